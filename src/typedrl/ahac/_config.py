"""Configuration of AHAC, the adaptive-horizon actor-critic: frozen, keyword-only, validated."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, final

from typedrl import _config_fields, _validation
from typedrl._config_fields import adam_betas, check, optional, sequence_of
from typedrl._validation import (
    non_negative_float,
    positive_float,
    positive_int,
    unit_interval,
)
from typedrl.apg._config import APGConfig, DecaySchedule
from typedrl.errors import ConfigError
from typedrl.policies import Activation

__all__ = ["AHACConfig"]


def _default_actor() -> APGConfig:
    # Georgiev et al. (2024), the authors' ahac.yaml: actor learning rate 2e-3, Adam betas
    # (0.7, 0.95), linear decay, gradient norm 1.0, gamma 0.99.
    return APGConfig(
        learning_rate=2e-3,
        betas=(0.7, 0.95),
        learning_rate_schedule="linear",
        max_grad_norm=1.0,
        gamma=0.99,
    )


@final
@_validation.no_type_check
@dataclass(frozen=True, slots=True, kw_only=True)
class AHACConfig:
    """Hyper-parameters of :class:`~typedrl.ahac.AHAC`.

    The defaults follow the authors' configuration (Georgiev et al., "Adaptive
    Horizon Actor-Critic for Policy Learning in Contact-Rich Differentiable
    Simulation", ICML 2024; ``cfg/alg/ahac.yaml`` of their DiffRL fork): horizon
    between 8 and 64 steps, starting at 8, contact threshold 500, dual step
    5e-4; actor and critic learning rates 2e-3 with Adam betas (0.7, 0.95) and
    linear decay; actor gradient norm 1.0; gamma 0.99; TD(lambda) with lambda
    0.95; a double critic ([64, 64] ELU with LayerNorm) fitted in 4 minibatches
    per pass until its loss stops moving (at most 64 passes). They differ from
    it where :class:`~typedrl.shac.SHACConfig`'s do (no policy LayerNorm unless
    the trainer's ``layer_norm``, LayerNorm before the activation, schedules that
    end at 0, typedrl's initialisation), and:

    - the double critic's two networks start from different weights (the
      reference builds both from the same layers, so its two critics are one);
    - its critic's gradient norm is clipped to 1.0 (the reference: no clipping).

    ``docs/guides/ahac.rst`` lists every difference and the reasons.

    Example:
        >>> config = AHACConfig()
        >>> config.horizon_min, config.horizon_max, config.contact_threshold
        (8, 64, 500.0)
        >>> AHACConfig(horizon_min=32, horizon_max=16)
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: AHACConfig.horizon_min (32) must be less than \
horizon_max (16)
    """

    actor: APGConfig = field(default_factory=_default_actor)
    """The policy's optimisation (optimizer, schedule, discount, clipping, non-finite rule)."""
    horizon_min: int = field(default=8, metadata=check(positive_int))
    """The shortest window, in steps, and the first window's length (the reference's
    ``steps_min``)."""
    horizon_max: int = field(default=64, metadata=check(positive_int))
    """The longest window, in steps (the reference's ``steps_max``)."""
    contact_threshold: float = field(default=500.0, metadata=check(positive_float))
    """``C``: the mean contact-force norm per step that the horizon's dual ascent aims at;
    windows grow while the contacts stay softer and shrink when they are stiffer."""
    horizon_learning_rate: float = field(default=5e-4, metadata=check(positive_float))
    """``alpha``, the dual ascent's step (the reference's ``lambd_lr``)."""
    horizon_learning_rate_schedule: DecaySchedule = "linear"
    """How ``alpha`` decays over the planned updates (the reference: linear when its
    learning rates are)."""
    horizon_min_learning_rate: float = field(default=0.0, metadata=check(non_negative_float))
    """Where ``alpha``'s linear and cosine schedules end; at most
    :attr:`horizon_learning_rate` (the reference's: ``1e-5``)."""
    critic_learning_rate: float = field(default=2e-3, metadata=check(positive_float))
    """The critic's Adam learning rate (the initial one of its schedule)."""
    critic_betas: tuple[float, float] = field(default=(0.7, 0.95), metadata=check(adam_betas))
    """The critic's Adam betas."""
    critic_learning_rate_schedule: DecaySchedule = "linear"
    """``"constant"``, ``"linear"`` or ``"cosine"``, over the run's planned updates."""
    critic_min_learning_rate: float = field(default=0.0, metadata=check(non_negative_float))
    """Where the critic's linear and cosine schedules end; at most
    :attr:`critic_learning_rate`."""
    critic_max_grad_norm: float | None = field(
        default=1.0, metadata=check(optional(positive_float))
    )
    """Clip the critic's gradient norm (``None``: no clipping, as the reference)."""
    critic_hidden: tuple[int, ...] = field(
        default=(64, 64),
        metadata=check(sequence_of(positive_int, expected="a sequence of positive ints")),
    )
    """Hidden layer widths of each of the two critic MLPs."""
    critic_activation: Activation = "elu"
    """Hidden activation of the critic MLPs."""
    critic_layer_norm: bool = True
    """LayerNorm after each hidden layer of the critics."""
    critic_iterations: int = field(default=64, metadata=check(positive_int))
    """The most passes over each window's data when the critic is fitted."""
    critic_minibatches: int = field(default=4, metadata=check(positive_int))
    """Shuffled minibatches per pass."""
    critic_stop_tolerance: float | None = field(
        default=0.2, metadata=check(optional(positive_float))
    )
    """Stop the critic's fit once the mean change of its loss over the last
    :attr:`critic_stop_passes` passes is below this in absolute value (``None``: always
    run :attr:`critic_iterations` passes)."""
    critic_stop_passes: int = field(default=5, metadata=check(positive_int))
    """How many passes' losses the stop rule compares (at least 2 to measure a change)."""
    gae_lambda: float = field(default=0.95, metadata=check(unit_interval))
    """Lambda of the TD(lambda) value targets."""
    normalize_returns: bool = False
    """Train the critics on TD targets standardised by their running mean and standard
    deviation (``(target - mean) / std``); their values are mapped back before use."""
    observation_limit: float = field(default=1e6, metadata=check(positive_float))
    """A row whose observation turns non-finite or exceeds this in absolute value is cut
    like a termination (no reward after it, no bootstrap) and counted in ``train/cut_rows``."""

    def __post_init__(self) -> None:
        _config_fields.validate(self)
        _config_fields.at_most(self, "critic_min_learning_rate", "critic_learning_rate")
        _config_fields.at_most(self, "horizon_min_learning_rate", "horizon_learning_rate")
        if self.horizon_min >= self.horizon_max:
            raise ConfigError(
                f"AHACConfig.horizon_min ({self.horizon_min}) must be less than horizon_max "
                f"({self.horizon_max})"
            )
        if self.critic_stop_passes < 2:
            raise ConfigError(
                "AHACConfig.critic_stop_passes must be at least 2 (a change needs two losses), "
                f"got {self.critic_stop_passes}"
            )

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON-like values (the actor a dict, tuples lists)."""
        return _config_fields.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "AHACConfig":
        """Rebuild a config from :meth:`to_dict` output; unknown keys raise ConfigError.

        Actor fields the dict leaves out keep AHAC's actor defaults, not APG's.
        """
        return _config_fields.from_dict(cls, data)
