"""checkpoint_io --quick (the smoke model) never replaces the committed
full-model record: it writes into a temporary folder unless --out names
one."""

import hashlib
from pathlib import Path

import checkpoint_io
import pytest

from agentrl.project import RESULTS_ENV

RECORD = Path(__file__).resolve().parents[1] / "benchmarks/results/checkpoint_io.json"


def _digest() -> str:
    return hashlib.sha256(RECORD.read_bytes()).hexdigest()


@pytest.mark.long
def test_a_quick_run_leaves_the_full_record_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    before = _digest()
    checkpoint_io.main(["--quick"])
    assert _digest() == before
    written = Path(capsys.readouterr().out.splitlines()[0])
    assert written.name == "checkpoint_io.json" and written.parent != RECORD.parent
    monkeypatch.setenv(RESULTS_ENV, str(tmp_path))  # agentrl bench --out
    checkpoint_io.main(["--quick"])
    assert (tmp_path / "checkpoint_io.json").is_file()
