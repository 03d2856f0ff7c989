"""The graph-preserving rollout a differentiable collector returns, and its alive mask."""

from dataclasses import dataclass
from typing import final

import torch
from jaxtyping import Shaped
from tensordict import TensorDict
from torch import Tensor

from typedrl.apg._adjoint import ActionAdjointClipper
from typedrl.episodes import EpochEpisodes
from typedrl.types import Obs, RolloutFlag, RolloutScalar

__all__ = ["DifferentiableRollout", "first_done_mask"]


def first_done_mask(done: RolloutFlag) -> RolloutFlag:
    """Where each row is in its first episode of the rollout: until and including its first done.

    ``alive[t, i]`` is ``True`` when no step before ``t`` ended row ``i``'s
    episode; the step of the first done itself is alive (its reward is the
    episode's last), every later step is not. Pure and loop-free.

    Args:
        done: ``terminated | truncated`` per step and row.

    Example:
        >>> import torch
        >>> done = torch.tensor([[False, True], [True, False], [False, False]])
        >>> first_done_mask(done).tolist()
        [[True, True], [True, False], [False, False]]
    """
    ended = done.to(torch.int64)
    # Dones strictly before step t: the inclusive running count minus step t's own.
    return ended.cumsum(dim=0) - ended == 0


@final
@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class DifferentiableRollout:
    """The graph-preserving rollout :meth:`~typedrl.apg.DifferentiableCollector.collect` returns.

    Time-major: every per-step field is ``[num_steps, num_envs, ...]``. The
    actions, rewards, entropies and observations keep their autograd graph
    back to the policy's parameters (and, until the env's
    :meth:`~typedrl.protocols.DifferentiableVecEnv.detach_state`, to earlier
    rollouts), so an objective built from them is differentiated by one
    ``backward``. Rows that end are reset inside the env's step: a step's
    reward belongs to the episode that ended, and the next step's reward to
    the new one; :attr:`alive_mask` masks everything after a row's first done
    for complete-rollout objectives.

    The package's collector builds it; its fields' shapes are annotated (and
    checked wherever jaxtyping's runtime checks are on, as in the test suites).
    An empty rollout (``num_steps == 0``) is shaped ``[0, num_envs, ...]``
    throughout.
    """

    initial_observation: Obs
    """The observation the first step acted on (``[num_envs]``)."""
    observations: TensorDict
    """The raw observation each step acted on (``[num_steps, num_envs]``; graph kept)."""
    actions: Shaped[Tensor, "num_steps num_envs *action_shape"]
    """The actions the env received, after any clipping to the bounds (graph kept)."""
    rewards: RolloutScalar
    """The env's rewards (graph kept)."""
    entropies: RolloutScalar
    """The policy's ``"entropy"`` output per step (graph kept), zeros if it has none."""
    terminated: RolloutFlag
    """Rows whose episode reached a terminal state at the step."""
    truncated: RolloutFlag
    """Rows whose episode was cut short (time limit) at the step."""
    valid: RolloutFlag
    """``False`` on ghost transitions, which must never count (always ``True`` for the
    built-in envs)."""
    alive_mask: RolloutFlag
    """``True`` until and including each row's first done of the rollout
    (:func:`first_done_mask` of ``terminated | truncated``)."""
    terminal_observations: TensorDict
    """Each step's ``final_obs`` (``[num_steps, num_envs]``; graph kept): the terminal
    observation where a row ended, the next observation elsewhere."""
    final_observation: Obs
    """The observation after the last step (``[num_envs]``), where the next rollout continues."""
    episodes: EpochEpisodes
    """Returns and lengths of the episodes that ended during the rollout (from the
    detached rewards)."""
    adjoint: ActionAdjointClipper | None
    """The clipper attached to this rollout's actions, ``None`` when neither clipping nor
    measuring; read its statistics after the backward pass."""
    contact_norms: RolloutScalar | None = None
    """Each step's contact-force norm per row
    (:meth:`~typedrl.protocols.SupportsContactForces.contact_force_norm`, detached), when
    the collector records them; else ``None``."""

    def detach(self) -> "DifferentiableRollout":
        """The same rollout cut from its graph (what an update keeps after its backward)."""
        return DifferentiableRollout(
            initial_observation=self.initial_observation.detach(),
            observations=self.observations.detach(),
            actions=self.actions.detach(),
            rewards=self.rewards.detach(),
            entropies=self.entropies.detach(),
            terminated=self.terminated,
            truncated=self.truncated,
            valid=self.valid,
            alive_mask=self.alive_mask,
            terminal_observations=self.terminal_observations.detach(),
            final_observation=self.final_observation.detach(),
            episodes=self.episodes,
            adjoint=None,
            contact_norms=self.contact_norms,
        )

    @property
    def num_steps(self) -> int:
        """Steps in the rollout (0 for an empty one)."""
        return int(self.rewards.shape[0])

    @property
    def num_envs(self) -> int:
        """Rows of the env."""
        return int(self.rewards.shape[1])
