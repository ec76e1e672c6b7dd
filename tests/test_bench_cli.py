"""``agentrl bench`` finds the checkout's ``benchmarks/`` folder: by name from
the working directory (or above it), by path from anywhere; the benchmark
scripts import their helper modules by name, also run as ``python FILE``."""

from __future__ import annotations

import subprocess
import sys

import pytest
from checkout import BENCHMARKS

from agentrl.cli import main


def test_listing_shows_benchmarks_not_helpers_from_below_the_checkout(
    capsys, monkeypatch
):
    monkeypatch.chdir(BENCHMARKS / "results")
    assert main(["bench"]) == 0  # a listing asked for is no error
    out = capsys.readouterr().out
    assert f"benchmarks in {BENCHMARKS}" in out and "peer_eval" in out
    for helper in ("common", "hlo_tools", "xla_profile", "_peers"):
        assert f"  {helper} " not in out


def test_outside_a_checkout_bench_says_where_it_looked(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["bench"]) == 2
    err = capsys.readouterr().err
    assert "error: no benchmarks/ folder in" in err and "path" in err
    assert main(["bench", "env_throughput"]) == 2
    assert "unknown benchmark 'env_throughput'" in capsys.readouterr().err


def test_a_path_runs_from_anywhere_and_a_helper_is_refused(
    capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", str(BENCHMARKS / "q_learning_ceiling.py"), "--help"])
    assert exit_info.value.code == 0
    assert "--seeds" in capsys.readouterr().out
    assert main(["bench", str(BENCHMARKS / "common.py")]) == 2
    assert "defines no main(argv)" in capsys.readouterr().err


def test_a_benchmark_runs_as_a_script_with_its_helpers():
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "peer_eval.py"), "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--rounds" in proc.stdout


def test_reproduce_is_a_command_of_its_own(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["reproduce", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "usage: agentrl reproduce" in out and "--controls" in out


@pytest.mark.parametrize(
    "args, says",
    [
        (["online_throughput", "--envs", "2"], "--envs 2 must be a multiple of"),
        (
            ["online_throughput", "--transformer-envs", "6"],
            "--transformer-envs 6 must be a multiple of",
        ),
        (
            ["online_long_context", "--episodes", "1", "2", "--update-every", "20"],
            "--update-every 20 must divide every trial's steps and be fewer",
        ),
    ],
)
def test_online_benchmarks_refuse_shapes_they_cannot_split(capsys, args, says):
    """Sizes the PPO updates cannot split are refused before any compile."""
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", *args])
    assert exit_info.value.code == 2
    assert says in capsys.readouterr().err
