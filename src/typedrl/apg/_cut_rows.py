"""Rows cut for an exploded observation: how they are found, blanked, and kept out of the gradient.

SHAC cuts a row whose observation turns non-finite or leaves
``[-observation_limit, observation_limit]``. An env rarely ends such a row
itself, so it keeps running on garbage until its time limit:
:class:`~typedrl.apg.DifferentiableCollector` then masks it (the policy sees
zeros, the steps are invalid, nothing of it reaches the loss or the gradient)
until the env resets it.
"""

from functools import partial
from typing import cast, final

import torch
from tensordict import TensorDict
from torch import Tensor

from typedrl._results import StepResult
from typedrl.types import Obs

__all__ = ["RolloutCuts", "RowGate", "exploded_rows", "zero_rows"]


def exploded_rows(observations: TensorDict, limit: float) -> Tensor:
    """Where any floating-point feature is non-finite or beyond ``limit`` in absolute value.

    Shaped as ``observations.batch_size`` (``[num_envs]`` or ``[num_steps, num_envs]``).

    Example:
        >>> obs = TensorDict({"obs": torch.tensor([[1.0], [float("nan")], [3e6]])}, [3])
        >>> exploded_rows(obs, 1e6).tolist()
        [False, True, True]
    """
    batch = observations.batch_size
    bad = torch.zeros(batch, dtype=torch.bool, device=observations.device)
    for leaf in observations.values(include_nested=True, leaves_only=True):
        if isinstance(leaf, Tensor) and leaf.is_floating_point():
            flat = leaf.detach().reshape(*batch, -1)
            bad |= ~(torch.isfinite(flat) & (flat.abs() <= limit)).all(dim=-1)
    return bad


def zero_rows(observations: TensorDict, rows: Tensor) -> TensorDict:
    """``observations`` with every floating-point feature of ``rows`` set to 0.

    ``rows`` is shaped as ``observations.batch_size``. Elsewhere the values keep
    their graph; the zeroed rows carry none and no gradient flows back through
    them, so a NaN there never reaches a forward or a backward pass.

    Example:
        >>> obs = TensorDict({"obs": torch.tensor([[1.0], [float("nan")]])}, [2])
        >>> zero_rows(obs, torch.tensor([False, True]))["obs"].tolist()
        [[1.0], [0.0]]
    """

    def zero(leaf: Tensor) -> Tensor:
        if not leaf.is_floating_point():
            return leaf
        mask = rows.reshape(*rows.shape, *([1] * (leaf.ndim - rows.ndim)))
        return torch.where(mask, torch.zeros_like(leaf), leaf)

    # apply returns None only when asked to work in place.
    return cast("TensorDict", observations.apply(zero))


@final
class RowGate:
    """Zeroes, in the backward pass, the action gradient of rows chosen after the forward.

    A row cut at step ``t`` of a rollout went non-finite inside the env: the
    backward pass through its later (masked) rewards multiplies zeros by NaN
    derivatives, and the NaN runs back along the row's graph into every
    earlier action of the rollout. :meth:`attach` wraps each step's action so
    that, once :meth:`close` has set :attr:`masks` (at the end of the
    rollout), the gradient of the rows masked at that step is replaced by
    zeros (a select, not a product, so NaN does not survive it) before it
    reaches the policy.

    Example:
        >>> gate = RowGate()
        >>> action = torch.ones(2, 1, requires_grad=True)
        >>> gated = gate.attach(action, 0)
        >>> gate.close(masked=torch.tensor([[False, False]]), cut=torch.tensor([[False, True]]))
        >>> (gated * torch.tensor([[2.0], [float("nan")]])).sum().backward()
        >>> action.grad.tolist()
        [[2.0], [0.0]]
    """

    def __init__(self) -> None:
        self.masks: Tensor | None = None
        """Rows whose gradient is zeroed, per step (``None``: none yet)."""

    def attach(self, action: Tensor, step: int) -> Tensor:
        """An alias of ``action`` whose gradient loses the rows ``masks[step]`` names."""
        gated = action.view_as(action)
        # torch leaves Tensor.register_hook unannotated.
        gated.register_hook(partial(self._hook, step))  # type: ignore[no-untyped-call]
        return gated

    def close(self, *, masked: Tensor, cut: Tensor) -> None:
        """Set :attr:`masks` from the rollout's masked rows and cuts (``[num_steps, num_envs]``).

        Step ``t`` of a row loses its gradient when the row is masked there or
        cut at ``t`` or later: a cut's NaN flows back along the row's graph to
        every earlier step of the rollout.
        """
        later = cut.to(torch.int64).flip(0).cumsum(0).flip(0) > 0
        self.masks = masked | later

    def _hook(self, step: int, grad: Tensor) -> Tensor | None:
        masks = self.masks
        if masks is None:
            return None
        rows = masks[step].reshape(-1, *([1] * (grad.ndim - 1)))
        return torch.where(rows, torch.zeros_like(grad), grad)


@final
class RolloutCuts:
    """The cut rows of one rollout, step by step, for the differentiable collector.

    Args:
        masked: Rows masked when the rollout starts (cut earlier, not yet reset).
        limit: The observation limit (SHAC's ``observation_limit``).
    """

    def __init__(self, masked: Tensor, *, limit: float) -> None:
        self.masked = masked
        """Rows masked at the current step."""
        self.limit = limit
        self.gate = RowGate()
        self._masked_steps: list[Tensor] = []
        self._cut_steps: list[Tensor] = []

    def observation(self, obs: Obs) -> Obs:
        """The observation the policy acts on: the masked rows zeroed."""
        return zero_rows(obs, self.masked)

    def action(self, action: Tensor, step: int) -> Tensor:
        """The action the env receives, gated for the backward pass (see :class:`RowGate`)."""
        return self.gate.attach(action, step) if action.requires_grad else action

    def step(self, result: StepResult, final_obs: Obs) -> tuple[Tensor, Tensor, Obs]:
        """The step's reward, validity and terminal observation as the rollout stores them.

        A row cut here (its ``final_obs`` exploded) keeps the step but not its
        reward; a masked row keeps nothing (reward and terminal observation
        zero, the step invalid). Rows cut here are masked from the next step
        on, until the env ends their episode.
        """
        masked = self.masked
        cut = exploded_rows(final_obs, self.limit) & ~masked
        reward = torch.where(cut | masked, torch.zeros_like(result.reward), result.reward)
        self._masked_steps.append(masked)
        self._cut_steps.append(cut)
        self.masked = (masked | cut) & ~(result.terminated | result.truncated)
        return reward, result.valid & ~masked, zero_rows(final_obs, masked)

    def close(self) -> Tensor:
        """Arm the gate with the rollout's masks; return the rows masked after its last step."""
        if self._cut_steps:
            self.gate.close(
                masked=torch.stack(self._masked_steps), cut=torch.stack(self._cut_steps)
            )
        return self.masked
