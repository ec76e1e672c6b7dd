"""Paper reproductions: train a preset over seeds, choose on validation, test once.

    agentrl bench reproduce ad_darkroom --preset cpu --seeds 5 --controls
    agentrl bench reproduce t2mir_ad_darkroom --compare ad_darkroom
    agentrl bench reproduce ad_darkroom --set algo.episode_stride=3

The protocol (docs/protocol.md):

- Each training seed ``s`` gets its own data seed (``data.seed + s``: its
  own histories *and* its own train / validation / test task split) and
  its own evaluation key (``eval.seed + s``), so the CIs carry the
  variance of the data and the split, not only of the initialisation.
  Reported CIs resample seeds, then tasks within them (``resample="both"``).
- The acting rule is chosen per seed on that seed's *validation* tasks
  (:mod:`agentrl.evaluate.selection`, candidates
  :data:`~agentrl.evaluate.selection.ACTING_RULES`, criterion ``auto``);
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
  so the difference is paired per (seed, task).

Writes, into the results folder (``benchmarks/results/`` by default, see
:mod:`agentrl.benchmarks`): ``repro_<experiment>_<preset>.json`` / ``.md``
(the benchmark form, with the issue's targets, selections, verdict) and a
folder of the same name with ``results.json``, ``results.md``, the
improvement / regret plots and, for Dark Room, the per-goal heatmap.
``--set FIELD=VALUE`` (repeatable) changes the preset for an ablation; its
results get the suffix ``_<field><value>...`` (e.g. ``_episode_stride3``)
and never overwrite the preset's own.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from agentrl import configtools
from agentrl.benchmarks import common as bench
from agentrl.cliargs import check_output_path, positive_int
from agentrl.evaluate import metrics
from agentrl.evaluate.evaluate import EvalResult
from agentrl.evaluate.report import summarize, write_results
from agentrl.train.experiments import load_experiment
from agentrl.train.loop import fit


def seed_config(name: str, preset: str, seed: int, overrides: dict | None):
    """The preset's config for training seed ``seed``: own data, split, key."""
    config = load_experiment(name, preset, overrides)
    return dataclasses.replace(
        config,
        data=dataclasses.replace(config.data, path="", seed=config.data.seed + seed),
        train=dataclasses.replace(config.train, seed=seed),
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
        root = runs_root / f"{name}-{preset}{suffix}-seed{seed}"
        cache = root.with_name(root.name + "-results.json")
        results, record = _load_seed(cache) if cache.is_file() else ({}, {})
        # done by an earlier (or a parallel) invocation; redone where it
        # lacks what this one asks for: a --compare run, which shares the
        # run (and its cache) but evaluates no controls, must not leave a
        # --controls run without its context controls (fit resumes the
        # finished run, so only selection and test evaluation are repeated)
        stale = (controls and _missing_controls(results, config)) or (
            scan_checkpoints and "checkpoint_scan" not in record
        )
        if not results or stale:
            fresh, fresh_record = _seed(
                config, root, seed, controls, scan_checkpoints, rules
            )
            results, record = {**results, **fresh}, {**record, **fresh_record}
            _save_seed(cache, results, record)  # kept if the control run dies
        ed = f"{config.algo.label}/expert_distillation"
        if controls and ed not in results and _has_expert_control(config):
            n = expert_episodes or default_expert_episodes(config)
            results[ed], record["expert_distillation"] = _expert(config, root, n, rules)
            _save_seed(cache, results, record)
        for method, result in results.items():
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
    from agentrl.evaluate.controls import controls_for

    return "expert_distillation" in controls_for(config)


def _missing_controls(results: dict, config: Any) -> list[str]:
    """The context controls a seed's cached results lack."""
    from agentrl.evaluate.controls import CONTEXT_CONTROLS

    label = config.algo.label
    return [c for c in CONTEXT_CONTROLS if f"{label}/{c}" not in results]


def _save_seed(path: Path, results: dict, record: dict) -> None:
    from agentrl.tables import write_json

    runs = {m: r.to_json() for m, r in results.items()}
    write_json(path, {"runs": runs, "protocol": record}, indent=None)


def _load_seed(path: Path) -> tuple[dict, dict]:
    saved = json.loads(path.read_text())
    results = {
        m: EvalResult(
            **{
                k: (np.asarray(v, np.float64) if isinstance(v, list) else v)
                for k, v in run.items()
                if k in EvalResult.__dataclass_fields__
            }
        )
        for m, run in saved["runs"].items()
    }
    return results, saved["protocol"]


def _seed(config, root, seed, controls, scan_checkpoints, rules):
    """Train, select on validation and test one seed: ``(results, record)``."""
    from agentrl.evaluate.controls import CONTEXT_CONTROLS
    from agentrl.evaluate.selection import (
        acting_candidates,
        checkpoint_candidates,
        evaluate_choice,
        select,
    )

    run_dir = fit(config, root)
    sel = select(acting_candidates(run_dir, rules))
    record: dict[str, Any] = {"seed": seed, "selection": sel.to_json()}
    if scan_checkpoints:
        scan = select(checkpoint_candidates(run_dir, sel.choice.eval))
        record["checkpoint_scan"] = scan.validation
    used = list(CONTEXT_CONTROLS) if controls else None
    results, _ = evaluate_choice(sel, control=used)
    return results, record


def _expert(config, root, episodes, rules):
    """The expert-distillation control of one seed: ``(result, record)``."""
    from agentrl.evaluate import controls as ctl
    from agentrl.evaluate.selection import acting_candidates, evaluate_choice, select

    data = ctl.expert_dataset(
        root / "dataset", root.with_name(root.name + "-expert-data"), episodes,
        overwrite=True,
    )  # fmt: skip
    ed_dir = fit(ctl.expert_config(config, data), root.with_name(root.name + "-expert"))
    ed_sel = select(acting_candidates(ed_dir, rules))
    ed, _ = evaluate_choice(ed_sel, baselines=[])
    record = {
        "episodes": episodes,
        "run_dir": str(ed_dir),
        "selection": ed_sel.to_json(),
    }
    return next(iter(ed.values())), record


def parse_sets(pairs: list[str]) -> dict[str, str]:
    """``["train.lr=1e-3", ...]`` -> ``{"train.lr": "1e-3", ...}``."""
    for pair in pairs:
        if "=" not in pair.strip("="):
            raise ValueError(f"--set expects FIELD=VALUE, got {pair!r}")
    return configtools.parse_cli_overrides([f"--{pair}" for pair in pairs])


def ablation_suffix(overrides: dict[str, str] | None) -> str:
    """``{"algo.episode_stride": "3"}`` -> ``"_episode_stride3"``.

    ``{"data.source_args": '[["epsilon_end", 0.5]]'}`` ->
    ``"_source_args-epsilon_end-0.5"``.
    """
    parts = [
        f"{field.rsplit('.', 1)[-1]}{value}"
        for field, value in (overrides or {}).items()
    ]
    slug = "_".join(parts)
    # JSON values (e.g. source_args) become dash-separated words
    slug = re.sub(r"[^A-Za-z0-9_.]+", "-", slug).strip("-")
    return f"_{slug}" if slug else ""


def data_best_return(dataset: Path, last_fraction: float = 0.1) -> float:
    """Mean return of the data's best (last, least noisy) episodes."""
    from agentrl.data import open_dataset

    ds = open_dataset(dataset)
    history = ds.load_history("train")
    episodes = ds.metadata["num_episodes"]
    returns = np.asarray(history.episode_returns(episodes))
    k = max(1, int(last_fraction * episodes))
    return float(returns[:, -k:].mean())


def _resample(runs: int) -> str:
    """Seeds then tasks where there are several seeds; tasks otherwise."""
    return "both" if runs > 1 else "tasks"


def paired_ratio(
    a: np.ndarray, b: np.ndarray, num_samples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """``mean(a) / mean(b)`` over ``[seed, task]`` with a paired bootstrap CI.

    Seeds, then tasks within them, are resampled jointly for ``a`` and ``b``
    (or tasks only with one seed).
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    runs, tasks = a.shape
    rng = np.random.default_rng(seed)
    ri, ti = metrics._resample_index(rng, runs, tasks, num_samples, _resample(runs))
    ratios = a[ri, ti].mean(axis=(1, 2)) / b[ri, ti].mean(axis=(1, 2))
    low, high = np.quantile(ratios, [0.025, 0.975])
    return float(a.mean() / b.mean()), float(low), float(high)


def _curves(runs: list) -> np.ndarray:
    """``[seed, task, episode]`` normalized score (else return)."""
    field = "normalized" if all(r.normalized is not None for r in runs) else "returns"
    return np.stack([np.asarray(getattr(r, field), np.float64) for r in runs])


def _final_regret(combined: dict):
    """``method -> [seed, task]`` cumulative regret at the horizon."""
    return lambda m: np.stack([np.asarray(r.regret)[:, -1] for r in combined[m]])


def _with_ci(name: str, value: float, low: float, high: float, goal: float,
             met: bool, higher: bool = True) -> dict:  # fmt: skip
    t = bench.target(name, value, goal, higher)
    t["ci"] = f"[{low:.3g}, {high:.3g}]"
    t["met"] = bool(met)
    return t


def targets_for(
    name: str, summary: dict, combined: dict, run_dirs: list[Path]
) -> list[dict]:
    """The issue's targets for ``name``, each with its value, CI and verdict."""
    algo = next(iter(summary))
    s = summary[algo]
    out = []
    if name == "ad_darkroom":
        m = s["score_last"]
        lo, hi = m["mean_ci"]
        out.append(_with_ci("AD normalized score, last 10 episodes (test goals)",
                            m["mean"], lo, hi, 0.75, m["mean"] >= 0.75))  # fmt: skip
        source = next((k for k in ("q_learning",) if k in combined), None)
        if source is not None:
            diff = metrics.curve_auc(_curves(combined[algo])) - metrics.curve_auc(
                _curves(combined[source])
            )  # [seed, task]
            low, high = metrics.bootstrap_ci(diff, resample=_resample(len(diff)))
            out.append(_with_ci(
                f"AD minus {source} (online, same goals): area under the curve",
                float(diff.mean()), low, high, 0.0, low >= 0.0,
            ))  # fmt: skip
    elif name == "dpt_bandit":
        regret = _final_regret(combined)
        ratio, lo, hi = paired_ratio(regret(algo), regret("thompson"))
        out.append(_with_ci("DPT / Thompson regret at H", ratio, lo, hi, 1.2,
                            ratio <= 1.2, False))  # fmt: skip
        ratio, lo, hi = paired_ratio(regret(algo), regret("random"))
        out.append(_with_ci("DPT / random regret at H", ratio, lo, hi, 0.5,
                            ratio <= 0.5, False))  # fmt: skip
    elif name in ("rl2_bandit", "transformer_ppo_bandit"):
        # issue 18's bandit target, for both online learners
        regret = _final_regret(combined)
        ratio, lo, hi = paired_ratio(regret(algo), regret("thompson"))
        out.append(_with_ci(f"{algo} / Thompson regret at H", ratio, lo, hi, 1.5,
                            ratio <= 1.5, False))  # fmt: skip
    elif name in ("rl2_darkroom", "transformer_ppo_darkroom"):
        # issue 18's Dark Room target, for both online learners: the score
        # over the trial's last (up to 10) episodes, and its rise from the first
        k = s["last_k"]
        m = s["score_last"]
        lo, hi = m["mean_ci"]
        out.append(_with_ci(f"{algo} normalized score, last {k} episodes",
                            m["mean"], lo, hi, 0.8, m["mean"] >= 0.8))  # fmt: skip
        curves = _curves(combined[algo])  # [seed, task, episode]
        gain = curves[..., -k:].mean(-1) - curves[..., 0]
        lo, hi = metrics.bootstrap_ci(gain, resample=_resample(len(gain)))
        out.append(_with_ci(
            f"{algo} score gain, last {k} episodes minus episode 1",
            float(gain.mean()), lo, hi, 0.0, lo > 0.0,
        ))  # fmt: skip
    elif name == "ad_eps_darkroom":
        best = np.array([data_best_return(d / "dataset") for d in run_dirs])
        k = s["last_k"]
        last = np.stack([r.returns for r in combined[algo]])[..., -k:].mean(-1)
        rel = last / np.maximum(best, 1e-9)[:, None]  # [seed, task]
        low, high = metrics.bootstrap_ci(rel, resample=_resample(len(rel)))
        out.append(_with_ci(
            "AD-eps last-episodes return / best return in its data",
            float(rel.mean()), low, high, 1.0, low > 1.0,
        ))  # fmt: skip
    else:
        m = s.get("score_last", s["return_last"])
        lo, hi = m["mean_ci"]
        out.append(_with_ci(f"{algo} normalized score, last episodes",
                            m["mean"], lo, hi, 0.0, lo > 0.0))  # fmt: skip
    return out


def paired_difference(a_runs: list, b_runs: list, last_k: int) -> tuple:
    """Mean last-``last_k``-episodes return of A minus B, with a 95% CI.

    Both methods were evaluated on the same held-out tasks with the same keys
    for each training seed, so the difference is taken per ``[seed, task]``
    and bootstrapped over seeds, then tasks within them.
    """
    from agentrl.evaluate.controls import paired_difference as paired

    d = paired(a_runs, b_runs, last_k, resample=_resample(len(a_runs)))
    return d["mean"], d["low"], d["high"]


def load_written(tag: str) -> tuple[dict, dict, dict]:
    """``(combined results, run_dirs, protocol)`` back from a reproduction."""
    saved = json.loads((bench.results_dir() / tag / "results.json").read_text())
    combined = {
        method: [
            EvalResult(
                **{
                    k: (np.asarray(v, np.float64) if isinstance(v, list) else v)
                    for k, v in run.items()
                    if k in EvalResult.__dataclass_fields__
                }
            )
            for run in runs
        ]
        for method, runs in saved["runs"].items()
    }
    meta = json.loads((bench.results_dir() / f"{tag}.json").read_text())
    dirs = {k: [Path(p) for p in v] for k, v in meta["results"]["run_dirs"].items()}
    return combined, dirs, meta["results"].get("protocol", {})


def _env_of(config: Any) -> Any:
    from agentrl.envs import make as make_env

    data = config.data
    return make_env(data.env, **dict(data.env_args))


def report(
    names: list[str],
    preset: str,
    combined: dict,
    dirs: dict,
    overrides: dict[str, str] | None = None,
    protocol: dict | None = None,
) -> None:
    """Tables, plots and targets of a reproduction, under ``results/<tag>``.

    ``overrides`` (``--set``) apply here as in training: they name the
    result and decide its environment and which controls apply."""
    from agentrl.evaluate.controls import controls_for, icl_verdict

    suffix = ablation_suffix(overrides)
    configs = {n: load_experiment(n, preset, overrides) for n in names}
    tag = f"repro_{'_vs_'.join(names)}_{preset}{suffix}"
    out_dir = bench.results_dir() / tag
    runs = len(next(iter(combined.values())))
    resample = _resample(runs)
    write_results(
        combined,
        out_dir,
        title=f"{' vs '.join(names)} ({preset}{suffix}), test tasks",
        env=_env_of(configs[names[0]]),
        resample=resample,
    )
    summary = summarize(combined, resample=resample)
    targets = targets_for(names[0], summary, combined, dirs[names[0]])
    label = next(iter(summary))
    verdict = None
    config = configs[names[0]]
    applicable = controls_for(config)
    done = {
        c: combined[f"{label}/{c}"] for c in applicable if f"{label}/{c}" in combined
    }
    if done:
        verdict = icl_verdict(
            combined[label],
            done,
            summary[label]["last_k"],
            resample=resample,
            applicable=applicable,
        )
        for c, v in verdict["controls"].items():
            targets.append(_with_ci(
                f"{label} minus control {c}, last-episodes return",
                v["mean"], v["low"], v["high"], 0.0, v["beaten"],
            ))  # fmt: skip
        targets.append(
            bench.target(
                f"{label} learns in context (beats all {len(applicable)} controls)",
                float(verdict["learns_in_context"]),
                1.0,
            )
        )
    if len(names) > 1:
        a, b = (configs[n].algo.label for n in names)
        diff, low, high = paired_difference(
            combined[a], combined[b], summary[a]["last_k"]
        )
        targets.append(_with_ci(
            f"{a} minus {b}, last-episodes return (reported, no target)",
            diff, low, high, float("-inf"), True,
        ))  # fmt: skip
    rows = []
    for m, s in summary.items():
        row = {
            "method": m,
            "seeds": s["runs"],
            "tasks": s["tasks"],
            "return ep1": s["return_first"]["mean"],
            "return last": s["return_last"]["mean"],
            "return last CI": "[{:.3g}, {:.3g}]".format(*s["return_last"]["mean_ci"]),
            "score last": s.get("score_last", {}).get("mean", float("nan")),
            "AUC": s["auc"]["mean"],
        }
        if "regret_final" in s:
            row["regret at H"] = s["regret_final"]["mean"]
        rows.append(row)
    chosen = {
        name: [p["selection"]["choice"]["name"] for p in recs]
        for name, recs in (protocol or {}).items()
    }
    how = "seeds, then tasks" if resample == "both" else "tasks"
    notes = [
        f"Plots, per-goal results and per-seed results: `{tag}/`.",
        f"Test tasks only; each seed has its own data seed, task split and "
        f"evaluation key; CIs resample {how}.",
        f"Acting rule chosen per seed on validation tasks: {chosen}.",
    ]
    notes += [
        line
        for name, recs in (protocol or {}).items()
        if (line := _scan_note(name, recs))
    ]
    if verdict is not None and verdict["missing"]:
        notes.append(
            f"Controls not run: {', '.join(verdict['missing'])}; without them "
            "the verdict cannot be 'learns in context'."
        )
    if not done:
        notes.append(f"Controls not run ({', '.join(applicable)}).")
    if "expert_distillation" not in applicable:
        why = (
            "is trained online by RL, not distilled from a dataset"
            if config.algo.trains_online
            else f"is distilled from {config.data.source!r} data, which do not "
            "learn over their episodes"
        )
        notes.append(
            f"{label} {why}: the expert-distillation control does not apply "
            "(there are no converged episodes to cut the histories to), so the "
            "verdict judges it against the context controls only."
        )
    path = bench.write_results(
        tag,
        {
            "summary": json.loads(json.dumps(summary, default=float)),
            "run_dirs": {k: [str(p) for p in v] for k, v in dirs.items()},
            "protocol": protocol or {},
            "verdict": verdict,
        },
        targets,
        rows,
        notes="\n\n".join(notes),
    )
    print(bench.markdown_table(rows))
    print(bench.markdown_table(targets))
    print(f"wrote {path}")


def _scan_note(name: str, records: list[dict]) -> str | None:
    """The validation learning curve of ``--scan-checkpoints``, as a line.

    ``"name: step 4000 0.815 (0.793, 0.807, 0.844); ..."``: the mean over
    seeds of the selection criterion (chosen acting rule, validation
    tasks) at each kept checkpoint, with the per-seed values; ``None``
    unless every seed has a scan.
    """
    scans = [r.get("checkpoint_scan") for r in records]
    if not scans or not all(scans):
        return None
    steps = sorted({v["step"] for scan in scans for v in scan.values()})
    parts = []
    for step in steps:
        values = [
            v["mean"] for scan in scans for v in scan.values() if v["step"] == step
        ]
        if len(values) == len(scans):
            each = ", ".join(f"{x:.3f}" for x in values)
            parts.append(f"step {step} {np.mean(values):.3f} ({each})")
    selection = records[0].get("selection", {})
    field = selection.get("field")
    if field is None:  # recorded before selections named their field
        rule = selection.get("rule", "the selection criterion")
        field = rule.split(" on ")[0].removeprefix("max over candidates of ")
    else:
        field = f"mean {field}"
    return (
        f"Checkpoint scan of {name} (validation tasks, the chosen acting rule; "
        f"value: {field}; mean over seeds, then per seed): " + "; ".join(parts) + "."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="agentrl bench reproduce", description=__doc__.splitlines()[0]
    )
    parser.add_argument("experiment")
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--seeds", type=positive_int, default=5)
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="run seeds FIRST.. (for parallel processes; a seed already done "
        "under --runs is reused, so a last call over all seeds only reports)",
    )
    parser.add_argument(
        "--compare", default=None, help="a second experiment trained on the same budget"
    )
    parser.add_argument("--runs", default="runs/repro")
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
        "--rescore",
        action="store_true",
        help="recompute the tables and targets from results already written "
        "(no training; bandit regret curves are not stored, so not for bandits)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a preset field (repeatable), e.g. algo.episode_stride=3",
    )
    args = parser.parse_args(argv)

    check_output_path(args.runs, "--runs")
    names = [args.experiment] + ([args.compare] if args.compare else [])
    overrides = parse_sets(args.set)
    for name in names:  # bad fields fail here, before any training
        load_experiment(name, args.preset, overrides)
    suffix = ablation_suffix(overrides)
    if args.rescore:
        tag = f"repro_{'_vs_'.join(names)}_{args.preset}{suffix}"
        combined, dirs, protocol = load_written(tag)
        return report(names, args.preset, combined, dirs, overrides, protocol)
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
        for method, results in per_method.items():
            combined.setdefault(method, results)
        dirs[name] = run_dirs
        protocol[name] = records
    report(names, args.preset, combined, dirs, overrides, protocol)


if __name__ == "__main__":
    main()
