"""Capture and restore the global torch, numpy and Python random-number generators."""

import random

import numpy as np
import torch

from typedrl.errors import CheckpointError, ConfigError

from ._schema import RngState

__all__ = ["capture_rng_state", "reseed_rng", "restore_rng_state"]


def capture_rng_state() -> RngState:
    """Capture this process's global torch, numpy and Python RNG states.

    Covers the default torch CPU generator, every visible CUDA device (when
    CUDA is available), numpy's legacy global generator (``np.random.*``) and
    the :mod:`random` module. In a distributed run every rank captures its own
    and the caller gathers them, in rank order, into
    :attr:`~typedrl.checkpoint.Checkpoint.rng`.

    Raises:
        ConfigError: numpy's global generator was replaced by one other than ``MT19937``.

    Example:
        >>> import random
        >>> import numpy as np
        >>> import torch
        >>> state = capture_rng_state()
        >>> first = (torch.rand(2).tolist(), np.random.rand(), random.random())
        >>> restore_rng_state(state)
        >>> first == (torch.rand(2).tolist(), np.random.rand(), random.random())
        True
    """
    numpy_state = np.random.get_state(legacy=True)
    if not isinstance(numpy_state, tuple):
        raise ConfigError(
            "numpy's global generator must be MT19937 to be checkpointed, "
            f"got {numpy_state.get('bit_generator')!r}"
        )
    _, key, pos, has_gauss, cached_gaussian = numpy_state
    python_version, python_state, python_gauss_next = random.getstate()
    cuda = tuple(torch.cuda.get_rng_state_all()) if torch.cuda.is_available() else ()
    return RngState(
        torch_cpu=torch.get_rng_state(),
        torch_cuda=cuda,
        numpy_key=torch.from_numpy(key.astype(np.int64)),
        numpy_pos=int(pos),
        numpy_has_gauss=int(has_gauss),
        numpy_cached_gaussian=float(cached_gaussian),
        python_version=int(python_version),
        python_state=torch.tensor(python_state, dtype=torch.int64),
        python_gauss_next=python_gauss_next,
    )


def restore_rng_state(state: RngState) -> None:
    """Restore the global RNG states captured by :func:`capture_rng_state`, exactly.

    The next draws of torch (CPU and CUDA), numpy's global generator and
    :mod:`random` are then the ones that followed the capture. CUDA states are
    restored when CUDA is available; without CUDA they are ignored (there is
    no CUDA generator to restore, and a GPU run resumed on a CPU is not
    bit-exact anyway).

    Raises:
        CheckpointError: CUDA is available, but the number of visible devices
            differs from the number of saved CUDA states. Nothing is changed.
    """
    cuda_available = bool(state.torch_cuda) and torch.cuda.is_available()
    if cuda_available and torch.cuda.device_count() != len(state.torch_cuda):
        raise CheckpointError(
            f"the RNG state holds {len(state.torch_cuda)} CUDA generator state(s), but "
            f"{torch.cuda.device_count()} CUDA device(s) are visible; resume with the same "
            "visible devices (CUDA_VISIBLE_DEVICES) as the run that saved it"
        )
    torch.set_rng_state(state.torch_cpu)
    if cuda_available:
        torch.cuda.set_rng_state_all(list(state.torch_cuda))
    np.random.set_state(
        (
            "MT19937",
            state.numpy_key.numpy().astype(np.uint32),
            state.numpy_pos,
            state.numpy_has_gauss,
            state.numpy_cached_gaussian,
        )
    )
    random.setstate(
        (state.python_version, tuple(state.python_state.tolist()), state.python_gauss_next)
    )


def reseed_rng(seed: int) -> None:
    """Seed the global torch (CPU and CUDA), numpy and Python generators from ``seed``.

    For a rank that has no saved state to restore (a resume on another number
    of ranks): its streams start afresh from a seed derived for it.

    Example:
        >>> reseed_rng(5)
        >>> first = torch.rand(1).item()
        >>> reseed_rng(5)
        >>> torch.rand(1).item() == first
        True
    """
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)
