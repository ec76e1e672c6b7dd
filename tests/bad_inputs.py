"""The bad inputs the reliability tests throw at agentrl, and how they are counted.

- :data:`CLI_ROWS`: one command line per row with one bad argument (or bad
  combination), and a fragment its error must contain;
- :data:`DATASET_DAMAGE`, :data:`RUN_DAMAGE`: ways to damage a dataset or a
  run directory, and the file or word the error must name;
- :func:`field_kinds`: for every leaf field of every shipped experiment, the
  kinds of bad value the property tests generate for it (ill-typed,
  out of range, not finite, not a choice ...);
- :data:`CLI_ARG_KINDS`: the numeric arguments of the commands and the kinds
  of bad value generated for them.

:func:`count` adds them up (docs/reliability.md).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from agentrl import configtools
from agentrl.train.experiments import known_experiments, load_experiment

# ----------------------------------------------------------------- CLI table
# Placeholders: {run} a run directory, {data} a dataset (30 episodes per
# history), {file} an existing file, {tmp} an empty directory.
GEN = "data generate --env darkroom --source q_learning --tasks 2 --episodes 2"
TINY = (
    "--data.path {data} --train.batch_size 4 --model.d_model 16 --model.d_ff 32 "
    "--model.num_layers 1 --run-dir {tmp}/r"
)
# the config of {run} (checkpoint at step 3): a resume of it
RESUME = (
    "--data.path {data} --train.batch_size 4 --model.d_model 16 --model.d_ff 32 "
    "--model.num_layers 1 --run-dir {run} --no-progress"
)

CLI_ROWS: list[tuple[str, str]] = [
    # data generate
    (f"{GEN} --out {{tmp}}/d --tasks 0", "--tasks"),
    (f"{GEN} --out {{tmp}}/d --tasks -1", "--tasks"),
    (f"{GEN} --out {{tmp}}/d --tasks abc", "--tasks"),
    (f"{GEN} --out {{tmp}}/d --episodes 0", "--episodes"),
    (f"{GEN} --out {{tmp}}/d --seed -1", "--seed"),
    (f"{GEN} --out {{tmp}}/d --split-fraction 0", "--split-fraction"),
    (f"{GEN} --out {{tmp}}/d --split-fraction 1.5", "--split-fraction"),
    (f"{GEN} --out {{tmp}}/d --split-fraction nan", "--split-fraction"),
    (f"{GEN} --out {{tmp}}/d --chunk-size 0", "--chunk-size"),
    (f"{GEN} --out {{tmp}}/d --env nope", "unknown environment 'nope'"),
    (f"{GEN} --out {{tmp}}/d --source nope", "unknown source 'nope'"),
    (f"{GEN} --out {{tmp}}/d --env-arg size=-3", "size"),
    (f"{GEN} --out {{tmp}}/d --env-arg bogus=1", "bogus"),
    (f"{GEN} --out {{tmp}}/d --env-arg noequals", "--env-arg"),
    (f"{GEN} --out {{tmp}}/d --source-arg learning_rate=-1", "learning_rate"),
    (f"{GEN} --out {{tmp}}/d --source-arg learning_rate=nan", "learning_rate"),
    (f"{GEN} --out {{tmp}}/d --source-arg bogus=1", "bogus"),
    (f"{GEN} --out {{file}}/sub", "--out"),
    (f"{GEN} --out {{file}}", "--out"),
    (f"{GEN} --out {{data}}", "--overwrite"),
    (f"{GEN} --out ''", "--out"),
    (f"{GEN} --out {{tmp}}/d --env bernoulli_bandit", "does not apply"),
    ("data generate --env darkroom --source q_learning --tasks 2", "required"),
    # data info / verify
    ("data info {tmp}/nonexistent", "no such dataset directory"),
    ("data info {file}", "is a file"),
    ("data info {data} --verify bogus", "--verify"),
    ("data info {tmp}", "agentrl.json: missing"),
    ("data verify {tmp}/nonexistent", "no such dataset directory"),
    ("data", "choose a subcommand"),
    ("data bogus", "invalid choice"),
    # envs, demo
    ("envs nope", "unknown families"),
    ("envs --tasks 0", "--tasks"),
    ("envs --tasks abc", "--tasks"),
    ("demo --preset nope", "preset must be one of"),
    ("demo --out {file}/sub", "--out"),
    # eval
    ("eval {tmp}/nonexistent", "not a training run directory"),
    ("eval {run} --episodes 0", "--episodes"),
    ("eval {run} --episodes -1", "--episodes"),
    ("eval {run} --tasks -2", "--tasks"),
    ("eval {run} --tasks 0", "--tasks"),
    ("eval {run} --tasks 100000", "split has only"),
    ("eval {run} --seed -1", "--seed"),
    ("eval {run} --out {file}/sub", "--out"),
    # tyro reads "" as Path("."): results were once written into the cwd
    ("eval {run} --out ''", "--out must be a directory path, got ''"),
    ("eval {run} --source-cache ''", "--source-cache must be a directory path"),
    # refused before the run is loaded, naming the flag and what is allowed
    ("eval {run} --baselines nope", "(--baselines): unknown 'nope'; choose from"),
    # train: arguments, config fields, combinations
    ("train nope", "unknown experiment"),
    ("train ad_darkroom --preset nope", "preset must be one of"),
    ("train ad_darkroom --train.steps 0", "train.steps"),
    ("train ad_darkroom --train.lr -1", "train.lr"),
    ("train ad_darkroom --train.lr abc", "train.lr"),
    ("train ad_darkroom --train.lr inf", "train.lr"),
    ("train ad_darkroom --train.lrr 1", "unknown config field 'train.lrr'"),
    ("train ad_darkroom --model.num_heads 3", "num_heads"),
    ("train ad_darkroom --algo nope", "algo must be one of"),
    ("train ad_darkroom --algo dpt", "token_layout"),
    ("train ad_darkroom --algo.context_episodes 0", "algo.context_episodes"),
    ("train ad_darkroom --algo.context_episodes 1000", "data.num_episodes"),
    (f"train ad_darkroom {TINY} --algo.context_episodes 31", "context_episodes=31"),
    (
        f"train ad_darkroom {TINY} --algo.context_episodes 10 --algo.episode_stride 4",
        "episode_stride=4",
    ),
    ("train t2mir_ad_darkroom --algo.base.context_episodes 99", "base.context_"),
    ("train ad_darkroom --run-dir {file}/sub", "--run-dir"),
    ("train ad_darkroom --run-dir {file}", "--run-dir"),
    # once trained into the default run directory
    ("train ad_darkroom --run-dir ''", "--run-dir must be a directory path, got ''"),
    ("train ad_darkroom --stop-at-step 0", "--stop-at-step"),
    ("train t2mir_ad_darkroom --train.batch_size 3", "train.batch_size"),
    ("train ad_darkroom --data.env nope --run-dir {tmp}/r", "unknown environment"),
    ("train ad_darkroom --data.env_args abc", "data.env_args"),
    ("train ad_darkroom --data.env_args size=9 size=8", "twice"),
    ("train ad_darkroom --data.env_args size=-1 --run-dir {tmp}/r", "size"),
    ("train ad_darkroom --data.path {tmp}/nonexistent --run-dir {tmp}/r", "no such"),
    ("train dpt_bandit --data.path {data} --run-dir {tmp}/r", "holds 'darkroom'"),
    # the dataset's Dark Room starts in the centre: training on it while
    # evaluating from the corner was once accepted
    (
        "train ad_darkroom --data.path {data} --data.env_args start=corner "
        "--run-dir {tmp}/r",
        "start: 'center' there, 'corner' here",
    ),
    # a finished run: training afresh into it once mixed the two runs
    ("train ad_darkroom --no-resume --run-dir {run}", "holds a run"),
    # fewer steps than its checkpoint's: once ran nothing and recorded them
    (f"train ad_darkroom {RESUME} --train.steps 2", "train.steps 2 is below"),
    ("train ad_darkroom --eval.temperature 0", "eval.temperature"),
    ("train ad_darkroom --train.seed -1", "train.seed"),
    ("train ad_darkroom --data.seed -1", "data.seed"),
    ("train ad_darkroom --name ../x", "name"),
    ("train ad_darkroom --model.max_steps abc", "model.max_steps"),
    ("train ad_darkroom --train.warmup_steps 5000", "train.warmup_steps"),
    ("train ad_darkroom --model.rope_base 0", "rope_base"),
    ("train ad_darkroom --train.lr", "missing value for --train.lr"),
    ("train ad_darkroom positional", "expected --field value"),
    ("train dt_darkroom --algo.target_return inf", "algo.target_return"),
    ("train ad_darkroom --model.expert_ff abc", "model.expert_ff"),
    ("train ad_darkroom --model.moe_layers 0 x", "model.moe_layers"),
    ("train ad_darkroom --data.source_args noequals", "data.source_args"),
    ("train ad_darkroom --data.source_args nope=1", "unknown setting(s) ['nope']"),
    ("train ad_darkroom --tracker nope", "--tracker"),
    # sweep
    ("sweep nope", "unknown experiment"),
    ("sweep ad_darkroom --seeds 0", "--seeds"),
    ("sweep ad_darkroom --seeds 1,1", "--seeds"),
    ("sweep ad_darkroom --grid lr", "--grid"),
    ("sweep ad_darkroom --grid lr=-1,2", "train.lr"),
    ("sweep ad_darkroom --grid nope=1,2", "unknown config field 'nope'"),
    ("sweep ad_darkroom --grid train.seed=1,2", "--seeds"),
    # the algorithm is a node, not a field: once a KeyError traceback
    ("sweep ad_darkroom --grid algo=ad,dt", "grid field 'algo' (--grid) selects"),
    ("sweep ad_darkroom --grid model=1,2", "'model' (--grid) is a section"),
    # one field under two spellings: only the last list was swept
    (
        "sweep ad_darkroom --grid lr=1e-3,3e-3 --grid train.lr=1e-2",
        "'lr' and 'train.lr'",
    ),
    (
        "sweep ad_darkroom --grid num_layers=1,2 --grid model.num_layers=3",
        "same field, model.num_layers",
    ),
    ("sweep ad_darkroom --split train", "--split"),
    # a setting the data cannot hold: refused before the first setting trains
    (
        "sweep gpicl_bandit --preset smoke --grid num_train_tasks=4,60",
        "data.num_train_tasks",
    ),
    ("sweep ad_darkroom --steps-per-call 0", "--steps-per-call"),
    ("sweep ad_darkroom --out {file}/sub", "--out"),
    # bench, reproduce
    ("bench nope", "unknown benchmark 'nope'"),
    ("bench --out {file}/sub env_throughput", "--out"),
    ("reproduce nope", "unknown experiment"),
    ("reproduce ad_darkroom --seeds 0", "--seeds"),
    ("reproduce ad_darkroom --set noeq", "--set"),
    ("reproduce ad_darkroom --record-suffix Fresh-Seeds", "--record-suffix"),
    ("reproduce ad_darkroom --set algo.nope=1", "algo.nope"),
    # Dark Room's 81 goals hold 8 validation goals, and nothing to draw beyond
    ("reproduce ad_darkroom --set eval.validation_tasks=9", "eval.validation_tasks=9"),
    ("reproduce ad_darkroom --runs {file}/sub", "--runs"),
    # other tasks (10x10 goals, horizon 100) cannot be paired with AD's
    ("reproduce dpt_darkroom --compare ad_darkroom", "data.env_args"),
    ("reproduce ad_darkroom --compare ad_darkroom", "both experiments are named"),
    ("bench q_learning_ceiling --seeds 0", "--seeds"),
    ("bench train_throughput --steps 0", "--steps"),
    ("bench eval_throughput --repeats 0", "--repeats"),
    ("bench dpt_eval_throughput --recompute-steps 0", "--recompute-steps"),
]


# ------------------------------------------------------------ damaged files
SHARD = "agentrl_history-train.array_record-00000-of-00001"


def _edit_json(name: str, change: Callable[[dict], object]) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        data = json.loads((path / name).read_text())
        change(data)
        (path / name).write_text(json.dumps(data))

    return damage


def _flip(name: str) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        data = bytearray((path / name).read_bytes())
        data[len(data) // 2] ^= 0xFF
        (path / name).write_bytes(bytes(data))

    return damage


def _truncate(*patterns: str) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        for pattern in patterns:
            for file in path.glob(pattern):
                if file.is_file():
                    os.truncate(file, min(10, file.stat().st_size))

    return damage


def _files(m: dict, name: str) -> None:
    m["files"][name] = {"bytes": 1, "sha256": "0" * 64}


#: (name, damage(dataset dir), fragment of the error)
DATASET_DAMAGE: list[tuple[str, Callable[[Path], None], str]] = [
    ("missing shard", lambda p: (p / SHARD).unlink(), SHARD),
    ("truncated shard", lambda p: os.truncate(p / SHARD, 1000), SHARD),
    ("renamed shard", lambda p: (p / SHARD).rename(p / "x.array_record"), SHARD),
    ("modified shard", _flip(SHARD), SHARD),
    ("missing metadata", lambda p: (p / "agentrl.json").unlink(), "agentrl.json"),
    ("broken metadata", lambda p: (p / "agentrl.json").write_text("{"), "agentrl"),
    (
        "metadata not an object",
        lambda p: (p / "agentrl.json").write_text("[]"),
        "agentrl",
    ),
    (
        "metadata without files",
        _edit_json("agentrl.json", lambda m: m.pop("files")),
        "files",
    ),
    (
        "num_steps of the wrong type",
        _edit_json("agentrl.json", lambda m: m.update(num_steps="x")),
        "num_steps",
    ),
    (
        "format version",
        _edit_json("agentrl.json", lambda m: m.update(format_version=99)),
        "format_version",
    ),
    (
        "task ids outside the split",
        _edit_json("agentrl.json", lambda m: m["task_ids"].update(train=[999] * 8)),
        "task ids",
    ),
    (
        "file name with ..",
        _edit_json("agentrl.json", lambda m: _files(m, "../x")),
        "'../x'",
    ),
    (
        "absolute file name",
        _edit_json("agentrl.json", lambda m: _files(m, "/etc/passwd")),
        "'/etc/passwd'",
    ),
    (
        "file name with a separator",
        _edit_json("agentrl.json", lambda m: _files(m, "a/b")),
        "'a/b'",
    ),
    (
        "unknown environment",
        _edit_json("agentrl.json", lambda m: m["env"].update(name="nope")),
        "agentrl.json",
    ),
    (
        "missing TFDS info",
        lambda p: (p / "dataset_info.json").unlink(),
        "dataset_info.json",
    ),
    (
        "broken TFDS features",
        lambda p: (p / "features.json").write_text("{"),
        "features.json",
    ),
    (
        "TFDS info naming a file outside",
        lambda p: (p / "dataset_info.json").write_text(
            (p / "dataset_info.json").read_text().replace("{DATASET}", "../{DATASET}")
        ),
        "dataset_info.json",
    ),
]

#: (name, damage(run dir), fragment of the error)
RUN_DAMAGE: list[tuple[str, Callable[[Path], None], str]] = [
    ("config.json missing", lambda p: (p / "config.json").unlink(), "config.json"),
    (
        "config.json broken",
        lambda p: (p / "config.json").write_text('{"name": '),
        "config.json",
    ),
    (
        "config.json not an object",
        lambda p: (p / "config.json").write_text("[1]"),
        "config.json",
    ),
    (
        "config.json bad value",
        _edit_json("config.json", lambda c: c["train"].update(lr=-1)),
        "train.lr",
    ),
    (
        "config.json unknown field",
        _edit_json("config.json", lambda c: c["train"].update(bogus=1)),
        "bogus",
    ),
    (
        "config.json wrong type",
        _edit_json("config.json", lambda c: c.update(model="x")),
        "config.json",
    ),
    (
        "config.json unknown algorithm",
        _edit_json("config.json", lambda c: c.update(algo={"name": "zzz"})),
        "zzz",
    ),
    ("run.json broken", lambda p: (p / "run.json").write_text("{"), "run.json"),
    ("run.json not an object", lambda p: (p / "run.json").write_text("[]"), "run.json"),
    (
        "run.json split out of range",
        _edit_json("run.json", lambda r: r.update(split={"test": [999]})),
        "run.json",
    ),
    (
        "checkpoints missing",
        lambda p: shutil.rmtree(p / "checkpoints"),
        "no checkpoint",
    ),
    (
        "checkpoints empty",
        lambda p: shutil.rmtree(p / "checkpoints" / "3"),
        "no checkpoint",
    ),
    (
        "checkpoints a file",
        lambda p: (shutil.rmtree(p / "checkpoints"), (p / "checkpoints").touch()),
        "checkpoints",
    ),
    (
        "state part missing",
        lambda p: shutil.rmtree(p / "checkpoints/3/state"),
        "'state'",
    ),
    ("meta part missing", lambda p: shutil.rmtree(p / "checkpoints/3/meta"), "'meta'"),
    ("meta truncated", _truncate("checkpoints/3/meta/metadata"), "meta/metadata"),
    (
        "array metadata truncated",
        _truncate("checkpoints/3/state/_METADATA"),
        "_METADATA",
    ),
    ("manifest truncated", _truncate("checkpoints/3/state/**/manifest.ocdbt"), "state"),
    (
        "array data truncated",
        _truncate("checkpoints/3/state/ocdbt.process_0/d/*"),
        "state",
    ),
    ("every file truncated", _truncate("checkpoints/**/*"), "checkpoints/3"),
    (
        "checkpoint renamed",
        lambda p: (p / "checkpoints/3").rename(p / "checkpoints/5"),
        "renamed or mixed up",
    ),
    (
        "config of a wider model",
        _edit_json("config.json", lambda c: c["model"].update(d_model=32, d_ff=64)),
        "shape",
    ),
    (
        "config of a deeper model",
        _edit_json("config.json", lambda c: c["model"].update(num_layers=2)),
        "arrays",
    ),
]
# Two more (tests/test_bad_input.py): a checkpoint of another model with the
# same shapes, copied in ("mixed up"), built from a second run; and a run
# whose config.json is gone, resumed under another config.
RUN_DAMAGE_EXTRA = 2
# And two built by writing histories with a NaN and an inf reward.
DATASET_DAMAGE_EXTRA = 2


# --------------------------------------------------- config fields x kinds
NOT_A_NUMBER = "not_a_number"
FRACTIONAL = "fractional"
NEGATIVE = "negative"
NON_FINITE = "non_finite"
NOT_A_BOOL = "not_a_bool"
WRONG_TYPE = "wrong_type"
NOT_A_CHOICE = "not_a_choice"
NOT_PAIRS = "not_pairs"
BAD_NAME = "bad_name"
UNKNOWN_ALGO = "unknown_algorithm"

#: float fields for which a negative value is allowed
NEGATIVE_OK = frozenset(
    {"algo.target_return", "algo.base.target_return", "algo.init_log_std"}
)


def _is_choice(config, path: str) -> bool:
    """Whether a str field takes one of a fixed set of values."""
    try:
        configtools.override(config, {path: "zz_not_a_choice"})
    except ValueError:
        return True
    return False


def field_kinds(config) -> dict[str, tuple[str, ...]]:
    """``{field path: (value kind, ...)}``: the bad values a field is given."""
    out: dict[str, tuple[str, ...]] = {}
    for path in configtools.node_paths(config):
        out[path] = (UNKNOWN_ALGO,)
    values = configtools.field_paths(config)
    for path, hint in configtools.field_types(config).items():
        current = values[path]
        if path == "name":
            kinds = (BAD_NAME, WRONG_TYPE)
        elif configtools.conforms(True, hint) and isinstance(current, bool):
            kinds = (NOT_A_BOOL,)
        elif configtools.conforms(1, hint) and not configtools.conforms(1.5, hint):
            kinds = (NOT_A_NUMBER, FRACTIONAL, NEGATIVE)
        elif configtools.conforms(1.5, hint):
            kinds = (NOT_A_NUMBER, NON_FINITE)
            if path not in NEGATIVE_OK:
                kinds += (NEGATIVE,)
        elif isinstance(current, str):
            kinds = (WRONG_TYPE,) + (
                (NOT_A_CHOICE,) if _is_choice(config, path) else ()
            )
        elif isinstance(current, tuple):
            kinds = (NOT_PAIRS,) if path.endswith("_args") else (NOT_A_NUMBER, NEGATIVE)
        else:
            continue
        out[path] = kinds
    return out


def experiment_configs() -> dict[str, object]:
    """The smoke preset of every shipped experiment."""
    return {name: load_experiment(name, "smoke") for name in known_experiments()}


def field_cases() -> list[tuple[str, str, str]]:
    """``[(experiment, field path, kind), ...]`` over the shipped experiments."""
    return [
        (name, path, kind)
        for name, config in experiment_configs().items()
        for path, kinds in field_kinds(config).items()
        for kind in kinds
    ]


# --------------------------------------------------- command-line arguments
#: (argv before the argument, argument, minimum or "fraction")
CLI_ARGS: list[tuple[str, str, object]] = [
    (f"{GEN} --out {{tmp}}/d", "--tasks", 1),
    (f"{GEN} --out {{tmp}}/d", "--episodes", 1),
    (f"{GEN} --out {{tmp}}/d", "--seed", 0),
    (f"{GEN} --out {{tmp}}/d", "--chunk-size", 1),
    (f"{GEN} --out {{tmp}}/d", "--split-fraction", "fraction"),
    ("eval {run}", "--episodes", 1),
    ("eval {run}", "--tasks", 1),
    ("eval {run}", "--seed", 0),
    ("envs", "--tasks", 1),
    ("train ad_darkroom", "--stop-at-step", 1),
    ("sweep ad_darkroom", "--steps-per-call", 1),
    ("sweep ad_darkroom", "--seeds", 1),
    ("reproduce ad_darkroom", "--seeds", 1),
    ("reproduce ad_darkroom", "--first-seed", 0),
    ("bench q_learning_ceiling", "--seeds", 1),
    ("bench train_throughput", "--steps", 1),
    ("bench eval_throughput", "--repeats", 1),
    ("bench eval_throughput", "--recompute-steps", 1),
]
#: kinds of bad value per argument: below its minimum (or outside (0, 1)),
#: and not a number
CLI_ARG_KINDS = ("out_of_range", NOT_A_NUMBER)


def count() -> dict[str, int]:
    """The distinct bad inputs covered, by suite, and their total.

    Config fields count once per ``(field path, kind)`` however many
    experiments share the field (every experiment is tested).
    """
    fields = {(path, kind) for _, path, kind in field_cases()}
    out = {
        "cli_rows": len(CLI_ROWS),
        "damaged_datasets": len(DATASET_DAMAGE) + DATASET_DAMAGE_EXTRA,
        "damaged_runs": len(RUN_DAMAGE) + RUN_DAMAGE_EXTRA,
        "config_field_kinds": len(fields),
        "cli_argument_kinds": len(CLI_ARGS) * len(CLI_ARG_KINDS),
    }
    out["total"] = sum(out.values())
    return out
