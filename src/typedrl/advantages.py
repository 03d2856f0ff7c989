"""Generalised advantage estimation (GAE) over a ``[num_steps, num_envs]`` rollout.

Conventions (time-major, as in :class:`~typedrl.buffers.ExperienceBuffer`):

- ``values[t]`` is ``V(s_t)``, the value of the observation step ``t`` acted on.
- ``next_values[t]`` is ``V`` of the observation step ``t`` reached *before*
  any autoreset: ``V(s_{t+1})`` for rows that did not end, ``V(final_obs_t)``
  for truncated rows (exact truncation bootstrapping). For terminated rows it
  is ignored: the bootstrap is zeroed whatever its value.
- A done step (``terminated | truncated``) ends its episode: the next row of
  the rollout belongs to a new episode, so the recursion is cut there.
- A ghost step (``valid == False``) gets advantage 0 and return 0 and also
  cuts the recursion. A ghost step always follows a done in the same row, so
  this never changes the advantage of a valid step.

Masks are applied with :func:`torch.where`, never by multiplication, so a
non-finite value at a terminated bootstrap or a ghost step cannot leak into
valid results. Everything is vectorised over envs with a loop over time only
and no host synchronisation.

Shape checks: the tensor arguments and results carry jaxtyping annotations
(:data:`~typedrl.types.RolloutScalar`, :data:`~typedrl.types.RolloutFlag`,
:data:`~typedrl.types.EnvScalar`, :data:`~typedrl.types.Done`). Where
jaxtyping's runtime checks are on (the test suites, or a debugging session
with ``jaxtyping.install_import_hook("typedrl", "beartype.beartype")``), a
wrong shape or dtype class raises :class:`jaxtyping.TypeCheckError` before the
function runs; nothing else re-checks them.
"""

import torch

from typedrl._validation import unit_interval
from typedrl.errors import ConfigError
from typedrl.types import EnvScalar, RolloutFlag, RolloutScalar

__all__ = ["compute_gae", "discount_weights"]


def compute_gae(
    *,
    rewards: RolloutScalar,
    values: RolloutScalar,
    next_values: RolloutScalar,
    terminated: RolloutFlag,
    truncated: RolloutFlag,
    valid: RolloutFlag,
    gamma: float,
    gae_lambda: float,
    dtype: torch.dtype | None = None,
) -> tuple[RolloutScalar, RolloutScalar]:
    """Generalised advantage estimates and value targets for a time-major rollout.

    With ``done_t = terminated_t or truncated_t``::

        delta_t = r_t + gamma * next_values_t * (1 - terminated_t) - values_t
        A_t     = delta_t + gamma * lambda * (1 - done_t) * valid_{t+1} * A_{t+1}
        A_t     = 0 and return_t = 0 where valid_t is False
        return_t = A_t + values_t where valid_t is True

    with ``A_{num_steps} = 0`` (the rollout's last step bootstraps through
    ``next_values`` alone). See the module docstring for the meaning of
    ``next_values`` on truncated and terminated rows.

    Args:
        rewards: ``r_t``, float ``[num_steps, num_envs]`` (unnormalised).
        values: ``V(s_t)``, float, same shape.
        next_values: ``V`` of the observation each step reached before any
            reset, float, same shape.
        terminated: ``torch.bool``, same shape: no bootstrap.
        truncated: ``torch.bool``, same shape: bootstrap from ``next_values``.
        valid: ``torch.bool``, same shape; ``False`` marks ghost steps.
        gamma: Discount factor in ``[0, 1]``.
        gae_lambda: GAE ``lambda`` in ``[0, 1]`` (0: one-step TD, 1: Monte Carlo
            with bootstrap).
        dtype: Floating dtype of the computation and of the results; by
            default the promoted dtype of ``rewards``, ``values`` and
            ``next_values``. Pass ``torch.float64`` to accumulate long horizons
            in double precision.

    Returns:
        ``(advantages, returns)``, each ``[num_steps, num_envs]`` in ``dtype``.

    Raises:
        ConfigError: If ``gamma`` or ``gae_lambda`` is outside ``[0, 1]`` or
            ``dtype`` is not a floating dtype.

    Example:
        >>> import torch
        >>> never = torch.zeros(3, 1, dtype=torch.bool)
        >>> advantages, returns = compute_gae(
        ...     rewards=torch.ones(3, 1),
        ...     values=torch.zeros(3, 1),
        ...     next_values=torch.tensor([[0.0], [10.0], [0.0]]),  # V(final_obs) = 10 at t=1
        ...     terminated=never,
        ...     truncated=torch.tensor([[False], [True], [False]]),
        ...     valid=~never,
        ...     gamma=0.5,
        ...     gae_lambda=1.0,
        ... )
        >>> advantages.flatten().tolist()  # the truncation at t=1 cuts the recursion
        [4.0, 6.0, 1.0]
    """
    # The common case inline (a call costs about what the check does); anything else, an
    # int or a value out of range, goes to the validator, which converts or raises.
    if type(gamma) is not float or not 0.0 <= gamma <= 1.0:
        gamma = unit_interval("compute_gae", "gamma", gamma)
    if type(gae_lambda) is not float or not 0.0 <= gae_lambda <= 1.0:
        gae_lambda = unit_interval("compute_gae", "gae_lambda", gae_lambda)
    if dtype is None:
        dtype = torch.promote_types(
            torch.promote_types(rewards.dtype, values.dtype), next_values.dtype
        )
    elif not dtype.is_floating_point:
        # An integer dtype would round every advantage without a word.
        raise ConfigError(f"compute_gae.dtype must be a floating dtype, got {dtype}")

    rewards = rewards.to(dtype)
    values = values.to(dtype)
    next_values = next_values.to(dtype)
    zero = torch.zeros((), dtype=dtype, device=rewards.device)

    # Bootstrap: V(s_{t+1}) (or V(final_obs_t) when truncated); 0 when terminated.
    bootstrap = torch.where(terminated, zero, next_values)
    # TD error: delta_t = r_t + gamma * V(s_{t+1}) * (1 - terminated_t) - V(s_t)
    deltas = rewards + gamma * bootstrap - values
    # Carry factor: gamma * lambda * (1 - done_t); a done cuts the recursion.
    carry = torch.where(terminated | truncated, zero, gamma * gae_lambda)

    advantages = torch.empty_like(deltas)
    # A_{num_steps} = 0: beyond the rollout nothing is carried back.
    next_advantage = torch.zeros_like(deltas[0])
    for t in reversed(range(deltas.shape[0])):
        # GAE recursion: A_t = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}
        advantage = deltas[t] + carry[t] * next_advantage
        # Ghost step: A_t = 0, which also cuts the recursion for step t - 1.
        advantage = torch.where(valid[t], advantage, zero)
        advantages[t] = advantage
        next_advantage = advantage

    # Value target: return_t = A_t + V(s_t) on valid steps, 0 on ghost steps.
    returns = torch.where(valid, advantages + values, zero)
    return advantages, returns


def discount_weights(
    discount: EnvScalar, done: RolloutFlag, gamma: float
) -> tuple[RolloutScalar, EnvScalar]:
    """The per-step discounts of a segment whose discount restarts after every done.

    ``d_0 = discount``, ``d_{t+1} = 1`` where step ``t`` ended the row's episode,
    else ``gamma * d_t``: the weights of a segmented analytic-gradient objective
    ``sum_t d_t r_t`` (APG's and SHAC's).

    Args:
        discount: The discount of the segment's first step, float ``[num_envs]``.
        done: ``terminated | truncated``, ``torch.bool`` ``[num_steps, num_envs]``
            with at least one step.
        gamma: The discount factor.

    Returns:
        ``(weights, next_discount)``: ``d_t`` as ``[num_steps, num_envs]``, and
        ``d_T`` where the next segment continues.

    Example:
        >>> import torch
        >>> done = torch.tensor([[False], [True], [False]])
        >>> weights, following = discount_weights(torch.ones(1), done, 0.5)
        >>> weights.flatten().tolist(), following.tolist()
        ([1.0, 0.5, 1.0], [0.5])
    """
    weights = []
    current = discount
    for step in range(done.shape[0]):
        weights.append(current)
        # d_{t+1} = 1 after a done, else gamma * d_t
        current = torch.where(done[step], torch.ones_like(current), gamma * current)
    return torch.stack(weights), current
