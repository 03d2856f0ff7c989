"""Configuration of PPO: frozen, keyword-only, validated on construction."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, final

from typedrl import _config_fields, _validation
from typedrl._config_fields import check, optional, policy, sequence_of
from typedrl._validation import (
    describe,
    finite_float,
    json_object,
    non_negative_float,
    positive_float,
    positive_int,
    seed_int,
    unit_interval,
)
from typedrl.errors import ConfigError

__all__ = ["LEGACY_COMPILE_FIELD", "PPOConfig", "PPOLearningRateSchedule", "upgrade_fields"]

PPOLearningRateSchedule: TypeAlias = Literal["constant", "linear", "adaptive"]
"""How PPO's learning rate moves: kept, decayed linearly to 0, or driven by the KL."""
NonFiniteGradients: TypeAlias = Literal["skip", "raise"]

_POSITIVE = check(positive_float)
_WIDTHS = policy(check(sequence_of(positive_int, expected="a sequence of positive ints")))


@final
@_validation.no_type_check
@dataclass(frozen=True, slots=True, kw_only=True)
class PPOConfig:
    """Hyper-parameters of :class:`~typedrl.ppo.PPOAgent`.

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

    total_timesteps: int = field(default=1_000_000, metadata=check(positive_int))
    """Training budget in env steps summed over all envs and ranks."""
    num_steps: int = field(default=2048, metadata=check(positive_int))
    """Steps collected per env per epoch (the rollout length)."""
    num_mini_epochs: int = field(default=10, metadata=check(positive_int))
    """Passes over each epoch's data."""
    batch_size: int = field(default=64, metadata=check(positive_int))
    """Samples per minibatch, per rank."""
    learning_rate: float = field(default=3e-4, metadata=_POSITIVE)
    """Adam learning rate (the initial one for schedules)."""
    learning_rate_schedule: PPOLearningRateSchedule = "constant"
    """``"constant"``; ``"linear"`` decay to 0 over ``total_timesteps``; or ``"adaptive"``
    (KL-driven, rsl_rl style: divide by 1.5 when the approximate KL exceeds
    ``2 * desired_kl``, multiply by 1.5 below ``desired_kl / 2``, within
    ``[min_learning_rate, max_learning_rate]``)."""
    desired_kl: float = field(default=0.01, metadata=_POSITIVE)
    """Target KL of the adaptive schedule."""
    min_learning_rate: float = field(default=1e-5, metadata=_POSITIVE)
    """Lower bound of the adaptive schedule."""
    max_learning_rate: float = field(default=1e-2, metadata=_POSITIVE)
    """Upper bound of the adaptive schedule."""
    target_kl: float | None = field(default=None, metadata=check(optional(positive_float)))
    """Stop an epoch's remaining minibatches once the approximate KL exceeds this
    (``None``: never)."""
    gamma: float = field(default=0.99, metadata=check(unit_interval))
    """Discount factor."""
    gae_lambda: float = field(default=0.95, metadata=check(unit_interval))
    """GAE lambda."""
    clip_range: float = field(default=0.2, metadata=_POSITIVE)
    """PPO ratio clipping epsilon."""
    clip_value_loss: bool = False
    """Clip the value update around the old values with ``clip_range``."""
    value_loss_coef: float = field(default=0.5, metadata=check(non_negative_float))
    """Weight of the value loss, half the mean squared error (Stable-Baselines3's ``vf_coef``
    weights the full mean squared error: its ``vf_coef=c`` is ``value_loss_coef=2 * c``)."""
    entropy_coef: float = field(default=0.0, metadata=check(non_negative_float))
    """Weight of the entropy bonus."""
    max_grad_norm: float | None = field(default=0.5, metadata=check(optional(positive_float)))
    """Global gradient-norm clipping (``None``: off)."""
    normalize_advantages: bool = True
    """Normalise advantages per minibatch."""
    normalize_observations: bool = False
    """Normalise observations with running statistics synchronised across ranks."""
    normalize_rewards: bool = False
    """Scale rewards by the running std of the discounted return (advantages are
    computed on the scaled rewards; reported returns stay unnormalised)."""
    observation_clip: float = field(default=10.0, metadata=_POSITIVE)
    """Clamp normalised observations to ``[-observation_clip, observation_clip]``."""
    reward_clip: float = field(default=10.0, metadata=_POSITIVE)
    """Clamp normalised rewards likewise."""
    nonfinite_gradients: NonFiniteGradients = "skip"
    """What to do when a minibatch's gradient is NaN/inf: skip that update or raise."""
    adam_eps: float = field(default=1e-5, metadata=_POSITIVE)
    """Adam epsilon."""
    actor_hidden: tuple[int, ...] = field(default=(64, 64), metadata=_WIDTHS)
    """Hidden layer widths of the actor MLP (after the recurrent core where ``core`` is
    one)."""
    critic_hidden: tuple[int, ...] = field(default=(64, 64), metadata=_WIDTHS)
    """Hidden layer widths of the critic MLP (after the recurrent core where ``core`` is
    one)."""
    activation: Literal["tanh", "relu", "elu", "silu"] = field(default="tanh", metadata=policy())
    """Hidden activation of both MLPs."""
    core: Literal["mlp", "gru", "lstm"] = field(default="mlp", metadata=policy())
    """The policy's core: ``"mlp"`` feeds the encoded observation to the actor and critic
    MLPs (:class:`~typedrl.policies.MLPActorCritic`); ``"gru"`` and ``"lstm"`` put a
    recurrent core between them, whose output feeds both heads and whose state the
    rollout carries (:class:`~typedrl.policies.RecurrentActorCritic`, for partially
    observed envs; ``batch_size`` must then be a multiple of ``num_steps``: PPO trains on
    whole env rollouts)."""
    core_hidden_size: int = field(default=64, metadata=policy(check(positive_int)))
    """Width of the recurrent core's state (``core`` ``"gru"`` or ``"lstm"``)."""
    core_layers: int = field(default=1, metadata=policy(check(positive_int)))
    """Stacked layers of the recurrent core (``core`` ``"gru"`` or ``"lstm"``)."""
    encoder: Literal["auto", "nature", "small", "flatten"] = field(
        default="auto", metadata=policy()
    )
    """How image observations (``uint8`` ``Box`` keys of shape HxWxC or CxHxW, at most 4
    channels, sides of 7 or more: :func:`~typedrl.policies.image_layout`) are encoded
    before the MLPs: ``"auto"`` gives images of sides 36 or more the Nature CNN and smaller
    ones (MiniGrid's 7x7) a CNN of 2x2 convolutions; ``"nature"`` and ``"small"`` force
    one; ``"flatten"`` reads the bytes as plain features. Each CNN scales the bytes by
    1/255 and is shared by the actor and the critic
    (:class:`~typedrl.policies.MLPActorCritic`). Other observations are not affected."""
    image_features: int | None = field(default=None, metadata=policy(check(optional(positive_int))))
    """Width of each image encoder's output (``None``: 512 for the Nature CNN, 128 for the
    small one)."""
    log_std_init: float = field(default=0.0, metadata=policy(check(finite_float)))
    """Initial log standard deviation of Gaussian policies."""
    orthogonal_init: bool = field(default=True, metadata=policy())
    """Orthogonal initialisation of both MLPs (gain ``sqrt(2)`` for hidden layers, 0.01
    for the actor's output layer, 1 for the critic's; zero biases), as most PPO
    implementations do. ``False`` keeps PyTorch's default initialisation of every
    layer, as Stable-Baselines3's ``ortho_init=False`` (rl-zoo3's MuJoCo settings)."""
    compile: bool = False
    """Compile each minibatch's loss with :func:`torch.compile`, and with it the
    loss's backward pass (LeanRL's recipe); the gradient clipping and the fused Adam
    step run as in the eager update. The first minibatch compiles (seconds; torch keeps
    what it compiled in its own caches, under ``TORCHINDUCTOR_CACHE_DIR``, for later
    runs). The weights differ from an eager run's by floating-point rounding; the same
    config and seed give the same weights whatever the caches hold. Single-process only:
    with several ranks :class:`~typedrl.errors.ConfigError` is raised."""
    seed: int = field(default=0, metadata=check(seed_int))
    """Seed of the run, in ``[0, 2**32 - 1]``: every random stream of every rank (env,
    evaluation env, initialisation, minibatch sampler) gets its own seed from it through
    :func:`typedrl.seeding.derive_seed`."""
    extra: dict[str, Any] = field(default_factory=dict, metadata=check(json_object))
    """Free-form JSON-like values stored with checkpoints (for your own bookkeeping)."""

    def __post_init__(self) -> None:
        _config_fields.validate(self)
        _config_fields.at_most(self, "min_learning_rate", "max_learning_rate")
        if self.core != "mlp":
            error = recurrent_plan_error(self, "PPOConfig", f"core {self.core!r}")
            if error is not None:
                raise error

    def minibatches_per_epoch(self, *, num_envs: int) -> int:
        """``ceil(num_envs * num_steps * num_mini_epochs / batch_size)``, per rank."""
        positive_int("PPOConfig.minibatches_per_epoch", "num_envs", num_envs)
        samples = num_envs * self.num_steps * self.num_mini_epochs
        return -(-samples // self.batch_size)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain JSON-like values (tuples become lists), for checkpoints and logs."""
        return _config_fields.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PPOConfig":
        """Rebuild a config from :meth:`to_dict` output; unknown keys raise ConfigError.

        A saved config of an older release may hold ``compile_update``; it is read as
        :attr:`compile` (``upgrade_fields``).
        """
        return _config_fields.from_dict(cls, upgrade_fields(data))


def recurrent_plan_error(config: PPOConfig, owner: str, subject: str) -> ConfigError | None:
    """Why ``subject`` (a recurrent policy) cannot train with ``config``; ``None`` if it can.

    ``owner`` starts the message (who refuses).

    Its minibatches are whole env columns (``batch_size`` a multiple of
    ``num_steps``), and its update is not compiled.
    """
    if config.batch_size % config.num_steps:
        return ConfigError(
            f"{owner}: {subject} trains on whole env rollouts, so batch_size must be a multiple of "
            f"num_steps ({config.num_steps}), got {config.batch_size}; e.g. "
            f"batch_size={max(1, config.batch_size // config.num_steps) * config.num_steps}"
        )
    if config.compile:
        return ConfigError(
            f"{owner}: compile does not apply to {subject} (its sequence minibatches re-run "
            "the core step by step); drop compile"
        )
    return None


LEGACY_COMPILE_FIELD = "compile_update"
"""The field :attr:`PPOConfig.compile` replaced, which older run folders and checkpoints hold."""


def upgrade_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with the fields of older releases in today's spelling.

    ``compile_update: true`` becomes ``compile: true``; ``false`` and ``"auto"``
    (which ran eagerly or compiled depending on the machine) become ``compile:
    false``. A ``compile`` given beside it wins.

    Example:
        >>> upgrade_fields({"compile_update": "auto", "gamma": 0.9})
        {'gamma': 0.9, 'compile': False}

    Raises:
        ConfigError: ``compile_update`` is not ``true``, ``false`` or ``"auto"``.
    """
    values = dict(data)
    if LEGACY_COMPILE_FIELD not in values:
        return values
    legacy = values.pop(LEGACY_COMPILE_FIELD)
    if not isinstance(legacy, bool) and legacy != "auto":
        raise ConfigError(
            f"PPOConfig.{LEGACY_COMPILE_FIELD} (now compile) must be true, false or 'auto', "
            f"got {describe(legacy)}"
        )
    values.setdefault("compile", legacy is True)
    return values
