"""Shared plumbing of the MuJoCo task families: Brax's systems on MJX physics.

Each family wraps one of Brax's locomotion systems (``brax.envs``'
``halfcheetah``, ``ant``, ``walker2d``, ``hopper``, built with
``backend="mjx"``) and steps it with Brax's own MJX pipeline
(``brax.mjx.pipeline.step`` ``n_frames`` times, as ``PipelineEnv`` does), so
a family's physics is Brax's step for step (tests/test_envs_mujoco.py checks
it). What a family adds is the task, in ``EnvParams``: a target velocity or
direction enters the reward; randomised physical parameters are written into
the ``sys`` inside ``reset``/``step``, so vmapping over params is vmapping
over tasks, physics included.

brax, mujoco and mujoco-mjx are the optional extra ``agentrl[mujoco]``; they
are imported when a family is built (:func:`import_mjx`), never when
``agentrl.envs`` is, and a missing extra is an ``ImportError`` naming it.

Reset. ``step`` auto-resets without branching (the base class), so the reset
state is computed on every step; Brax's ``pipeline.init`` runs a full
``mjx.forward`` (collision and constraint solve: about one physics substep),
which would cost a family 20-25 % of its speed next to Brax's own step. The
reset here computes only what an observation, a reward or Brax's state needs
from the start positions: ``mjx.kinematics``, ``com_pos`` and ``com_vel``
(so ``x`` and ``xd`` are Brax's exactly); the remaining derived fields
(contacts, constraint rows, accelerations) are left as ``mjx.make_data``
allocates them, and ``mjx.step`` recomputes all of them from ``qpos``,
``qvel``, ``ctrl`` and ``qacc_warmstart`` (zero, as after Brax's init) before
it uses them. The step after a reset therefore equals Brax's step from
Brax's own reset state (tested).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

import agentrl.envs.spaces as spaces
from agentrl.envs.base import Environment, EnvState
from agentrl.envs.validate import check_int

INSTALL_HINT = "install the optional extra: pip install 'agentrl[mujoco]'"

#: The physical parameters the ``*_params`` families randomise, and the base
#: of each one's log-uniform scale factor ``base ** U(-limit, limit)``
#: (rand_param_envs, as T2MIR and Meta-DT use it).
RANDOMISED_FIELDS = {
    "body_mass": 1.5,
    "body_inertia": 1.5,
    "dof_damping": 1.3,
    "geom_friction": 1.5,
}


def import_mjx(family: str) -> SimpleNamespace:
    """brax's and MJX's modules (``envs``, ``pipeline``, ``base``, ``State``,
    ``mjx``), or an ``ImportError`` naming the extra to install."""
    try:
        import brax.envs as brax_envs
        from brax import base as brax_base
        from brax.mjx import pipeline
        from brax.mjx.base import State
        from mujoco import mjx
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError(
            f"{family} needs brax, mujoco and mujoco-mjx: {INSTALL_HINT}"
        ) from err
    return SimpleNamespace(
        envs=brax_envs, pipeline=pipeline, base=brax_base, State=State, mjx=mjx
    )


@contextlib.contextmanager
def no_mujoco_log_file() -> Iterator[None]:
    """MuJoCo's warnings not appended to ``MUJOCO_LOG.TXT`` in the working
    directory while the block runs (MuJoCo's global log setting, restored
    after). Brax's ``halfcheetah.xml`` uses the deprecated ``settotalmass``
    attribute, so compiling it warns, and MuJoCo's default writes every
    warning to that file wherever the user runs; the console copy stays."""
    import mujoco

    saved = mujoco.MjLogConfig.get()
    quiet = mujoco.MjLogConfig.get()
    quiet.logto_file = False
    quiet.set()
    try:
        yield
    finally:
        saved.set()


@struct.dataclass
class MjxState(EnvState):
    """``pipeline``: Brax's MJX pipeline state (``brax.mjx.base.State``)."""

    pipeline: Any


class MjxLocomotion(Environment[MjxState, Any]):
    """Base of the MuJoCo families (see the module docstring).

    A subclass sets the Brax system (``brax_name``, ``brax_kwargs``), the
    reset noise as Brax's env draws it (``reset_noise``, ``velocity_noise``:
    ``"normal"`` or ``"uniform"``), and defines ``observe``, ``reward`` and
    the task (``default_params``, ``sample_params``, ``params_for_task``).
    """

    brax_name: str = ""
    #: constructor arguments of Brax's env (``n_frames`` among them)
    brax_kwargs: dict[str, Any] = {}
    reset_noise: float = 0.1
    velocity_noise: str = "normal"

    def __init__(self, horizon: int, num_tasks: int, task_seed: int):
        self.horizon = check_int(self.name, "horizon", horizon, 1)
        num_tasks = check_int(self.name, "num_tasks", num_tasks, 0)
        if num_tasks == 1:
            raise ValueError(
                f"{self.name}: `num_tasks` must be 0 (a continuous task space) "
                "or >= 2, got 1"
            )
        self.num_tasks = num_tasks or None
        self.task_seed = check_int(self.name, "task_seed", task_seed, 0)
        self._lib = import_mjx(self.name)
        #: Brax's own environment: the reference for parity and throughput
        with no_mujoco_log_file():
            self.brax_env = self._lib.envs.get_environment(
                self.brax_name, backend="mjx", **self.brax_kwargs
            )
        self.sys = self.brax_env.sys
        self.n_frames = int(self.brax_kwargs["n_frames"])
        self.dt = float(self.sys.opt.timestep) * self.n_frames
        self.action_size = int(self.sys.nu)

    # ------------------------------------------------------------- physics
    def task_sys(self, params: Any) -> Any:
        """The ``sys`` this task's physics runs on (the default: Brax's)."""
        return self.sys

    def start_state(self, key: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(q, qd)`` of a new episode, drawn as Brax's env ``reset`` draws them."""
        _, key_q, key_qd = jax.random.split(key, 3)
        low, high = -self.reset_noise, self.reset_noise
        nq, nv = int(self.sys.nq), int(self.sys.nv)
        q = self.sys.init_q + jax.random.uniform(key_q, (nq,), minval=low, maxval=high)
        if self.velocity_noise == "normal":
            qd = high * jax.random.normal(key_qd, (nv,))
        else:
            qd = jax.random.uniform(key_qd, (nv,), minval=low, maxval=high)
        return q, qd

    def pipeline_reset(self, sys: Any, q: jax.Array, qd: jax.Array) -> Any:
        """Brax's pipeline state at ``(q, qd)`` without the collision/solver pass.

        ``q``, ``qd``, ``x`` and ``xd`` are what ``brax.mjx.pipeline.init``
        gives; the module docstring says why the rest may be left stale.
        """
        mjx, base = self._lib.mjx, self._lib.base
        data = mjx.make_data(sys).replace(qpos=q, qvel=qd)
        data = mjx.com_vel(sys, mjx.com_pos(sys, mjx.kinematics(sys, data)))
        x = base.Transform(pos=data.xpos[1:], rot=data.xquat[1:])
        cvel = base.Motion(vel=data.cvel[1:, 3:], ang=data.cvel[1:, :3])
        offset = data.xpos[1:, :] - data.subtree_com[sys.body_rootid[1:]]
        xd = base.Transform.create(pos=offset).vmap().do(cvel)
        q, qd = data.qpos, data.qvel  # kinematics normalizes free-joint quaternions
        fields = dict(data.__dict__)
        contact = self._lib.pipeline._reformat_contact(sys, data._impl.contact)
        fields["contact"] = contact
        return self._lib.State(q=q, qd=qd, x=x, xd=xd, **fields)

    def pipeline_step(self, sys: Any, state: Any, action: jax.Array) -> Any:
        """``n_frames`` MJX substeps with ``action`` as control (Brax's step)."""

        def substep(s, _):
            return self._lib.pipeline.step(sys, s, action), None

        return jax.lax.scan(substep, state, (), self.n_frames)[0]

    # ----------------------------------------------------------- the API
    def reset_env(self, key: jax.Array, params: Any):
        q, qd = self.start_state(key)
        ps = self.pipeline_reset(self.task_sys(params), q, qd)
        return self.observe(ps), MjxState(time=jnp.int32(0), pipeline=ps)

    def step_env(self, key: jax.Array, state: MjxState, action: Any, params: Any):
        action = jnp.asarray(action, jnp.float32).reshape(self.action_size)
        before = state.pipeline
        after = self.pipeline_step(self.task_sys(params), before, action)
        reward = self.reward(before, after, action, params)
        state = MjxState(time=state.time + 1, pipeline=after)
        return self.observe(after), state, reward, jnp.bool_(False), {}

    def observe(self, ps: Any) -> jax.Array:
        raise NotImplementedError

    def reward(self, before: Any, after: Any, action: jax.Array, params: Any):
        """The task's reward for the transition ``before -> after``."""
        raise NotImplementedError

    def forward_velocity(self, before: Any, after: Any) -> jax.Array:
        """The root's x velocity over the step, ``Δq[0] / dt``: the references'
        ``Δqpos[0] / dt`` (the planar models' ``rootx`` slide joint).

        Not Brax's ``Δx.pos[0, 0]``: after ``mjx.step`` (as after MuJoCo's
        ``mj_step``) the body poses ``x`` are those of the last substep's
        start, one substep behind ``q``.
        """
        return (after.q[0] - before.q[0]) / self.dt

    @property
    def observation_size(self) -> int:
        raise NotImplementedError

    def action_space(self, params=None) -> spaces.Box:
        return spaces.Box(-1.0, 1.0, (self.action_size,), jnp.float32)

    def observation_space(self, params=None) -> spaces.Box:
        return spaces.Box(-jnp.inf, jnp.inf, (self.observation_size,), jnp.float32)

    # -------------------------------------------------------------- tasks
    def task_rng(self) -> np.random.Generator:
        """NumPy's PCG64 from ``task_seed``: the same fixed tasks on every machine."""
        return np.random.default_rng(self.task_seed)

    def task_index(self, key: jax.Array) -> jax.Array:
        """A task id drawn uniformly from the fixed set (finite task spaces)."""
        return jax.random.randint(key, (), 0, self.num_tasks)


class ScalarTaskLocomotion(MjxLocomotion):
    """A family whose task is one number (``params.<task_field>``), drawn from
    ``U(task_low, task_high)``: ``num_tasks=N`` fixes ``N`` of them once
    (PCG64 from ``task_seed``), ``num_tasks=0`` draws one per task."""

    task_field: str = ""
    params_class: Any = None
    #: The task's name on evaluation's return-against-task plot, with units.
    task_parameter_name: str = ""

    def __init__(self, horizon, num_tasks, task_seed, low: float, high: float):
        super().__init__(horizon, num_tasks, task_seed)
        self.task_low, self.task_high = float(low), float(high)
        self._table = None
        if self.num_tasks is not None:
            table = self.task_rng().uniform(low, high, self.num_tasks)
            self._table = table.astype(np.float32)

    def task_values(self) -> np.ndarray:
        """``[num_tasks]`` the fixed tasks' values (finite task spaces only)."""
        if self._table is None:
            raise ValueError(
                f"{self.name}: task_values needs `num_tasks` >= 2, got 0 "
                "(a continuous task space)"
            )
        return self._table.copy()

    def task_parameter(self, params: Any) -> jax.Array:
        """``[]`` one task's value (the optional task-parameter protocol of
        :mod:`agentrl.evaluate.task_parameter`)."""
        return getattr(params, self.task_field)

    def params_of(self, value: Any) -> Any:
        return self.params_class(
            max_steps_in_episode=jnp.int32(self.horizon),
            **{self.task_field: jnp.asarray(value, jnp.float32)},
        )

    @property
    def default_params(self) -> Any:
        if self._table is not None:
            return self.params_for_task(jnp.int32(0))
        return self.params_of((self.task_low + self.task_high) / 2)

    def params_for_task(self, task_id: jax.Array) -> Any:
        if self._table is None:
            return super().params_for_task(task_id)
        return self.params_of(jnp.asarray(self._table)[task_id])

    def sample_params(self, key: jax.Array) -> Any:
        if self._table is not None:
            return self.params_for_task(self.task_index(key))
        return self.draw_params(key)

    def draw_params(self, key: jax.Array) -> Any:
        """A fresh task from ``U(task_low, task_high)``, the distribution the
        fixed tasks were drawn from."""
        low, high = self.task_low, self.task_high
        return self.params_of(jax.random.uniform(key, (), minval=low, maxval=high))


TWO_PI = 2 * math.pi
