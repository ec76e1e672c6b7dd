"""A dataset directory's files: their checksums, and their safe replacement.

>>> prepare_out(out, overwrite)        # before anything is computed
>>> tmp = temp_sibling(out); ...       # build the complete dataset in tmp
>>> files = file_checksums(tmp)        # {name: {"bytes", "sha256"}}
>>> move_into_place(tmp, out)

A dataset is built in a temporary sibling directory and renamed onto
``out`` only when complete, with ``agentrl.json`` (:data:`METADATA_FILE`,
which lists a size and SHA-256 per file) written last, so an interrupted
run leaves nothing that opens as a dataset. The temporary sibling is named
after its process (:func:`agentrl.safeio.temp_sibling`); the next
:func:`prepare_out` of ``out`` removes those of killed writers, and puts
back a dataset that a writer killed mid-replacement had moved aside. An
unwritable directory raises :class:`agentrl.safeio.StorageError` naming
``out`` before anything is computed. The reader checks the same sizes and
checksums (:mod:`agentrl.data.reader`).
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from pathlib import Path
from typing import Any

from agentrl.safeio import (
    remove,
    remove_stale_siblings,
    stale_siblings,
    storage_error,
    temp_sibling,
)

#: The dataset's metadata (env, source, task ids, files), written last.
METADATA_FILE = "agentrl.json"
#: The version of its format (the reader opens only this one).
FORMAT_VERSION = 1


def file_checksums(directory: Path) -> dict[str, dict[str, Any]]:
    """``{relative name: {"bytes", "sha256"}}`` of every file under ``directory``."""
    out = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        name = path.relative_to(directory).as_posix()
        if name == METADATA_FILE:
            continue
        out[name] = {"bytes": path.stat().st_size, "sha256": sha256(path)}
    return out


def sha256(path: Path) -> str:
    """The SHA-256 of the file at ``path``, in hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def prepare_out(out: Path, overwrite: bool) -> None:
    """Undo killed writers of ``out``; refuse an existing one without overwrite."""
    restored = _recover(out)
    if out.exists() and not overwrite:
        how = " (put back: a killed overwrite had moved it aside)" if restored else ""
        raise ValueError(f"`out` {out} already exists{how} (pass overwrite=True)")
    _check_writable(out)


def _recover(out: Path) -> bool:
    """Clean up after writers of ``out`` that were killed; True if one is undone.

    A killed writer leaves its temporary build beside ``out`` (removed). One
    killed between moving the dataset it replaced aside and renaming the new
    one into place (before its commit) leaves the old dataset aside: it is
    put back, as if the overwrite had not started.
    """
    restored = False
    for old in stale_siblings(out, ("old",)):
        if out.exists():
            remove(old)
        else:
            with contextlib.suppress(OSError):  # unwritable: _check_writable says
                old.rename(out)
                restored = True
    remove_stale_siblings(out, ("tmp",))
    return restored


def _check_writable(out: Path) -> None:
    """A clear error, before anything is computed, if ``out`` cannot be written."""
    probe = temp_sibling(out)
    try:
        probe.mkdir(parents=True)
        probe.rmdir()
    except OSError as err:
        after = "the existing dataset is unchanged" if out.exists() else ""
        storage = storage_error(err, f"write the dataset {out}", after)
        raise (storage or err) from None


def move_into_place(built: Path, out: Path) -> None:
    """Rename the complete ``built`` onto ``out``, replacing a previous dataset."""
    if not out.exists():
        try:
            built.rename(out)
        except OSError as err:
            if out.exists():
                raise ValueError(
                    f"`out` {out} was created by another process while this one "
                    "wrote it; nothing was replaced"
                ) from err
            raise
        return
    old = temp_sibling(out, "old")
    out.rename(old)
    try:
        built.rename(out)
    except BaseException:
        old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)
