"""The notebooks in notebooks/ run top to bottom at smoke size (nbclient).

Each notebook is executed in a fresh ``python3`` kernel of this interpreter's
environment, from the ``notebooks/`` folder, with a time limit; a failing
cell fails the test with its traceback. ``make test-long`` runs them all:
05, the smallest that trains and compares two learners (it shrinks the smoke
presets itself), costs ~80 s of a cold ``make test``, which it would take
past its 10 minutes on 2 cores (measured 2026-11-28: 10 min 46 s with it).
"""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
TIMEOUT_S = 300


def test_notebooks_exist_with_stripped_outputs():
    names = [p.name for p in NOTEBOOKS]
    for name in (
        "01_quickstart.ipynb",
        "02_custom_task.ipynb",
        "03_sweep_analysis.ipynb",
    ):
        assert name in names
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code and all(not c.get("outputs") for c in code), path.name


@pytest.mark.long
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    errors = [
        o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"
    ]
    assert not errors
