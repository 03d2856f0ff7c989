"""Configuration of the analytic-policy-gradient algorithm: frozen, keyword-only, validated."""

from dataclasses import asdict, dataclass
from typing import Any, Literal, final

from typedrl import _validation
from typedrl._validation import (
    describe,
    finite_float,
    non_negative_float,
    positive_float,
    unit_interval,
)
from typedrl.errors import ConfigError

__all__ = ["APGConfig", "LearningRateSchedule", "NonFiniteUpdates", "OptimizerName"]

OptimizerName = Literal["adam", "adamw", "sgd"]
LearningRateSchedule = Literal["constant", "linear", "cosine"]
NonFiniteUpdates = Literal["skip", "raise"]


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

    learning_rate: float = 3e-3
    """The optimizer's learning rate (the initial one of a schedule)."""
    optimizer: OptimizerName = "adam"
    """``"adam"``, ``"adamw"`` (decoupled weight decay) or ``"sgd"``."""
    betas: tuple[float, float] = (0.9, 0.999)
    """Adam's moment decay rates, each in ``[0, 1)``."""
    adam_eps: float = 1e-8
    """Adam's epsilon."""
    weight_decay: float = 0.0
    """Weight decay (L2 for adam and sgd, decoupled for adamw)."""
    momentum: float = 0.0
    """SGD momentum, in ``[0, 1)``."""
    learning_rate_schedule: LearningRateSchedule = "constant"
    """``"constant"``, or ``"linear"`` / ``"cosine"`` decay from :attr:`learning_rate` to
    :attr:`min_learning_rate` over the run's planned number of updates. Schedules step
    only on applied updates (a skipped update leaves the learning rate as it was)."""
    min_learning_rate: float = 0.0
    """Where linear and cosine schedules end."""
    gamma: float = 0.99
    """Discount of the objective."""
    entropy_coef: float = 0.0
    """Weight of the policy's entropy bonus in the loss."""
    max_grad_norm: float | None = 1.0
    """Clip the global gradient norm to this (``None``: no clipping)."""
    skip_grad_norm_above: float | None = None
    """Skip an update whose pre-clip gradient norm exceeds this (``None``: never); an
    exploding backward through a chaotic simulator is better skipped than clipped."""
    nonfinite: NonFiniteUpdates = "skip"
    """What a non-finite loss or gradient does: skip the update (weights, optimizer
    state and learning rate untouched) or raise :class:`~typedrl.errors.NonFiniteError`."""

    def __post_init__(self) -> None:
        owner = "APGConfig"
        object.__setattr__(
            self, "learning_rate", positive_float(owner, "learning_rate", self.learning_rate)
        )
        object.__setattr__(self, "adam_eps", positive_float(owner, "adam_eps", self.adam_eps))
        for name in ("weight_decay", "min_learning_rate", "entropy_coef"):
            object.__setattr__(self, name, non_negative_float(owner, name, getattr(self, name)))
        object.__setattr__(self, "gamma", unit_interval(owner, "gamma", self.gamma))
        momentum = unit_interval(owner, "momentum", self.momentum)
        if momentum >= 1.0:
            raise ConfigError(f"{owner}.momentum must be < 1, got {describe(self.momentum)}")
        object.__setattr__(self, "momentum", momentum)
        betas: object = self.betas
        if isinstance(betas, str) or not isinstance(betas, tuple | list) or len(betas) != 2:
            raise ConfigError(f"{owner}.betas must be a pair of floats, got {describe(betas)}")
        pair = tuple(finite_float(owner, "betas[]", beta) for beta in betas)
        if not all(0.0 <= beta < 1.0 for beta in pair):
            raise ConfigError(f"{owner}.betas must lie in [0, 1), got {describe(betas)}")
        object.__setattr__(self, "betas", pair)
        for name in ("max_grad_norm", "skip_grad_norm_above"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, positive_float(owner, name, value))
        if self.min_learning_rate > self.learning_rate:
            raise ConfigError(
                f"{owner}.min_learning_rate ({self.min_learning_rate}) must not exceed "
                f"learning_rate ({self.learning_rate})"
            )
        choices: dict[str, tuple[str, ...]] = {
            "optimizer": ("adam", "adamw", "sgd"),
            "learning_rate_schedule": ("constant", "linear", "cosine"),
            "nonfinite": ("skip", "raise"),
        }
        for name, valid in choices.items():
            value = getattr(self, name)
            if not isinstance(value, str) or value not in valid:
                raise ConfigError(
                    f"{owner}.{name} must be one of {list(valid)}, got {describe(value)}"
                )

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON-like values (tuples become lists)."""
        data = asdict(self)
        data["betas"] = list(self.betas)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "APGConfig":
        """Rebuild a config from :meth:`to_dict` output; unknown keys raise ConfigError."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"APGConfig has no fields {unknown}; valid fields: {sorted(known)}")
        values = dict(data)
        if "betas" in values:
            values["betas"] = tuple(values["betas"])
        return cls(**values)
