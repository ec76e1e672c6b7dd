"""XLand-100B / XLand-Trivial-20B HDF5 files <-> agentrl datasets (extra ``h5py``).

The published schema (Nikulin et al., 2024, ``dunnolab/xland-minigrid-datasets``):
one HDF5 group per task (``"0"``, ``"1"``, ...), its attributes ``env-id``
(e.g. ``XLand-MiniGrid-R1-9x9``), ``benchmark-id`` (``trivial-1m``,
``medium-1m``, ...) and ``ruleset-id``, and five datasets holding that
task's learning histories, each one uninterrupted stream of steps::

    states          uint8    [history, step, view, view]  tile * 12 + colour
    actions         uint8    [history, step]
    rewards         float16  [history, step]
    dones           bool     [history, step]   terminated or truncated
    expert_actions  uint8    [history, step]   the final policy's action

(XLand-100B: 32 histories of 121,856 steps per task, on
``XLand-MiniGrid-R1-13x13``, ``medium-1m``; XLand-Trivial-20B: 60,928, on
``XLand-MiniGrid-R1-9x9``, ``trivial-1m``.) :func:`import_hdf5` turns such
a file into an agentrl dataset (:func:`agentrl.data.write_histories`, one
record per learning history, read chunk by chunk), which AD and DPT then
train on unchanged (``data.path`` may also name the ``.hdf5`` file: ``fit``
imports it into the run directory once). The mapping:

- ``obs``: the state decompressed to xminigrid's ``[view, view, 2]``
  (tile, colour); ``action``, ``reward`` widened to int32 / float32;
- ``terminated = done & (reward > 0)`` (XLand ends an episode with a reward
  only when the goal is reached), ``truncated`` the other ``done`` steps;
  ``episode`` counts the ``done`` steps before each step;
- ``optimal_action``: ``expert_actions`` (DPT's label) when the file has them;
- ``task_id``: the ruleset id, ``params``: the env's params of that ruleset.

agentrl's records have ``num_episodes * horizon`` steps: a stream whose
length is not a multiple of the env's horizon (xminigrid's ``max_steps``,
``3 * height * width``) is cut to the largest one (XLand-100B, horizon 507:
121,856 = 240 x 507 + 176; XLand-Trivial-20B, horizon 243: 60,928 =
250 x 243 + 178; the remainders are dropped). The import checks that the
states' view is the env's and that no episode (a run of steps up to a
``done``) of the imported steps is longer than the env's horizon.
The env: a file :func:`generate_hdf5` wrote is rebuilt from its
``agentrl-env`` attribute (``env_overrides`` override it). A published file
is rebuilt as ``make("xland", env_id=<env-id>, rulesets=...)``, where
``rulesets`` must be the path of the ruleset table its ``benchmark-id``
named when it was collected (``env_overrides={"rulesets": path}``;
:data:`PUBLISHED_TABLES`: ``medium-1m`` is ``medium_1m_v2``, from
:data:`TABLES_URL`): the import refuses the ``benchmark-id`` itself, any
name the installed xminigrid registers and ``None``, since xminigrid 0.9.2
re-sampled its named tables and every history would be labelled with
another ruleset, without any error. The split, by ``held_out`` (:data:`HELD_OUT`):

- ``"file"`` (default): the file's ruleset ids split ``split_fraction`` /
  rest with ``seed``, the rest halved into validation and test rulesets
  (``DEFAULT_VALIDATION_SHARE``, as generated data); records of the train
  rulesets are written, the others are the held-out tasks (or the
  ``agentrl-split`` a file of :func:`generate_hdf5` records);
- ``"table"``, the XLand AD baseline's (the datasets' repository trains on
  every ruleset of the file and evaluates on rulesets of the benchmark
  table outside it, ``baselines/ad/evaluate_in_context.py``): every group's
  histories are written, and the validation and test rulesets are drawn
  with ``seed`` from the env's table ids the file does not hold, as many
  as ``"file"`` would hold out (:func:`held_out_counts`; 1,000 each for
  XLand-Trivial-20B's 10,000 rulesets at ``split_fraction`` 0.8). A file
  with its own ``agentrl-split`` is refused: it records one already, over
  the rulesets outside the file. The dataset records ``held_out`` (absent:
  ``"file"``, :func:`recorded_held_out`).

:func:`generate_hdf5` writes agentrl's own histories (e.g. its PPO source
on XLand-MiniGrid) in the same schema, one PPO learner per history (the
published data records 32 of the parallel environments of one learner per
task). agentrl's PPO has no relabelling pass, so its files carry no
``expert_actions`` (and train AD, not DPT).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import agentrl.envs as envs
import agentrl.envs.xland as xland
from agentrl.data.task_plan import plan_tasks, task_params
from agentrl.data.writer import HistoriesFn, write_histories
from agentrl.envs.tasks import DEFAULT_VALIDATION_SHARE, TaskSplit, split_task_ids
from agentrl.history import History, check_history

#: xminigrid's ``NUM_COLORS``: a compressed cell is ``tile * 12 + colour``.
NUM_COLORS = 12
#: The published datasets and their dtypes, in the order of the README.
SCHEMA = {
    "states": np.uint8,
    "actions": np.uint8,
    "rewards": np.float16,
    "dones": np.bool_,
    "expert_actions": np.uint8,
}
INSTALL_HINT = "install the optional extra: pip install 'agentrl[h5py]'"
#: The ruleset table each ``benchmark-id`` of the published files names:
#: they were collected with xminigrid 0.7-0.8 (the datasets repository's
#: ``collection/requirements.txt``, ``baselines/ad/requirements.txt``),
#: whose names loaded these files (``benchmarks.py``, 0.7.0 to 0.9.1).
#: xminigrid 0.9.2 re-sampled them (``medium-1m`` is ``medium_1m_v3``
#: since) and replaced ``trivial-1m`` by another table, ``trivial-21k``.
PUBLISHED_TABLES = {
    "trivial-1m": "trivial_1m_v2",
    "small-1m": "small_1m_v2",
    "medium-1m": "medium_1m_v2",
    "medium-3m": "medium_3m_v2",
    "high-1m": "high_1m_v2",
    "high-3m": "high_3m_v2",
}
#: Where xminigrid's ruleset table files are published.
TABLES_URL = "https://huggingface.co/datasets/Howuhh/xland_minigrid"
#: Where an import's validation and test rulesets come from: ``"file"``,
#: the file's own rulesets; ``"table"``, the env's table outside the file.
HELD_OUT = ("file", "table")


def _h5py():
    try:
        import h5py
    except ImportError as err:  # pragma: no cover - depends on the install
        raise ImportError(f"XLand-100B files need `h5py`: {INSTALL_HINT}") from err
    return h5py


def compress_obs(obs: np.ndarray) -> np.ndarray:
    """``[..., view, view, 2]`` (tile, colour) -> ``[..., view, view]`` uint8."""
    obs = np.asarray(obs)
    return (obs[..., 0].astype(np.int32) * NUM_COLORS + obs[..., 1]).astype(np.uint8)


def decompress_obs(states: np.ndarray) -> np.ndarray:
    """Inverse of :func:`compress_obs`: ``[..., view, view, 2]`` uint8."""
    return np.stack(np.divmod(np.asarray(states), NUM_COLORS), axis=-1).astype(np.uint8)


# ------------------------------------------------------------- writing
def write_hdf5(
    path: str | Path,
    groups: Iterator[tuple[int, History]],
    attrs: dict[str, Any],
    root_attrs: dict[str, Any] | None = None,
) -> Path:
    """Write ``(ruleset id, History [history, step, ...])`` groups in the schema.

    ``attrs``: the ``env-id`` and ``benchmark-id`` of every group (each
    group also gets its ``ruleset-id``); ``root_attrs``: extra attributes of
    the file (JSON strings). Datasets are gzip-compressed in chunks of
    4,096 steps of one history, as the published files are.
    """
    h5py = _h5py()
    path = Path(path)
    tmp = path.with_name(path.name + ".partial")
    try:
        with h5py.File(tmp, "w") as f:
            for key, value in (root_attrs or {}).items():
                f.attrs[key] = value
            for g, (ruleset, history) in enumerate(groups):
                history = jax.device_get(history)
                group = f.create_group(str(g))
                group.attrs.update({**attrs, "ruleset-id": int(ruleset)})
                steps = history.num_steps
                data = {
                    "states": compress_obs(history.obs),
                    "actions": np.asarray(history.action),
                    "rewards": np.asarray(history.reward),
                    "dones": np.asarray(history.done),
                }
                if history.optimal_action is not None:
                    data["expert_actions"] = np.asarray(history.optimal_action)
                for name, value in data.items():
                    value = value.astype(SCHEMA[name])
                    group.create_dataset(
                        name,
                        data=value,
                        compression="gzip",
                        compression_opts=6,
                        chunks=(1, min(4096, steps), *value.shape[2:]),
                    )
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path)  # complete files only
    return path


def generate_hdf5(
    path: str | Path,
    env: Any,
    histories: HistoriesFn,
    num_histories: int,
    num_episodes: int,
    seed: int = 0,
    *,
    env_name: str = "xland",
    env_overrides: dict[str, Any] | None = None,
    split_fraction: float = 0.8,
    chunk_size: int = 64,
) -> Path:
    """Run ``histories`` (e.g. PPO) on XLand rulesets; write the HDF5 schema.

    The tasks are planned as :func:`agentrl.data.write_dataset` plans them
    (``num_histories`` histories cycling over the train rulesets of the
    env's split), grouped by ruleset; each chunk of ``chunk_size`` histories
    is one jitted call. The file records the env (``agentrl-env``) and the
    split (``agentrl-split``) so :func:`import_hdf5` rebuilds both.
    """
    _check_schema_obs(env)
    plan = plan_tasks(env, num_histories, split_fraction, seed)
    ids = np.sort(plan.task_ids["train"])  # one group per ruleset
    key_tasks, key_run = jax.random.split(jax.random.key(seed))
    chunk_size = min(chunk_size, len(ids))

    def chunks() -> Iterator[History]:
        for c, start in enumerate(range(0, len(ids), chunk_size)):
            chunk = ids[start : start + chunk_size]
            padded = np.resize(chunk, chunk_size)
            params = task_params(env, plan, padded, key_tasks)
            key = jax.random.fold_in(key_run, c)
            history = histories(params, key, num_episodes, jnp.asarray(padded))
            check_history(history)
            n = len(chunk)
            yield jax.tree.map(lambda x: np.asarray(x)[:n], jax.device_get(history))

    def by_ruleset(history: History) -> Iterator[tuple[int, History]]:
        task = np.asarray(history.task_id)
        for ruleset in dict.fromkeys(task.tolist()):
            rows = np.flatnonzero(task == ruleset)
            yield int(ruleset), jax.tree.map(lambda x, r=rows: x[r], history)

    def groups() -> Iterator[tuple[int, History]]:
        # ids are sorted: a ruleset's rows are contiguous across chunks, and
        # every ruleset but the last one seen so far is complete
        pending = None
        for history in chunks():
            pending = history if pending is None else _concat([pending, history])
            task = np.asarray(pending.task_id)
            last = int(np.flatnonzero(task == task[-1])[0])
            yield from by_ruleset(jax.tree.map(lambda x, n=last: x[:n], pending))
            pending = jax.tree.map(lambda x, n=last: x[n:], pending)
        if pending is not None:
            yield from by_ruleset(pending)

    name = getattr(env, "env_id", "XLand-MiniGrid-R1-9x9")
    return write_hdf5(
        path,
        groups(),
        {"env-id": name, "benchmark-id": "agentrl"},
        {
            "agentrl-env": json.dumps(
                {"name": env_name, "overrides": dict(env_overrides or {})}
            ),
            "agentrl-split": json.dumps(plan.split.to_json()),
            "agentrl-source": json.dumps(getattr(histories, "source", None)),
            "agentrl-seed": seed,
            # histories per jitted call: the keys, so the histories, depend on it
            "agentrl-chunk-size": json.dumps(int(chunk_size)),
        },
    )


def _check_schema_obs(env: Any) -> None:
    """``ValueError`` unless ``env`` observes ``[view, view, 2]`` (tile,
    colour) ids: the schema's ``states`` hold those only, compressed."""
    shape = tuple(env.observation_space(env.default_params).shape)
    if len(shape) != 3 or shape[0] != shape[1] or shape[2] != 2:
        raise ValueError(
            "generate_hdf5: the XLand-100B schema stores observations as "
            f"[view, view, 2] (tile, colour) ids; the env observes {shape} "
            "(XLand-MiniGrid's are ids with observation='ids')"
        )


def _concat(histories: list[History]) -> History:
    if len(histories) == 1:
        return histories[0]
    return jax.tree.map(lambda *x: np.concatenate(x), *histories)


# ------------------------------------------------------------ importing
def _read_attr(f: Any, key: str) -> Any:
    value = f.attrs.get(key)
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode()
    return json.loads(value) if isinstance(value, str) else value


def _recorded_seed(f: Any, seed: int) -> int:
    """The seed the file's histories were generated with (a file agentrl
    wrote records it, 0 included), else the import's ``seed``."""
    recorded = _read_attr(f, "agentrl-seed")
    return int(seed if recorded is None else recorded)


def _check_group(file: Path, name: str, group: Any) -> None:
    """The published datasets, dtypes and shapes (``ValueError`` naming them)."""
    for key in ("states", "actions", "rewards", "dones"):
        if key not in group:
            raise ValueError(
                f"{file}: group {name!r} has no {key!r} dataset (an XLand-100B "
                f"file has {', '.join(SCHEMA)})"
            )
    shape = group["actions"].shape  # [history, step]: the others' leading axes
    for key in ("actions", *SCHEMA):
        if key not in group:
            continue
        ds, dtype = group[key], np.dtype(SCHEMA[key])
        want = _schema_shape(key, ds.shape, shape)
        if len(shape) != 2 or ds.shape != want or ds.dtype != dtype:
            axes = "history, step, view, view" if key == "states" else "history, step"
            lead = "" if key == "actions" else f" with [history, step] = {list(shape)}"
            raise ValueError(
                f"{file}: {name}/{key} is {ds.dtype}{list(ds.shape)}, the schema "
                f"has {dtype}[{axes}]{lead}"
            )
    for key in ("env-id", "ruleset-id"):
        if key not in group.attrs:
            raise ValueError(f"{file}: group {name!r} has no attribute {key!r}")


def _schema_shape(key: str, got: tuple, shape: tuple) -> tuple:
    """The shape dataset ``key`` must have: ``shape`` ``[history, step]``,
    ``states`` with two equal view axes after it (``got``'s first view axis)."""
    if key != "states":
        return shape
    view = got[2] if len(got) > 2 else -1  # no view axes: never matches
    return (*shape, view, view)


def _check_fit(
    file: Path, f: Any, names: list[str], env: Any, steps: int, env_name: str
) -> None:
    """Groups ``names`` fit ``env``: their view is its own, and no episode
    of their first ``steps`` steps is longer than its horizon (``ValueError``
    naming the group)."""
    want = tuple(env.observation_space(env.default_params).shape)
    for name in names:
        view = tuple(f[name]["states"].shape[2:]) + (2,)  # decompressed
        if view != want:
            raise ValueError(
                f"{file}: {name}/states decompresses to observations of shape "
                f"{view}; {env_name} (view_size {getattr(env, 'view_size', '?')}) "
                f"observes {want}"
            )
        _check_episodes(file, name, f[name]["dones"][:, :steps], env.horizon)


def _check_episodes(file: Path, name: str, dones: np.ndarray, horizon: int) -> None:
    """``ValueError`` if a history of ``dones [history, step]`` has an
    episode (steps up to and including a done) longer than ``horizon``."""
    done = np.asarray(dones, bool)
    t = np.arange(done.shape[1], dtype=np.int32)
    ends = np.maximum.accumulate(np.where(done, t, -1), axis=1)
    before = np.pad(ends[:, :-1], ((0, 0), (1, 0)), constant_values=-1)
    # step t is step (t - before) of its episode; one not done must be < horizon
    over = (t - before) + ~done > horizon
    if over.any():
        h, step = (int(i[0]) for i in np.nonzero(over))
        raise ValueError(
            f"{file}: {name}/dones: history {h} has an episode from step "
            f"{int(before[h, step]) + 1} longer than the env's horizon {horizon} "
            "(is the env the file's? XLand-100B is XLand-MiniGrid-R1-13x13, "
            "horizon 507)"
        )


def read_group(group: Any, env: Any, steps: int, rows: slice | None = None) -> History:
    """Histories ``rows`` of one HDF5 group as a numpy History (``steps`` each)."""
    rows = rows or slice(None)

    def read(key: str) -> np.ndarray:
        return np.asarray(group[key][rows, :steps])

    reward = read("rewards").astype(np.float32)
    done = read("dones").astype(bool)
    terminated = done & (reward > 0)
    ruleset = int(group.attrs["ruleset-id"])
    n = reward.shape[0]
    params = jax.device_get(
        jax.vmap(env.params_for_task)(jnp.full((n,), ruleset, jnp.int32))
    )
    expert = (
        read("expert_actions").astype(np.int32) if "expert_actions" in group else None
    )
    return History(
        obs=decompress_obs(read("states")),
        action=read("actions").astype(np.int32),
        reward=reward,
        terminated=terminated,
        truncated=done & ~terminated,
        episode=(np.cumsum(done, axis=1) - done).astype(np.int32),
        optimal_action=expert,
        task_id=np.full((n,), ruleset, np.int32),
        params=params,
    )


def _task_groups(file: Path, f: Any) -> list[str]:
    """The file's task groups in numeric order, each checked against the schema."""
    names = sorted(f.keys(), key=lambda k: (len(k), k))
    if not names:
        raise ValueError(f"{file}: no task groups (an empty file?)")
    for name in names:
        _check_group(file, name, f[name])
    return names


def _import_env(
    file: Path, f: Any, first: Any, env_overrides: dict[str, Any] | None
) -> tuple[str, dict[str, Any], Any]:
    """The env a file's histories ran on: its ``agentrl-env``, else its ids
    (a published file's table checked: :func:`_check_published_table`)."""
    recorded = _read_attr(f, "agentrl-env")
    bench = first.get("benchmark-id")
    if recorded is not None:
        env_name, overrides = recorded["name"], dict(recorded["overrides"])
    else:
        env_name, overrides = "xland", {"env_id": str(first["env-id"])}
        if bench is not None:
            overrides["rulesets"] = str(bench)
    for key, value in (env_overrides or {}).items():  # a Path as its string
        overrides[key] = os.fspath(value) if isinstance(value, os.PathLike) else value
    _check_recordable(file, overrides)
    if recorded is None and bench is not None:
        _check_published_table(file, str(bench), overrides)
    env = envs.make(env_name, **overrides)
    return env_name, overrides, env


def _check_recordable(file: Path, overrides: dict[str, Any]) -> None:
    """``ValueError`` unless every env argument is a JSON value: the dataset
    records them to rebuild the env."""
    for key, value in overrides.items():
        try:
            json.dumps(value)
        except TypeError:
            raise ValueError(
                f"{file}: env_overrides[{key!r}] is a {type(value).__name__}, "
                "not a JSON value, and the dataset records the env's arguments "
                "to rebuild it (a ruleset table: write it with "
                "xminigrid.benchmarks.save_bz2_pickle and pass the file's path)"
            ) from None


def _check_published_table(file: Path, bench: str, overrides: dict[str, Any]) -> None:
    """Refuse a published file unless ``rulesets`` is a table file's path.

    Its ``benchmark-id`` named a table in the xminigrid it was collected
    with (:data:`PUBLISHED_TABLES`); the installed xminigrid's names load
    other tables, and ``None`` agentrl's generated rulesets, so every
    history would get another ruleset's params, silently.
    """
    rulesets = overrides.get("rulesets")
    registered = xland.registered_benchmarks()
    if isinstance(rulesets, str) and rulesets not in (*registered, bench):
        return  # a table file: make("xland") checks that it loads
    table = PUBLISHED_TABLES.get(bench)
    path = f"/path/to/{table or 'TABLE'}"
    raise ValueError(
        f"{file}: benchmark-id {bench!r} named, when the file was collected, "
        f"{_collected_table(table)}; {_why_not(bench, rulesets, registered)}. "
        f"Pass that table's file: env_overrides={{'rulesets': '{path}'}} in "
        f"Python, --data.env_args env_id={overrides['env_id']} rulesets={path} "
        "for a run whose data.path is the file"
    )


def _collected_table(table: str | None) -> str:
    """The table a published ``benchmark-id`` named, and where it is."""
    if table is None:
        return "a ruleset table agentrl does not know (its publisher has it)"
    return f"xminigrid 0.7-0.9.1's ruleset table {table!r} (the file at {TABLES_URL})"


def _why_not(bench: str, rulesets: Any, registered: tuple[str, ...]) -> str:
    """Why ``rulesets`` is not the table of a file of ``benchmark-id`` ``bench``."""
    silent = "every history would get another ruleset's params, without an error"
    if rulesets is None:
        return f"rulesets=None is agentrl's generated rulesets: {silent}"
    if rulesets == bench and bench in registered:
        return (
            f"the installed xminigrid's {bench!r} is another table (re-sampled "
            f"in xminigrid 0.9.2): {silent}"
        )
    if rulesets == bench:
        return (
            f"the installed xminigrid registers no {bench!r}, and none of its "
            f"tables {registered} is that one"
        )
    if rulesets in registered:
        return (
            f"rulesets={rulesets!r} is the installed xminigrid's table of that "
            f"name, not the collection's: {silent}"
        )
    return f"rulesets={rulesets!r} is not the path of a table file"


def _import_steps(
    file: Path,
    f: Any,
    names: list[str],
    env: Any,
    env_name: str,
    overrides: dict[str, Any],
) -> tuple[int, int, dict[str, int]]:
    """``(num_episodes, steps, ruleset of each group)``, checked against ``env``."""
    total = f[names[0]]["actions"].shape[1]
    num_episodes = total // env.horizon
    if num_episodes < 1:
        raise ValueError(
            f"{file}: histories of {total} steps are shorter than one "
            f"episode of the env's horizon {env.horizon}"
        )
    steps = num_episodes * env.horizon
    rulesets = {n: int(f[n].attrs["ruleset-id"]) for n in names}
    bad = [r for r in rulesets.values() if not 0 <= r < (env.num_tasks or 0)]
    if bad:
        raise ValueError(
            f"{file}: ruleset ids {bad[:5]} are not tasks of {env_name} "
            f"with {overrides} ({env.num_tasks} rulesets)"
        )
    lengths = {f[n]["actions"].shape[1] for n in names}
    if len(lengths) != 1:
        raise ValueError(f"{file}: groups hold histories of {sorted(lengths)} steps")
    return num_episodes, steps, rulesets


def _import_split(
    f: Any, rulesets: dict[str, int], split_fraction: float, seed: int
) -> TaskSplit:
    """The file's ``agentrl-split``, else its ruleset ids split with ``seed``
    into train / validation / test."""
    split = _read_attr(f, "agentrl-split")
    if split is not None:
        return TaskSplit.from_json(split)
    ids = np.asarray(sorted(set(rulesets.values())), np.int32)
    # held-out validation rulesets, as generated data's (plan_tasks)
    local = split_task_ids(len(ids), split_fraction, seed, DEFAULT_VALIDATION_SHARE)
    return TaskSplit(
        train=ids[local.train],
        test=ids[local.test],
        seed=seed,
        train_fraction=split_fraction,
        validation=ids[local.validation],
        validation_share=local.validation_share,
    )


def held_out_counts(num_rulesets: int, split_fraction: float) -> tuple[int, int]:
    """``(validation, test)`` rulesets ``"file"`` holds out of a file of
    ``num_rulesets`` (:func:`split_task_ids`; a file of one: ``(0, 1)``)."""
    if num_rulesets < 2:
        return 0, 1
    local = split_task_ids(num_rulesets, split_fraction, 0, DEFAULT_VALIDATION_SHARE)
    return len(local.validation), len(local.test)


def _table_split(
    file: Path, f: Any, env: Any, rulesets: dict[str, int], fraction: float, seed: int
) -> TaskSplit:
    """Every ruleset of the file trains; validation and test rulesets are
    drawn with ``seed`` from the env's table outside the file."""
    ids = np.asarray(sorted(set(rulesets.values())), np.int32)
    outside = _outside_rulesets(file, f, env, ids)
    n_val, n_test = held_out_counts(len(ids), fraction)
    n_test = min(n_test, len(outside))
    n_val = min(n_val, len(outside) - n_test)
    drawn = np.random.default_rng(seed).choice(outside, n_val + n_test, replace=False)
    return TaskSplit(
        train=ids,
        test=np.sort(drawn[n_val:]).astype(np.int32),
        seed=seed,
        train_fraction=fraction,
        validation=np.sort(drawn[:n_val]).astype(np.int32),
        validation_share=DEFAULT_VALIDATION_SHARE,
    )


def _outside_rulesets(file: Path, f: Any, env: Any, ids: np.ndarray) -> np.ndarray:
    """The env's table ids not in ``ids`` (``ValueError`` naming
    ``held_out`` when there are none, or the file records its split)."""
    if _read_attr(f, "agentrl-split") is not None:
        raise ValueError(
            f"{file}: held_out='table' draws held-out rulesets from the table, "
            "but this file (written by generate_hdf5) records its own split "
            "(agentrl-split), whose validation and test rulesets are already "
            "outside the file: import it with held_out='file'"
        )
    total = env.num_tasks or 0
    outside = np.setdiff1d(np.arange(total, dtype=np.int32), ids)
    if not len(outside):
        raise ValueError(
            f"{file}: held_out='table' holds out rulesets of the env's table "
            f"that the file does not hold, and its table has {total} "
            f"rulesets, all in the file ({len(ids)} rulesets): pass the table "
            "the file was collected from (env_overrides rulesets=PATH), or "
            "held_out='file' to split the file's own rulesets"
        )
    return outside


def _check_held_out(held_out: str) -> None:
    if held_out not in HELD_OUT:
        raise ValueError(
            f"held_out must be 'file' (validation and test rulesets split off "
            "the file's own) or 'table' (every ruleset of the file trains; "
            f"held-out ones drawn from the env's table outside it), got {held_out!r}"
        )


def recorded_held_out(metadata: dict[str, Any]) -> str:
    """The ``held_out`` a dataset was imported with (``"file"`` where its
    metadata has none: "file" imports and every other dataset)."""
    return metadata.get("held_out", "file")


def _group_chunks(
    f: Any, keep: list[str], env: Any, steps: int, histories_per_chunk: int
) -> Iterator[History]:
    """The histories of groups ``keep``, ``histories_per_chunk`` at a time."""
    for n in keep:
        count = f[n]["actions"].shape[0]
        for lo in range(0, count, histories_per_chunk):
            rows = slice(lo, min(lo + histories_per_chunk, count))
            yield read_group(f[n], env, steps, rows)


def _import_metadata(
    file: Path,
    f: Any,
    first: Any,
    env_name: str,
    overrides: dict[str, Any],
    env: Any,
    *,
    seed: int,
    task_ids: list[int],
    num_episodes: int,
    steps: int,
    histories_per_chunk: int,
    split: TaskSplit,
) -> dict[str, Any]:
    """The dataset metadata of an imported file."""
    source = _read_attr(f, "agentrl-source") or {
        "name": "xland-100b",
        "settings": {
            "file": file.name,
            "benchmark": str(first.get("benchmark-id")),
        },
    }
    return {
        "env": {"name": env_name, "overrides": overrides},
        "source": source,
        "seed": _recorded_seed(f, seed),
        "num_tasks": len(task_ids),
        "num_episodes": num_episodes,
        "horizon": env.horizon,
        "num_steps": steps,
        # the generation's histories per call (None: a file not agentrl's)
        "chunk_size": _read_attr(f, "agentrl-chunk-size"),
        "import_chunk_size": histories_per_chunk,
        "stateless_obs": False,
        "task_space": "finite",
        "task_ids": {"train": task_ids},
        "split": split.to_json(),
    }


def import_hdf5(
    file: str | Path,
    out: str | Path,
    *,
    env_overrides: dict[str, Any] | None = None,
    split_fraction: float = 0.8,
    seed: int = 0,
    histories_per_chunk: int = 32,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
    held_out: str = "file",
) -> Path:
    """Import an XLand-100B-schema HDF5 ``file`` as the agentrl dataset ``out``.

    Reads ``histories_per_chunk`` histories at a time (memory bounded by
    that, at any file size). See the module docstring for the mapping, the
    env and the split (``held_out``: :data:`HELD_OUT`). Raises
    ``ValueError`` naming the file, group and dataset that does not follow
    the schema, or the ``held_out`` it cannot follow, before anything is
    written.
    """
    _check_held_out(held_out)
    h5py = _h5py()
    file = Path(file)
    if not file.is_file():
        raise FileNotFoundError(f"{file}: no such XLand-100B HDF5 file")
    with h5py.File(file, "r") as f:
        names = _task_groups(file, f)
        first = f[names[0]].attrs
        env_name, overrides, env = _import_env(file, f, first, env_overrides)
        num_episodes, steps, rulesets = _import_steps(
            file, f, names, env, env_name, overrides
        )
        split = (
            _table_split(file, f, env, rulesets, split_fraction, seed)
            if held_out == "table"
            else _import_split(f, rulesets, split_fraction, seed)
        )
        train = set(split.train.tolist())
        keep = [n for n in names if rulesets[n] in train]
        _check_fit(file, f, keep, env, steps, env_name)
        task_ids = [rulesets[n] for n in keep for _ in range(f[n]["actions"].shape[0])]
        metadata = _import_metadata(
            file,
            f,
            first,
            env_name,
            overrides,
            env,
            seed=seed,
            task_ids=task_ids,
            num_episodes=num_episodes,
            steps=steps,
            histories_per_chunk=histories_per_chunk,
            split=split,
        )
        if held_out != "file":  # "file" datasets keep their metadata as before
            metadata["held_out"] = held_out
        return write_histories(
            out,
            {"train": _group_chunks(f, keep, env, steps, histories_per_chunk)},
            metadata,
            overwrite=overwrite,
            progress=progress,
            description=f"{file.name} (XLand-100B schema) on {env_name}",
        )


def is_hdf5(path: str | Path) -> bool:
    """Whether ``path`` names an HDF5 file (by suffix: ``.hdf5``, ``.h5``)."""
    return Path(path).suffix.lower() in (".hdf5", ".h5")
