"""Orbax checkpoints of a training run: arrays + JSON metadata, keep last K.

One checkpoint is ``ocp.args.Composite(state=StandardSave, meta=JsonSave)``:
``state`` holds every array of the training state (model, optimizer, EMA
router, ...) flattened to ``{"00000": leaf, ...}`` so any pytree round-trips
without orbax knowing its classes (typed PRNG keys are stored as key data),
and ``meta`` holds the step, the data-iterator position and the config.
Orbax writes to a temporary directory and renames it when complete, so a
killed run never leaves a checkpoint that looks finished. Saves are async:
:meth:`Checkpointer.wait` (called by :meth:`close`) blocks until written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp


def _is_key(x: Any) -> bool:
    return isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jax.dtypes.prng_key)


def flatten_state(tree: Any) -> dict[str, Any]:
    """``{"00000": array, ...}`` from any pytree (keys stored as key data)."""
    leaves = jax.tree.leaves(tree)
    return {
        f"{i:05d}": jax.random.key_data(x) if _is_key(x) else x
        for i, x in enumerate(leaves)
    }


def unflatten_state(flat: dict[str, Any], like: Any) -> Any:
    """Inverse of :func:`flatten_state` given a tree of the same structure."""
    leaves, treedef = jax.tree.flatten(like)
    if len(flat) != len(leaves):
        raise ValueError(
            f"checkpoint has {len(flat)} arrays but the model/optimizer state has "
            f"{len(leaves)}: the config does not match the checkpoint"
        )
    out = []
    for i, ref in enumerate(leaves):
        x = flat[f"{i:05d}"]
        if _is_key(ref):
            x = jax.random.wrap_key_data(jnp.asarray(x), impl=jax.random.key_impl(ref))
        elif hasattr(ref, "sharding") and isinstance(x, np.ndarray | jax.Array):
            x = jax.device_put(jnp.asarray(x, ref.dtype), ref.sharding)
        out.append(x)
    return jax.tree.unflatten(treedef, out)


class Checkpointer:
    """Save every ``every`` steps into ``directory``, keeping the last ``keep``."""

    def __init__(self, directory: str | Path, every: int, keep: int = 3):
        self.directory = Path(directory).resolve()
        self.every = every
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep, save_interval_steps=1, create=True
        )
        self._manager = ocp.CheckpointManager(self.directory, options=options)

    def latest_step(self) -> int | None:
        return self._manager.latest_step()

    def should_save(self, step: int) -> bool:
        return self.every > 0 and step % self.every == 0

    def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
        self._manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(flatten_state(state)),
                meta=ocp.args.JsonSave({**meta, "step": step}),
            ),
        )

    def restore(self, like: Any, step: int | None = None) -> tuple[Any, dict]:
        """Restore ``step`` (default latest) into the structure of ``like``."""
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        abstract = jax.tree.map(
            lambda x: np.zeros(x.shape, x.dtype), flatten_state(like)
        )
        restored = self._manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract),
                meta=ocp.args.JsonRestore(),
            ),
        )
        return unflatten_state(restored["state"], like), dict(restored["meta"])

    def restore_part(
        self, like: Any, offset: int, step: int | None = None
    ) -> tuple[Any, dict]:
        """Restore only the saved leaves ``offset ..`` that ``like`` stands for.

        ``like`` is a pytree shaped like a contiguous run of the saved
        state's leaves starting at leaf ``offset`` (e.g. the model's
        parameters); no other array is read from disk.
        """
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        flat = flatten_state(like)
        abstract = {
            f"{offset + i:05d}": np.zeros(x.shape, x.dtype)
            for i, x in enumerate(flat.values())
        }
        restored = self._manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.PyTreeRestore(
                    item=abstract,
                    restore_args=jax.tree.map(
                        lambda _: ocp.RestoreArgs(restore_type=np.ndarray), abstract
                    ),
                    partial_restore=True,
                ),
                meta=ocp.args.JsonRestore(),
            ),
        )
        state = restored["state"]
        part = {f"{i:05d}": state[f"{offset + i:05d}"] for i in range(len(flat))}
        return unflatten_state(part, like), dict(restored["meta"])

    def wait(self) -> None:
        self._manager.wait_until_finished()

    def close(self) -> None:
        self.wait()
        self._manager.close()
