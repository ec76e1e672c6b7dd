"""Evaluation as CSV and TensorBoard scalars; the optional experiment tracker.

The tracker is tested with a fake ``wandb`` module that records what it is
given (never the network); the fake follows the calls agentrl makes of the
real one (``init`` with ``id``/``resume``/``dir``/``config``, ``run.log``
with ``step``, ``run.summary[...]``, ``run.finish``).
"""

from __future__ import annotations

import csv
import importlib.machinery
import json
import struct
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from agentrl import tracking
from agentrl.configtools import ConfigError
from agentrl.evaluate.evaluate import EvalResult
from agentrl.evaluate.report import write_results
from agentrl.train.logger import RunLogger, read_metrics


def read_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` of every TensorBoard event file under
    ``folder`` (TFRecord framing: length, its CRC, the Event proto, its CRC)."""
    from tensorboardX.proto import event_pb2

    out: dict[str, list[tuple[int, float]]] = {}
    for path in sorted(folder.rglob("events.out.tfevents.*")):
        data = path.read_bytes()
        i = 0
        while i < len(data):
            (length,) = struct.unpack("<Q", data[i : i + 8])
            event = event_pb2.Event.FromString(data[i + 12 : i + 12 + length])
            i += 12 + length + 4
            for value in event.summary.value:
                out.setdefault(value.tag, []).append(
                    (event.step, float(value.simple_value))
                )
    return out


def _results() -> dict[str, EvalResult]:
    rng = np.random.default_rng(0)
    returns = np.cumsum(rng.uniform(0, 1, (6, 5)), axis=1)  # [task, episode]
    return {
        "ad": EvalResult("ad", returns, normalized=returns / returns.max()),
        "random": EvalResult("random", np.ones((6, 5)), normalized=np.zeros((6, 5))),
    }


def test_evaluation_writes_csv_and_tensorboard_beside_json(tmp_path):
    out = tmp_path / "run" / "eval"
    paths = write_results(_results(), out)
    assert paths["csv"] == out / "results.csv" and paths["tensorboard"] == out / "tb"
    summary = json.loads(paths["json"].read_text())["summary"]
    rows = list(csv.DictReader(paths["csv"].open()))
    assert list(rows[0]) == list(tracking.CSV_COLUMNS)
    curve = [r for r in rows if r["method"] == "ad" and r["kind"] == "curve"]
    assert [int(r["x"]) for r in curve] == [1, 2, 3, 4, 5]
    np.testing.assert_allclose(
        [float(r["mean"]) for r in curve], summary["ad"]["curve"]["mean"]
    )
    last = next(r for r in rows if r["metric"] == "return_last" and r["method"] == "ad")
    assert float(last["mean"]) == pytest.approx(summary["ad"]["return_last"]["mean"])
    assert float(last["low"]) <= float(last["mean"]) <= float(last["high"])
    scalars = read_scalars(paths["tensorboard"])
    tag = "eval/ad/normalized_score"
    assert [s for s, _ in scalars[tag]] == [1, 2, 3, 4, 5]
    np.testing.assert_allclose(
        [v for _, v in scalars[tag]], summary["ad"]["curve"]["mean"], rtol=1e-6
    )
    assert scalars["eval/random/return_last"][0][1] == pytest.approx(1.0)


class FakeRun:
    def __init__(self, calls):
        self.calls = calls
        self.summary = {}

    def log(self, data, step):
        self.calls.append(("log", step, dict(data)))

    def finish(self):
        self.calls.append(("finish", dict(self.summary)))


@pytest.fixture
def fake_wandb(monkeypatch):
    calls: list = []
    module = types.ModuleType("wandb")
    module.__spec__ = importlib.machinery.ModuleSpec("wandb", None)

    def init(**kwargs):
        calls.append(("init", kwargs))
        return FakeRun(calls)

    module.init = init
    monkeypatch.setitem(sys.modules, "wandb", module)
    monkeypatch.setenv(tracking.TRACKER_ENV, "wandb")
    return calls


def test_tracker_gets_the_records_of_metrics_jsonl_and_resumes_its_run(
    tmp_path, fake_wandb
):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"name": "x", "train": {"lr": 0.1}}))
    logger = RunLogger(run, total_steps=4, progress=False)
    logger.log(1, {"loss": 2.0, "lr": 0.1})
    logger.log(2, {"loss": 1.5, "grad_norm": float("nan")})
    logger.close()
    init = fake_wandb[0][1]
    assert init["config"] == {"name": "x", "train": {"lr": 0.1}}
    assert init["resume"] == "allow" and init["dir"] == str(run)
    logged = [(c[1], c[2]) for c in fake_wandb if c[0] == "log"]
    jsonl = read_metrics(run)
    assert [s for s, _ in logged] == [r["step"] for r in jsonl]
    assert logged[0][1] == {"loss": 2.0, "lr": 0.1}
    assert logged[1][1] == {"loss": 1.5}  # non-finite values are not sent
    assert fake_wandb[-1][0] == "finish"
    # a resumed run (and its evaluation) continues the same tracked run
    run_id = json.loads((run / tracking.TRACKER_FILE).read_text())["id"]
    assert init["id"] == run_id and len(run_id) == 8
    RunLogger(run, total_steps=4, start_step=2, progress=False).close()
    write_results(_results(), run / "eval")
    inits = [c[1] for c in fake_wandb if c[0] == "init"]
    assert [i["id"] for i in inits] == [run_id] * 3
    summary = fake_wandb[-1][1]
    assert summary["eval/ad/return_last"] == pytest.approx(
        json.loads((run / "eval" / "results.json").read_text())["summary"]["ad"][
            "return_last"
        ]["mean"]
    )


def test_no_tracker_by_default(tmp_path, monkeypatch):
    monkeypatch.delenv(tracking.TRACKER_ENV, raising=False)
    assert tracking.open_tracker(tmp_path) is None
    logger = RunLogger(tmp_path, total_steps=1, progress=False)
    logger.log(1, {"loss": 1.0})
    logger.close()
    assert not (tmp_path / tracking.TRACKER_FILE).exists()


def test_a_missing_or_unknown_tracker_is_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"agentrl\[tracking\]"):
        tracking.check_available("wandb")
    with pytest.raises(ConfigError, match="--tracker"):
        tracking.check_available("mlflow")
    monkeypatch.setenv(tracking.TRACKER_ENV, "mlflow")
    with pytest.raises(ConfigError, match=tracking.TRACKER_ENV):
        tracking.chosen()
