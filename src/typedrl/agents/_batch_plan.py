"""The start-up check that every rank runs the same number of minibatches per epoch."""

import torch

from typedrl.buffers import validate_batch_plan
from typedrl.distributed import Distributed
from typedrl.errors import ConfigError, DistributedError

__all__ = ["agree_on_batch_plan"]

_INVALID = -1


def agree_on_batch_plan(
    *, num_envs: int, num_steps: int, num_mini_epochs: int, batch_size: int, dist: Distributed
) -> int:
    """Validate this rank's minibatch plan and check that every rank has the same count.

    In data-parallel training each minibatch ends in a gradient all-reduce, so
    a rank that runs one minibatch more than another waits forever. This
    function is collective: every rank must call it, and it returns or raises
    on every rank alike, never leaving a rank waiting. A rank whose own numbers
    are impossible does not raise before the exchange: it sends a marker, so
    that the other ranks learn of the failure too.

    Args:
        num_envs: Env rows on this rank.
        num_steps: Steps per epoch.
        num_mini_epochs: Passes over the data per epoch.
        batch_size: Samples per minibatch on this rank.
        dist: The ranks to agree with.

    Returns:
        ``ceil(num_envs * num_steps * num_mini_epochs / batch_size)``, the same on every rank.

    Raises:
        ConfigError: On the ranks whose own plan is impossible (with the numbers).
        DistributedError: On every other rank when some rank's plan is impossible,
            and on every rank when the counts differ (listing each rank's count).

    Example:
        >>> from typedrl.distributed import SingleProcess
        >>> agree_on_batch_plan(
        ...     num_envs=8, num_steps=32, num_mini_epochs=4, batch_size=100, dist=SingleProcess()
        ... )
        11
    """
    local_error: ConfigError | None = None
    try:
        count = validate_batch_plan(
            num_envs=num_envs,
            num_steps=num_steps,
            num_mini_epochs=num_mini_epochs,
            batch_size=batch_size,
        )
    except ConfigError as error:
        local_error, count = error, _INVALID
    local = torch.tensor([count], dtype=torch.int64, device=dist.device)
    counts = [int(c) for c in dist.all_gather(local).reshape(-1).tolist()]
    if local_error is not None:
        raise local_error
    invalid = [rank for rank, c in enumerate(counts) if c == _INVALID]
    if invalid:
        raise DistributedError(
            f"rank(s) {invalid} have an impossible minibatch plan (their own error says why); "
            "every rank stops before training"
        )
    if any(c != counts[0] for c in counts):
        per_rank = ", ".join(f"rank {rank}: {c}" for rank, c in enumerate(counts))
        raise DistributedError(
            "ranks disagree on the number of minibatches per epoch, "
            f"ceil(num_envs * num_steps * num_mini_epochs / batch_size) ({per_rank}); a "
            "mismatch would deadlock DDP. Choose batch_size per rank so the counts match"
        )
    return counts[0]
