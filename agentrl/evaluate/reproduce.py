"""Paper reproductions: train a preset over seeds, choose on validation, test once.

    agentrl reproduce ad_darkroom --preset cpu --seeds 5 --controls
    agentrl reproduce t2mir_ad_darkroom --compare ad_darkroom
    agentrl reproduce ad_darkroom --set algo.episode_stride=3

or from Python, ``agentrl.evaluate.reproduce.main(["ad_darkroom", ...])``,
or step by step: :func:`train_and_evaluate` per experiment, then
:func:`agentrl.evaluate.reproduce_report.report`.

The protocol (docs/protocol.md):

- Each training seed ``s`` gets its own data seed (``data.seed + s``: its
  own histories *and* its own train / validation / test task split) and
  its own evaluation key (``eval.seed + s``), so the CIs carry the
  variance of the data and the split, not only of the initialisation.
  Reported CIs resample seeds, then tasks within them (``resample="both"``).
- The acting rule is chosen per seed on that seed's *validation* tasks
  (:mod:`agentrl.evaluate.selection`, candidates
  :data:`~agentrl.evaluate.selection.ACTING_RULES` and a preset's own rule
  beyond them, :func:`~agentrl.evaluate.selection.candidate_rules`,
  criterion ``auto``);
  the choice and its validation numbers are recorded. The *test* tasks are
  evaluated once, with the chosen rule, for every reported number.
  ``--scan-checkpoints`` also evaluates every kept checkpoint on validation
  tasks (a learning curve over training steps, recorded, not used to pick).
- ``--controls`` evaluates the in-context-learning controls on the same
  test tasks and keys (zeroed / shuffled rewards in context, empty
  context) and trains the expert-distillation control (same config, only
  the last ``--expert-episodes`` episodes of each history), and reports
  the verdict of :func:`agentrl.evaluate.controls.icl_verdict`. A learner
  trained online by RL (RL², transformer PPO) has no dataset to distil,
  and one distilled from a source that does not learn (DPT's roll-ins)
  has no converged episodes to keep: each gets the three context controls
  only, acting on what it reads (its previous-reward input, its KV cache,
  its context set), and the verdict judges it against those
  (:func:`agentrl.evaluate.controls.controls_for`).
- A ``--compare`` experiment uses the same data seeds and evaluation keys,
  so the difference is paired per (seed, task). It is reported by its
  algorithm's label, or by its own name where both use one algorithm (a
  variant of AD against AD); two experiments of one ``name`` are refused
  (they would share runs and results:
  :func:`~agentrl.evaluate.reproduce_report.method_labels`).
- A source that runs only whole (SAC, PPO) is a baseline run from scratch
  on the test tasks; its runs are kept in ``<runs>/source-runs/`` and read
  back by any experiment that meets the same tasks, keys, settings, code
  and machine (:mod:`agentrl.evaluate.source_cache`), so the learners of
  one family and seed run it once. Likewise a distilled learner's
  generated histories are kept in ``<runs>/datasets/`` and linked into the
  next run with the same data config (a ``--compare`` partner, a ``--set``
  ablation of the model or training: :mod:`agentrl.train.data_cache`).

Writes, into the results folder (``--out``, else ``$AGENTRL_BENCH_RESULTS``,
else ``benchmarks/results/`` under the current directory):
``repro_<experiment>_<preset>.json`` / ``.md`` (the record form of
:mod:`agentrl.evaluate.reproduce_record`, with the issue's targets,
selections, verdict) and a folder of the same name with ``results.json.gz``,
``results.md``, the improvement / regret plots and, for Dark Room, the
per-goal heatmap (:mod:`agentrl.evaluate.reproduce_report`).
``--set FIELD=VALUE`` (repeatable) changes the preset for an ablation; its
results get the suffix ``_<field><value>...`` (e.g. ``_episode_stride3``)
and never overwrite the preset's own. An ablation of evaluation settings
only (``eval.*``, ``algo.eval_context``:
:data:`agentrl.train.rundir.EVALUATION_ONLY`) trains nothing of its own: it
evaluates copies of the preset's runs of the same seeds (trained first
where missing), so the two are paired on the same weights
(:func:`reuse_training`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import agentrl.configtools as configtools
import agentrl.evaluate.controls as ctl
from agentrl.cliargs import check_output_path, nonnegative_int, positive_int
from agentrl.evaluate import seed_results
from agentrl.evaluate.reproduce_checks import check_comparable, check_validation
from agentrl.evaluate.reproduce_report import (
    ablation_suffix,
    load_written,
    report,
    result_tag,
)
from agentrl.evaluate.selection import (
    acting_candidates,
    candidate_rules,
    checkpoint_candidates,
    evaluate_choice,
    select,
)
from agentrl.evaluate.source_runs import share_stand_in_oracle
from agentrl.evaluate.targets import target_kind
from agentrl.project import RESULTS_ENV
from agentrl.safeio import link_tree
from agentrl.train.data_cache import share_dataset
from agentrl.train.experiments import load_experiment
from agentrl.train.loop import fit
from agentrl.train.rundir import evaluation_only
from agentrl.train.segments import provenance, trained_by_other_code

#: The folder under ``--runs`` that keeps the source baselines' runs.
SOURCE_RUNS = "source-runs"
#: The folder under ``--runs`` that keeps the generated datasets.
DATASETS = "datasets"


def seed_config(name: str, preset: str, seed: int, overrides: dict | None):
    """The preset's config for training seed ``seed``: own data, split, key
    (``data.seed``, ``train.seed`` and ``eval.seed`` each offset by it)."""
    config = load_experiment(name, preset, overrides)
    return dataclasses.replace(
        config,
        data=dataclasses.replace(config.data, path="", seed=config.data.seed + seed),
        train=dataclasses.replace(config.train, seed=config.train.seed + seed),
        eval=dataclasses.replace(config.eval, seed=config.eval.seed + seed),
    )


def default_expert_episodes(config: Any) -> int:
    """The last 20% of each history (at least the model's context + 1)."""
    context = int(getattr(config.algo, "context_episodes", 1) or 1)
    n = config.data.num_episodes
    return min(n, max(-(-n // 5), context + 1))


def train_and_evaluate(
    name: str,
    preset: str,
    seeds: int,
    runs_root: Path,
    overrides: dict[str, str] | None = None,
    controls: bool = False,
    expert_episodes: int | None = None,
    scan_checkpoints: bool = False,
    rules: dict[str, dict] | None = None,
    first_seed: int = 0,
):
    """``({method: [EvalResult per seed]}, run_dirs, protocol)``.

    Seeds ``first_seed ..`` ``first_seed + seeds - 1``. Each seed's results
    are saved beside its run (``<run>-results.json``) and reused when
    present, so seeds can run in parallel processes (``--first-seed``) and
    a last invocation over all of them only reports.

    ``protocol`` holds per seed the selection (validation numbers and the
    chosen rule), the checkpoint scan and the expert-distillation run.
    """
    per_method: dict[str, list] = {}
    run_dirs, protocol = [], []
    suffix = ablation_suffix(overrides)
    for seed in range(first_seed, first_seed + seeds):
        config = seed_config(name, preset, seed, overrides)
        # folders by the experiment's name, also when given as a .py path
        root = runs_root / f"{config.name}-{preset}{suffix}-seed{seed}"
        cache = root.with_name(root.name + "-results.json")
        results, record = (
            seed_results.load(cache, config) if cache.is_file() else ({}, {})
        )
        # done by an earlier (or a parallel) invocation; redone where it
        # lacks what this one asks for: a --compare run, which shares the
        # run (and its cache) but evaluates no controls, must not leave a
        # --controls run without its context controls (fit resumes the
        # finished run, so only selection and test evaluation are repeated)
        stale = (controls and seed_results.missing_controls(results, config)) or (
            scan_checkpoints and "checkpoint_scan" not in record
        )
        if (not results or stale) and overrides and _evaluation_only(overrides, config):
            base = runs_root / f"{config.name}-{preset}-seed{seed}"
            reuse_training(seed_config(name, preset, seed, None), base, root)
        seed_rules = candidate_rules(config.eval.acting) if rules is None else rules
        if not results or stale:
            fresh, fresh_record = _seed(
                config, root, seed, controls, scan_checkpoints, seed_rules
            )
            results, record = {**results, **fresh}, {**record, **fresh_record}
            seed_results.save(
                cache, results, record, config
            )  # kept if the control dies
        ed = f"{config.algo.label}/expert_distillation"
        n = expert_episodes or default_expert_episodes(config)
        if (
            controls
            and _has_expert_control(config)
            and seed_results.expert_stale(ed, results, record, n)
        ):
            results[ed], record["expert_distillation"] = _expert(
                config, root, n, seed_rules
            )
            seed_results.save(cache, results, record, config)
        for method, result in share_stand_in_oracle(results).items():
            per_method.setdefault(method, []).append(result)
        run_dirs.append(root)
        protocol.append(record)
    # a method some seeds lack (controls run for later seeds only) would
    # pool unequal seeds: report only the methods every seed has
    partial = sorted(m for m, r in per_method.items() if len(r) != seeds)
    if partial:
        print(f"left out (not run for every seed): {', '.join(partial)}")
    return {m: r for m, r in per_method.items() if m not in partial}, run_dirs, protocol


def _has_expert_control(config: Any) -> bool:
    """Whether the expert-distillation control applies (a learner distilled
    from learning histories)."""
    return "expert_distillation" in ctl.controls_for(config)


def _seed(config, root, seed, controls, scan_checkpoints, rules):
    """Train, select on validation and test one seed: ``(results, record)``."""
    run_dir = fit_sharing_data(config, root)
    sel = select(acting_candidates(run_dir, rules))
    record: dict[str, Any] = {
        "seed": seed,
        "selection": sel.to_json(),
        "training_code": _training_code(run_dir),
    }
    if scan_checkpoints:
        scan = select(checkpoint_candidates(run_dir, sel.choice.eval))
        record["checkpoint_scan"] = scan.validation
    used = list(ctl.CONTEXT_CONTROLS) if controls else None
    source_runs = root.parent / SOURCE_RUNS
    results, _ = evaluate_choice(sel, control=used, source_cache=source_runs)
    return results, record


def _training_code(run_dir: Path) -> dict[str, Any]:
    """Which code trained and evaluates ``run_dir`` (a finished run is reused
    as it is: ``fit`` trains nothing more), said where they differ."""
    record = provenance(run_dir)
    if trained_by_other_code(record):
        trained = record["trained_by"]
        was = ", ".join(d[:12] for d in trained) if trained else "not recorded"
        print(
            f"{run_dir.name}: trained by other agentrl code ({was}) than "
            f"evaluates it ({record['evaluated_by'][:12]}); train into a new "
            "--runs directory to measure this code"
        )
    return record


def fit_sharing_data(config: Any, root: Path) -> Path:
    """``fit(config, root)``; a distilled learner's dataset is shared through
    ``<runs>/datasets`` (:func:`agentrl.train.data_cache.share_dataset`)."""
    if config.algo.by_training(from_data=True, online=False):
        share_dataset(root.parent / DATASETS, config, root)
    return fit(config, root)


def _evaluation_only(overrides: dict[str, str], config: Any) -> bool:
    """Whether every ``--set`` field (a path, or a leaf name ``config``
    resolves) changes only how a trained model is evaluated."""
    fields = (configtools.resolve(config, field) for field in overrides)
    return all(evaluation_only(field) for field in fields)


def reuse_training(base_config: Any, base: Path, root: Path) -> None:
    """``root``: the preset's trained run ``base`` (trained first if it is
    not), for an ablation of evaluation settings only, with its
    expert-distillation run and data where ``base`` has them.

    The data are hard-linked (read only); checkpoints and records are
    copied (evaluating ``root`` rewrites its config and logs). Once
    ``root`` exists (an earlier call made it) nothing is done: the
    preset's run is not opened again.
    """
    if root.exists():
        return
    fit_sharing_data(base_config, base)
    for suffix in ("", "-expert", "-expert-data"):
        source = base.with_name(base.name + suffix)
        target = root.with_name(root.name + suffix)
        if source.is_dir() and not target.exists():
            data_only = suffix == "-expert-data"
            link_tree(source, target, copied=_never if data_only else _not_data)
            print(f"training: the run {source.name} reused for {target.name}")


def _expert_episodes_of(run_dir: Path) -> int | None:
    """The last-episode count an expert-distillation run was trained on."""
    record = run_dir / "run.json"
    if not record.is_file():
        return None
    source = json.loads(record.read_text()).get("dataset_source") or {}
    return source.get("settings", {}).get("expert_episodes")


def _never(rel: Path) -> bool:
    return False


def _not_data(rel: Path) -> bool:
    """Whether ``rel`` (inside a run) lies outside the run's ``dataset/``."""
    return rel.parts[0] != "dataset"


def _expert(config, root, episodes, rules):
    """The expert-distillation control of one seed: ``(result, record)``.

    A ``-expert`` run distilled from another number of last episodes (an
    earlier ``--expert-episodes``) is trained again from scratch: resuming
    it on the new data would keep its weights."""
    ed_root = root.with_name(root.name + "-expert")
    kept = _expert_episodes_of(ed_root)
    if kept is not None and kept != episodes:
        print(f"{ed_root.name}: distilled from {kept} episodes, now {episodes}")
        shutil.rmtree(ed_root)
    data = ctl.expert_dataset(
        root / "dataset", root.with_name(root.name + "-expert-data"), episodes,
        overwrite=True,
    )  # fmt: skip
    ed_dir = fit(ctl.expert_config(config, data), ed_root)
    ed_sel = select(acting_candidates(ed_dir, rules))
    ed, _ = evaluate_choice(ed_sel, baselines=[])
    record = {
        "episodes": episodes,
        "run_dir": str(ed_dir),
        "selection": ed_sel.to_json(),
        "training_code": _training_code(ed_dir),
    }
    return next(iter(ed.values())), record


def parse_sets(pairs: list[str]) -> dict[str, str]:
    """``["train.lr=1e-3", ...]`` -> ``{"train.lr": "1e-3", ...}``."""
    for pair in pairs:
        if "=" not in pair.strip("="):
            raise ValueError(f"--set expects FIELD=VALUE, got {pair!r}")
    return configtools.parse_cli_overrides([f"--{pair}" for pair in pairs])


def parse(argv: list[str]) -> argparse.Namespace:
    """The options of ``agentrl reproduce`` (``--help`` lists them)."""
    parser = argparse.ArgumentParser(
        prog="agentrl reproduce", description=__doc__.splitlines()[0]
    )
    parser.add_argument("experiment", help="an experiment's name or .py path")
    parser.add_argument(
        "--preset", default="cpu", help="the experiment's preset (default: cpu)"
    )
    parser.add_argument(
        "--seeds",
        type=positive_int,
        default=5,
        help="training seeds, each with its own data seed and task split (default: 5)",
    )
    parser.add_argument(
        "--first-seed",
        type=nonnegative_int,
        default=0,
        help="run seeds FIRST.. (for parallel processes; a seed already done "
        "under --runs is reused, so a last call over all seeds only reports); "
        "from FIRST > 0 the record is named ..._first_seedFIRST unless "
        "--record-suffix names it",
    )
    parser.add_argument(
        "--compare",
        default=None,
        metavar="EXPERIMENT",
        help="a second experiment trained on the same budget",
    )
    parser.add_argument(
        "--runs",
        default="runs/repro",
        metavar="DIR",
        help="folder of the training runs, one per experiment and seed (default: "
        "runs/repro)",
    )
    parser.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help=f"results folder (default ${RESULTS_ENV} or ./benchmarks/results)",
    )
    parser.add_argument(
        "--controls",
        action="store_true",
        help="also evaluate the in-context-learning controls and train the "
        "expert-distillation control (one more training run per seed; learners "
        "distilled from a dataset only, not those trained online by RL)",
    )
    parser.add_argument(
        "--expert-episodes",
        type=positive_int,
        default=None,
        help="episodes per history the expert-distillation control keeps "
        "(default: the last 20%%)",
    )
    parser.add_argument(
        "--scan-checkpoints",
        action="store_true",
        help="evaluate every kept checkpoint on validation tasks (a learning "
        "curve over training steps, recorded)",
    )
    parser.add_argument(
        "--record-suffix",
        type=record_suffix,
        default=None,
        metavar="SUFFIX",
        help="append _SUFFIX to the record's name (e.g. fresh_seeds; default: "
        "_first_seedN for a --first-seed N > 0 run, nothing otherwise); "
        "lowercase letters, digits and '_'",
    )
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="recompute the tables and targets from results already written "
        "(no training; refused for bandits, whose regret curves are not stored)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a preset field (repeatable), e.g. algo.episode_stride=3",
    )
    return parser.parse_args(argv)


def record_suffix(text: str) -> str:
    """``--record-suffix``: ``[a-z0-9_]+`` (it becomes part of file names)."""
    if not re.fullmatch(r"[a-z0-9_]+", text):
        raise argparse.ArgumentTypeError(
            f"must be lowercase letters, digits and '_', got {text!r}"
        )
    return text


def record_name_suffix(suffix: str | None, first_seed: int) -> str:
    """What the record's name gets after the experiment and preset: ``_SUFFIX``
    where given, else ``_first_seedN`` for seeds from ``N > 0`` (so a run of
    other seeds never replaces the preset's record), else nothing."""
    if suffix:
        return f"_{suffix}"
    return f"_first_seed{first_seed}" if first_seed else ""


def run(args: argparse.Namespace) -> int:
    """Train, select, test and report the reproduction ``args`` describe."""
    check_output_path(args.runs, "--runs")
    if args.out is not None:
        check_output_path(args.out, "--out")
        # the environment, as for agentrl bench: agentrl.project.results_dir()
        os.environ[RESULTS_ENV] = args.out
    names = [args.experiment] + ([args.compare] if args.compare else [])
    overrides = parse_sets(args.set)
    configs = [load_experiment(n, args.preset, overrides) for n in names]
    labels = check_comparable(configs)
    experiments = dict(zip(names, configs, strict=True))
    for config in configs:  # bad fields and targets fail here, before training
        note = check_validation(config)
        if note:
            print(note)
    target_kind(names[0])
    named = record_name_suffix(args.record_suffix, args.first_seed)
    if args.rescore:
        tag = result_tag([c.name for c in configs], args.preset, overrides) + named
        combined, dirs, protocol, measured = load_written(tag)
        report(
            experiments, args.preset, combined, dirs, overrides, protocol,
            measured, named,
        )  # fmt: skip
        return 0
    combined: dict[str, list] = {}
    dirs: dict[str, list[Path]] = {}
    protocol: dict[str, list] = {}
    for i, name in enumerate(names):
        per_method, run_dirs, records = train_and_evaluate(
            name,
            args.preset,
            args.seeds,
            Path(args.runs),
            overrides,
            controls=args.controls and i == 0,
            expert_episodes=args.expert_episodes,
            scan_checkpoints=args.scan_checkpoints,
            first_seed=args.first_seed,
        )
        own = configs[i].algo.label
        for method, results in per_method.items():
            if i and method.startswith(f"{own}/"):
                continue  # the compared learner's controls (cached) are its own
            combined.setdefault(labels[i] if method == own else method, results)
        dirs[configs[i].name] = run_dirs
        protocol[configs[i].name] = records
    report(experiments, args.preset, combined, dirs, overrides, protocol, None, named)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``agentrl reproduce ARGV`` without the command line's error handling."""
    return run(parse(argv))


if __name__ == "__main__":
    raise SystemExit(main())
