"""XLand-MiniGrid behind the agentrl API (optional extra ``xminigrid``).

``make("xland", env_id=..., rulesets=...)`` wraps any environment registered in
``xminigrid`` (``XLand-MiniGrid-R1-9x9`` ... and the ``MiniGrid-*`` ports).
xminigrid is imported only when an environment is built; without it the
constructor raises an ``ImportError`` saying how to install it.

For ``XLand-MiniGrid-*`` envs the task is a *ruleset* (goal, rules, initial
objects), held in ``params.ruleset`` (xminigrid's ``RuleSet`` pytree, uint8),
and the task space is a padded table of rulesets, the xminigrid
``Benchmark``; task id = ruleset id, so ``params_for_task``,
``sample_params`` and ``task_split`` (deterministic split of ruleset ids)
work as for any finite family. ``rulesets`` selects the table:

- ``None`` (default): ``num_rulesets`` rulesets generated locally and
  deterministically from ``ruleset_seed`` by :func:`generate_rulesets`
  (single-goal tasks "pick up X" / "go next to X" among distractors), so
  nothing is downloaded;
- a name the installed xminigrid registers (0.9.3: ``"trivial-21k"``,
  ``"small-1m"``, ``"medium-1m"``, ``"medium-3m"``, ``"high-1m"``,
  ``"high-3m"``): ``xminigrid.load_benchmark``, which reads
  ``$XLAND_MINIGRID_DATA`` (default ``~/.xland_minigrid``) and downloads the
  file only if it is not there yet -- fetch it once ahead of offline runs.
  A name is not a fixed table: xminigrid 0.9.2 re-sampled them (``*-1m``
  is ``*_1m_v3``, ``*_1m_v2`` before; ``trivial-21k`` replaced
  ``trivial-1m``);
- the path of a ruleset table file in xminigrid's format (a bz2-compressed
  pickle of ``goals``, ``rules``, ``init_tiles``, ``num_rules``, e.g.
  ``trivial_1m_v2`` from ``huggingface.co/datasets/Howuhh/xland_minigrid``;
  a pickle: load only files you trust): :func:`load_rulesets`;
- an ``xminigrid.benchmarks.Benchmark`` object.

``MiniGrid-*`` envs have a single task (``num_tasks = 1``, ``params.ruleset``
is ``None``); their layouts are random per episode as in xminigrid.

Observation (``observation``): ``"ids"`` (default), xminigrid's egocentric
view ``[view, view, 2]`` uint8 (tile, colour ids); or ``"onehot"``, what the
xland-minigrid meta-RL baseline's network sees (its
``DirectionObservationWrapper`` input): a flat uint8 vector
``[view * view * (13 + 12) + 4]``, the tile and the colour of every cell one-hot
and the agent's direction one-hot (the egocentric view does not show it).
A learner that flattens ``Box`` observations (RL²) then embeds each cell's
tile and colour with its first linear layer, as the baseline's per-cell
embeddings do. 6 discrete actions. Reward ``1 - 0.9 * t / horizon`` on reaching
the goal (which terminates), else 0, as xminigrid computes it with
``max_steps = horizon``. No oracle.

Static: ``env_id``, ``rulesets``, ``num_rulesets``, ``ruleset_seed``,
``num_distractors``, ``view_size``, ``horizon``, ``observation``.
Traced: ``ruleset``, ``max_steps_in_episode``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

import agentrl.envs.spaces as spaces
from agentrl.envs.base import Environment, EnvParams, EnvState
from agentrl.envs.validate import check_choice, check_int

INSTALL_HINT = "install the optional extra: pip install 'agentrl[xminigrid]'"
#: Tiles that can be goals and distractors (ball, square, pyramid, key, hex,
#: star) and their colours (red, green, blue, purple, yellow, orange, white,
#: brown, pink), in xminigrid's ``Tiles`` / ``Colors`` numbering.
OBJECT_TILES = (3, 4, 5, 7, 11, 12)
OBJECT_COLORS = (1, 2, 3, 4, 5, 8, 9, 10, 11)
#: ``observation`` choices (module docstring).
OBSERVATIONS = ("ids", "onehot")
#: xminigrid's tile and colour vocabularies (``NUM_TILES``, ``NUM_COLORS``)
#: and the agent's four directions: the one-hot observation's widths.
NUM_TILES, NUM_COLORS, NUM_DIRECTIONS = 13, 12, 4
#: A ruleset table's arrays and their shapes (``None``: any size; the first
#: axis is the ruleset): goal and rule encodings are xminigrid's
#: ``MAX_GOAL_ENCODING_LEN`` 5 and ``MAX_RULE_ENCODING_LEN`` 7 wide.
TABLE_SHAPES = {
    "goals": (None, 5),
    "rules": (None, None, 7),
    "init_tiles": (None, None, 2),
    "num_rules": (None,),
}
#: xminigrid goal codes used by :func:`generate_rulesets`.
GOAL_AGENT_HOLD, GOAL_AGENT_NEAR = 1, 3


def registered_benchmarks() -> tuple[str, ...]:
    """The benchmark names the installed xminigrid loads (module doc)."""
    return tuple(_import_xminigrid().registered_benchmarks())


def load_rulesets(path: str | os.PathLike) -> Any:
    """The ``Benchmark`` in the ruleset table file ``path`` (module doc).

    ``ValueError`` naming ``rulesets`` and the path if the file cannot be
    read as xminigrid's bz2 pickle or holds no table (:func:`_check_table`).
    """
    from xminigrid.benchmarks import load_benchmark_from_path

    where = f"XLandMiniGrid: `rulesets` {str(path)!r}"
    try:
        table = load_benchmark_from_path(str(path))
    except Exception as err:  # whatever reading or unpickling the file raised
        raise ValueError(
            f"{where} is not a ruleset table file (xminigrid's bz2 pickle of "
            f"{', '.join(TABLE_SHAPES)}): {type(err).__name__}: {err}"
        ) from err
    _check_table(table, where)
    return table


def _check_table(table: Any, where: str) -> None:
    """``ValueError`` (prefixed ``where``) unless ``table``'s arrays have
    the shapes of :data:`TABLE_SHAPES`, with the same n >= 1 rulesets."""
    shapes = {k: tuple(np.shape(getattr(table, k))) for k in TABLE_SHAPES}
    rows = {shape[0] for shape in shapes.values() if shape}
    if len(rows) == 1 and 0 not in rows:
        if all(_fits(shapes[k], want) for k, want in TABLE_SHAPES.items()):
            return
    raise ValueError(
        f"{where}: a ruleset table holds goals [n, 5], rules [n, r, 7], "
        f"init_tiles [n, k, 2] and num_rules [n] (n >= 1 rulesets), this one {shapes}"
    )


def _fits(shape: tuple, want: tuple) -> bool:
    """Whether ``shape`` is ``want`` (``None``: any size on that axis)."""
    return len(shape) == len(want) and all(
        w is None or n == w for n, w in zip(shape, want, strict=True)
    )


def _import_xminigrid() -> Any:
    try:
        import xminigrid
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError(f"XLand-MiniGrid needs `xminigrid`: {INSTALL_HINT}") from err
    return xminigrid


@struct.dataclass
class XLandState(EnvState):
    """``inner``: xminigrid's ``State`` (grid, agent, goal/rule encodings)."""

    inner: Any


@struct.dataclass
class XLandParams(EnvParams):
    """``ruleset``: xminigrid ``RuleSet`` (the task), ``None`` for MiniGrid."""

    ruleset: Any


def generate_rulesets(
    key: jax.Array, num_rulesets: int, num_distractors: int = 2
) -> dict[str, jax.Array]:
    """Single-goal rulesets, jittable: ``{goals, rules, init_tiles, num_rules}``.

    Each ruleset's goal is "pick up X" or "stand next to X" (xminigrid goal
    codes 1 and 3) for a random object X; the room holds X plus
    ``num_distractors`` other objects (never identical to X); no rules.

    Returns arrays ``goals [n, 5]``, ``rules [n, 1, 7]``,
    ``init_tiles [n, 1 + num_distractors, 2]`` (uint8) and ``num_rules [n]``.
    """
    k_kind, k_tile, k_color, k_shift = jax.random.split(key, 4)
    n, m = num_rulesets, 1 + num_distractors
    tiles = jnp.asarray(OBJECT_TILES, jnp.uint8)
    colors = jnp.asarray(OBJECT_COLORS, jnp.uint8)
    tile_ix = jax.random.randint(k_tile, (n, m), 0, len(OBJECT_TILES))
    color_ix = jax.random.randint(k_color, (n, m), 0, len(OBJECT_COLORS))
    # A distractor equal to the goal object gets another colour.
    same = (tile_ix == tile_ix[:, :1]) & (color_ix == color_ix[:, :1])
    same = same.at[:, 0].set(False)
    shift = jax.random.randint(k_shift, (n, m), 1, len(OBJECT_COLORS))
    color_ix = jnp.where(same, (color_ix + shift) % len(OBJECT_COLORS), color_ix)
    objects = jnp.stack([tiles[tile_ix], colors[color_ix]], axis=-1)
    kind = jnp.where(
        jax.random.bernoulli(k_kind, 0.5, (n,)), GOAL_AGENT_HOLD, GOAL_AGENT_NEAR
    ).astype(jnp.uint8)
    goals = jnp.zeros((n, 5), jnp.uint8).at[:, 0].set(kind)
    goals = goals.at[:, 1:3].set(objects[:, 0])
    return {
        "goals": goals,
        "rules": jnp.zeros((n, 1, 7), jnp.uint8),
        "init_tiles": objects,
        "num_rules": jnp.zeros((n,), jnp.int32),
    }


class XLandMiniGrid(Environment[XLandState, XLandParams]):
    """Any xminigrid environment; the ruleset is the task (module doc)."""

    episodes_end_early = True  # the goal terminates

    def __init__(
        self,
        env_id: str = "XLand-MiniGrid-R1-9x9",
        rulesets: Any = None,
        num_rulesets: int = 1024,
        ruleset_seed: int = 0,
        num_distractors: int = 2,
        view_size: int | None = None,
        horizon: int | None = None,
        observation: str = "ids",
    ):
        self.observation = check_choice(
            self.name, "observation", observation, OBSERVATIONS
        )
        xminigrid = _import_xminigrid()
        known = xminigrid.registered_environments()
        if env_id not in known:
            raise ValueError(
                f"{self.name}: `env_id` must be one of {known}, got {env_id!r}"
            )
        self.env_id = env_id
        self.env, inner = xminigrid.make(env_id)
        if view_size is not None:
            inner = inner.replace(
                view_size=check_int(self.name, "view_size", view_size, 1)
            )
        if horizon is not None:
            inner = inner.replace(max_steps=check_int(self.name, "horizon", horizon, 1))
        self.horizon = int(inner.max_steps)
        self.view_size = int(inner.view_size)
        self.is_xland = env_id.startswith("XLand-MiniGrid")
        self.benchmark = None
        if self.is_xland:
            self.benchmark = self._benchmark(
                xminigrid, rulesets, num_rulesets, ruleset_seed, num_distractors
            )
            inner = inner.replace(ruleset=self.benchmark.get_ruleset(0))
            self.num_tasks = int(self.benchmark.num_rulesets())
        else:
            if rulesets is not None:
                raise ValueError(
                    f"{self.name}: `rulesets` applies to XLand-MiniGrid-* envs "
                    f"only, got {rulesets!r} for {env_id!r}"
                )
            self.num_tasks = 1
        self.inner_params = inner

    def _benchmark(self, xminigrid, rulesets, num_rulesets, seed, num_distractors):
        from xminigrid.benchmarks import Benchmark

        if rulesets is None:
            check_int(self.name, "num_rulesets", num_rulesets, 1)
            check_int(self.name, "ruleset_seed", seed, 0)
            check_int(self.name, "num_distractors", num_distractors, 0)
            arrays = generate_rulesets(
                jax.random.key(seed), num_rulesets, num_distractors
            )
            return Benchmark(**arrays)
        if isinstance(rulesets, str | os.PathLike):
            return self._named_table(xminigrid, rulesets)
        if isinstance(rulesets, Benchmark):
            _check_table(rulesets, f"{self.name}: `rulesets`")
            return rulesets
        raise ValueError(
            f"{self.name}: `rulesets` must be None, a benchmark name, the path "
            "of a ruleset table file or an xminigrid Benchmark, got "
            f"{type(rulesets).__name__}"
        )

    def _named_table(self, xminigrid, rulesets: str | os.PathLike):
        """The table a registered benchmark name or a file path names."""
        names = registered_benchmarks()
        if rulesets in names:
            return xminigrid.load_benchmark(rulesets)
        if not Path(rulesets).is_file():
            raise ValueError(
                f"{self.name}: `rulesets` {str(rulesets)!r}: no such file, and "
                f"no benchmark the installed xminigrid registers ({names}); "
                "`rulesets` must be None, one of those names, the path of a "
                "ruleset table file (xminigrid's bz2 pickle) or a Benchmark"
            )
        return load_rulesets(rulesets)

    @property
    def name(self) -> str:
        return "XLandMiniGrid"

    # ---------------------------------------------------------------- tasks
    def params_for_task(self, task_id: jax.Array) -> XLandParams:
        ruleset = self.benchmark.get_ruleset(task_id) if self.is_xland else None
        return XLandParams(
            max_steps_in_episode=jnp.int32(self.horizon), ruleset=ruleset
        )

    @property
    def default_params(self) -> XLandParams:
        return self.params_for_task(jnp.int32(0))

    def sample_params(self, key: jax.Array) -> XLandParams:
        """A ruleset id uniform over the table (MiniGrid: the one task)."""
        return self.params_for_task(jax.random.randint(key, (), 0, self.num_tasks))

    def _inner(self, params: XLandParams) -> Any:
        if not self.is_xland:
            return self.inner_params
        return self.inner_params.replace(ruleset=params.ruleset)

    # ------------------------------------------------------------- dynamics
    def _observe(self, view: jax.Array, inner: Any) -> jax.Array:
        """The ``observation`` of a step from xminigrid's view and state."""
        if self.observation == "ids":
            return view
        tile = jax.nn.one_hot(view[..., 0], NUM_TILES, dtype=jnp.uint8)
        colour = jax.nn.one_hot(view[..., 1], NUM_COLORS, dtype=jnp.uint8)
        direction = jax.nn.one_hot(
            inner.agent.direction, NUM_DIRECTIONS, dtype=jnp.uint8
        )
        cells = jnp.concatenate([tile, colour], -1).reshape(-1)
        return jnp.concatenate([cells, direction])

    def reset_env(self, key: jax.Array, params: XLandParams):
        timestep = self.env.reset(self._inner(params), key)
        obs = self._observe(timestep.observation, timestep.state)
        return obs, XLandState(time=jnp.int32(0), inner=timestep.state)

    def step_env(self, key: jax.Array, state: XLandState, action: Any, params):
        from xminigrid.types import StepType, TimeStep

        shape = (self.view_size, self.view_size, 2)
        previous = TimeStep(
            state=state.inner,
            step_type=StepType.MID,
            reward=jnp.float32(0.0),
            discount=jnp.float32(1.0),
            observation=jnp.zeros(shape, jnp.uint8),
        )
        timestep = self.env.step(self._inner(params), previous, action)
        terminated = timestep.discount == 0.0
        reward = jnp.asarray(timestep.reward, jnp.float32)
        state = XLandState(time=state.time + 1, inner=timestep.state)
        obs = self._observe(timestep.observation, timestep.state)
        return obs, state, reward, terminated, {}

    def action_space(self, params=None) -> spaces.Discrete:
        return spaces.Discrete(self.env.num_actions(self.inner_params))

    def observation_space(self, params=None) -> spaces.Box:
        if self.observation == "onehot":
            width = self.view_size**2 * (NUM_TILES + NUM_COLORS) + NUM_DIRECTIONS
            return spaces.Box(0, 1, (width,), jnp.uint8)
        shape = (self.view_size, self.view_size, 2)
        return spaces.Box(0, 255, shape, jnp.uint8)
