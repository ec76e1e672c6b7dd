"""In-context-learning controls and the verdict "learns in context".

A model whose return rises over the episodes of an evaluation may be
learning from its context, or merely unrolling a fixed exploration schedule
it memorised. The controls (as in the AD paper, plus two context ablations)
tell them apart; each is evaluated on the same tasks with the same keys as
the method, so differences are paired per ``[seed, task]``:

- ``zero_rewards``: every reward the model reads in context is 0 (it still
  collects the true reward). A learner that needs rewards to find the goal
  cannot.
- ``shuffle_rewards``: every reward written into the context is replaced by
  one drawn uniformly from the rewards this task has paid so far
  (including the current one): the rewards' distribution is kept, their
  link to the states and actions that earned them is broken. (Context is
  causal and decoded online, so the "shuffle" is drawn step by step rather
  than as one permutation of a finished history.)
- ``empty_context``: the model acts every step from a fresh state, i.e.
  from the current observation alone with no history (AD: an empty KV
  cache; DPT: an empty context set).
- ``expert_distillation``: the same model and training budget, trained only
  on the converged episodes of the same histories (the last
  ``num_episodes`` of each; :func:`expert_dataset` writes that dataset and
  :func:`expert_config` the run's config). It distils the expert, not the
  learning, and is the AD paper's control. It applies only to a learner
  distilled from a dataset: one trained online by RL (RL², transformer
  PPO) has no histories to cut, so its
  controls are the three context ones (:func:`controls_for`).

The context controls act on whatever the wrapped agent reads as context:
AD's and transformer PPO's KV cache (the reward in each token), DPT's
context set, RL²'s input (the previous reward it is fed each step); the
empty context is a fresh agent state every step (an empty cache, an empty
context set, a fresh GRU hidden state started on the current
observation).

The first three wrap a trained model's agent (:func:`control_policy`,
or ``agentrl eval RUN --control NAME``) inside its acting rule: the rule
(sample until the first reward, then greedy) sees the rewards the task
pays, as it does for the method, and only the model's context is
controlled (:func:`controlled_agent`). The last
is another training run. :func:`icl_verdict` says a method learns in
context only if it beats every control that applies to it, each by a paired
bootstrap CI of the last-episodes return that excludes zero.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import agentrl.evaluate.metrics as metrics
from agentrl.agents.agent import start_agent
from agentrl.agents.driver import ModelPolicy
from agentrl.data.reader import open_dataset
from agentrl.data.writer import write_dataset
from agentrl.sources.registry import SOURCES

#: Controls that change how a trained model reads its context (no training).
CONTEXT_CONTROLS = ("zero_rewards", "shuffle_rewards", "empty_context")
#: Every control, in the order reports list them.
CONTROLS = (*CONTEXT_CONTROLS, "expert_distillation")


def controls_for(config: Any) -> tuple[str, ...]:
    """The controls that apply to the learner of ``config`` (an
    ``ExperimentConfig``).

    All of :data:`CONTROLS` for a learner distilled from learning histories;
    the :data:`CONTEXT_CONTROLS` only when there are no such histories to cut
    to their converged episodes: a learner trained online by RL
    (RL², transformer PPO), or one distilled from a source that
    does not learn (``Source.learns``: DPT's independent roll-ins, random
    play), where the "last episodes" are no more expert than the rest.
    The source is the one its data records (:func:`data_source`); one outside
    the registry (a published dataset, e.g. XLand-100B's PPO histories) is
    taken to be learning histories, the premise of distilling from it.
    """
    if not config.algo.by_training(from_data=True, online=False):
        return CONTEXT_CONTROLS  # no histories to cut
    source = SOURCES.get(data_source(config.data), None)
    return CONTROLS if source is None or source.learns else CONTEXT_CONTROLS


def data_source(data: Any) -> str:
    """The name of the source that wrote a run's histories (``data``: its
    ``DataConfig``): the dataset's own record where the run reads an
    existing one (``data.path``; ``data.source`` is then only a default),
    else ``data.source``, which generates them."""
    if data.path:
        try:
            return str(
                open_dataset(data.path, verify="none").metadata["source"]["name"]
            )
        except (OSError, ValueError, KeyError, TypeError):
            pass  # moved or unreadable: fall back to the config's name
    return data.source


def check_control(name: str) -> str:
    """``name`` if it is a context control, else ``ValueError`` listing them."""
    if name not in CONTEXT_CONTROLS:
        extra = (
            " (expert_distillation is a training run: see expert_dataset)"
            if name == "expert_distillation"
            else ""
        )
        raise ValueError(
            f"control must be one of {', '.join(CONTEXT_CONTROLS)}, got {name!r}{extra}"
        )
    return name


class ControlState(NamedTuple):
    """The wrapped agent's state and, for ``shuffle_rewards``, the rewards paid.

    ``rewards [task, num_steps]``, ``count []`` steps so far, ``key [task]``.
    """

    inner: Any
    rewards: jax.Array
    count: jax.Array
    key: jax.Array


class ControlledAgent:
    """A batched agent whose context is ablated by a control (see the module)."""

    batched = True

    def __init__(self, agent: Any, control: str, num_steps: int):
        self.agent = agent
        self.control = check_control(control)
        self.num_steps = int(num_steps)

    def init(self, key: jax.Array, params: Any) -> ControlState:
        batch = key.shape[0]
        size = self.num_steps if self.control == "shuffle_rewards" else 1
        return ControlState(
            inner=self.agent.init(key, params),
            rewards=jnp.zeros((batch, size), jnp.float32),
            count=jnp.int32(0),
            # a model agent's init reads only the key's shape: the shuffle
            # stream is the init key's only use
            key=jax.vmap(lambda k: jax.random.fold_in(k, 0x5F1E))(key),
        )

    def start(self, state: ControlState, obs: Any) -> ControlState:
        if self.control == "empty_context":  # ``inner`` stays the fresh state
            return state
        return state._replace(inner=start_agent(self.agent, state.inner, obs))

    def _reading(self, state: ControlState, obs) -> Any:
        """The agent state the model acts from under the control."""
        if self.control == "empty_context":
            # ``inner`` is never started nor updated: start a fresh agent on
            # the current observation, i.e. act from it alone
            return start_agent(self.agent, state.inner, obs)
        return state.inner

    def act(self, key, state: ControlState, obs, env_state, params) -> jax.Array:
        inner = self._reading(state, obs)
        return self.agent.act(key, inner, obs, env_state, params)

    # a scored model agent stays one (an acting rule wrapped around the
    # control needs both: :class:`~agentrl.agents.acting.SampleThenGreedy`)
    def scores(self, state: ControlState, obs, env_state, params) -> jax.Array:
        inner = self._reading(state, obs)
        return self.agent.scores(inner, obs, env_state, params)

    def select(self, key: jax.Array, scores: jax.Array, greedy: bool) -> jax.Array:
        return self.agent.select(key, scores, greedy)

    @property
    def space(self) -> Any:
        return self.agent.space

    def update(self, state: ControlState, step: Any) -> ControlState:
        if self.control == "empty_context":
            return state
        reward = jnp.asarray(step.reward, jnp.float32).reshape(-1)
        if self.control == "zero_rewards":
            seen = jnp.zeros_like(reward)
            rewards = state.rewards
        else:  # shuffle_rewards: a draw from the rewards paid so far
            t = jnp.minimum(state.count, self.num_steps - 1)
            rewards = state.rewards.at[:, t].set(reward)
            keys = jax.vmap(lambda k: jax.random.fold_in(k, state.count))(state.key)
            pick = jax.vmap(lambda k: jax.random.randint(k, (), 0, t + 1))(keys)
            seen = jnp.take_along_axis(rewards, pick[:, None], axis=1)[:, 0]
        step = step._replace(reward=seen.reshape(jnp.shape(step.reward)))
        inner = self.agent.update(state.inner, step)
        return ControlState(inner, rewards, state.count + 1, state.key)


def controlled_agent(agent: Any, control: str, num_steps: int) -> Any:
    """``agent`` (an algorithm's acting agent) under ``control``.

    The control changes what the *model* reads, nothing else: where the
    agent is an acting rule around the model's agent (one with
    ``around(wrap)``, :class:`~agentrl.agents.acting.SampleThenGreedy`),
    the control goes inside it, so the rule still sees the rewards the task pays (under
    ``zero_rewards`` it turns greedy after the first real reward, as the
    method's does) while the model's context holds the controlled ones.
    """
    check_control(control)
    around = getattr(agent, "around", None)
    if around is not None:
        return around(lambda inner: ControlledAgent(inner, control, num_steps))
    return ControlledAgent(agent, control, num_steps)


def control_policy(policy: ModelPolicy, control: str) -> ModelPolicy:
    """``policy`` acting under ``control`` (one of :data:`CONTEXT_CONTROLS`)."""
    check_control(control)
    make = policy.make_agent
    return ModelPolicy(
        policy.model, lambda handle, n: controlled_agent(make(handle, n), control, n)
    )


# ------------------------------------------------------ expert distillation


def expert_dataset(
    source: str | Path,
    out: str | Path,
    num_episodes: int,
    overwrite: bool = False,
) -> Path:
    """Write ``out``: the last ``num_episodes`` episodes of every history.

    The records, task ids, split and seed are ``source``'s (the tasks are
    planned again with the recorded seed and split, and checked to match);
    only the time axis is cut to its last ``num_episodes * horizon`` steps,
    which for fixed-length episodes (Dark Room) are the last
    ``num_episodes`` episodes: the source's converged behaviour. A source
    with a two-way split (agentrl <= 0.2) gets a three-way one with the
    same training tasks; its test tasks are then a subset of the source's.
    """
    ds = open_dataset(source)
    m = ds.metadata
    total = int(m["num_episodes"])
    if not (isinstance(num_episodes, int) and 1 <= num_episodes <= total):
        raise ValueError(
            f"num_episodes must be an integer in [1, {total}] (the source's "
            f"episodes per history), got {num_episodes!r}"
        )
    keep = num_episodes * int(m["horizon"])
    chunk = min(256, int(m["num_tasks"]))
    # The writer asks for each split's records chunk by chunk, in order, with
    # the last chunk padded by repeating its ids: a cursor per split, and the
    # ids asked for tell which split is being written.
    cursor = {split: 0 for split in ds.splits}

    def histories(params, key, n, task_id):
        wanted = np.asarray(task_id)
        for split, at in cursor.items():
            ids = ds.task_ids(split)
            rows = np.arange(at, min(at + chunk, len(ids)))
            if len(rows) and np.array_equal(np.resize(ids[rows], chunk), wanted):
                cursor[split] = at + len(rows)
                history = ds.load_history(split, np.resize(rows, chunk).tolist())
                return _last_steps(history, keep)
        raise ValueError(f"{source}: the re-planned task ids do not match its records")

    settings = dict(m["source"].get("settings", {}))
    settings["expert_episodes"] = num_episodes
    split = m["split"]
    # The writer plans the split with the default validation share; the
    # training ids do not depend on it, so they are the source's.
    return write_dataset(
        out,
        ds.env,
        histories,
        int(m["num_tasks"]),
        num_episodes,
        seed=int(m["seed"]),
        source={"name": f"{m['source']['name']}_expert", "settings": settings},
        env_name=m["env"]["name"],
        env_overrides=m["env"]["overrides"],
        split_fraction=float(split["train_fraction"]),
        chunk_size=chunk,
        overwrite=overwrite,
    )


def _last_steps(history: Any, keep: int) -> Any:
    """``history`` with only its last ``keep`` steps (episode ids restart at 0)."""
    timed = ("obs", "action", "reward", "terminated", "truncated", "episode")
    cut = {f: getattr(history, f)[:, -keep:] for f in timed}
    for f in ("optimal_action", "next_obs"):
        value = getattr(history, f)
        cut[f] = None if value is None else jax.tree.map(lambda x: x[:, -keep:], value)
    cut["episode"] = cut["episode"] - cut["episode"][:, :1]
    return dataclasses.replace(history, **cut)


def expert_config(config: Any, dataset: str | Path) -> Any:
    """``config`` trained on ``dataset`` (an :func:`expert_dataset`) instead.

    Everything else (model, algorithm, steps, seed, evaluation) is kept, so
    the expert-distillation run differs from the method's only in its data.
    """
    data = dataclasses.replace(config.data, path=str(dataset))
    return dataclasses.replace(config, name=f"{config.name}_expert", data=data)


# ---------------------------------------------------------------- verdict


def _last_returns(runs: Sequence[Any], last_k: int) -> np.ndarray:
    """``[seed, task]`` mean return of the last ``last_k`` episodes."""
    return np.stack([np.asarray(r.returns) for r in runs])[..., -last_k:].mean(-1)


def _check_paired(a_runs: Sequence[Any], b_runs: Sequence[Any], shown: bool) -> None:
    if len(a_runs) != len(b_runs):
        raise ValueError(f"paired over seeds: {len(a_runs)} != {len(b_runs)} seeds")
    for seed, (a, b) in enumerate(zip(a_runs, b_runs, strict=True)):
        shapes = np.shape(a.returns), np.shape(b.returns)
        ids = a.metadata.get("task_ids"), b.metadata.get("task_ids")
        agree = tasks_agree(a, b)
        if shapes[0] != shapes[1] or agree is False:
            raise ValueError(
                f"seed {seed}: {a.name} and {b.name} were not evaluated on the "
                f"same tasks and episodes ([task, episode] {shapes[0]} vs "
                f"{shapes[1]}; task ids {ids[0]} vs {ids[1]}), so they cannot "
                "be paired"
            )
        if shown and agree is None:
            raise ValueError(
                f"seed {seed}: neither {a.name} nor {b.name} records task ids or "
                "the oracle's return per task, so their tasks cannot be shown "
                "to agree"
            )


def tasks_agree(a: Any, b: Any) -> bool | None:
    """Whether two results were evaluated on the same tasks.

    Their task ids where either records them (one recording them and the
    other not: ``False``, not shown to agree), else the oracle's return per
    task where both have it (drawn families, whose tasks have no ids), else
    ``None``: nothing to compare.
    """
    ids = a.metadata.get("task_ids"), b.metadata.get("task_ids")
    if ids[0] is not None or ids[1] is not None:
        # lists or arrays alike: one bool, never an elementwise array
        recorded = ids[0] is not None and ids[1] is not None
        return recorded and bool(np.array_equal(ids[0], ids[1]))
    oracles = a.oracle_return, b.oracle_return
    if oracles[0] is None or oracles[1] is None:
        return None
    oa, ob = (np.asarray(o, np.float64) for o in oracles)
    return oa.shape == ob.shape and bool(np.allclose(oa, ob, rtol=1e-6))


def paired_difference(
    a_runs: Sequence[Any],
    b_runs: Sequence[Any],
    last_k: int,
    resample: str = "tasks",
    seed: int = 0,
    shown: bool = False,
) -> dict[str, float]:
    """A minus B, last-``last_k``-episodes return, paired per ``[seed, task]``.

    Both were evaluated on the same tasks with the same keys per seed: a
    ``ValueError`` where a seed's ``[task, episode]`` shapes differ or its
    tasks do not agree (:func:`tasks_agree`). Results of one run (a method
    and its controls) may record neither ids nor oracle returns; results
    evaluated apart (``shown=True``) must show their tasks agree.

    Returns ``{"mean", "low", "high", "pairs"}`` (95% bootstrap CI;
    ``resample`` as :func:`agentrl.evaluate.metrics.bootstrap_ci`; ``pairs``
    the ``[seed, task]`` count).
    """
    _check_paired(a_runs, b_runs, shown)
    diff = _last_returns(a_runs, last_k) - _last_returns(b_runs, last_k)
    low, high = metrics.bootstrap_ci(diff, resample=resample, seed=seed)
    return {"mean": float(diff.mean()), "low": low, "high": high, "pairs": diff.size}


def icl_verdict(
    method: Sequence[Any],
    controls: Mapping[str, Sequence[Any]],
    last_k: int = 10,
    resample: str = "tasks",
    applicable: Sequence[str] = CONTROLS,
) -> dict[str, Any]:
    """Does ``method`` learn in context? Only if it beats every control.

    Args:
      method: the method's ``EvalResult`` per training seed.
      controls: ``{control name: [EvalResult per seed]}`` on the same tasks
        and keys (same order of seeds).
      last_k: the score is the mean return of the last ``last_k`` episodes.
      resample: bootstrap resampling (``"tasks"``, ``"runs"``, ``"both"``).
      applicable: the controls that apply to the method (default all;
        :func:`controls_for` its config): the verdict needs each of them.

    Returns:
      ``{"learns_in_context": bool, "controls": {name: {"mean", "low",
      "high", "beaten"}}, "missing": [applicable controls not run],
      "not_applicable": [controls that do not apply], "last_k": k}``;
      ``learns_in_context`` is true only if every applicable control was
      run and each paired CI lies above zero, over at least
      :data:`~agentrl.evaluate.metrics.MIN_RESOLVING_TASKS` (seed, task)
      pairs.
    """
    if not controls:
        raise ValueError("icl_verdict needs at least one control's results")
    unknown = [c for c in (*controls, *applicable) if c not in CONTROLS]
    if unknown:
        raise ValueError(f"controls must be among {', '.join(CONTROLS)}, got {unknown}")
    extra = [c for c in controls if c not in applicable]
    if extra:
        raise ValueError(
            f"control(s) {extra} do not apply here (applicable: "
            f"{', '.join(applicable)})"
        )
    out: dict[str, Any] = {}
    for name, runs in controls.items():
        if len(runs) != len(method):
            raise ValueError(
                f"control {name!r} has {len(runs)} seeds, the method {len(method)}"
            )
        d = paired_difference(method, runs, last_k, resample)
        enough = d["pairs"] >= metrics.MIN_RESOLVING_TASKS  # as a choice's margin
        out[name] = {**d, "beaten": bool(d["low"] > 0 and enough)}
    missing = [c for c in CONTROLS if c in applicable and c not in controls]
    return {
        "learns_in_context": all(v["beaten"] for v in out.values()) and not missing,
        "controls": out,
        "missing": missing,
        "not_applicable": [c for c in CONTROLS if c not in applicable],
        "last_k": last_k,
    }
