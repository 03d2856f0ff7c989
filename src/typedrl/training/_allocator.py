"""Keep freed host memory for reuse: glibc's malloc thresholds for training loops.

A training loop frees and re-allocates the same large CPU tensors every
minibatch (activations and their gradients: a ``[16384, 32]`` float32 tensor
is 2 MiB). glibc's malloc serves blocks above its mmap threshold (128 KiB at
start, raised as such blocks are freed) with fresh ``mmap`` pages and gives the
top of the heap back to the kernel once more than its trim threshold is free.
Either way the next minibatch pays a page fault and a kernel zero-fill for
every 4 KiB page it touches. Measured on PPO with 4,096 CPU envs (rsl_rl's
cart-pole settings, one thread), that is about a third of the run's time.

:func:`retain_freed_memory` raises both thresholds once per process, so that
freed blocks stay in the heap for the next minibatch. It changes nothing where
the user already tuned malloc (any ``MALLOC_*`` environment variable, or
``GLIBC_TUNABLES`` naming a malloc setting) and nothing outside glibc (macOS, Windows, musl), where
the call reports why.
"""

import ctypes
import enum
import os
import sys
import threading
from typing import Final, final

__all__ = [
    "MMAP_THRESHOLD_BYTES",
    "TRIM_THRESHOLD_BYTES",
    "AllocatorTuning",
    "retain_freed_memory",
]

MMAP_THRESHOLD_BYTES: Final = 32 * 1024 * 1024
"""Blocks up to this size come from the heap, not from ``mmap`` (glibc's maximum on 64-bit)."""
TRIM_THRESHOLD_BYTES: Final = 64 * 1024 * 1024
"""Free memory at the top of the heap kept for reuse before any is returned to the kernel."""

# mallopt's parameter numbers (glibc's malloc.h).
_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3


@final
class AllocatorTuning(enum.Enum):
    """What :func:`retain_freed_memory` did."""

    APPLIED = "applied"
    """The thresholds are set (now or by an earlier call in this process)."""
    USER_CONFIGURED = "user-configured"
    """The environment configures malloc already; it was left as it is."""
    UNSUPPORTED = "unsupported"
    """Not glibc (or ``mallopt`` refused the values): nothing was changed."""


_lock = threading.Lock()
_outcome: AllocatorTuning | None = None


def retain_freed_memory() -> AllocatorTuning:
    """Set glibc's mmap and trim thresholds so freed tensor memory is reused; idempotent.

    Called at the start of :meth:`~typedrl.training.AbstractTrainer.fit`
    unless ``RunOptions(tune_allocator=False)``. The setting is process-wide
    and lasts for the process: up to 64 MiB of free memory at the top of the
    heap is kept before any is trimmed (freed blocks below live ones are
    kept in any case), and blocks up to 32 MiB come from the heap. To choose
    other values, set glibc's own variables (for example
    ``MALLOC_TRIM_THRESHOLD_``) before starting Python; then this leaves
    malloc alone.

    Example:
        >>> retain_freed_memory() in set(AllocatorTuning)
        True
    """
    global _outcome  # noqa: PLW0603 - one decision per process, whoever asks first
    with _lock:
        if _outcome is None:
            _outcome = _tune()
        return _outcome


def _tune() -> AllocatorTuning:
    if any(name.startswith("MALLOC_") for name in os.environ) or "malloc" in os.environ.get(
        "GLIBC_TUNABLES", ""
    ):
        return AllocatorTuning.USER_CONFIGURED
    if not sys.platform.startswith("linux"):
        return AllocatorTuning.UNSUPPORTED
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return AllocatorTuning.UNSUPPORTED
    # gnu_get_libc_version exists only in glibc; musl has a mallopt that does nothing.
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return AllocatorTuning.UNSUPPORTED
    mallopt = libc.mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # Setting either threshold explicitly also turns off glibc's dynamic adjustment.
    # The mmap threshold first: where glibc refuses it (a 32-bit build caps it lower),
    # nothing is changed at all.
    if mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) != 1:
        return AllocatorTuning.UNSUPPORTED
    mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)  # any size is accepted
    return AllocatorTuning.APPLIED
