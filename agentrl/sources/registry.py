"""One entry point for every source: ``generate(source_name, env, params, ...)``.

>>> history = generate("q_learning", env, params, key, num_episodes=100)
>>> write_dataset(out, env, source_histories("q_learning", env), 1000, 100)

``params`` holds one task per leading index (leaves ``[task, ...]``); the
result is a :class:`~agentrl.history.History` with leaves ``[task,
num_episodes * env.horizon, ...]``. Source names, settings and whether the
source applies to the environment are checked before anything compiles, and
a ``ValueError`` names the field and what is allowed.

A :class:`Source` either builds an :class:`~agentrl.agents.agent.Agent`
(``build``), which the shared driver runs, or makes its histories itself
(``histories``: DPT's uniform roll-in, PPO's own training loop).

Sources (settings and defaults in :data:`SOURCES`; add one with
:func:`register_source`):

- ``ucb``, ``ucb_dpt``, ``thompson``, ``epsilon_greedy``: bandits only;
- ``random``: any environment;
- ``q_learning``: ``Discrete`` observations and actions (dark grid worlds);
- ``noisy_oracle`` (AD-ε) and ``dpt_rollin`` (DPT's random roll-in, oracle
  labels in ``optimal_action``): discrete actions and an oracle; with
  ``rollin="uniform"`` draws independent transitions from uniform states
  (the DPT paper's Dark Room data; :mod:`agentrl.sources.rollin`);
- ``ppo``: ``agentrl.sources.ppo.generate_ppo`` (imported on demand);
- ``sac``: ``agentrl.sources.sac.generate_sac`` (continuous actions; what
  the MuJoCo references collect their data with);
- ``learned_learner``: a trained online learner's run (``run_dir=...``)
  acting in context with frozen weights (:mod:`agentrl.train.learned`).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

import agentrl.sources.bandits as bandits
import agentrl.sources.tabular as tabular
from agentrl.agents.agent import RandomAgent, run_agent_on_tasks
from agentrl.checks import is_int
from agentrl.envs.base import is_bandit
from agentrl.history import History, task_ids
from agentrl.registry import Registry, caller_module, expect
from agentrl.sources.rollin import supports_uniform_rollin, uniform_rollin


def _space(env: Any, which: str) -> Any:
    params = getattr(env, "default_params", None)
    return getattr(env, which)(params)


def _discrete_actions(env: Any) -> bool:
    return hasattr(_space(env, "action_space"), "n")


def _need_bandit(env: Any) -> str | None:
    return None if is_bandit(env) else "it needs a bandit environment"


def _need_table(env: Any) -> str | None:
    if not _discrete_actions(env):
        return "it needs discrete actions"
    if not hasattr(_space(env, "observation_space"), "n"):
        return "it needs a Discrete observation space (a table of states)"
    return None


def _need_oracle(env: Any) -> str | None:
    if not _discrete_actions(env):
        return "it needs discrete actions"
    if not getattr(env, "has_oracle", False):
        return "it needs an environment with an oracle (optimal_action)"
    return None


def _always(env: Any) -> str | None:
    return None


@dataclasses.dataclass(frozen=True)
class Source:
    """A source algorithm: its settings, where it applies, how it makes histories.

    Attributes:
      name, description: registry name and one line for listings.
      defaults: ``{setting: default}``; ``None`` when the source checks its
        own settings when it runs (``ppo``: the ``PPOConfig`` fields; ``sac``:
        ``SACConfig``'s).
      bounds: ``{setting: (low, high)}`` of numeric settings.
      applies: ``env -> None`` if the source runs on ``env``, else why not.
      build: ``(env, num_episodes, **settings) -> Agent``, the agent that the
        shared driver runs (and that evaluation runs as a baseline); ``None``
        if the source is no agent.
      histories: ``(env, params [task, ...], key, num_episodes, task_id [task],
        **settings) -> History``: set when the source makes its histories
        itself; ``generate`` then calls it instead of running ``build``'s agent.
      check: ``(env, merged settings) -> None``, or why they do not fit ``env``.
      choices: ``{setting: allowed values}`` of non-numeric settings.
      baseline: whether ``build``'s agent is a sensible online baseline to
        compare a model with (a learner or an oracle, not a random roll-in).
      text: settings whose values are strings (paths), checked by ``check``.
      learns: whether its histories are learning histories, improving over
        their episodes (a learner, or AD-ε's annealed noise), so that their
        last episodes are its converged behaviour: what the
        expert-distillation control trains on. ``random`` and ``dpt_rollin``
        (independent roll-ins) do not learn.
      record_only: settings that change only what is recorded beside the
        run (DPT's labels, computed after it without a key), never the
        actions, rewards or returns; a source run kept for its returns
        (:mod:`agentrl.evaluate.source_cache`) is shared across them.
    """

    name: str
    description: str
    defaults: dict[str, Any] | None = dataclasses.field(default_factory=dict)
    bounds: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    applies: Callable[[Any], str | None] = _always
    build: Callable[..., Any] | None = None
    histories: Callable[..., History] | None = None
    check: Callable[[Any, dict], str | None] | None = None
    choices: dict[str, tuple] = dataclasses.field(default_factory=dict)
    baseline: bool = False
    text: tuple[str, ...] = ()
    learns: bool = False
    record_only: tuple[str, ...] = ()


#: the registered sources, in registration order (see :class:`Source`)
SOURCES = Registry("source")


def register_source(name: str, **fields: Any) -> Source:
    """Register the source ``name``; ``fields`` are :class:`Source`'s (keywords).

    >>> register_source("greedy", description="...", applies=_need_bandit,
    ...                 build=lambda env, n: MyGreedy(env.num_arms), baseline=True)

    It needs ``build`` (an agent the shared driver runs) or ``histories``.
    Registering again from the same module (a notebook cell re-run) replaces
    the source; another module's source under a taken name is a
    ``ValueError`` naming both (:mod:`agentrl.registry`).
    """
    source = Source(name=name, **fields)
    if source.build is None and source.histories is None:
        raise ValueError(f"source {name!r} needs `build` or `histories`")
    return SOURCES.register(name, source, module=caller_module())


_UNIT = (0.0, 1.0)
_NONNEGATIVE = (0.0, float("inf"))

register_source(
    "ucb",
    description="UCB1: mean + c * sqrt(2 ln t / n)",
    defaults={"c": 1.0},
    bounds={"c": _NONNEGATIVE},
    applies=_need_bandit,
    build=lambda env, n, c: bandits.UCB(env.num_arms, float(c)),
    baseline=True,
    learns=True,
)
register_source(
    "ucb_dpt",
    description="DPT reference's UCB1.0: mean + c / max(1, sqrt(n)), no log t",
    defaults={"c": 1.0},
    bounds={"c": _NONNEGATIVE},
    applies=_need_bandit,
    build=lambda env, n, c: bandits.UCBDPT(env.num_arms, float(c)),
    baseline=True,
    learns=True,
)


def _thompson(env, num_episodes, posterior, noise_variance, prior_mean, prior_var):
    if posterior == "auto":
        bernoulli = getattr(env, "reward_distribution", None) == "bernoulli"
        posterior = "bernoulli" if bernoulli else "gauss"
    if posterior == "bernoulli":
        return bandits.BernoulliThompson(env.num_arms)
    if noise_variance is None:
        # the env's reward noise variance; where it has none or 0 (noiseless
        # rewards), 1.0: a zero-variance likelihood would divide by zero
        # (pass noise_variance to choose another)
        noise_variance = float(getattr(env, "noise_variance", 0.0)) or 1.0
    return bandits.GaussianThompson(
        env.num_arms, float(noise_variance), float(prior_mean), float(prior_var)
    )


register_source(
    "thompson",
    description="Thompson sampling, Beta (bernoulli) or normal (gauss) posteriors",
    defaults={
        "posterior": "auto",
        "noise_variance": None,
        # matched to arm means uniform in [0, 1] (DPT's reference)
        "prior_mean": 0.5,
        "prior_var": 1.0 / 12.0,
    },
    bounds={"noise_variance": (1e-9, float("inf")), "prior_var": (1e-9, 1e9)},
    applies=_need_bandit,
    build=_thompson,
    choices={"posterior": ("auto", "bernoulli", "gauss")},
    baseline=True,
    learns=True,
)
register_source(
    "epsilon_greedy",
    description="empirical best arm, a uniform arm with probability epsilon",
    defaults={"epsilon": 0.1},
    bounds={"epsilon": _UNIT},
    applies=_need_bandit,
    build=lambda env, n, epsilon: bandits.EpsilonGreedy(env.num_arms, epsilon),
    baseline=True,
    learns=True,
)
register_source(
    "random",
    description="uniform random actions",
    build=lambda env, n: RandomAgent(env),
)


def _q_learning(env, num_episodes, explore_fraction, **kw):
    decay = max(1, round(explore_fraction * num_episodes))
    kw = {k: float(v) for k, v in kw.items()}
    return tabular.QLearning(
        num_states=_space(env, "observation_space").n,
        num_actions=env.num_actions,
        decay_episodes=decay,
        **kw,
    )


register_source(
    "q_learning",
    description="tabular epsilon-greedy Q-learning across episodes",
    defaults={
        "learning_rate": 0.8,
        "discount": 0.9,
        "epsilon_start": 1.0,
        "epsilon_end": 0.01,
        "explore_fraction": 0.5,
        "initial_q": 1.0,
    },
    bounds={
        "learning_rate": (1e-9, 1.0),
        "discount": _UNIT,
        "epsilon_start": _UNIT,
        "epsilon_end": _UNIT,
        "explore_fraction": _UNIT,
        "initial_q": (-1e9, 1e9),
    },
    applies=_need_table,
    build=_q_learning,
    baseline=True,
    learns=True,
)


def _noisy_oracle(env, num_episodes, epsilon_end, decay_fraction, schedule):
    decay = max(1, round(decay_fraction * num_episodes))
    return tabular.NoisyOracle(
        env, decay, epsilon_end=float(epsilon_end), per_step=schedule == "step"
    )


register_source(
    "noisy_oracle",
    description="AD-eps: oracle with epsilon annealed 1 -> epsilon_end per episode "
    "or per step",
    defaults={"epsilon_end": 0.0, "decay_fraction": 0.9, "schedule": "episode"},
    bounds={"epsilon_end": _UNIT, "decay_fraction": _UNIT},
    applies=_need_oracle,
    build=_noisy_oracle,
    choices={"schedule": ("episode", "step")},
    baseline=True,
    learns=True,
)


def _dpt(env, num_episodes, concentration, rollin):
    # rollin="uniform" runs no agent (see _dpt_histories); its stand-in as an
    # agent is the same uniformly random policy
    if is_bandit(env):
        return bandits.FixedPolicyBandit(env.num_arms, float(concentration))
    return RandomAgent(env)


def _dpt_histories(env, params, key, num_episodes, task_id, **settings) -> History:
    num_steps = num_episodes * env.horizon
    if settings["rollin"] == "uniform":
        return uniform_rollin(env, params, key, num_steps, task_id)
    agent = _dpt(env, num_episodes, **settings)
    return _run(env, agent, params, key, num_steps, task_id, TASK_BLOCK)


def _check_dpt(env, settings) -> str | None:
    if settings["rollin"] != "uniform":
        return None
    if is_bandit(env):
        return (
            "`rollin` must be 'trajectory' on bandits (their contexts come "
            "from the Dirichlet-mixed policy)"
        )
    if not supports_uniform_rollin(env):
        return (
            "`rollin='uniform'` needs an environment with `uniform_state` and "
            "an oracle (e.g. darkroom)"
        )
    return None


register_source(
    "dpt_rollin",
    description="DPT: random roll-in (Dirichlet-mixed for bandits; 'trajectory' "
    "of random actions or 'uniform' independent transitions), oracle labels",
    defaults={"concentration": 1.0, "rollin": "trajectory"},
    bounds={"concentration": (1e-6, float("inf"))},
    applies=_need_oracle,
    build=_dpt,
    histories=_dpt_histories,
    check=_check_dpt,
    choices={"rollin": ("trajectory", "uniform")},
)

#: Tasks run side by side inside the jit; larger task sets loop over blocks
#: of this many (``lax.map``), which keeps per-task state (Q tables) in cache.
TASK_BLOCK = 1024


@partial(jax.jit, static_argnums=(0, 1, 4, 6))
def _run(env, agent, params, key, num_steps, task_id, block_size) -> History:
    """``agent``'s histories on tasks ``params [task, ...]``, one jit."""
    history, _ = run_agent_on_tasks(
        env, agent, params, key, num_steps, task_id, block_size=block_size
    )
    return history


# A trained learner's run as a source needs run directories (a higher
# floor): agentrl.train.learned registers it when imported (training,
# evaluation and sweeps import it); a lookup before that names the module.
expect("source", "learned_learner", "agentrl.train.learned")


def _load_learner(name: str) -> Callable[..., History]:
    """``agentrl.sources.<name>.generate_<name>`` (a learning source)."""
    module_name = f"agentrl.sources.{name}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name != module_name:
            raise ValueError(f"source {name!r} is not available: {err}") from err
        raise ValueError(
            f"source {name!r} is not available: agentrl/sources/{name}.py is missing"
        ) from err
    except ImportError as err:
        raise ValueError(f"source {name!r} is not available: {err}") from err
    fn = getattr(module, f"generate_{name}", None)
    if fn is None:
        raise ValueError(
            f"source {name!r} is not available: {module_name} has no generate_{name}"
        )
    return fn


def _ppo_histories(env, params, key, num_episodes, task_id, **settings) -> History:
    # imported here: PPO (optax, its networks) is heavy and rarely used
    history = _load_learner("ppo")(env, params, key, num_episodes, **settings)
    return history.replace(task_id=task_id)


def _sac_histories(env, params, key, num_episodes, task_id, **settings) -> History:
    history = _load_learner("sac")(env, params, key, num_episodes, **settings)
    return history.replace(task_id=task_id)


def _need_box_actions(env: Any) -> str | None:
    return "it needs continuous (Box) actions" if _discrete_actions(env) else None


register_source(
    "ppo",
    description="PPO from scratch on each task, over its episodes (MLP or GRU)",
    defaults=None,
    histories=_ppo_histories,
    learns=True,
    record_only=("labels",),
)

register_source(
    "sac",
    description="SAC per task, replay buffer on the device (continuous actions)",
    defaults=None,
    applies=_need_box_actions,
    histories=_sac_histories,
    learns=True,
    record_only=("labels",),
)


def source_names() -> list[str]:
    return list(SOURCES)


def check_settings(source_name: str, env: Any, settings: dict[str, Any]) -> dict:
    """Validate ``source_name`` for ``env`` and fill defaults; return the settings.

    Raises ``ValueError`` naming the bad source, setting or value (nothing is
    compiled). A source with ``defaults=None`` (``ppo``) gets its settings
    passed through to its own checks.
    """
    spec = SOURCES.get(source_name)
    env_name = getattr(env, "name", type(env).__name__)
    reason = spec.applies(env)
    if reason is not None:
        raise ValueError(
            f"source {source_name!r} does not apply to {env_name}: {reason}. "
            f"Sources for {env_name}: {', '.join(applicable_sources(env))}"
        )
    if spec.defaults is None:
        return dict(settings)
    unknown = sorted(set(settings) - set(spec.defaults))
    if unknown:
        allowed = ", ".join(f"{k}={v!r}" for k, v in spec.defaults.items())
        raise ValueError(
            f"source {source_name!r}: unknown setting(s) {unknown}; "
            f"allowed (defaults): {allowed or 'none'}"
        )
    merged = {**spec.defaults, **settings}
    for field, value in settings.items():
        if value is None and spec.defaults[field] is None:
            continue  # resolved from the env (e.g. thompson's noise_variance)
        if field in spec.text:
            if not isinstance(value, str):
                raise ValueError(
                    f"source {source_name!r}: `{field}` must be a string, got {value!r}"
                )
            continue
        choices = spec.choices.get(field)
        if choices is not None:
            if value not in choices:
                raise ValueError(
                    f"source {source_name!r}: `{field}` must be one of {choices}, "
                    f"got {value!r}"
                )
            continue
        low, high = spec.bounds.get(field, (-float("inf"), float("inf")))
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not low <= value <= high:
            raise ValueError(
                f"source {source_name!r}: `{field}` must be a number in "
                f"[{low}, {high}], got {value!r}"
            )
    problem = spec.check(env, merged) if spec.check is not None else None
    if problem is not None:
        raise ValueError(f"source {source_name!r} on {env_name}: {problem}")
    return merged


def applicable_sources(env: Any) -> list[str]:
    """The sources that apply to ``env``."""
    return [n for n, s in SOURCES.items() if s.applies(env) is None]


def make_agent(source_name: str, env: Any, num_episodes: int, **settings) -> Any:
    """The :class:`~agentrl.agents.agent.Agent` behind ``source_name``."""
    settings = check_settings(source_name, env, settings)
    if SOURCES[source_name].build is None:
        raise ValueError(f"source {source_name!r} is not an Agent")
    return SOURCES[source_name].build(env, num_episodes, **settings)


def generate(
    source_name: str,
    env: Any,
    params: Any,
    key: jax.Array,
    num_episodes: int,
    task_id: jax.Array | None = None,
    **settings: Any,
) -> History:
    """Run ``source_name`` on every task in ``params`` (one jit, vmapped).

    Args:
      source_name: one of :func:`source_names`.
      env: the environment (its ``horizon`` sets the episode length).
      params: env params with leaves ``[task, ...]``.
      key: PRNG key.
      num_episodes: episodes per history; histories have
        ``num_episodes * env.horizon`` steps (more episodes where episodes
        terminate early).
      task_id: ``[task]`` int ids recorded in the history (default ``-1``).
      **settings: the source's settings (see :data:`SOURCES`).

    Returns:
      :class:`History` with leaves ``[task, num_episodes * env.horizon, ...]``.
    """
    settings = check_settings(source_name, env, settings)
    if not is_int(num_episodes, 1):
        raise ValueError(f"`num_episodes` must be an integer >= 1, got {num_episodes}")
    horizon = getattr(env, "horizon", None)
    if not isinstance(horizon, int):
        raise ValueError(f"env `horizon` must be a static int, got {horizon!r}")
    leaves = jax.tree.leaves(params)
    if not leaves or jnp.ndim(leaves[0]) < 1:
        raise ValueError("`params` must have a leading task axis: leaves [task, ...]")
    num_tasks = leaves[0].shape[0]
    task_id = task_ids(params, task_id)
    if task_id.shape != (num_tasks,):
        raise ValueError(
            f"`task_id` must have shape [{num_tasks}], got {task_id.shape}"
        )
    spec = SOURCES[source_name]
    if spec.histories is not None:
        return spec.histories(env, params, key, num_episodes, task_id, **settings)
    agent = spec.build(env, num_episodes, **settings)
    return _run(env, agent, params, key, num_episodes * horizon, task_id, TASK_BLOCK)


@dataclasses.dataclass(frozen=True)
class SourceHistories:
    """A source with its checked settings, as the callable a dataset writer takes.

    ``histories(params [task, ...], key, num_episodes, task_id [task])`` is
    ``generate(name, env, params, key, num_episodes, task_id, **settings)``;
    ``histories.source`` is its metadata ``{"name", "settings"}`` (plain
    values), which :func:`agentrl.data.write_dataset` records.
    """

    name: str
    env: Any
    settings: dict[str, Any]

    @property
    def source(self) -> dict[str, Any]:
        return {"name": self.name, "settings": dict(self.settings)}

    def __call__(
        self, params: Any, key: jax.Array, num_episodes: int, task_id: jax.Array
    ) -> History:
        return generate(
            self.name, self.env, params, key, num_episodes, task_id, **self.settings
        )


def source_histories(source_name: str, env: Any, **settings: Any) -> SourceHistories:
    """``source_name`` on ``env`` with ``settings``, checked now (before compiling).

    >>> write_dataset(out, env, source_histories("ucb", env, c=0.5), 1000, 1)

    Raises ``ValueError`` as :func:`check_settings` does.
    """
    return SourceHistories(source_name, env, check_settings(source_name, env, settings))
