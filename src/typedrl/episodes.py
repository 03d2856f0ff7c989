"""Episode returns and lengths, computed once per rollout for every collector.

:func:`epoch_episodes` finds the episodes that ended in a rollout of
``[num_steps, num_envs]`` rewards and done flags with no loop over steps, and
:class:`EpisodeTracker` carries the episodes still running from one rollout to
the next (checkpointable), so that no collector tracks episodes per step or
with a host synchronisation.
"""

from typing import Any, NamedTuple, final

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from typedrl._validation import describe
from typedrl.errors import CheckpointError

__all__ = ["EpisodeTracker", "EpochEpisodes", "epoch_episodes"]

_Steps = Float[Tensor, "num_steps num_envs"]
_Flags = Bool[Tensor, "num_steps num_envs"]


class EpochEpisodes(NamedTuple):
    """Returns and lengths of the episodes that ended during an epoch.

    ``returns``: at each step where a row's episode ended, the episode's
    undiscounted return (other entries are meaningless); ``lengths``: likewise,
    the episode's length in valid steps; ``ended``: where an episode ended on a
    valid step (the entries to record); ``return_so_far`` and ``length_so_far``:
    per row, the return and length of the episode still running at the end of
    the epoch, carried into the next one.
    """

    returns: Float[Tensor, "num_steps num_envs"]
    lengths: Int[Tensor, "num_steps num_envs"]
    ended: Bool[Tensor, "num_steps num_envs"]
    return_so_far: Float[Tensor, " num_envs"]
    length_so_far: Int[Tensor, " num_envs"]


def epoch_episodes(
    reward: _Steps,
    done: _Flags,
    valid: _Flags,
    return_so_far: Float[Tensor, " num_envs"],
    length_so_far: Int[Tensor, " num_envs"],
) -> EpochEpisodes:
    """Episode returns and lengths of an epoch, with no loop over steps.

    Equivalent to accumulating, step by step, ``return += reward`` and
    ``length += 1`` on valid steps, recording both where ``done & valid``, and
    zeroing them where ``done`` (ghost steps add nothing and are not recorded).
    Computed in float64 from running sums: an episode's return is the
    difference of the row's running total at its last step and at the end of
    the row's previous episode.

    Args:
        reward: The epoch's rewards.
        done: Where an episode ended (terminated or truncated).
        valid: ``False`` on ghost steps.
        return_so_far: Per row, the return of the episode running when the
            epoch began (float64).
        length_so_far: Per row, that episode's length so far (int64).
    """
    num_steps = reward.shape[0]
    if num_steps == 0:
        # No step, no episode ended: the running ones carry on unchanged.
        return EpochEpisodes(
            returns=torch.zeros_like(reward, dtype=torch.float64),
            lengths=torch.zeros_like(reward, dtype=torch.int64),
            ended=torch.zeros_like(done),
            return_so_far=return_so_far,
            length_so_far=length_so_far,
        )
    step_reward = torch.where(valid, reward.to(torch.float64), 0.0)
    # Running totals of each row since the start of its episode running at step 0.
    total_return = step_reward.cumsum(0) + return_so_far
    total_length = valid.to(torch.int64).cumsum(0) + length_so_far
    # Per step, the last step <= t at which the row's episode ended (-1: none yet).
    steps = torch.arange(num_steps, device=reward.device).unsqueeze(1)
    last_end = torch.where(done, steps, -1).cummax(0).values
    # The episode that ends at t began after the previous end, strictly before t.
    previous_end = torch.cat((torch.full_like(last_end[:1], -1), last_end[:-1]))
    returns = total_return - _total_at(total_return, previous_end)
    lengths = total_length - _total_at(total_length, previous_end)
    # The episode still running at the end carries what it gathered since the last end.
    final_end = last_end[-1:]
    return EpochEpisodes(
        returns=returns,
        lengths=lengths,
        ended=done & valid,
        return_so_far=(total_return[-1:] - _total_at(total_return, final_end))[0],
        length_so_far=(total_length[-1:] - _total_at(total_length, final_end))[0],
    )


def _total_at(totals: Tensor, end: Tensor) -> Tensor:
    """``totals[end[t, i], i]``, and 0 where ``end`` is -1 (no end before)."""
    gathered = totals.gather(0, end.clamp(min=0))
    return torch.where(end >= 0, gathered, torch.zeros_like(gathered))


@final
class EpisodeTracker:
    """The running episodes of every env row, carried across rollouts.

    Example:
        >>> import torch
        >>> tracker = EpisodeTracker(num_envs=2, device=torch.device("cpu"))
        >>> reward = torch.ones(3, 2)
        >>> done = torch.tensor([[False, True], [True, False], [False, False]])
        >>> episodes = tracker.update(reward, done, torch.ones(3, 2, dtype=torch.bool))
        >>> episodes.returns[episodes.ended].tolist(), tracker.return_so_far.tolist()
        ([1.0, 2.0], [1.0, 2.0])
    """

    def __init__(self, *, num_envs: int, device: torch.device) -> None:
        self.num_envs = num_envs
        self.return_so_far = torch.zeros(num_envs, dtype=torch.float64, device=device)
        self.length_so_far = torch.zeros(num_envs, dtype=torch.int64, device=device)

    def restart(self) -> None:
        """Every row starts a new episode (after an env reset)."""
        self.return_so_far.zero_()
        self.length_so_far.zero_()

    def update(
        self,
        reward: Float[Tensor, "num_steps num_envs"],
        done: Bool[Tensor, "num_steps num_envs"],
        valid: Bool[Tensor, "num_steps num_envs"],
    ) -> EpochEpisodes:
        """The episodes that ended in this rollout; the running ones carry on."""
        episodes = epoch_episodes(
            reward.detach(), done, valid, self.return_so_far, self.length_so_far
        )
        self.return_so_far = episodes.return_so_far
        self.length_so_far = episodes.length_so_far
        return episodes

    def state_dict(self) -> dict[str, Any]:
        """The running episodes' returns and lengths."""
        return {"episode_return": self.return_so_far, "episode_length": self.length_so_far}

    def load_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore :meth:`state_dict`.

        Raises:
            CheckpointError: A key is missing or holds a tensor of another shape
                (saved with another ``num_envs``); shapes are shown, never values.
        """
        rows = self.num_envs
        for key in ("episode_return", "episode_length"):
            value = state_dict.get(key)
            if not isinstance(value, Tensor) or tuple(value.shape) != (rows,):
                raise CheckpointError(
                    f"the episode state's {key!r} must be a tensor of shape [{rows}] (one "
                    f"entry per env row), got {describe(value)}; was it saved with another "
                    "num_envs?"
                )
        device = self.return_so_far.device
        self.return_so_far = state_dict["episode_return"].to(device, torch.float64)
        self.length_so_far = state_dict["episode_length"].to(device, torch.int64)
