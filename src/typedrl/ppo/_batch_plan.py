"""The start-up check that every rank runs the same number of minibatches per epoch."""

from typedrl.buffers import validate_batch_plan
from typedrl.distributed import Distributed, agree_on, raise_together
from typedrl.errors import ConfigError

__all__ = ["agree_on_batch_plan"]


def agree_on_batch_plan(
    *, num_envs: int, num_steps: int, num_mini_epochs: int, batch_size: int, dist: Distributed
) -> int:
    """Validate this rank's minibatch plan and check that every rank has the same count.

    In data-parallel training each minibatch ends in a gradient all-reduce, so
    a rank that runs one minibatch more than another waits forever. This
    function is collective: every rank must call it, and it returns or raises
    on every rank alike, never leaving a rank waiting (a rank whose own numbers
    are impossible raises its own error, the others learn of it through
    :func:`~typedrl.distributed.raise_together`).

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
    error: ConfigError | None = None
    count = 0
    try:
        count = validate_batch_plan(
            num_envs=num_envs,
            num_steps=num_steps,
            num_mini_epochs=num_mini_epochs,
            batch_size=batch_size,
        )
    except ConfigError as failure:
        error = failure
    raise_together(error, "the minibatch plan check (an impossible plan)", dist)
    agree_on(
        "the number of minibatches per epoch, "
        "ceil(num_envs * num_steps * num_mini_epochs / batch_size), since a mismatch would "
        "deadlock DDP: choose batch_size per rank so the counts match",
        count,
        dist,
    )
    return count
