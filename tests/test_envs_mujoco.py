"""The MuJoCo families (Brax/MJX): parity with Brax, tasks, splits, extras.

Parity: from the same Brax state and action a family's step gives Brax's
next state and observation, and its reward is the reference's formula
(T2MIR's / Meta-DT's) computed from Brax's states; a family's reset gives
Brax's reset for the same key, and the step after it Brax's step after
Brax's reset (the reset skips the collision pass: mjx_base's docstring).
MJX's step compiles for one to several minutes on a 2-core CPU, so every
check that steps the physics runs in `make test-long`, or for three of the
five families' parity in `make test-heavy` (each compiles as few programs as
it can: Brax's side and ours, a vmap for two start states); the
task tables, spaces and errors need no physics and run in `make test`. The
gymnax contract (auto-reset, final observation, vmap over tasks) runs on
one MuJoCo family in tests/test_envs_contract.py (they share mjx_base).
"""

import functools
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agentrl import envs
from agentrl.envs.registry import MUJOCO_FAMILIES
from agentrl.evaluate.task_parameter import task_parameter

#: name -> (observation size, action size)
SIZES = {
    "halfcheetah_vel": (20, 6),
    "halfcheetah_dir": (20, 6),
    "ant_dir": (27, 8),
    "walker_params": (17, 6),
    "hopper_params": (11, 3),
}


def _make(name, **kw):
    pytest.importorskip("brax")
    return _built(name, tuple(sorted(kw.items())))


@functools.cache
def _built(name, kw):
    """One environment per (name, overrides): building one loads its model."""
    return envs.make(name, **dict(kw))


def _brax_params(env):
    """Params under which the family's physics is Brax's default system."""
    if hasattr(env, "defaults"):  # the *_params families: the unscaled model
        return env.params_of(env.defaults)
    return env.default_params


def _reference_reward(name, env, s0, s1, action, params):
    """The references' reward formulas, from Brax's pipeline states."""
    dt = env.dt
    act_sq = jnp.sum(jnp.square(action))
    forward = (s1.q[0] - s0.q[0]) / dt  # rootx: the references' qpos[0]
    if name == "halfcheetah_vel":
        return -jnp.abs(forward - params.target_velocity) - 0.05 * act_sq
    if name == "halfcheetah_dir":
        return params.direction * forward - 0.05 * act_sq
    if name == "ant_dir":
        v = (s1.x.pos[0, :2] - s0.x.pos[0, :2]) / dt  # get_body_com("torso")
        goal = jnp.array([jnp.cos(params.angle), jnp.sin(params.angle)])
        return v @ goal - 0.5 * act_sq + 1.0
    if name == "walker_params":
        # rootz is the height above the torso's rest position in Brax's XML
        rest = float(env.sys.body_pos[1, 2]) - float(env.sys.qpos0[1])
        height, angle = s1.q[1] + rest, s1.q[2]
        healthy = (0.8 < height) & (height < 2.0) & (-1.0 < angle) & (angle < 1.0)
        return forward + healthy - 1e-3 * act_sq
    assert name == "hopper_params"
    return forward - 1e-3 * act_sq


def _close(a, b, tol=1e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


#: CI (``long``) checks one family of each kind against Brax, a scalar-task
#: one and a physics-parameter one; ``make test-heavy`` checks the others.
PARITY = [
    pytest.param(
        name,
        marks=pytest.mark.long
        if name in ("halfcheetah_vel", "hopper_params")
        else pytest.mark.heavy,
    )
    for name in MUJOCO_FAMILIES
]


@pytest.mark.parametrize("name", PARITY)
def test_step_and_reset_match_brax(name):
    env = _make(name)
    brax_env, params = env.brax_env, _brax_params(env)
    key = jax.random.key(3)
    action = jax.random.uniform(jax.random.key(4), (env.action_size,), minval=-1)

    @jax.jit
    def brax_side(key):
        b0 = brax_env.reset(key)
        return b0, brax_env.step(b0, action)

    @jax.jit
    def our_side(key, brax_start):
        obs0, state0 = env.reset_env(key, params)
        # one step from Brax's start state and one from ours, vmapped
        starts = jax.tree.map(
            lambda a, b: jnp.stack([a, b]), state0.replace(pipeline=brax_start), state0
        )
        step = jax.vmap(env.step_env, (None, 0, None, None))
        return obs0, state0, step(key, starts, action, params)

    b0, b1 = brax_side(key)
    obs0, state0, (obs1, state1, reward, terminated, _) = our_side(
        jax.random.clone(key), b0.pipeline_state
    )
    # reset: Brax's start state and observation for the same key
    for field in ("q", "qd"):
        _close(getattr(state0.pipeline, field), getattr(b0.pipeline_state, field))
    _close(state0.pipeline.x.pos, b0.pipeline_state.x.pos)
    _close(obs0[: b0.obs.shape[0]], b0.obs)
    # the step from Brax's own state: Brax's next state, the references' reward
    size = b0.obs.shape[0]
    _close(obs1[0, :size], b1.obs)
    _close(state1.pipeline.q[0], b1.pipeline_state.q)
    _close(state1.pipeline.qd[0], b1.pipeline_state.qd)
    ps0, ps1 = b0.pipeline_state, b1.pipeline_state
    _close(reward[0], _reference_reward(name, env, ps0, ps1, action, params), 1e-4)
    assert not np.asarray(terminated).any()
    if env.observation_size > size:  # the cheetahs' torso position
        _close(obs1[0, size:], b1.pipeline_state.x.pos[0])
    # the step after our cheaper reset equals the step after Brax's reset
    _close(obs1[1], obs1[0])
    _close(reward[1], reward[0], 1e-4)


@pytest.mark.long
def test_physics_params_change_the_trajectory_under_vmap():
    env = _make("walker_params")
    base = _brax_params(env)
    heavy = base.replace(body_mass=base.body_mass * 3.0)
    params = jax.tree.map(lambda *x: jnp.stack(x), base, heavy, base)
    actions = jax.random.uniform(jax.random.key(1), (8, env.action_size), minval=-1)

    def rollout(p):
        _, state = env.reset_env(jax.random.key(0), p)

        def body(state, a):
            obs, state, *_ = env.step_env(jax.random.key(2), state, a, p)
            return state, obs

        return jax.lax.scan(body, state, actions)[1]

    obs = np.asarray(jax.jit(jax.vmap(rollout))(params))
    np.testing.assert_array_equal(obs[0], obs[2])  # same task, same data
    assert np.abs(obs[0, -1] - obs[1, -1]).max() > 1e-3  # heavier: other motion


# ------------------------------------------------------ no physics below


@pytest.mark.parametrize("name", MUJOCO_FAMILIES)
def test_spaces_and_horizon(name):
    env = _make(name)
    obs_size, act_size = SIZES[name]
    assert env.observation_space().shape == (obs_size,)
    assert env.action_space().shape == (act_size,)
    assert env.horizon == 200 and int(env.default_params.max_steps_in_episode) == 200
    assert not env.has_oracle


def test_halfcheetah_vel_tasks_and_split():
    env = _make("halfcheetah_vel")
    v = env.task_values()
    assert v.shape == (50,) and v.min() >= 0.0 and v.max() <= 3.0
    np.testing.assert_array_equal(v, _make("halfcheetah_vel").task_values())
    assert not np.array_equal(v, _make("halfcheetah_vel", task_seed=1).task_values())
    split = env.task_split(0.9, seed=0)
    assert len(split.train) == 45 and len(split.test) == 5
    p = jax.vmap(env.params_for_task)(jnp.asarray(split.test))
    np.testing.assert_allclose(p.target_velocity, v[split.test])
    drawn = jax.vmap(env.sample_params)(jax.random.split(jax.random.key(0), 64))
    assert set(np.asarray(drawn.target_velocity).tolist()) <= set(v.tolist())
    free = _make("halfcheetah_vel", num_tasks=0, max_velocity=2.0)
    assert free.num_tasks is None
    drawn = jax.vmap(free.sample_params)(jax.random.split(jax.random.key(0), 64))
    assert 0 <= drawn.target_velocity.min() and drawn.target_velocity.max() <= 2.0


def test_direction_tasks():
    cheetah = _make("halfcheetah_dir")
    assert cheetah.num_tasks == 4  # Meta-DT's: the two directions, twice
    dirs = [float(cheetah.params_for_task(i).direction) for i in range(4)]
    assert dirs == [1.0, -1.0, 1.0, -1.0]
    ant = _make("ant_dir")
    angles = ant.task_values()
    assert angles.shape == (50,) and 0 <= angles.min() and angles.max() < 2 * np.pi


@pytest.mark.parametrize("kw", [{}, {"num_tasks": 8}])
def test_direction_split_trains_and_tests_both_directions(kw):
    """As Meta-DT (tasks 0, 1 train, 2, 3 test): every split trains on both
    directions and holds both out, so a test task repeats a trained one."""
    cheetah = _make("halfcheetah_dir", **kw)
    num_tasks = cheetah.num_tasks
    directions = cheetah.task_values()
    for fraction in (0.5, 0.8, 0.9):
        for seed in range(4):
            for share in (0.0, 0.5):
                split = cheetah.task_split(fraction, seed, share)
                assert len(split.train) and len(split.test)
                for ids in (split.train, split.validation, split.test):
                    forward = int((directions[ids] > 0).sum())
                    assert 2 * forward == len(ids), (fraction, seed, share, ids)
                every = np.concatenate([split.train, split.validation, split.test])
                assert sorted(every.tolist()) == list(range(num_tasks))
    assert len(cheetah.task_split(0.5, 0, 0.5).validation) == (num_tasks == 8) * 2


@pytest.mark.parametrize("name", ["walker_params", "hopper_params"])
def test_physics_tasks_are_log_uniform_scalings(name):
    env = _make(name)
    default = env.defaults
    tasks = jax.vmap(env.params_for_task)(jnp.arange(env.num_tasks))
    for field, base in (("body_mass", 1.5), ("dof_damping", 1.3)):
        value, ref = np.asarray(getattr(tasks, field)), default[field]
        live = ref > 0
        factor = value[:, live] / ref[live]
        assert factor.min() >= base**-3 * (1 - 1e-5)
        assert factor.max() <= base**3 * (1 + 1e-5)
        assert factor.std() > 0.3  # spread over the range, one factor per entry
    only_mass = _make(name, randomise=("body_mass",))
    p = only_mass.params_for_task(3)
    np.testing.assert_array_equal(p.geom_friction, default["geom_friction"])
    np.testing.assert_array_equal(p.body_mass, tasks.body_mass[3])  # same draws
    free = _make(name, num_tasks=0)
    drawn = jax.vmap(free.sample_params)(jax.random.split(jax.random.key(0), 4))
    assert len(np.unique(np.asarray(drawn.body_mass), axis=0)) == 4


@pytest.mark.parametrize("name", MUJOCO_FAMILIES)
def test_task_parameter_is_the_task(name):
    """Evaluation's return-against-task plot reads one scalar per task: the
    target velocity, direction or angle, or the total mass over the default."""
    env = _make(name)
    n = min(env.num_tasks, 6)
    params = jax.vmap(env.params_for_task)(jnp.arange(n))
    label, values = task_parameter(env, params)
    assert label == env.task_parameter_name and label
    if name.endswith("_params"):
        total = np.asarray(params.body_mass).sum(-1)
        expected = total / env.defaults["body_mass"].sum()
        assert 1 / 1.5**3 < expected.min() and expected.max() < 1.5**3
    else:
        expected = env.task_values()[:n]
    np.testing.assert_allclose(values, expected, rtol=1e-5)
    distinct = 2 if name == "halfcheetah_dir" else n  # the directions repeat
    assert len(np.unique(values)) == distinct  # tells the tasks apart


@pytest.mark.parametrize(
    "name,kw,field",
    [
        ("halfcheetah_vel", {"num_tasks": 1}, "num_tasks"),
        ("halfcheetah_vel", {"max_velocity": -1.0}, "max_velocity"),
        ("halfcheetah_dir", {"observe_torso": "yes"}, "observe_torso"),
        ("halfcheetah_dir", {"num_tasks": 2}, "num_tasks"),
        ("halfcheetah_dir", {"num_tasks": 5}, "num_tasks"),
        ("ant_dir", {"horizon": 0}, "horizon"),
        ("walker_params", {"randomise": ("mass",)}, "randomise"),
        ("hopper_params", {"log_scale_limit": -1.0}, "log_scale_limit"),
    ],
)
def test_bad_overrides_name_the_field(name, kw, field):
    pytest.importorskip("brax")
    with pytest.raises(ValueError, match=f"`{field}`"):
        envs.make(name, **kw)


def test_listing_and_import_need_no_brax():
    code = (
        "import sys; import agentrl.envs as e; from agentrl.envs.cli import listing;"
        "text = listing(); import agentrl.envs.halfcheetah_vel, agentrl.envs.ant_dir;"
        "import agentrl.envs.walker_params, agentrl.envs.hopper_params;"
        "import agentrl.envs.halfcheetah_dir;"
        "print('halfcheetah_vel' in text, 'brax' in sys.modules, "
        "'mujoco' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["True", "False", "False"]


def test_a_missing_extra_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "brax.envs", None)
    with pytest.raises(ImportError, match=r"pip install 'agentrl\[mujoco\]'"):
        envs.make("hopper_params")


def test_building_a_family_leaves_no_mujoco_log_in_the_working_directory(
    tmp_path, monkeypatch
):
    """Brax's halfcheetah model warns when compiled; MuJoCo's default appends
    the warning to ./MUJOCO_LOG.TXT, which the build turns off (and back)."""
    mujoco = pytest.importorskip("mujoco")
    pytest.importorskip("brax")
    monkeypatch.chdir(tmp_path)
    fields = ("logfile", "logto_console", "logto_file", "topics")
    setting = lambda: [getattr(mujoco.MjLogConfig.get(), f) for f in fields]  # noqa: E731
    before = setting()
    envs.make("halfcheetah_vel", horizon=7)  # a fresh build: its model compiles
    assert list(tmp_path.iterdir()) == []
    assert setting() == before
