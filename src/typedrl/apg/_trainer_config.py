"""Configuration of the differentiable trainer: rollouts, budget, policy and algorithm."""

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, final

from typedrl import _validation
from typedrl._validation import describe, json_like, positive_float, positive_int
from typedrl.apg._config import APGConfig
from typedrl.apg._shac_config import SHACConfig
from typedrl.errors import ConfigError
from typedrl.policies import Activation

__all__ = ["DifferentiableTrainerConfig", "RolloutMode"]

RolloutMode = Literal["segmented", "complete"]

_MAX_SEED = 2**32 - 1
_BOOLS = (
    "normalize_observations",
    "random_initial_clocks",
    "measure_adjoint",
    "clip_actions",
    "layer_norm",
    "squash_actions",
    "learn_log_std",
)


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

    total_timesteps: int | None = None
    """Budget in env steps over all rows and ranks (or set :attr:`total_updates`)."""
    total_updates: int | None = None
    """Budget in optimizer updates (or set :attr:`total_timesteps`)."""
    rollout_mode: RolloutMode = "segmented"
    """``"segmented"``: truncated backpropagation through time over a running env;
    ``"complete"``: every microbatch resets the env and rolls out a full horizon."""
    segment_length: int = 32
    """Steps between two graph cuts (``env.detach_state()``) in segmented mode."""
    update_horizon: int | None = None
    """Steps of one update: a multiple of :attr:`segment_length` in segmented mode
    (default: one segment); the horizon of each complete rollout in complete mode
    (default: :attr:`segment_length`; a scheduled env chooses its own)."""
    gradient_accumulation_steps: int = 1
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
    adjoint_max_norm: float | None = None
    """Clip each row's gradient with respect to its action to this norm (``None``: only
    measure it), a guard against exploding gradients through the simulator."""
    hidden: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the policy MLP."""
    activation: Activation = "elu"
    """Hidden activation of the policy MLP."""
    layer_norm: bool = False
    """LayerNorm after each hidden layer of the policy."""
    squash_actions: bool = True
    """Squash actions into the action space's bounds with tanh (gradients never blocked)."""
    log_std_init: float = -1.0
    """Initial log standard deviation of the Gaussian policy."""
    learn_log_std: bool = True
    """Learn the log standard deviation (else it stays at :attr:`log_std_init`)."""
    observation_clip: float = 10.0
    """Clamp normalised observations to ``[-observation_clip, observation_clip]``."""
    algorithm: APGConfig | SHACConfig = field(default_factory=APGConfig)
    """The algorithm: :class:`~typedrl.apg.APGConfig` for plain analytic policy gradients,
    :class:`~typedrl.apg.SHACConfig` for the short-horizon actor-critic (segmented only,
    one window of ``segment_length`` steps per update)."""
    seed: int = 0
    """Seed of the run, in ``[0, 2**32 - 1]`` (every stream derives its seed from it)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form JSON-like values stored with checkpoints."""

    def __post_init__(self) -> None:
        owner = "DifferentiableTrainerConfig"
        budgets = [
            name for name in ("total_timesteps", "total_updates") if getattr(self, name) is not None
        ]
        if len(budgets) != 1:
            raise ConfigError(
                f"{owner} needs exactly one budget, total_timesteps or total_updates, got "
                f"{'both' if budgets else 'neither'}"
            )
        positive_int(owner, budgets[0], getattr(self, budgets[0]))
        if self.rollout_mode not in ("segmented", "complete"):
            raise ConfigError(
                f"{owner}.rollout_mode must be one of ['segmented', 'complete'], got "
                f"{describe(self.rollout_mode)}"
            )
        positive_int(owner, "segment_length", self.segment_length)
        positive_int(owner, "gradient_accumulation_steps", self.gradient_accumulation_steps)
        if self.update_horizon is not None:
            positive_int(owner, "update_horizon", self.update_horizon)
            if self.rollout_mode == "segmented" and self.update_horizon % self.segment_length:
                raise ConfigError(
                    f"{owner}.update_horizon ({self.update_horizon}) must be a multiple of "
                    f"segment_length ({self.segment_length})"
                )
        if self.rollout_mode == "segmented" and self.gradient_accumulation_steps != 1:
            raise ConfigError(
                f"{owner}.gradient_accumulation_steps ({self.gradient_accumulation_steps}) "
                "applies to rollout_mode='complete' only; a segmented update spans "
                "update_horizon steps instead"
            )
        self._validate_policy()
        if not isinstance(self.algorithm, APGConfig | SHACConfig):
            raise ConfigError(
                f"{owner}.algorithm must be an APGConfig or a SHACConfig, got "
                f"{describe(self.algorithm)}"
            )
        if isinstance(self.algorithm, SHACConfig) and (
            self.rollout_mode != "segmented" or self.horizon != self.segment_length
        ):
            raise ConfigError(
                f"{owner}: SHAC learns from one window of segment_length steps per update; "
                f"set rollout_mode='segmented' and leave update_horizon unset (got "
                f"rollout_mode={self.rollout_mode!r}, update_horizon={self.update_horizon!r})"
            )
        seed: object = self.seed
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= _MAX_SEED:
            raise ConfigError(
                f"{owner}.seed must be an int in [0, {_MAX_SEED}], got {describe(seed)}"
            )
        if not isinstance(self.extra, dict):
            raise ConfigError(f"{owner}.extra must be a dict, got {describe(self.extra)}")
        json_like(f"{owner}.extra", self.extra)

    def _validate_policy(self) -> None:
        owner = "DifferentiableTrainerConfig"
        for name in _BOOLS:
            if getattr(self, name) is not True and getattr(self, name) is not False:
                raise ConfigError(
                    f"{owner}.{name} must be a bool, got {describe(getattr(self, name))}"
                )
        if self.adjoint_max_norm is not None:
            object.__setattr__(
                self,
                "adjoint_max_norm",
                positive_float(owner, "adjoint_max_norm", self.adjoint_max_norm),
            )
        object.__setattr__(
            self,
            "observation_clip",
            positive_float(owner, "observation_clip", self.observation_clip),
        )
        object.__setattr__(
            self, "log_std_init", _validation.finite_float(owner, "log_std_init", self.log_std_init)
        )
        hidden: object = self.hidden
        if isinstance(hidden, str) or not isinstance(hidden, tuple | list):
            raise ConfigError(
                f"{owner}.hidden must be a sequence of positive ints, got {describe(hidden)}"
            )
        object.__setattr__(
            self, "hidden", tuple(positive_int(owner, "hidden[]", w) for w in hidden)
        )
        if self.activation not in ("tanh", "relu", "elu", "silu"):
            raise ConfigError(
                f"{owner}.activation must be one of ['tanh', 'relu', 'elu', 'silu'], got "
                f"{describe(self.activation)}"
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
        data = asdict(self)
        data["hidden"] = list(self.hidden)
        data["algorithm"] = self.algorithm.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DifferentiableTrainerConfig":
        """Rebuild a config from :meth:`to_dict` output; unknown keys raise ConfigError."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(
                f"DifferentiableTrainerConfig has no fields {unknown}; valid fields: "
                f"{sorted(known)}"
            )
        values = dict(data)
        if "hidden" in values:
            values["hidden"] = tuple(values["hidden"])
        algorithm = values.get("algorithm")
        if isinstance(algorithm, dict):
            # A SHAC config is one with a field APG does not have (its actor, a critic_*).
            shac_only = set(SHACConfig.__dataclass_fields__) - set(APGConfig.__dataclass_fields__)
            values["algorithm"] = (
                SHACConfig.from_dict(algorithm)
                if shac_only & set(algorithm)
                else APGConfig.from_dict(algorithm)
            )
        return cls(**values)
