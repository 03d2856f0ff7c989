"""Configuration of the analytic-policy-gradient algorithm: frozen, keyword-only, validated."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, final

from typedrl import _config_fields, _validation
from typedrl._config_fields import adam_betas, check, optional
from typedrl._validation import (
    half_open_unit_interval,
    non_negative_float,
    positive_float,
    unit_interval,
)

__all__ = ["APGConfig", "DecaySchedule", "NonFiniteUpdates", "OptimizerName"]

OptimizerName: TypeAlias = Literal["adam", "adamw", "sgd"]
"""The optimizers :class:`APGConfig` builds."""
DecaySchedule: TypeAlias = Literal["constant", "linear", "cosine"]
"""A learning rate kept, or decayed linearly or along half a cosine to a floor over the
run's planned updates (the actor's and SHAC's critic's)."""
NonFiniteUpdates: TypeAlias = Literal["skip", "raise"]
"""What a non-finite loss or gradient does to an update."""

_NON_NEGATIVE = check(non_negative_float)
_OPTIONAL_POSITIVE = check(optional(positive_float))


@final
@_validation.no_type_check
@dataclass(frozen=True, slots=True, kw_only=True)
class APGConfig:
    """Hyper-parameters of :class:`~typedrl.apg.APG`, the analytic policy gradient.

    The defaults follow plain-APG runs on the built-in tasks (PointMass, Reacher,
    Pendulum; 64 envs, 32-step segments, normalised observations): Adam at
    ``3e-3`` (faster than ``1e-3`` on all three; ``1e-2`` leaves Pendulum at
    about -825), a discount of 0.99 and global gradient-norm clipping at 1.0.

    Example:
        >>> APGConfig(learning_rate=3e-4, learning_rate_schedule="cosine").optimizer
        'adam'
        >>> APGConfig(gamma=1.5)
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: APGConfig.gamma must lie in [0, 1], got 1.5 (type float)
    """

    learning_rate: float = field(default=3e-3, metadata=check(positive_float))
    """The optimizer's learning rate (the initial one of a schedule)."""
    optimizer: OptimizerName = "adam"
    """``"adam"``, ``"adamw"`` (decoupled weight decay) or ``"sgd"``."""
    betas: tuple[float, float] = field(default=(0.9, 0.999), metadata=check(adam_betas))
    """Adam's moment decay rates, each in ``[0, 1)``."""
    adam_eps: float = field(default=1e-8, metadata=check(positive_float))
    """Adam's epsilon."""
    weight_decay: float = field(default=0.0, metadata=_NON_NEGATIVE)
    """Weight decay (L2 for adam and sgd, decoupled for adamw)."""
    momentum: float = field(default=0.0, metadata=check(half_open_unit_interval))
    """SGD momentum, in ``[0, 1)``."""
    learning_rate_schedule: DecaySchedule = "constant"
    """``"constant"``, or ``"linear"`` / ``"cosine"`` decay from :attr:`learning_rate` to
    :attr:`min_learning_rate` over the run's planned number of updates. Schedules step
    only on applied updates (a skipped update leaves the learning rate as it was)."""
    min_learning_rate: float = field(default=0.0, metadata=_NON_NEGATIVE)
    """Where linear and cosine schedules end."""
    gamma: float = field(default=0.99, metadata=check(unit_interval))
    """Discount of the objective."""
    entropy_coef: float = field(default=0.0, metadata=_NON_NEGATIVE)
    """Weight of the policy's entropy bonus in the loss."""
    max_grad_norm: float | None = field(default=1.0, metadata=_OPTIONAL_POSITIVE)
    """Clip the global gradient norm to this (``None``: no clipping)."""
    skip_grad_norm_above: float | None = field(default=None, metadata=_OPTIONAL_POSITIVE)
    """Skip an update whose pre-clip gradient norm exceeds this (``None``: never); an
    exploding backward through a chaotic simulator is better skipped than clipped."""
    nonfinite: NonFiniteUpdates = "skip"
    """What a non-finite loss or gradient does: skip the update (weights, optimizer
    state and learning rate untouched) or raise :class:`~typedrl.errors.NonFiniteError`."""

    def __post_init__(self) -> None:
        _config_fields.validate(self)
        _config_fields.at_most(self, "min_learning_rate", "learning_rate")

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON-like values (tuples become lists)."""
        return _config_fields.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "APGConfig":
        """Rebuild a config from :meth:`to_dict` output; unknown keys raise ConfigError."""
        return _config_fields.from_dict(cls, data)
