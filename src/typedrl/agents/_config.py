"""Configuration of the on-policy agents: frozen, keyword-only, validated on construction."""

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, final

from typedrl import _validation
from typedrl._validation import (
    describe,
    finite_float,
    non_negative_float,
    positive_float,
    positive_int,
    unit_interval,
)
from typedrl.errors import ConfigError

__all__ = ["PPOConfig"]

LearningRateSchedule = Literal["constant", "linear", "adaptive"]
NonFiniteGradients = Literal["skip", "raise"]


_MAX_SEED = 2**32 - 1


@final
@_validation.no_type_check
@dataclass(frozen=True, slots=True, kw_only=True)
class PPOConfig:
    """Hyper-parameters of :class:`~typedrl.agents.PPOAgent`.

    The defaults are Stable-Baselines3's PPO defaults (per rank). Every field
    is validated on construction; an invalid value raises
    :class:`~typedrl.errors.ConfigError` naming the field and showing the value.

    Example:
        >>> config = PPOConfig(num_steps=128, batch_size=256, learning_rate_schedule="linear")
        >>> config.minibatches_per_epoch(num_envs=8)
        40
        >>> PPOConfig(clip_range=0.0)
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: PPOConfig.clip_range must be > 0, got 0.0 (type float)
    """

    total_timesteps: int = 1_000_000
    """Training budget in env steps summed over all envs and ranks."""
    num_steps: int = 2048
    """Steps collected per env per epoch (the rollout length)."""
    num_mini_epochs: int = 10
    """Passes over each epoch's data."""
    batch_size: int = 64
    """Samples per minibatch, per rank."""
    learning_rate: float = 3e-4
    """Adam learning rate (the initial one for schedules)."""
    learning_rate_schedule: LearningRateSchedule = "constant"
    """``"constant"``; ``"linear"`` decay to 0 over ``total_timesteps``; or ``"adaptive"``
    (KL-driven, rsl_rl style: divide by 1.5 when the approximate KL exceeds
    ``2 * desired_kl``, multiply by 1.5 below ``desired_kl / 2``, within
    ``[min_learning_rate, max_learning_rate]``)."""
    desired_kl: float = 0.01
    """Target KL of the adaptive schedule."""
    min_learning_rate: float = 1e-5
    """Lower bound of the adaptive schedule."""
    max_learning_rate: float = 1e-2
    """Upper bound of the adaptive schedule."""
    target_kl: float | None = None
    """Stop an epoch's remaining minibatches once the approximate KL exceeds this
    (``None``: never)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clip_range: float = 0.2
    """PPO ratio clipping epsilon."""
    clip_value_loss: bool = False
    """Clip the value update around the old values with ``clip_range``."""
    value_loss_coef: float = 0.5
    """Weight of the value loss, half the mean squared error (Stable-Baselines3's ``vf_coef``
    weights the full mean squared error: its ``vf_coef=c`` is ``value_loss_coef=2 * c``)."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus."""
    max_grad_norm: float | None = 0.5
    """Global gradient-norm clipping (``None``: off)."""
    normalize_advantages: bool = True
    """Normalise advantages per minibatch."""
    normalize_observations: bool = False
    """Normalise observations with running statistics synchronised across ranks."""
    normalize_rewards: bool = False
    """Scale rewards by the running std of the discounted return (advantages are
    computed on the scaled rewards; reported returns stay unnormalised)."""
    observation_clip: float = 10.0
    """Clamp normalised observations to ``[-observation_clip, observation_clip]``."""
    reward_clip: float = 10.0
    """Clamp normalised rewards likewise."""
    nonfinite_gradients: NonFiniteGradients = "skip"
    """What to do when a minibatch's gradient is NaN/inf: skip that update or raise."""
    adam_eps: float = 1e-5
    """Adam epsilon."""
    actor_hidden: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the actor MLP."""
    critic_hidden: tuple[int, ...] = (64, 64)
    """Hidden layer widths of the critic MLP."""
    activation: Literal["tanh", "relu", "elu", "silu"] = "tanh"
    """Hidden activation of both MLPs."""
    log_std_init: float = 0.0
    """Initial log standard deviation of Gaussian policies."""
    orthogonal_init: bool = True
    """Orthogonal initialisation of both MLPs (gain ``sqrt(2)`` for hidden layers, 0.01
    for the actor's output layer, 1 for the critic's; zero biases), as most PPO
    implementations do. ``False`` keeps PyTorch's default initialisation of every
    layer, as Stable-Baselines3's ``ortho_init=False`` (rl-zoo3's MuJoCo settings)."""
    compile_update: bool | Literal["auto"] = "auto"
    """Run each minibatch update as one function compiled with :func:`torch.compile`:
    the loss, its gradients (:func:`torch.func.grad`), the gradient clipping and Adam's
    update on the optimizer's own state (so checkpoints stay interchangeable with eager
    runs). On a CPU, minibatch steps of small networks run about 2.7x faster ([64, 64]
    tanh, batches of 64) and PPO with large batches about 1.5x faster overall ([32, 32]
    ELU, batches of 16,384). A minibatch with a non-finite gradient norm is skipped
    inside the compiled function. Results match the eager update to floating-point
    rounding, not bit for bit.

    ``"auto"`` (the default) compiles where it pays and runs eagerly elsewhere, without
    a warning: a single process in Fabric's 32-true or 64-true precision, a C++ compiler
    where inductor looks for one, runtime shape checking (jaxtyping's import hook) off,
    and at least :data:`~typedrl.agents.AUTO_COMPILE_MIN_UPDATES` minibatch updates
    planned over ``total_timesteps`` (the first update compiles, for seconds).
    ``True`` compiles always and raises :class:`~typedrl.errors.ConfigError` with DDP or
    another precision; ``False`` never compiles. The seconds spent compiling appear in
    the fit result's metrics as ``time/compile_seconds``."""
    seed: int = 0
    """Seed of the run, in ``[0, 2**32 - 1]``: every random stream of every rank (env,
    evaluation env, initialisation, minibatch sampler) gets its own seed from it through
    :func:`typedrl.seeding.derive_seed`."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form JSON-like values stored with checkpoints (for your own bookkeeping)."""

    def __post_init__(self) -> None:
        self._validate_numbers()
        self._validate_choices()
        self._validate_structures()

    def _set(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)

    def _validate_numbers(self) -> None:
        for name in ("total_timesteps", "num_steps", "num_mini_epochs", "batch_size"):
            positive_int("PPOConfig", name, getattr(self, name))
        for name in (
            "learning_rate",
            "desired_kl",
            "min_learning_rate",
            "max_learning_rate",
            "clip_range",
            "adam_eps",
            "observation_clip",
            "reward_clip",
        ):
            self._set(name, positive_float("PPOConfig", name, getattr(self, name)))
        for name in ("value_loss_coef", "entropy_coef"):
            self._set(name, non_negative_float("PPOConfig", name, getattr(self, name)))
        self._set("log_std_init", finite_float("PPOConfig", "log_std_init", self.log_std_init))
        self._set("gamma", unit_interval("PPOConfig", "gamma", self.gamma))
        self._set("gae_lambda", unit_interval("PPOConfig", "gae_lambda", self.gae_lambda))
        for name in ("target_kl", "max_grad_norm"):
            if getattr(self, name) is not None:
                self._set(name, positive_float("PPOConfig", name, getattr(self, name)))
        if self.min_learning_rate > self.max_learning_rate:
            raise ConfigError(
                f"PPOConfig.min_learning_rate ({self.min_learning_rate}) must not exceed "
                f"max_learning_rate ({self.max_learning_rate})"
            )
        if (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, int)
            or not 0 <= self.seed <= _MAX_SEED
        ):
            # Env seeds must be non-negative, and derived torch seeds must stay in range.
            raise ConfigError(
                f"PPOConfig.seed must be an int in [0, {_MAX_SEED}], got {describe(self.seed)}"
            )

    def _validate_choices(self) -> None:
        choices: dict[str, tuple[object, ...]] = {
            "learning_rate_schedule": ("constant", "linear", "adaptive"),
            "nonfinite_gradients": ("skip", "raise"),
            "activation": ("tanh", "relu", "elu", "silu"),
            "compile_update": (True, False, "auto"),
        }
        for name in (
            "clip_value_loss",
            "normalize_advantages",
            "normalize_observations",
            "normalize_rewards",
            "orthogonal_init",
        ):
            choices[name] = (True, False)
        for name, valid in choices.items():
            value = getattr(self, name)
            if not any(value is v or (isinstance(v, str) and value == v) for v in valid):
                raise ConfigError(
                    f"PPOConfig.{name} must be one of {list(valid)}, got {describe(value)}"
                )

    def _validate_structures(self) -> None:
        for name in ("actor_hidden", "critic_hidden"):
            value = getattr(self, name)
            if isinstance(value, str) or not hasattr(value, "__iter__"):
                raise ConfigError(
                    f"PPOConfig.{name} must be a sequence of positive ints, got {describe(value)}"
                )
            widths = tuple(value)
            for width in widths:
                positive_int("PPOConfig", f"{name}[]", width)
            self._set(name, widths)
        if not isinstance(self.extra, dict):
            raise ConfigError(f"PPOConfig.extra must be a dict, got {describe(self.extra)}")
        # The checkpoint's own rule, checked now rather than when the first checkpoint
        # is written, after training.
        _validation.json_like("PPOConfig.extra", self.extra)

    def minibatches_per_epoch(self, *, num_envs: int) -> int:
        """``ceil(num_envs * num_steps * num_mini_epochs / batch_size)``, per rank."""
        positive_int("PPOConfig.minibatches_per_epoch", "num_envs", num_envs)
        samples = num_envs * self.num_steps * self.num_mini_epochs
        return -(-samples // self.batch_size)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain JSON-like values (tuples become lists), for checkpoints and logs."""
        data = asdict(self)
        for name in ("actor_hidden", "critic_hidden"):
            data[name] = list(data[name])
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PPOConfig":
        """Rebuild a config from :meth:`to_dict` output; unknown keys raise ConfigError."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"PPOConfig has no fields {unknown}; valid fields: {sorted(known)}")
        values = dict(data)
        for name in ("actor_hidden", "critic_hidden"):
            if name in values:
                values[name] = tuple(values[name])
        return cls(**values)
