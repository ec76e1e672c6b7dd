"""Crash-safe file handling: directory locks, temporary siblings, storage errors.

Everything agentrl writes goes to a temporary path beside its destination
and is renamed into place when complete (datasets, orbax checkpoints, result
files through :mod:`agentrl.tables`). A process killed with SIGKILL cannot
remove its temporaries, so their names say who made them,
``.NAME.KIND-HOST-PID-RANDOM`` (:func:`temp_sibling`), and the next writer
of the same path removes those whose process is gone
(:func:`remove_stale_siblings`).

:class:`DirectoryLock` keeps two processes from writing into one run or
sweep directory: ``fcntl.flock`` on ``DIR/.lock``, which the kernel releases
when its holder exits or is killed, so a stale lock is simply taken over.
The file holds the holder's pid for the refusal message and is removed on
release.

:func:`storage_error` turns the shapes a full disk or an unwritable
directory takes (``OSError``; array_record's ``RuntimeError`` and
tensorstore's ``ValueError`` whose text carries the system error) into one
:class:`StorageError` with a sentence that names the path.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import glob
import os
import re
import shutil
import socket
import uuid
from collections.abc import Callable
from pathlib import Path

LOCK_FILE = ".lock"

#: System errors that mean "cannot write here", as opposed to a bug.
STORAGE_ERRNOS = (
    errno.ENOSPC,
    errno.EDQUOT,
    errno.EACCES,
    errno.EPERM,
    errno.EROFS,
)


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"


class DirectoryLockedError(ValueError):
    """Another live process holds the directory's lock."""


class StorageError(OSError):
    """A write failed for lack of space or permission; nothing was half written."""

    def __str__(self) -> str:
        return str(self.strerror)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def temp_sibling(path: str | Path, kind: str = "tmp") -> Path:
    """``DIR/.NAME.KIND-HOST-PID-RANDOM``: a fresh temporary name beside ``path``."""
    path = Path(path)
    owner = f"{_host()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    return path.parent / f".{path.name}.{kind}-{owner}"


def _sibling_owner(path: Path, candidate: Path) -> tuple[str, str, int] | None:
    """``(kind, host, pid)`` of a :func:`temp_sibling` name of ``path``, else None."""
    prefix = f".{path.name}."
    if not candidate.name.startswith(prefix):
        return None
    head, sep, _ = candidate.name[len(prefix) :].rpartition("-")
    kind_host, sep2, pid = head.rpartition("-")
    kind, sep3, host = kind_host.partition("-")
    if not (sep and sep2 and sep3 and pid.isdigit() and kind.isalpha()):
        return None
    return kind, host, int(pid)


def stale_siblings(path: str | Path, kinds: tuple[str, ...] = ("tmp",)) -> list[Path]:
    """Temporary siblings of ``path`` of ``kinds`` whose process has ended.

    Only names made on this host are judged (a pid means nothing elsewhere).
    """
    path = Path(path)
    if not path.parent.is_dir():
        return []
    out = []
    for candidate in path.parent.glob(f".{glob.escape(path.name)}.*"):
        owner = _sibling_owner(path, candidate)
        if owner is None:
            continue
        kind, host, pid = owner
        if kind in kinds and host == _host() and not pid_alive(pid):
            out.append(candidate)
    return sorted(out)


def remove(path: Path) -> None:
    """Remove a file or a directory tree; missing is fine."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def remove_stale_siblings(
    path: str | Path, kinds: tuple[str, ...] = ("tmp",)
) -> list[Path]:
    """Remove what killed writers of ``path`` left beside it; return the paths."""
    stale = stale_siblings(path, kinds)
    for candidate in stale:
        remove(candidate)
    return stale


def link_tree(
    source: Path,
    target: Path,
    skip: str | None = None,
    copied: Callable[[Path], bool] = lambda rel: False,
) -> None:
    """``target``: a folder of hard links to ``source``'s files (copies where
    linking fails, and of the files whose relative path ``copied`` names:
    those another writer may change in place), but not ``skip`` (a relative
    path); built beside ``target`` and renamed into place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_siblings(target)
    tmp = temp_sibling(target)
    try:
        for path in sorted(source.rglob("*")):
            rel = path.relative_to(source)
            if path.is_dir() or str(rel) == skip:
                continue
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            if copied(rel) or not _hard_link(path, tmp / rel):
                shutil.copy2(path, tmp / rel)
        try:
            tmp.replace(target)
        except OSError:
            if not target.is_dir():
                raise
            # another process put the same folder in place first
    finally:
        if tmp.exists():
            remove(tmp)


def _hard_link(source: Path, link: Path) -> bool:
    """Link ``link`` to ``source``; ``False`` where another file system or
    the file system's rules forbid it."""
    try:
        os.link(source, link)
    except OSError:
        return False
    return True


class DirectoryLock:
    """An exclusive lock on ``directory`` for one process (``with`` or acquire/release).

    ``acquire`` raises :class:`DirectoryLockedError`, naming the directory and
    the holder's pid, when another live process holds it.
    """

    def __init__(self, directory: str | Path, what: str = "directory"):
        self.directory = Path(directory)
        self.path = self.directory / LOCK_FILE
        self.what = what
        self._fd: int | None = None

    def acquire(self) -> DirectoryLock:
        self.directory.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise DirectoryLockedError(
                    f"{self.what} {self.directory} is in use by another agentrl "
                    f"process ({holder}); wait for it to finish or stop it, or "
                    "use another directory"
                ) from None
            # The previous holder removes the file on release: if it did so
            # between our open and flock, our lock is on a deleted file.
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        since = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {_host()} {since}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # while still held: see acquire
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> DirectoryLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 256, 0).decode(errors="replace").split()
    except OSError:
        text = []
    if len(text) >= 3 and text[0].isdigit():
        return f"pid {text[0]} on {text[1]}, since {text[2]}"
    return "pid not yet recorded"


_OS_CODE = re.compile(r"os_error_code='?(\d+)")


def storage_errno(err: BaseException) -> int | None:
    """The :data:`STORAGE_ERRNOS` code behind ``err`` (or its causes), if any."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in STORAGE_ERRNOS:
            return err.errno
        text = str(err)
        match = _OS_CODE.search(text)
        if match and int(match.group(1)) in STORAGE_ERRNOS:
            return int(match.group(1))
        for code in STORAGE_ERRNOS:
            if os.strerror(code) in text:
                return code
        err = err.__cause__ or err.__context__
    return None


def storage_error(
    err: BaseException, doing: str, after: str = ""
) -> StorageError | None:
    """``StorageError("cannot DOING: REASON; AFTER")`` if ``err`` is a storage error."""
    code = storage_errno(err)
    if code is None:
        return None
    reason = os.strerror(code).lower()
    return StorageError(
        code, f"cannot {doing}: {reason}" + (f"; {after}" if after else "")
    )
