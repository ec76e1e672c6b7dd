"""Orbax checkpoints of a training run: arrays + JSON metadata, keep last K.

One checkpoint is ``ocp.args.Composite(state=StandardSave, meta=JsonSave)``:
``state`` holds every array of the training state (model, optimizer, EMA
router, ...) flattened to ``{"00000": leaf, ...}`` so any pytree round-trips
without orbax knowing its classes (typed PRNG keys are stored as key data),
and ``meta`` holds the step, the data-iterator position and the config.
Orbax writes to a temporary directory and renames it when complete, so a
killed run never leaves a checkpoint that looks finished. Saves are async:
:meth:`Checkpointer.wait` (called by :meth:`close`) blocks until written.

Before restoring, a checkpoint is inspected (:meth:`Checkpointer.inspect`):
its parts are present, its JSON parses, every stored array can be read
(synchronously, through tensorstore's key-value store, so a damaged file
never fails inside orbax's event loop) and the arrays' count and shapes
match the structure being restored. Anything wrong raises
:class:`CheckpointError` naming the checkpoint directory, the array and both
shapes or counts; never an error from inside orbax or tensorstore.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp


class CheckpointError(ValueError):
    """A checkpoint is incomplete, damaged, mixed up or from another model."""


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:400]


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
    """Save every ``every`` steps into ``directory``, keeping the last ``keep``.

    ``create=False`` opens existing checkpoints only (nothing is written: for
    readers such as :func:`agentrl.load_run`).
    """

    def __init__(
        self, directory: str | Path, every: int, keep: int = 3, *, create: bool = True
    ):
        self.directory = Path(directory).resolve()
        self.every = every
        if self.directory.exists() and not self.directory.is_dir():
            raise CheckpointError(f"{self.directory}: is a file, not a directory")
        if not create and not self.directory.is_dir():
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep, save_interval_steps=1, create=create
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

    # ----------------------------------------------------------- reading
    def _step(self, step: int | None) -> int:
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        if not (self.directory / str(step)).is_dir():
            raise FileNotFoundError(
                f"no checkpoint of step {step} in {self.directory} (steps: "
                f"{list(self._manager.all_steps())})"
            )
        return step

    def inspect(self, step: int) -> dict[str, tuple[int, ...]] | None:
        """``{array name: shape}`` of checkpoint ``step``, every array read once.

        Raises :class:`CheckpointError` naming the file or part that is
        missing or unreadable (truncated, damaged). ``None``: the arrays are
        not stored as OCDBT (orbax checks them while restoring).
        """
        where = self.directory / str(step)
        for part in ("state", "meta"):
            if not (where / part).is_dir():
                raise CheckpointError(
                    f"{where}: checkpoint of step {step} has no {part!r} part "
                    "(incomplete or damaged)"
                )
        for file in (where / "meta" / "metadata", where / "state" / "_METADATA"):
            try:
                json.loads(file.read_text())
            except (OSError, ValueError) as err:
                raise CheckpointError(
                    f"{file}: unreadable ({_first_line(err)}); the checkpoint of "
                    f"step {step} is truncated or damaged"
                ) from None
        return _read_arrays(where / "state", step)

    def _check(
        self,
        step: int,
        like_flat: dict[str, Any],
        offset: int,
        names: list[str],
        total: int | None,
    ) -> None:
        """Compare the saved arrays with the ones being restored."""
        saved = self.inspect(step)
        where = self.directory / str(step)
        if saved is None:  # not an OCDBT checkpoint: orbax will check
            return
        if total is not None and len(saved) != total:
            raise CheckpointError(
                f"{where}: the checkpoint holds {len(saved)} arrays but the "
                f"model and optimizer state of this config have {total}: it was "
                "saved by a different model (or config)"
            )
        for i, x in enumerate(like_flat.values()):
            name = f"{offset + i:05d}"
            if name not in saved:
                raise CheckpointError(
                    f"{where}: the checkpoint holds {len(saved)} arrays, this "
                    f"config's state needs array {name} ({names[i]}): it was "
                    "saved by a different model (or config)"
                )
            want = tuple(np.shape(x))
            if saved[name] != want:
                raise CheckpointError(
                    f"{where}: array {name} has shape {saved[name]} in the "
                    f"checkpoint but {names[i]} has shape {want} in this config's "
                    "model: the checkpoint is from a different model"
                )

    def _restore(self, step: int, args: Any) -> dict:
        try:
            restored = self._manager.restore(step, args=args)
        except Exception as err:  # orbax/tensorstore raise many kinds
            raise CheckpointError(
                f"{self.directory / str(step)}: checkpoint of step {step} cannot "
                f"be restored ({_first_line(err)})"
            ) from None
        meta = restored["meta"]
        if not isinstance(meta, dict) or meta.get("step") != step:
            got = meta.get("step") if isinstance(meta, dict) else meta
            raise CheckpointError(
                f"{self.directory / str(step)}: directory of step {step} holds "
                f"the checkpoint of step {got!r} (renamed or mixed up)"
            )
        return restored

    def restore(self, like: Any, step: int | None = None) -> tuple[Any, dict]:
        """Restore ``step`` (default latest) into the structure of ``like``."""
        step = self._step(step)
        flat = flatten_state(like)
        self._check(step, flat, 0, _leaf_names(like), len(flat))
        abstract = jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), flat)
        restored = self._restore(
            step,
            ocp.args.Composite(
                state=ocp.args.StandardRestore(abstract),
                meta=ocp.args.JsonRestore(),
            ),
        )
        return unflatten_state(restored["state"], like), dict(restored["meta"])

    def restore_part(
        self,
        like: Any,
        offset: int,
        step: int | None = None,
        *,
        total: int | None = None,
    ) -> tuple[Any, dict]:
        """Restore only the saved leaves ``offset ..`` that ``like`` stands for.

        ``like`` is a pytree shaped like a contiguous run of the saved
        state's leaves starting at leaf ``offset`` (e.g. the model's
        parameters); no other array is restored (:meth:`inspect` reads each
        stored value once to check the files, keeping none). ``total``: the
        number of arrays the whole saved state must have (checked).
        """
        step = self._step(step)
        flat = flatten_state(like)
        self._check(step, flat, offset, _leaf_names(like), total)
        abstract = {
            f"{offset + i:05d}": np.zeros(x.shape, x.dtype)
            for i, x in enumerate(flat.values())
        }
        restored = self._restore(
            step,
            ocp.args.Composite(
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


def _leaf_names(tree: Any) -> list[str]:
    """``["['params']['embed']['kernel']", ...]``: a name per leaf of ``tree``."""
    return [
        jax.tree_util.keystr(path)
        for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]
    ]


def _read_arrays(state_dir: Path, step: int) -> dict[str, tuple[int, ...]] | None:
    """``{name: shape}`` of an OCDBT ``state`` directory, reading every value.

    Synchronous tensorstore reads (no event loop): a truncated or damaged
    file is reported here, with its checkpoint. ``None`` when the state is
    not stored as OCDBT (orbax then checks it while restoring).
    """
    if not (state_dir / "manifest.ocdbt").is_file():
        return None
    import tensorstore as ts

    shapes: dict[str, tuple[int, ...]] = {}
    try:
        kv = ts.KvStore.open(
            {"driver": "ocdbt", "base": f"file://{state_dir.resolve()}/"}
        ).result()
        keys = kv.list().result()
        for lo in range(0, len(keys), 256):
            batch = keys[lo : lo + 256]
            values = [kv.read(k) for k in batch]
            for key, future in zip(batch, values, strict=True):
                value = future.result().value
                name, _, leaf = key.decode().partition("/")
                if leaf in (".zarray", "zarr.json"):
                    shapes[name] = tuple(json.loads(bytes(value))["shape"])
    except Exception as err:  # tensorstore: ValueError with a status code
        raise CheckpointError(
            f"{state_dir}: arrays of the checkpoint of step {step} cannot be read "
            f"({_first_line(err)}); it is truncated or damaged"
        ) from None
    return shapes


# -- after a kill or a failed save (agentrl.train.loop, agentrl.sweep.train)

#: Orbax names an unfinished checkpoint ``<step>.orbax-checkpoint-tmp[-...]``.
_ORBAX_TMP = ".orbax-checkpoint-tmp"


def complete_steps(directory: Path) -> list[int]:
    """Steps of ``directory`` whose checkpoint is complete, ascending."""
    if not directory.is_dir():
        return []
    return sorted(
        int(p.name)
        for p in directory.iterdir()
        if p.name.isdigit() and (p / "_CHECKPOINT_METADATA").is_file()
    )


def remove_incomplete_checkpoints(directory: str | Path) -> list[Path]:
    """Remove what a killed or failed run left in a checkpoint directory.

    Orbax writes a checkpoint into ``<step>.orbax-checkpoint-tmp`` and renames
    it when complete, so a kill leaves that directory behind; and it deletes
    checkpoints beyond ``keep`` with a plain recursive delete, so a kill can
    leave an old step directory half deleted (no ``_CHECKPOINT_METADATA``,
    which orbax writes before the rename). Both are removed; the latest step
    is never touched. Call it only while holding the run directory's lock
    (no save in flight).
    """
    import shutil

    from agentrl.safeio import remove_stale_siblings

    directory = Path(directory)
    if not directory.is_dir():
        return []
    # and what a killed agentrl.train.loop._check_writable left
    removed = remove_stale_siblings(directory / "probe")
    steps = sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())
    for path in directory.iterdir():
        unfinished = _ORBAX_TMP in path.name
        half_deleted = (
            path.name.isdigit()
            and int(path.name) != steps[-1]
            and not (path / "_CHECKPOINT_METADATA").is_file()
        )
        if unfinished or half_deleted:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
