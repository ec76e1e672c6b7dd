"""Checkpoints: missing or renamed steps, arrays of another state, orbax temporaries."""

import jax.numpy as jnp
import pytest

from agentrl.train.checkpoint import (
    Checkpointer,
    CheckpointError,
    remove_incomplete_checkpoints,
)


@pytest.fixture
def saved(tmp_path):
    """Checkpoints of steps 2 and 4 of ``{"w": [2], "v": [3]}`` (w = step)."""
    ckpt = Checkpointer(tmp_path / "ckpt", every=2, keep=5)
    for step in (2, 4):
        state = {"w": jnp.full(2, step, jnp.float32), "v": jnp.zeros(3)}
        ckpt.save(step, state, {"note": "x"})
    ckpt.close()
    return tmp_path / "ckpt"


def reopened(directory):
    return Checkpointer(directory, every=2, create=False)


LIKE = {"w": jnp.zeros(2, jnp.float32), "v": jnp.zeros(3)}


def test_a_step_is_restored_as_saved_and_a_missing_one_is_named(saved):
    ckpt = reopened(saved)
    state, meta = ckpt.restore(LIKE, step=2)
    assert meta["step"] == 2 and meta["note"] == "x"
    assert state["w"].tolist() == [2.0, 2.0]
    assert ckpt.restore(LIKE)[1]["step"] == 4  # the latest by default
    with pytest.raises(FileNotFoundError, match=r"no checkpoint of step 3 .*\[2, 4\]"):
        ckpt.restore(LIKE, step=3)
    ckpt.close()


def test_a_step_directory_holding_another_steps_checkpoint_is_refused(saved):
    (saved / "2").rename(saved / "6")
    ckpt = reopened(saved)
    with pytest.raises(
        CheckpointError, match="of step 6 holds the checkpoint of step 2"
    ):
        ckpt.restore(LIKE)
    ckpt.close()


def test_arrays_of_another_state_are_refused_naming_them(saved):
    ckpt = reopened(saved)
    with pytest.raises(CheckpointError, match=r"array w has shape \(2,\) .*\(5,\)"):
        ckpt.restore({**LIKE, "w": jnp.zeros(5, jnp.float32)})
    with pytest.raises(CheckpointError, match="holds 2 arrays .* have 1"):
        ckpt.restore({"w": LIKE["w"]})
    with pytest.raises(CheckpointError, match="holds 2 arrays .* have 3"):
        ckpt.restore({**LIKE, "u": jnp.zeros(1)})
    ckpt.close()


def test_an_orbax_temporary_named_with_its_timestamp_is_removed(tmp_path):
    """Orbax names an unfinished save ``<step>.orbax-checkpoint-tmp-<timestamp>``."""
    (tmp_path / "4").mkdir()
    (tmp_path / "4" / "_CHECKPOINT_METADATA").write_text("{}")
    (tmp_path / "8.orbax-checkpoint-tmp-1700000000" / "state").mkdir(parents=True)
    removed = remove_incomplete_checkpoints(tmp_path)
    assert [p.name for p in removed] == ["8.orbax-checkpoint-tmp-1700000000"]
    assert [p.name for p in tmp_path.iterdir()] == ["4"]
