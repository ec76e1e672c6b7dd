"""The one result-table writer: markdown tables, strict JSON, atomic writes."""

import json
import math

import numpy as np

from agentrl.tables import format_cell, json_safe, markdown_table, write_json


def test_markdown_table_columns_blanks_and_formatting():
    rows = [{"name": "a", "x": 1 / 3, "n": 2}, {"name": "b", "n": 3}]
    assert markdown_table(rows) == (
        "| name | x | n |\n|---|---|---|\n| a | 0.3333 | 2 |\n| b |  | 3 |"
    )
    # explicit columns pick and order; a custom formatter applies to every cell
    out = markdown_table(rows, ["n", "name"], fmt=lambda v: f"<{v}>")
    assert out.splitlines()[2] == "| <2> | <a> |"
    assert markdown_table([]) == ""
    assert markdown_table([], ["a", "b"]) == "| a | b |\n|---|---|"
    assert format_cell(np.float64(2.0)) == "2" and format_cell(7) == "7"


def test_json_safe_makes_strict_json():
    payload = {
        "nan": float("nan"),
        "inf": [np.float32(np.inf), -math.inf],
        "array": np.array([[1.5, np.nan]]),
        "int": np.int64(3),
        "flag": np.bool_(True),
        "tuple": (1, "x"),
    }
    out = json_safe(payload)
    assert out == {
        "nan": None,
        "inf": [None, None],
        "array": [[1.5, None]],
        "int": 3,
        "flag": True,
        "tuple": [1, "x"],
    }
    json.dumps(out, allow_nan=False)  # raises on anything left non-strict


def test_write_json_is_atomic_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "sub" / "r.json"
    write_json(path, {"a": float("nan")})
    write_json(path, {"a": 1.0})  # replaces the file in one rename
    assert json.loads(path.read_text()) == {"a": 1.0}
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]


def test_benchmark_results_go_to_the_chosen_folder(tmp_path, monkeypatch):
    from agentrl.evaluate.reproduce_record import target, write_record
    from agentrl.project import RESULTS_ENV

    monkeypatch.setenv(RESULTS_ENV, str(tmp_path))
    goal = target("ratio", 2.0, 1.0)
    reported = target("difference (no target)", 0.5, float("-inf"))
    path = write_record("demo", {"x": float("nan")}, [goal, reported], [])
    assert path == tmp_path / "demo.json"
    payload = json.loads(path.read_text())
    assert payload["results"] == {"x": None} and payload["targets"][1]["target"] is None
    md = (tmp_path / "demo.md").read_text()
    assert "| ratio | 2 | 1 | True | True |" in md


def test_gzipped_json_is_strict_deterministic_and_read_back(tmp_path):
    from agentrl.tables import read_json, write_json_gz

    payload = {"a": [1.5, float("nan")], "b": {"c": np.float32(2.0)}}
    first = write_json_gz(tmp_path / "x.json.gz", payload).read_bytes()
    second = write_json_gz(tmp_path / "y.json.gz", payload).read_bytes()
    assert first == second  # no timestamp in the gzip header
    assert read_json(tmp_path / "x.json.gz") == {"a": [1.5, None], "b": {"c": 2.0}}


def test_figures_are_written_as_256_colour_pngs(tmp_path):
    """A plot with lines, a CI band and text, as a palette PNG of the same
    size in pixels, smaller than the full-colour rendering."""
    import io

    from matplotlib.figure import Figure
    from PIL import Image

    from agentrl.tables import write_figure

    fig = Figure(figsize=(6, 4), dpi=120)
    ax = fig.subplots()
    x = np.arange(50)
    ax.plot(x, np.sin(x / 5), label="a")
    ax.fill_between(x, np.sin(x / 5) - 0.2, np.sin(x / 5) + 0.2, alpha=0.2)
    ax.legend()
    full = io.BytesIO()
    fig.savefig(full, format="png")
    path = write_figure(tmp_path / "f.png", fig)
    with Image.open(path) as image, Image.open(full) as reference:
        assert image.mode == "P" and image.size == reference.size
        assert len(image.getcolors(256)) <= 256
    assert path.stat().st_size < len(full.getvalue())
    assert not list(tmp_path.glob("*.tmp*"))
