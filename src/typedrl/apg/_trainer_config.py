"""Configuration of the differentiable trainer: rollouts, budget, policy and algorithm."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, final

from typedrl import _config_fields, _validation
from typedrl._config_fields import check, optional, policy, sequence_of
from typedrl._validation import finite_float, json_object, positive_float, positive_int, seed_int
from typedrl.ahac._config import AHACConfig
from typedrl.apg._config import APGConfig
from typedrl.errors import ConfigError
from typedrl.policies import Activation
from typedrl.shac._config import SHACConfig

__all__ = ["DifferentiableTrainerConfig", "RolloutMode"]

RolloutMode: TypeAlias = Literal["segmented", "complete"]
"""Truncated segments of a running env, or complete rollouts from a reset."""

_POSITIVE_INT = check(positive_int)
_OPTIONAL_POSITIVE_INT = check(optional(positive_int))


@final
@_validation.no_type_check
@dataclass(frozen=True, slots=True, kw_only=True)
class DifferentiableTrainerConfig:
    """Hyper-parameters of :class:`~typedrl.apg.DifferentiableTrainer`.

    Exactly one budget is set: :attr:`total_timesteps` or :attr:`total_updates`.
    Every invalid combination raises :class:`~typedrl.errors.ConfigError`
    naming the fields.

    Example:
        >>> config = DifferentiableTrainerConfig(total_updates=100, segment_length=16)
        >>> config.steps_per_update
        16
        >>> DifferentiableTrainerConfig(total_updates=10, segment_length=16, update_horizon=24)
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: DifferentiableTrainerConfig.update_horizon (24) must be a \
multiple of segment_length (16)
    """

    total_timesteps: int | None = field(default=None, metadata=_OPTIONAL_POSITIVE_INT)
    """Budget in env steps over all rows and ranks (or set :attr:`total_updates`)."""
    total_updates: int | None = field(default=None, metadata=_OPTIONAL_POSITIVE_INT)
    """Budget in optimizer updates (or set :attr:`total_timesteps`)."""
    rollout_mode: RolloutMode = "segmented"
    """``"segmented"``: truncated backpropagation through time over a running env;
    ``"complete"``: every microbatch resets the env and rolls out a full horizon."""
    segment_length: int = field(default=32, metadata=_POSITIVE_INT)
    """Steps between two graph cuts (``env.detach_state()``) in segmented mode."""
    update_horizon: int | None = field(default=None, metadata=_OPTIONAL_POSITIVE_INT)
    """Steps of one update: a multiple of :attr:`segment_length` in segmented mode
    (default: one segment); the horizon of each complete rollout in complete mode
    (default: :attr:`segment_length`; a scheduled env chooses its own)."""
    gradient_accumulation_steps: int = field(default=1, metadata=_POSITIVE_INT)
    """Complete rollouts per update (complete mode only)."""
    normalize_observations: bool = True
    """Normalise observations with running statistics (frozen within an update, updated
    after each applied update from alive rows, synchronised across ranks), leaving the
    features the env's ``observation_normalize_mask`` marks False untouched."""
    random_initial_clocks: bool = False
    """Start every row's episode clock at a random step at each reset (the built-in envs'
    reset option ``random_elapsed_steps``), so that the time-outs of all rows do not fall
    on the same step of a segmented run."""
    measure_adjoint: bool = True
    """Measure the gradient flowing back into each action (``adjoint/*`` metrics); about 7%
    of an update on Reacher, so turn it off for speed when ``adjoint_max_norm`` is unset."""
    clip_actions: bool = False
    """Clamp actions to the action space's bounds before the env (clamped coordinates get
    no gradient; the squashing policy keeps actions in bounds without it)."""
    adjoint_max_norm: float | None = field(default=None, metadata=check(optional(positive_float)))
    """Clip each row's gradient with respect to its action to this norm (``None``: only
    measure it), a guard against exploding gradients through the simulator."""
    hidden: tuple[int, ...] = field(
        default=(64, 64),
        metadata=policy(check(sequence_of(positive_int, expected="a sequence of positive ints"))),
    )
    """Hidden layer widths of the policy MLP."""
    activation: Activation = field(default="elu", metadata=policy())
    """Hidden activation of the policy MLP."""
    layer_norm: bool = field(default=False, metadata=policy())
    """LayerNorm after each hidden layer of the policy."""
    squash_actions: bool = field(default=True, metadata=policy())
    """Squash actions into the action space's bounds with tanh (gradients never blocked)."""
    log_std_init: float = field(default=-1.0, metadata=policy(check(finite_float)))
    """Initial log standard deviation of the Gaussian policy."""
    learn_log_std: bool = field(default=True, metadata=policy())
    """Learn the log standard deviation (else it stays at :attr:`log_std_init`)."""
    observation_clip: float = field(default=10.0, metadata=check(positive_float))
    """Clamp normalised observations to ``[-observation_clip, observation_clip]``."""
    algorithm: APGConfig | SHACConfig | AHACConfig = field(default_factory=APGConfig)
    """The algorithm: :class:`~typedrl.apg.APGConfig` for plain analytic policy gradients,
    :class:`~typedrl.shac.SHACConfig` for the short-horizon actor-critic (segmented only,
    one window of ``segment_length`` steps per update), :class:`~typedrl.ahac.AHACConfig`
    for the adaptive-horizon actor-critic (segmented only; its windows are as long as its
    horizon, and ``segment_length`` is not used)."""
    seed: int = field(default=0, metadata=check(seed_int))
    """Seed of the run, in ``[0, 2**32 - 1]`` (every stream derives its seed from it)."""
    extra: dict[str, Any] = field(default_factory=dict, metadata=check(json_object))
    """Free-form JSON-like values stored with checkpoints."""

    def __post_init__(self) -> None:
        owner = "DifferentiableTrainerConfig"
        _config_fields.validate(self)
        budgets = [self.total_timesteps, self.total_updates]
        if budgets.count(None) != 1:
            raise ConfigError(
                f"{owner} needs exactly one budget, total_timesteps or total_updates, got "
                f"{'neither' if budgets.count(None) == 2 else 'both'}"
            )
        segmented = self.rollout_mode == "segmented"
        horizon = self.update_horizon
        if segmented and horizon is not None and horizon % self.segment_length:
            raise ConfigError(
                f"{owner}.update_horizon ({self.update_horizon}) must be a multiple of "
                f"segment_length ({self.segment_length})"
            )
        if segmented and self.gradient_accumulation_steps != 1:
            raise ConfigError(
                f"{owner}.gradient_accumulation_steps ({self.gradient_accumulation_steps}) "
                "applies to rollout_mode='complete' only; a segmented update spans "
                "update_horizon steps instead"
            )
        if isinstance(self.algorithm, AHACConfig) and (
            not segmented or self.update_horizon is not None
        ):
            raise ConfigError(
                f"{owner}: AHAC learns from one window of its adaptive horizon per update; "
                f"set rollout_mode='segmented' and leave update_horizon unset (got "
                f"rollout_mode={self.rollout_mode!r}, update_horizon={self.update_horizon!r})"
            )
        if isinstance(self.algorithm, SHACConfig) and (
            not segmented or self.horizon != self.segment_length
        ):
            raise ConfigError(
                f"{owner}: SHAC learns from one window of segment_length steps per update; "
                f"set rollout_mode='segmented' and leave update_horizon unset (got "
                f"rollout_mode={self.rollout_mode!r}, update_horizon={self.update_horizon!r})"
            )

    @property
    def horizon(self) -> int:
        """Steps of one segmented update, or of one complete rollout of an unscheduled env."""
        return self.update_horizon if self.update_horizon is not None else self.segment_length

    @property
    def steps_per_update(self) -> int:
        """Env steps per row in one update (of an unscheduled env)."""
        if self.rollout_mode == "segmented":
            return self.horizon
        return self.horizon * self.gradient_accumulation_steps

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON-like values (tuples become lists, the algorithm a dict)."""
        return _config_fields.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "DifferentiableTrainerConfig":
        """Rebuild a config from :meth:`to_dict` output; unknown keys raise ConfigError.

        An ``algorithm`` dict is the config among :class:`~typedrl.apg.APGConfig`,
        :class:`~typedrl.shac.SHACConfig` and :class:`~typedrl.ahac.AHACConfig` whose fields
        it names most (the first on a tie).
        """
        return _config_fields.from_dict(cls, data)
