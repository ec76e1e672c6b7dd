"""The notebooks in notebooks/ run top to bottom at smoke size (nbclient).

Each notebook is executed in a fresh ``python3`` kernel of this interpreter's
environment, from the ``notebooks/`` folder, with a time limit; a failing
cell fails the test with its traceback. ``make test`` runs one of them, 05,
which trains and compares two in-context learners (sized for it inside the
notebook); ``make test-long`` runs the others.
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


# In `make test`: 05, one notebook that trains and compares two in-context
# learners (issue 37; it shrinks the smoke presets itself); the others in
# `make test-long` (the quickstart among them since c59e5f7: over 8 s).
IN_MAKE_TEST = ("05_compare_learners",)


@pytest.mark.parametrize(
    "path",
    [
        p if p.stem in IN_MAKE_TEST else pytest.param(p, marks=pytest.mark.long)
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
