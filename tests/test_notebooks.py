"""The notebooks in notebooks/ run top to bottom at smoke size (nbclient).

Each notebook is executed in a fresh ``python3`` kernel of this interpreter's
environment, from the ``notebooks/`` folder, with a time limit; a failing
cell fails the test with its traceback. ``make test`` runs 05 (RA-DT and
Meta-DT trained on one dataset and compared on the same goals: the
smallest notebook that trains and compares two learners, ~50 s of one test
worker with the tests' XLA flags); ``make test-long`` runs the others.
"""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
IN_MAKE_TEST = "05_compare_learners.ipynb"
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


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(p, marks=() if p.name == IN_MAKE_TEST else pytest.mark.long)
        for p in NOTEBOOKS
    ],
    ids=lambda p: p.stem,
)
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
