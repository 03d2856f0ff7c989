"""Shape-annotated tensor aliases: the one axis vocabulary of typedrl.

Import these aliases to annotate your own code with the shapes typedrl uses
(``from typedrl.types import Reward``). Axis names used throughout the package:

``num_envs``
    Rows of a vector environment (one row per sub-environment).
``num_steps``
    Time steps of a rollout.
``obs_dim``
    Width of a flat observation vector.
``act_dim``
    Width of a flat continuous action vector.
``batch``
    Any flattened batch (for example ``num_envs * num_steps`` samples).

One-dimensional shapes start with a space (``" num_envs"``) so that jaxtyping
reads them as an axis name rather than a forward reference.

The axes are checked at run time only where jaxtyping's checks are switched
on: in typedrl's test suites (``pytest --jaxtyping-packages=typedrl,beartype.beartype``)
or in a debugging session of yours that calls
``jaxtyping.install_import_hook("typedrl", "beartype.beartype")`` before
importing typedrl. Without the hook the aliases are plain annotations and cost
nothing.

Observations are :class:`tensordict.TensorDict` objects with
``batch_size == [num_envs]``; jaxtyping cannot describe their leaves, so the
functions that take them validate them explicitly.

Example:
    >>> import torch
    >>> from typedrl.types import Reward
    >>> def scaled(reward: Reward, scale: float) -> Reward:
    ...     return reward * scale
    >>> scaled(torch.ones(3), 0.5).tolist()
    [0.5, 0.5, 0.5]
    >>> isinstance(torch.ones(3), Reward), isinstance(torch.ones(3, 1), Reward)
    (True, False)
"""

from typing import TypeAlias

from jaxtyping import Bool, Float, Int, Int64, Shaped
from tensordict import TensorDict
from torch import Tensor

__all__ = [
    "Action",
    "BatchAction",
    "BatchIndices",
    "BatchScalar",
    "ContinuousAction",
    "DiscreteAction",
    "Done",
    "EnvScalar",
    "ObjectiveScale",
    "Obs",
    "ObsMask",
    "ObsVector",
    "Reward",
    "RolloutFlag",
    "RolloutScalar",
    "Valid",
]

Obs: TypeAlias = TensorDict
"""Observation of a vector env: a TensorDict with ``batch_size == [num_envs]``."""

ObsVector: TypeAlias = Float[Tensor, "num_envs obs_dim"]
"""A flat floating-point observation, one row per env."""

ObsMask: TypeAlias = Bool[Tensor, " obs_dim"]
"""Per-feature flag, for example which observation features to normalise."""

# The shape strings below read as products to ruff, hence the F821 waivers.
Action: TypeAlias = Shaped[Tensor, "num_envs *action_shape"]  # noqa: F821
"""An action batch of any dtype: one row per env, then the action space's shape."""

ContinuousAction: TypeAlias = Float[Tensor, "num_envs act_dim"]
"""A batch of flat continuous actions."""

DiscreteAction: TypeAlias = Int[Tensor, " num_envs"]
"""A batch of discrete (integer-coded) actions."""

BatchAction: TypeAlias = Shaped[Tensor, "batch *action_shape"]  # noqa: F821
"""Actions of a flattened batch of samples."""

Reward: TypeAlias = Float[Tensor, " num_envs"]
"""Per-env reward of one step."""

Done: TypeAlias = Bool[Tensor, " num_envs"]
"""Per-env flag: ``terminated`` or ``truncated`` of one step."""

Valid: TypeAlias = Bool[Tensor, " num_envs"]
"""Per-env flag: ``False`` marks a ghost transition that must never train anything."""

EnvScalar: TypeAlias = Float[Tensor, " num_envs"]
"""Any per-env floating-point scalar (values, returns, log-probabilities)."""

BatchScalar: TypeAlias = Float[Tensor, " batch"]
"""Any per-sample floating-point scalar of a flattened batch."""

BatchIndices: TypeAlias = Int64[Tensor, " batch"]
"""Sample indices (``int64``) of one minibatch into a flattened batch."""

RolloutScalar: TypeAlias = Float[Tensor, "num_steps num_envs"]
"""A floating-point scalar per step and env of a time-major rollout (rewards, values)."""

RolloutFlag: TypeAlias = Bool[Tensor, "num_steps num_envs"]
"""A flag per step and env of a time-major rollout (``terminated``, ``truncated``, ``valid``)."""

ObjectiveScale: TypeAlias = Float[Tensor, " num_envs"]
"""Per-env weight of a differentiable rollout's objective."""
