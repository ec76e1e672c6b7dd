"""Orbax checkpoints of a training run: named arrays + JSON metadata, keep last K.

One checkpoint is ``ocp.args.Composite(state=StandardSave, meta=JsonSave)``.
``state`` holds the training state as a *named* pytree of plain dicts, one
key per path element, so orbax (or tensorstore, or any tool that reads
OCDBT/zarr) finds an array by name::

    params/blocks/0/attn/qkv/kernel      the model's parameters (module paths)
    rest/blocks/0/drop/rngs/key          its other state (RNG keys as key data)
    opt/1/0/mu/blocks/0/attn/qkv/kernel  the optimizer state (optax's nesting)
    aux/...                              the algorithm's state (T2MIR's EMA router)

(orbax itself joins the names with ``.``: ``params.blocks.0.attn.qkv.kernel``).
``meta`` holds the step, the data-iterator position, the config and the
metrics since the last log line (``log_window``). Orbax
writes to a temporary directory and renames it when complete, so a killed
run never leaves a checkpoint that looks finished. Saves are async:
:meth:`Checkpointer.wait` (called by :meth:`close`) blocks until written.

Restoring reads each array once, straight onto the sharding of the array it
replaces (orbax restores per shard; no host copy of the whole state first),
and :meth:`Checkpointer.restore_part` restores only some top-level parts
(``load_run`` reads ``params`` and ``rest``: no optimizer is built or read).

Before restoring, a checkpoint is inspected (:meth:`Checkpointer.inspect`):
its parts are present, its JSON parses, and the stored arrays' names and
shapes (read from their zarr metadata, not their data) match the structure
being restored. Anything wrong raises :class:`CheckpointError` naming the
checkpoint directory, the array and both shapes or counts; an array whose
data is damaged is reported the same way when orbax reads it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

from agentrl.prng import is_key
from agentrl.safeio import remove_stale_siblings


class CheckpointError(ValueError):
    """A checkpoint is incomplete, damaged, mixed up or from another model."""


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:400]


def _wrap_key(data: Any, ref: Any) -> jax.Array:
    """Key data back into a key array of ``ref``'s implementation."""
    return jax.random.wrap_key_data(data, impl=ref.dtype._impl)


# ------------------------------------------------------------- names
def _part(key: Any) -> str:
    for attr in ("key", "idx", "name"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def leaf_names(tree: Any) -> list[tuple[str, ...]]:
    """The name of each leaf of ``tree``, in ``jax.tree.leaves`` order.

    A name is the leaf's path, one string per element (dict key, sequence
    index, attribute); the ``.value`` of a flax ``Variable`` is dropped, so
    a parameter is named by its module path: ``("params", "blocks", "0",
    "attn", "qkv", "kernel")``.
    """
    names = []
    for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]:
        parts = tuple(_part(k) for k in path)
        if len(parts) > 1 and isinstance(path[-1], jax.tree_util.GetAttrKey):
            if parts[-1] == "value":
                parts = parts[:-1]
        names.append(parts)
    if len(set(names)) != len(names):  # cannot happen for dicts, tuples, nnx
        raise ValueError("two leaves of the state have the same path name")
    return names


def _nest(names: list[tuple[str, ...]], values: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for parts, value in zip(names, values, strict=True):
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def _get(tree: dict[str, Any], parts: tuple[str, ...]) -> Any:
    for p in parts:
        tree = tree[p]
    return tree


def _empty(x: Any) -> bool:
    """An array (or spec) with no elements: not stored (orbax refuses them),
    rebuilt from the structure on restore (a shape holds all it has)."""
    return 0 in tuple(np.shape(x))


def _stored(tree: Any) -> tuple[list[tuple[str, ...]], list[Any]]:
    """The names and leaves of ``tree`` a checkpoint holds (not the empty
    ones: e.g. an MJX physics state's ``[0]`` contact arrays, in an online
    learner's environment states)."""
    pairs = zip(leaf_names(tree), jax.tree.leaves(tree), strict=True)
    kept = [(n, x) for n, x in pairs if not _empty(x)]
    return [n for n, _ in kept], [x for _, x in kept]


def named_state(tree: Any) -> dict[str, Any]:
    """``tree`` as nested dicts of its leaf names (keys stored as key data;
    arrays with no elements left out)."""
    names, leaves = _stored(tree)
    data = [jax.random.key_data(x) if is_key(x) else x for x in leaves]
    return _nest(names, data)


def _spec(x: Any) -> jax.ShapeDtypeStruct:
    """Shape, dtype and sharding ``x`` is stored with (keys as key data)."""
    sharding = getattr(x, "sharding", None)
    if is_key(x):
        data = jax.eval_shape(
            jax.random.key_data, jax.ShapeDtypeStruct(x.shape, x.dtype)
        )
        return jax.ShapeDtypeStruct(data.shape, data.dtype, sharding=sharding)
    return jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=sharding)


def _abstract(tree: Any) -> dict[str, Any]:
    """:func:`named_state` of shapes, dtypes and shardings (nothing allocated)."""
    names, leaves = _stored(tree)
    return _nest(names, [_spec(x) for x in leaves])


def _zeros(ref: Any) -> jax.Array:
    """The array of an empty leaf ``ref`` (on its sharding, if it has one)."""
    spec = _spec(ref)
    x = jnp.zeros(spec.shape, spec.dtype)
    return x if spec.sharding is None else jax.device_put(x, spec.sharding)


def from_named(named: dict[str, Any], like: Any) -> Any:
    """Inverse of :func:`named_state`: the arrays of ``named`` in ``like``'s
    tree (its empty leaves rebuilt from their shapes)."""
    leaves, treedef = jax.tree.flatten(like)
    out = []
    for parts, ref in zip(leaf_names(like), leaves, strict=True):
        x = _zeros(ref) if _empty(ref) else _get(named, parts)
        if is_key(ref):
            x = _wrap_key(x, ref)
        out.append(x)
    return jax.tree.unflatten(treedef, out)


#: A name of the flat layout of agentrl 0.1 (``00000``, ``00001``, ...).


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

    def all_steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def should_save(self, step: int) -> bool:
        return self.every > 0 and step % self.every == 0

    def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
        self._save(step, named_state(state), meta)

    def _save(self, step: int, named: dict[str, Any], meta: dict[str, Any]) -> None:
        self._manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(named),
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
        """``{array name: shape}`` of checkpoint ``step`` (orbax's dotted names).

        Reads the checkpoint's JSON and its arrays' zarr metadata, not their
        data. Raises :class:`CheckpointError` naming the file or part that
        is missing or unreadable. ``None``: the arrays are not stored as
        OCDBT (orbax checks them while restoring).
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
        return _array_shapes(where / "state", step)

    def _check(self, step: int, like: dict[str, Any], partial: bool) -> None:
        """Compare the saved arrays with the ones being restored.

        ``like``: the parts to restore (``{"params": ..., ...}``); with
        ``partial`` the checkpoint may hold other top-level parts.
        """
        saved = self.inspect(step)
        where = self.directory / str(step)
        if saved is None:  # not an OCDBT checkpoint: orbax will check
            return
        names, leaves = _stored(like)
        shapes = [tuple(_spec(x).shape) for x in leaves]
        parts = {n[0] for n in names}
        stored = {
            n: s for n, s in saved.items() if not partial or n.split(".")[0] in parts
        }
        what = "+".join(sorted(parts)) if partial else "model and optimizer state"
        if len(stored) != len(names):
            raise CheckpointError(
                f"{where}: the checkpoint holds {len(stored)} arrays of the "
                f"{what} but this config's have {len(names)}: it was saved by a "
                "different model (or config)"
            )
        for parts_, want in zip(names, shapes, strict=True):
            name, shown = ".".join(parts_), "/".join(parts_)
            if name not in stored:
                raise CheckpointError(
                    f"{where}: the checkpoint has no array {shown}, which this "
                    "config's state needs: it was saved by a different model "
                    "(or config)"
                )
            if stored[name] != want:
                raise CheckpointError(
                    f"{where}: array {shown} has shape {stored[name]} in the "
                    f"checkpoint but shape {want} in this config's model: the "
                    "checkpoint is from a different model"
                )

    def _restoring(self, step: int, restore: Any) -> Any:
        """``restore()``, its errors as :class:`CheckpointError` naming ``step``."""
        try:
            return restore()
        except Exception as err:  # orbax/tensorstore raise many kinds
            raise CheckpointError(
                f"{self.directory / str(step) / 'state'}: the arrays of the "
                f"checkpoint of step {step} cannot be restored "
                f"({_first_line(err)}); it is truncated or damaged"
            ) from None

    def _check_meta(self, step: int, meta: Any) -> None:
        if not isinstance(meta, dict) or meta.get("step") != step:
            got = meta.get("step") if isinstance(meta, dict) else meta
            raise CheckpointError(
                f"{self.directory / str(step)}: directory of step {step} holds "
                f"the checkpoint of step {got!r} (renamed or mixed up)"
            )

    def _restore(self, step: int, args: Any) -> dict:
        restored = self._restoring(step, lambda: self._manager.restore(step, args=args))
        self._check_meta(step, restored["meta"])
        return restored

    def restore(self, like: Any, step: int | None = None) -> tuple[Any, dict]:
        """Restore ``step`` (default latest) into the structure of ``like``.

        Each array lands on the sharding of its counterpart in ``like``
        (which may be arrays or ``jax.ShapeDtypeStruct`` with shardings).
        """
        step = self._step(step)
        self._check(step, like, partial=False)
        restored = self._restore(
            step,
            ocp.args.Composite(
                state=ocp.args.StandardRestore(_abstract(like)),
                meta=ocp.args.JsonRestore(),
            ),
        )
        return from_named(restored["state"], like), dict(restored["meta"])

    def restore_part(
        self, like: dict[str, Any], step: int | None = None
    ) -> tuple[dict[str, Any], dict]:
        """Restore only the top-level parts of the saved state that ``like`` has.

        ``like = {"params": ..., "rest": ...}`` restores the model (no other
        array is read, no optimizer needs to exist); each part must match
        the saved part in names and shapes.
        """
        if not isinstance(like, dict) or not like:
            raise TypeError("`like` must be a dict of the parts to restore")
        step = self._step(step)
        self._check(step, like, partial=True)
        abstract = _abstract(like)
        where = self.directory / str(step)
        meta = json.loads((where / "meta" / "metadata").read_text())
        self._check_meta(step, meta)
        args = ocp.args.PyTreeRestore(
            item=abstract,
            restore_args=ocp.checkpoint_utils.construct_restore_args(abstract),
            partial_restore=True,
        )
        # orbax's manager fixes one handler per item (StandardSave's): a
        # partial restore goes through the PyTree handler directly.
        with ocp.PyTreeCheckpointer() as reader:
            state = self._restoring(
                step, lambda: reader.restore(where / "state", args=args)
            )
        return from_named(state, like), dict(meta)

    def wait(self) -> None:
        self._manager.wait_until_finished()

    def close(self) -> None:
        self.wait()
        self._manager.close()


def _array_shapes(state_dir: Path, step: int) -> dict[str, tuple[int, ...]] | None:
    """``{name: shape}`` of an OCDBT ``state`` directory, from zarr metadata.

    Synchronous tensorstore reads (no event loop) of the B-tree and of each
    array's small metadata entry, never of its data: a damaged manifest or
    index is reported here, with its checkpoint. ``None`` when the state is
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
        keys = [
            k
            for k in kv.list().result()
            if k.decode().rpartition("/")[2] in (".zarray", "zarr.json")
        ]
        futures = [kv.read(k) for k in keys]
        for key, future in zip(keys, futures, strict=True):
            name = key.decode().rpartition("/")[0]
            meta = json.loads(bytes(future.result().value))
            shapes[name] = tuple(meta["shape"])
    except Exception as err:  # tensorstore: ValueError with a status code
        raise CheckpointError(
            f"{state_dir}: arrays of the checkpoint of step {step} cannot be read "
            f"({_first_line(err)}); it is truncated or damaged"
        ) from None
    return shapes


# ------------------------------------------- the flat layout (agentrl 0.1)
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
    directory = Path(directory)
    if not directory.is_dir():
        return []
    # and what a killed agentrl.train.runner._check_writable left
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
