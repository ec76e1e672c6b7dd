"""Host memory settings for a process that runs XLA:CPU programs.

XLA:CPU allocates each execution's temporary buffers with ``malloc`` and
frees them when it returns. With glibc's defaults those buffers come from
per-thread arenas and ``mmap`` and go back to the kernel on ``free``, so
every call of a compiled training step touches hundreds of megabytes of
fresh pages again: measured on the 2-core development machine, 154,000
page faults and 0.33 s of kernel time per step of T2MIR's Dark Room AD
update (1.10 s), 124,000 and 0.26 s per step of DPT's bandit update (0.50 s).
PyTorch's CPU steps at the same shapes take ~2,800 faults.

:func:`configure_malloc` keeps freed memory in the process instead (one
arena, no ``mmap``-backed blocks, trimming only past 2 GiB free), as
tcmalloc does: 0 page faults, and the same steps ran 0.94 s and 0.42 s.
It only changes where memory comes from, never a value computed.

The ``agentrl`` command calls it first thing; a notebook or script can call
it before its first JAX computation (later, the threads XLA has started
keep their own arenas and most of the gain is lost). The cost: the process
keeps up to 2 GiB of freed memory for reuse rather than returning it. Set
``AGENTRL_MALLOC=system`` to keep glibc's defaults.
"""

from __future__ import annotations

import ctypes
import os
import sys

# mallopt parameters (glibc's malloc.h)
M_TRIM_THRESHOLD, M_MMAP_MAX, M_ARENA_MAX = -1, -4, -8
#: freed memory at the top of the heap kept for reuse, in bytes (a C int)
TRIM_THRESHOLD = 2**31 - 1
#: ``AGENTRL_MALLOC`` values: "tuned" (the default) or "system"
CHOICES = ("tuned", "system")


def configure_malloc() -> bool:
    """Keep freed host memory for reuse (see the module docstring).

    Returns whether the settings were applied: only on Linux with glibc and
    unless ``AGENTRL_MALLOC=system``. Raises ``ValueError`` naming the
    variable for any other value.
    """
    choice = os.environ.get("AGENTRL_MALLOC", "tuned")
    if choice not in CHOICES:
        raise ValueError(f"AGENTRL_MALLOC must be one of {CHOICES}, got {choice!r}")
    if choice == "system" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return False
    if not hasattr(libc, "gnu_get_libc_version"):  # glibc only (not musl)
        return False
    settings = ((M_ARENA_MAX, 1), (M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return all(libc.mallopt(param, value) == 1 for param, value in settings)
