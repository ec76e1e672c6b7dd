"""Tables, targets and verdicts of a paper reproduction.

:func:`report` writes what :mod:`agentrl.evaluate.reproduce` measured:
``repro_<experiment>_<preset>[_<ablation>].json`` / ``.md`` in the record
form of :mod:`agentrl.evaluate.reproduce_record` (the issue's targets with
their CIs, the selections, the verdict of the in-context-learning
controls) and a folder of the same name with ``results.json.gz``,
``results.md``, the improvement / regret plots and, for Dark Room, the
per-goal heatmap. Every CI resamples seeds, then tasks within them, where
there are several seeds (tasks only with one).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from agentrl.envs.registry import make as make_env
from agentrl.evaluate import metrics
from agentrl.evaluate.controls import controls_for, icl_verdict, paired_difference
from agentrl.evaluate.evaluate import EvalResult
from agentrl.evaluate.report import read_results, summarize, write_results
from agentrl.evaluate.reproduce_record import target, write_record
from agentrl.evaluate.selection import recorded_field
from agentrl.evaluate.targets import resample_for, targets_for, with_ci
from agentrl.models import ModelConfig
from agentrl.project import results_dir
from agentrl.tables import markdown_table
from agentrl.train.config import DataConfig, EvalConfig, TrainConfig
from agentrl.train.segments import trained_by_other_code


def result_tag(names: list[str], preset: str, overrides: dict | None) -> str:
    """``repro_<name>[_vs_<name>]_<preset><ablation suffix>``: the result's name."""
    return f"repro_{'_vs_'.join(names)}_{preset}{ablation_suffix(overrides)}"


_SECTION_FIELDS = collections.Counter(
    f.name
    for section in (DataConfig, TrainConfig, EvalConfig, ModelConfig)
    for f in dataclasses.fields(section)
)
#: Field names more than one section has (``data.seed``, ``train.seed``,
#: ``eval.seed``): outside ``data`` a suffix names their section too.
SHARED_FIELDS = frozenset(name for name, n in _SECTION_FIELDS.items() if n > 1)


def ablation_suffix(overrides: dict[str, str] | None) -> str:
    """``{"algo.episode_stride": "3"}`` -> ``"_episode_stride3"``.

    ``{"data.source_args": '[["epsilon_end", -0.5]]'}`` ->
    ``"_source_args-epsilon_end-m0.5"``; a field of :data:`SHARED_FIELDS`
    outside ``data`` keeps its section: ``{"eval.num_episodes": "30"}`` ->
    ``"_eval_num_episodes30"`` (``data.num_episodes`` gives
    ``"_num_episodes30"``, as every record before session 48 has it); so does
    an ``algo`` field that a section also has: ``{"algo.batch_size": "64"}``
    -> ``"_algo_batch_size64"``, apart from ``train.batch_size``'s
    ``"_batch_size64"``.
    """
    parts = []
    for field, value in (overrides or {}).items():
        section, _, leaf = field.rpartition(".")
        in_algo = section == "algo" and leaf in _SECTION_FIELDS
        shared = leaf in SHARED_FIELDS or in_algo
        if shared and section not in ("", "data"):
            leaf = f"{section.replace('.', '_')}_{leaf}"
        # a sign before a digit is kept apart from the separators below
        value = re.sub(r"-(?=[0-9.])", "m", re.sub(r"\+(?=[0-9.])", "p", value))
        parts.append(f"{leaf}{value}")
    slug = "_".join(parts)
    # JSON values (e.g. source_args) become dash-separated words
    slug = re.sub(r"[^A-Za-z0-9_.]+", "-", slug).strip("-")
    return f"_{slug}" if slug else ""


def eval_result(saved: dict) -> EvalResult:
    """An :class:`EvalResult` back from its JSON (lists become float64 arrays)."""
    return EvalResult(
        **{
            k: (np.asarray(v, np.float64) if isinstance(v, list) else v)
            for k, v in saved.items()
            if k in EvalResult.__dataclass_fields__
        }
    )


def load_written(tag: str) -> tuple[dict, dict, dict, dict]:
    """``(combined results, run_dirs, protocol, measured)`` back from a
    reproduction (``measured``: its record's machine, date and version).

    Raises ``ValueError`` for a bandit's (its regret curves are not stored,
    only their final values, so its regret targets and plot cannot be
    recomputed), before anything is written.
    """
    saved = read_results(results_dir() / tag)
    if any("regret_final" in run for runs in saved["runs"].values() for run in runs):
        raise ValueError(
            f"--rescore: {tag} holds bandit regret, whose curves are not stored "
            "(only their final values); run the reproduction again instead"
        )
    combined = {
        method: [eval_result(run) for run in runs]
        for method, runs in saved["runs"].items()
    }
    meta = json.loads((results_dir() / f"{tag}.json").read_text())
    dirs = {k: [Path(p) for p in v] for k, v in meta["results"]["run_dirs"].items()}
    measured = {k: meta[k] for k in ("machine", "date", "agentrl_version")}
    return combined, dirs, meta["results"].get("protocol", {}), measured


def _env_of(config: Any) -> Any:
    data = config.data
    return make_env(data.env, **dict(data.env_args))


def method_labels(configs: list[Any]) -> list[str]:
    """The method each experiment's own results are reported as, the
    learner first: its algorithm's label, except that a ``--compare``
    learner of the learner's algorithm (an AD variant against AD) is
    reported by its experiment's name."""
    labels = [c.algo.label for c in configs]
    if len(configs) == 2 and labels[0] == labels[1]:
        labels[1] = configs[1].name
    return labels


def report(
    experiments: dict[str, Any],
    preset: str,
    combined: dict,
    dirs: dict,
    overrides: dict[str, str] | None = None,
    protocol: dict | None = None,
    measured: dict | None = None,
    named: str = "",
) -> None:
    """Tables, plots and targets of a reproduction, under ``results/<tag>``.

    ``experiments``: each experiment as given (a name or .py path) to its
    loaded config (``--set`` applied), the learner first; ``dirs`` and
    ``protocol`` are keyed by the experiments' own names (``config.name``),
    which also name the result. ``overrides`` (``--set``) apply here as in
    training: they name the result and decide its environment and which
    controls apply. ``measured``: a rescore's record's first machine, date
    and version (kept; :func:`write_record`). ``named``: appended to the
    record's name (``--record-suffix``)."""
    suffix = ablation_suffix(overrides)
    names, configs = list(experiments), experiments
    labels = [configs[n].name for n in names]  # ``names`` may be .py paths
    tag = result_tag(labels, preset, overrides) + named
    runs = len(next(iter(combined.values())))
    resample = resample_for(runs)
    summary = summarize(combined, resample=resample)
    targets = targets_for(names[0], summary, combined, dirs[labels[0]])
    config = configs[names[0]]
    verdict, done = _verdict(config, summary, combined, resample, targets)
    if len(names) > 1:
        a, b = method_labels(list(configs.values()))
        d = paired_difference(  # evaluated apart: their tasks must agree
            combined[a], combined[b], summary[a]["last_k"], resample=resample,
            shown=True,
        )  # fmt: skip
        targets.append(with_ci(
            f"{a} minus {b}, last-episodes return (reported, no target)",
            d["mean"], d["low"], d["high"], float("-inf"),
        ))  # fmt: skip
    # written once every check above has passed: nothing half
    write_results(
        combined,
        results_dir() / tag,
        title=f"{' vs '.join(labels)} ({preset}{suffix}), test tasks",
        env=_env_of(configs[names[0]]),
        compress=True,  # the repository keeps every record
        resample=resample,
    )
    rows = _summary_rows(summary)
    label = next(iter(summary))
    notes = _notes(tag, label, config, resample, protocol, verdict, done)
    path = write_record(
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
        measured=measured,
    )
    print(markdown_table(rows))
    print(markdown_table(targets))
    print(f"wrote {path}")


def _verdict(
    config: Any, summary: dict, combined: dict, resample: str, targets: list[dict]
) -> tuple[dict | None, dict]:
    """``(verdict, controls done)``: the in-context-learning verdict of the
    controls that ran (``None`` if none did); appends their targets."""
    label = next(iter(summary))
    applicable = controls_for(config)
    done = {
        c: combined[f"{label}/{c}"] for c in applicable if f"{label}/{c}" in combined
    }
    if not done:
        return None, done
    verdict = icl_verdict(
        combined[label],
        done,
        summary[label]["last_k"],
        resample=resample,
        applicable=applicable,
    )
    for c, v in verdict["controls"].items():
        targets.append(with_ci(
            f"{label} minus control {c}, last-episodes return",
            v["mean"], v["low"], v["high"], 0.0,
            resolved=v["beaten"],
        ))  # fmt: skip
    targets.append(
        target(
            f"{label} learns in context (beats all {len(applicable)} controls)",
            float(verdict["learns_in_context"]),
            1.0,
        )
    )
    return verdict, done


def _summary_rows(summary: dict) -> list[dict]:
    """One table row per method: returns, score, AUC (and regret at H)."""
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
    return rows


def _notes(
    tag: str,
    label: str,
    config: Any,
    resample: str,
    protocol: dict | None,
    verdict: dict | None,
    done: dict,
) -> list[str]:
    """The record's notes: the protocol, the choices, what was not run."""
    applicable = controls_for(config)
    chosen = {
        name: [p["selection"]["choice"]["name"] for p in recs]
        for name, recs in (protocol or {}).items()
    }
    how = "seeds, then tasks" if resample == "both" else "tasks"
    notes = [
        f"Plots, per-goal results and per-seed results: `{tag}/`.",
        f"{_seed_range(protocol)}Test tasks only; each seed has its own data "
        f"seed, task split and evaluation key; CIs resample {how}.",
        f"Acting rule chosen per seed on validation tasks: {chosen}.",
    ]
    notes += [
        line
        for name, recs in (protocol or {}).items()
        for line in (
            _margin_note(name, recs),
            _scan_note(name, recs),
            _code_note(name, recs),
        )
        if line
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
            if config.algo.by_training(from_data=False, online=True)
            else f"is distilled from {config.data.source!r} data, which do not "
            "learn over their episodes"
        )
        notes.append(
            f"{label} {why}: the expert-distillation control does not apply "
            "(there are no converged episodes to cut the histories to), so the "
            "verdict judges it against the context controls only."
        )
    return notes


def _seed_range(protocol: dict | None) -> str:
    """``"Training seeds 5-9. "`` (the learner's, from its seed records; a
    record from before they named their seed: ``""``)."""
    records = next(iter((protocol or {}).values()), [])
    seeds = [r.get("seed") for r in records]
    if not seeds or None in seeds:
        return ""
    consecutive = seeds == list(range(seeds[0], seeds[0] + len(seeds)))
    if consecutive and len(seeds) > 1:
        return f"Training seeds {seeds[0]}-{seeds[-1]}. "
    return f"Training seed{'s' if len(seeds) > 1 else ''} " + (
        ", ".join(map(str, seeds)) + ". "
    )


def _margin_note(name: str, records: list[dict]) -> str | None:
    """How many seeds' acting-rule choices their validation tasks resolve.

    ``None`` for records made before selections kept their margin (no
    ``"margin"`` key); a seed whose margin is ``None`` had no rival rule
    (every other rule scored as the chosen one on every task)."""
    if not records or any("margin" not in r["selection"] for r in records):
        return None
    margins = [(r["seed"], r["selection"]["margin"]) for r in records]
    rivalled = [(seed, m) for seed, m in margins if m is not None]
    alone = len(margins) - len(rivalled)
    alike = "the rules scored alike on every validation task"
    without = f"; {alone} without a rival ({alike})" if alone else ""
    if not rivalled:
        return f"Choice of {name}'s acting rule: no rival in any seed ({alike})."
    open_ = [
        f"seed {seed}: {m['mean']:+.3g} [{m['ci'][0]:.3g}, {m['ci'][1]:.3g}] "
        f"over {m['runner_up']}"
        for seed, m in rivalled
        if not metrics.is_resolved(m)
    ]
    line = (
        f"Choice of {name}'s acting rule resolved (paired CI of the chosen rule "
        f"minus the runner-up above 0, on {rivalled[0][1]['tasks']} validation "
        f"tasks) in {len(rivalled) - len(open_)} of {len(rivalled)} seeds{without}"
    )
    if not open_:
        return line + "."
    few = rivalled[0][1]["tasks"] < metrics.MIN_RESOLVING_TASKS
    why = (
        f"fewer than {metrics.MIN_RESOLVING_TASKS} validation tasks cannot "
        "resolve a choice"
        if few
        else "the validation tasks cannot tell the two rules apart"
    )
    return (
        line + f"; unresolved ({why}; more of them: `--set "
        "eval.validation_tasks=N`, where the split holds more or the family "
        "draws them): " + "; ".join(open_) + "."
    )


def _code_note(name: str, records: list[dict]) -> str | None:
    """Whether every seed's runs (and expert-distillation runs) were trained
    by the agentrl code that evaluated them (:mod:`agentrl.train.segments`);
    a seed record without the account (before session 52) counts as
    trained by unrecorded code."""

    def other(record: dict | None) -> bool:
        return record is None or trained_by_other_code(record)

    if not records:
        return None
    runs = [s for s, r in _seeds(records) if other(r.get("training_code"))]
    experts = [
        s
        for s, r in _seeds(records)
        if "expert_distillation" in r
        and other(r["expert_distillation"].get("training_code"))
    ]
    if not runs and not experts:
        digests = {r["training_code"]["evaluated_by"][:12] for r in records}
        return (
            f"Every seed's {name} run was trained by the agentrl code that "
            f"evaluated it (code sha256 {', '.join(sorted(digests))})."
        )
    parts = [f"the runs of seeds {runs}"] if runs else []
    parts += [f"the expert-distillation runs of seeds {experts}"] if experts else []
    return (
        f"Trained (in part) by other agentrl code than evaluated them, or by "
        f"code not recorded (runs from before session 52): {name}'s "
        f"{' and '.join(parts)}; their numbers mix code versions."
    )


def _seeds(records: list[dict]) -> list[tuple[int, dict]]:
    return [(r.get("seed", i), r) for i, r in enumerate(records)]


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
    field = recorded_field(records[0].get("selection", {}))
    field = "the selection criterion" if field is None else f"mean {field}"
    return (
        f"Checkpoint scan of {name} (validation tasks, the chosen acting rule; "
        f"value: {field}; mean over seeds, then per seed): " + "; ".join(parts) + "."
    )
