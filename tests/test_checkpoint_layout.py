"""Checkpoints store named pytrees; partial restores; the flat layout is refused."""

import dataclasses
import shutil

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
import tensorstore as ts
from flax import nnx

import agentrl
from agentrl.prng import is_key
from agentrl.train import checkpoint
from agentrl.train.checkpoint import Checkpointer, CheckpointError
from agentrl.train.loop import build_model, fit
from agentrl.train.step import init_train_state


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, darkroom_dataset):
    from agentrl import configtools
    from agentrl.train.experiments import load_experiment

    config = configtools.override(
        load_experiment("t2mir_ad_darkroom", "smoke"),
        {
            "data.path": str(darkroom_dataset),
            "train.steps": 4,
            "train.checkpoint_every": 2,
            "train.batch_size": 4,
            "train.warmup_steps": 1,
            "model.d_model": 16,
            "model.d_ff": 32,
            "eval.num_tasks": 3,
            "eval.num_episodes": 2,
        },
    )
    return fit(config, tmp_path_factory.mktemp("ckpt") / "run", progress=False)


def _train_state(run_dir):
    config = agentrl.train.rundir.load_config(run_dir)
    env = agentrl.envs.make(config.data.env, **dict(config.data.env_args))
    return config, init_train_state(build_model(config, env), config)[1]


@pytest.mark.long
def test_arrays_are_stored_by_name_and_readable_without_agentrl(run_dir):
    run = agentrl.load_run(run_dir)
    kernel = np.asarray(run.model.blocks[0].attn.qkv.kernel[...])
    # orbax reads one parameter by its module path, with no agentrl code
    step_dir = run_dir / "checkpoints" / "4" / "state"
    restored = ocp.PyTreeCheckpointer().restore(step_dir)
    np.testing.assert_array_equal(
        restored["params"]["blocks"]["0"]["attn"]["qkv"]["kernel"], kernel
    )
    # and so does tensorstore alone: OCDBT + zarr, the name is the key
    array = ts.open(
        {
            "driver": "zarr",
            "kvstore": {
                "driver": "ocdbt",
                "base": f"file://{step_dir}/",
                "path": "params.blocks.0.attn.qkv.kernel/",
            },
        }
    ).result()
    np.testing.assert_array_equal(array.read().result(), kernel)
    names = set(Checkpointer(run_dir / "checkpoints", 0, create=False).inspect(4))
    assert {n.split(".")[0] for n in names} == {"params", "rest", "opt", "aux"}
    # T2MIR's EMA router statistics are in `aux`, by name
    assert any(n.startswith("aux.") for n in names), sorted(names)[:5]


@pytest.mark.long
def test_restore_part_reads_the_model_without_an_optimizer(run_dir):
    config, state = _train_state(run_dir)
    ckpt = Checkpointer(run_dir / "checkpoints", 0, create=False)
    try:
        full, _ = ckpt.restore(state)
        part, meta = ckpt.restore_part({"params": state["params"]})
    finally:
        ckpt.close()
    assert meta["step"] == 4
    for a, b in zip(
        jax.tree.leaves(part["params"]), jax.tree.leaves(full["params"]), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    # restored arrays sit on the sharding of the arrays they replace
    ref = jax.tree.leaves(state["params"])[0]
    assert jax.tree.leaves(part["params"])[0].sharding == ref.sharding


@pytest.mark.long
def test_a_part_of_another_model_names_the_array_and_both_shapes(run_dir):
    config, state = _train_state(run_dir)
    wider = dataclasses.replace(
        config, model=dataclasses.replace(config.model, d_ff=48)
    )
    env = agentrl.envs.make(config.data.env, **dict(config.data.env_args))
    params = nnx.split(build_model(wider, env), nnx.Param, ...)[1]
    ckpt = Checkpointer(run_dir / "checkpoints", 0, create=False)
    try:
        with pytest.raises(CheckpointError, match=r"params/blocks/0/ffn/.* has shape"):
            ckpt.restore_part({"params": params})
    finally:
        ckpt.close()


def _write_flat_layout(run_dir, state):
    """Rewrite run_dir's checkpoints as agentrl 0.1 did: leaves "00000", ..."""
    ckpt = Checkpointer(run_dir / "checkpoints", 0, create=False)
    saved = {}
    try:
        for step in ckpt.all_steps():
            saved[step] = ckpt.restore(state, step)
    finally:
        ckpt.close()
    shutil.rmtree(run_dir / "checkpoints")
    manager = ocp.CheckpointManager(run_dir / "checkpoints")
    for step, (restored, meta) in saved.items():
        leaves = jax.tree.leaves(restored)
        flat = {
            f"{i:05d}": jax.random.key_data(x) if is_key(x) else x
            for i, x in enumerate(leaves)
        }
        manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(flat), meta=ocp.args.JsonSave(meta)
            ),
        )
    manager.wait_until_finished()
    manager.close()
    return saved


@pytest.mark.long
def test_a_run_in_the_pre_release_flat_layout_is_refused(run_dir, tmp_path):
    """0.1.0 reads only checkpoints stored by name (the converter is gone)."""
    path = shutil.copytree(run_dir, tmp_path / "run")
    _, state = _train_state(path)
    _write_flat_layout(path, state)
    assert set(Checkpointer(path / "checkpoints", 0, create=False).inspect(4)) == {
        f"{i:05d}" for i in range(len(jax.tree.leaves(state)))
    }
    with pytest.raises(CheckpointError, match=r"checkpoints/4: .*different model"):
        agentrl.load_run(path)


def test_empty_arrays_are_left_out_and_rebuilt(tmp_path):
    """Arrays with no elements (an MJX physics state's contact arrays, in an
    online learner's environment states) are not stored -- orbax refuses
    them -- and come back from the restored structure's shapes; the other
    arrays round-trip, whole or by part."""
    import jax.numpy as jnp

    state = {
        "env": {"q": jnp.arange(6.0).reshape(2, 3), "contact": jnp.zeros((2, 0, 9))},
        "key": jax.random.key(3),
        "none": jax.random.split(jax.random.key(1), 0),
        "rest": {"w": jnp.ones(4, jnp.int32)},
    }
    assert "contact" not in checkpoint.named_state(state)["env"]
    ckpt = Checkpointer(tmp_path / "ckpt", every=1)
    ckpt.save(1, state, {"note": "x"})
    ckpt.wait()
    like = jax.tree.map(jnp.zeros_like, state)
    like["key"], like["none"] = jax.random.key(0), state["none"]
    restored, meta = ckpt.restore(like)
    assert meta["note"] == "x"
    for got, want in zip(
        jax.tree.leaves(restored), jax.tree.leaves(state), strict=True
    ):
        assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(restored["env"]["q"], state["env"]["q"])
    assert jax.random.key_data(restored["key"]).tolist() == (
        jax.random.key_data(state["key"]).tolist()
    )
    part, _ = ckpt.restore_part({"env": like["env"]})
    np.testing.assert_array_equal(part["env"]["q"], state["env"]["q"])
    assert part["env"]["contact"].shape == (2, 0, 9)
    ckpt.close()
