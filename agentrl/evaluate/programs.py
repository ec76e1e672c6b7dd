"""Compiled evaluation programs, kept and shared across evaluations.

Every evaluation used to build its programs anew (a ``jax.jit`` of a fresh
closure per call): choosing the acting rule on validation tasks (three
rules), testing the chosen one and its three in-context-learning controls
compiled the model's program seven times, every baseline and the random
reference once per call, and a reproduction did it all again per seed.

Here a program is kept under a key that names everything it depends on
besides its arguments, and ``jax.jit`` compiles it once per argument shape:

- the model's lane program (:mod:`agentrl.evaluate.lanes`,
  ``evaluate_model_lanes``): the run's config without the fields that only
  seed or size an evaluation (seeds, data path, training steps, the eval
  seed, task count, episodes and rule), the environment (its name and
  arguments, a shift's included), the model's graph and the number of steps.
  Its arguments are the model's weights, the tasks, the key and the lane, so
  every acting rule, every control, validation and test (when they hold as
  many tasks) and every training seed of one experiment share one program;
- a baseline's program (``run_baseline``): the environment, the baseline's
  name and settings, the number of steps;
- the random and oracle references of the normalized score.

:func:`sharing` turns keeping off (every call builds its own program, as
before; ``benchmarks/eval_compile.py`` compares both) and
:func:`count_compiles` counts XLA compilations by function name. At most
:data:`MAX_PROGRAMS` programs are kept (least recently used dropped).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import re
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import jax
import numpy as np

import agentrl.configtools as configtools
from agentrl.agents.agent import run_agent_on_tasks, run_batched_agent
from agentrl.agents.model_agents import ModelHandle, split_model
from agentrl.evaluate.lanes import Lane, LaneAgent, is_scored

#: programs kept at most (each holds a compiled executable per shape)
MAX_PROGRAMS = 16
#: the name XLA compiles the model's lane program under
MODEL_PROGRAM = "evaluate_model_lanes"
#: jax.monitoring's event for one backend compilation
_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

_PROGRAMS: collections.OrderedDict[Any, Callable] = collections.OrderedDict()
_SHARING = [True]

#: config fields that only seed or size an evaluation (not in a program key)
_UNKEYED = (
    ("name",),
    ("train", "seed"),
    ("train", "steps"),
    ("data", "seed"),
    ("data", "path"),
    ("eval", "seed"),
    ("eval", "num_tasks"),
    ("eval", "num_episodes"),
    ("eval", "acting"),
)


class Prepared(NamedTuple):
    """An actor whose history a kept program makes: ``run(params, key)``.

    ``kind`` is what the result's metadata records (``"model"``, ...).
    """

    run: Callable[[Any, jax.Array], Any]
    kind: str


def kept(key: Any, build: Callable[[], Callable]) -> Callable:
    """The program kept under ``key``, built by ``build()`` the first time."""
    if not _SHARING[0]:
        return build()
    program = _PROGRAMS.get(key)
    if program is None:
        program = _PROGRAMS[key] = build()
        while len(_PROGRAMS) > MAX_PROGRAMS:
            _PROGRAMS.popitem(last=False)
    else:
        _PROGRAMS.move_to_end(key)
    return program


def clear() -> None:
    """Drop every kept program."""
    _PROGRAMS.clear()


@contextlib.contextmanager
def sharing(enabled: bool) -> Iterator[None]:
    """Keep and share programs (``True``, the default) or build each anew."""
    before = _SHARING[0]
    _SHARING[0] = bool(enabled)
    try:
        yield
    finally:
        _SHARING[0] = before


@contextlib.contextmanager
def count_compiles() -> Iterator[collections.Counter]:
    """Count XLA compilations inside the block: ``{function name: count}``
    (the jitted function's ``__name__``, e.g. :data:`MODEL_PROGRAM`).

    A persistent-cache hit counts too (it is a jit cache miss all the same).
    """
    counts: collections.Counter = collections.Counter()

    def listen(event: str, duration: float, **kwargs: Any) -> None:
        if event == _COMPILE_EVENT:  # fun_name reads "jit(name)"
            name = str(kwargs.get("fun_name", "?"))
            counts[re.sub(r"^jit\((.*)\)$", r"\1", name)] += 1

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield counts
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)


def config_key(config: Any) -> str:
    """``config`` as canonical JSON without the fields in :data:`_UNKEYED`."""
    tree = json.loads(json.dumps(configtools.to_dict(config), default=str))
    for path in _UNKEYED:
        node = tree
        for part in path[:-1]:
            node = node.get(part, {})
        node.pop(path[-1], None)
    return json.dumps(tree, sort_keys=True)


def _model_argument(model: Any):
    """``(argument, graph, rebuild)``: the model's arrays as a traced argument.

    An NNX module's weights (its graph is static); a plain pytree of arrays
    (RL²'s weights) as it is. ``None`` for anything else, whose arrays
    would be baked into the program as constants (not shareable).
    """
    handle = split_model(model)
    if handle.weights is not None:
        graph = handle.graphdef
        return handle.weights, graph, lambda w: ModelHandle(graph, w)
    leaves, tree = jax.tree.flatten(handle.graphdef)
    if leaves and all(isinstance(x, jax.Array | np.ndarray) for x in leaves):
        return handle.graphdef, tree, lambda t: ModelHandle(t, None)
    return None


def lane_runner(
    config: Any, env: Any, env_key: str, model: Any, num_steps: int
) -> Callable[[Any, jax.Array, Lane], Any] | None:
    """``run(params, key, lane) -> History`` of the model's lane program.

    ``config``: the run's config (``eval.temperature`` is the sampling
    temperature; the rule comes with each lane). ``None`` where lanes do not
    apply (the algorithm's sampling agent has no ``scores``/``select``, or
    the model's arrays cannot be an argument) or sharing is off: evaluate
    the old way then, one program per rule and control.
    """
    found = _model_argument(model) if _SHARING[0] else None
    if found is None:
        return None
    argument, graph, rebuild = found
    sample = dataclasses.replace(
        config, eval=dataclasses.replace(config.eval, acting="sample")
    )
    if not is_scored(config.algo.make_agent(model, env, num_steps, sample)):
        return None
    key = ("model", config_key(sample), env_key, graph, num_steps)
    program = kept(key, lambda: _lane_program(env, sample, rebuild, num_steps))
    return lambda params, k, lane: program(argument, params, k, lane)


def _lane_program(env: Any, config: Any, rebuild: Callable, num_steps: int):
    def evaluate_model_lanes(model_argument, params, key, lane):
        handle = rebuild(model_argument)
        agent = config.algo.make_agent(handle, env, num_steps, config)
        lanes = LaneAgent(agent, lane, num_steps)
        return run_batched_agent(env, lanes, params, key, num_steps)[0]

    return jax.jit(evaluate_model_lanes)


def baseline_runner(
    key: Any, env: Any, agent: Any, num_steps: int, batched: bool
) -> Callable[[Any, jax.Array], Any]:
    """``run(params, key) -> History`` of a baseline agent's kept program.

    ``key`` names the environment and the baseline with its settings.
    """

    def build():
        def run_baseline(params, k):
            if batched:
                return run_batched_agent(env, agent, params, k, num_steps)[0]
            return run_agent_on_tasks(env, agent, params, k, num_steps)[0]

        return jax.jit(run_baseline)

    return kept(("baseline", key, num_steps, batched), build)
