"""Frozen, validated value types exchanged through the contracts.

They are re-exported from :mod:`typedrl.protocols` and :mod:`typedrl`. Both
collector families (the on-policy one in :mod:`typedrl.ppo` and the
differentiable one in :mod:`typedrl.apg`) step envs through :func:`step_env`,
so an exception raised inside an env reads the same whichever trainer hit it.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, final, runtime_checkable

import torch
from tensordict import TensorDict
from torch import Tensor

from typedrl import _config_fields, _validation
from typedrl._config_fields import check
from typedrl._validation import (
    describe,
    finite_float,
    float_mapping,
    non_negative_float,
    positive_int,
)
from typedrl.errors import ConfigError, EnvContractError, EnvError, NonFiniteError, SpecError
from typedrl.types import Action, Done, ObjectiveScale, Obs, Reward, Valid

__all__ = ["DifferentiableRolloutSpec", "EvaluationResult", "StepResult", "step_env"]

_StepTuple = tuple[Obs, Reward, Done, Done, dict[str, Any]]


@final
@_validation.no_type_check
class StepResult(_StepTuple):
    """What :meth:`VecEnv.step <typedrl.protocols.VecEnv.step>` returns.

    It unpacks like Gymnasium's 5-tuple ``(obs, reward, terminated, truncated,
    info)`` and carries two typed extras as attributes:

    - ``final_obs``: the observation each row reached with this step, *before*
      any autoreset, as a TensorDict shaped like ``obs``. Rows that ended hold
      their terminal observation; other rows hold the same values as ``obs``.
      ``None`` when the env cannot provide terminal observations (its
      ``provides_final_obs`` is ``False``).
    - ``valid``: ``False`` on rows whose transition is a ghost (a reset taken
      inside ``step`` by a next-step-autoreset env) that must never be trained on.

    Construction checks shapes, dtypes and devices against ``obs`` (metadata
    only, no host synchronisation) and raises :class:`~typedrl.errors.SpecError`.

    Example:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> obs = TensorDict({"obs": torch.zeros(2, 3)}, batch_size=[2])
        >>> done = torch.zeros(2, dtype=torch.bool)
        >>> result = StepResult(obs, torch.ones(2), done, done, {})
        >>> next_obs, reward, terminated, truncated, info = result
        >>> reward.tolist(), result.valid.tolist(), result.final_obs is None
        ([1.0, 1.0], [True, True], True)
    """

    _final_obs: Obs | None
    _valid: Valid

    def __new__(
        cls,
        obs: Obs,
        reward: Reward,
        terminated: Done,
        truncated: Done,
        info: dict[str, Any],
        *,
        final_obs: Obs | None = None,
        valid: Valid | None = None,
    ) -> "StepResult":
        self = super().__new__(cls, (obs, reward, terminated, truncated, info))
        if not isinstance(obs, TensorDict) or obs.batch_dims != 1:
            raise SpecError(
                "StepResult.obs must be a TensorDict with batch_size [num_envs], "
                f"got {describe(obs)}"
            )
        num_envs = obs.batch_size[0]
        # A TensorDict built without a device reports None: the reward then sets it.
        _check_row_tensor("reward", reward, num_envs, obs.device, floating=True)
        device = reward.device
        _check_row_tensor("terminated", terminated, num_envs, device, floating=False)
        _check_row_tensor("truncated", truncated, num_envs, device, floating=False)
        if valid is None:
            valid = torch.ones(num_envs, dtype=torch.bool, device=device)
        else:
            _check_row_tensor("valid", valid, num_envs, device, floating=False)
        if final_obs is not None and (
            not isinstance(final_obs, TensorDict) or final_obs.batch_size != obs.batch_size
        ):
            raise SpecError(
                f"StepResult.final_obs must be a TensorDict with batch_size "
                f"{list(obs.batch_size)}, got {describe(final_obs)}"
            )
        object.__setattr__(self, "_final_obs", final_obs)
        object.__setattr__(self, "_valid", valid)
        return self

    @classmethod
    def from_trusted(
        cls,
        obs: Obs,
        reward: Reward,
        terminated: Done,
        truncated: Done,
        info: dict[str, Any],
        *,
        final_obs: Obs | None,
        valid: Valid,
    ) -> "StepResult":
        """Build a result without validation, for producers correct by construction.

        Adapters and built-in envs whose outputs have the right shapes, dtypes
        and devices by construction use this on their hot path; nothing is
        checked. Everything else should call the validating constructor.
        """
        self = tuple.__new__(cls, (obs, reward, terminated, truncated, info))
        # Writing the instance dict directly bypasses __setattr__ as
        # object.__setattr__ would, in one step instead of two calls.
        attributes = self.__dict__
        attributes["_final_obs"] = final_obs
        attributes["_valid"] = valid
        return self

    @property
    def final_obs(self) -> Obs | None:
        """Observation each row reached before any autoreset; ``None`` if unavailable."""
        return self._final_obs

    @property
    def valid(self) -> Valid:
        """``False`` on ghost rows that must never be trained on.

        Read-only: envs may return one shared all-``True`` tensor on every
        step, so copy it before changing it in place.
        """
        return self._valid

    @property
    def obs(self) -> Obs:
        """Observation after the step (after autoreset for rows that ended)."""
        return self[0]

    @property
    def reward(self) -> Reward:
        """Reward of the step, float ``[num_envs]``."""
        return self[1]

    @property
    def terminated(self) -> Done:
        """Rows whose episode reached a terminal state (no bootstrapping)."""
        return self[2]

    @property
    def truncated(self) -> Done:
        """Rows whose episode was cut short (time limit): bootstrap from ``final_obs``."""
        return self[3]

    @property
    def info(self) -> dict[str, Any]:
        """Free-form per-step information, as in Gymnasium."""
        return self[4]

    @property
    def done(self) -> Done:
        """``terminated | truncated``: the rows that were reset by this step."""
        return self[2] | self[3]

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"StepResult is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"StepResult is immutable; cannot delete {name!r}")

    def __repr__(self) -> str:
        return (
            f"StepResult(num_envs={self.reward.shape[0]}, obs_keys={sorted(self.obs.keys())}, "
            f"final_obs={'yes' if self.final_obs is not None else 'no'})"
        )


def _check_row_tensor(
    name: str, value: object, num_envs: int, device: torch.device | None, *, floating: bool
) -> None:
    if not isinstance(value, Tensor):
        raise SpecError(f"StepResult.{name} must be a torch.Tensor, got {describe(value)}")
    if value.shape != (num_envs,):
        raise SpecError(
            f"StepResult.{name} must have shape [{num_envs}] (num_envs), got {list(value.shape)}"
        )
    if floating and not value.is_floating_point():
        raise SpecError(f"StepResult.{name} must be a floating-point tensor, got {value.dtype}")
    if not floating and value.dtype != torch.bool:
        raise SpecError(f"StepResult.{name} must be a torch.bool tensor, got {value.dtype}")
    if device is not None and value.device != device:
        raise SpecError(
            f"StepResult.{name} is on {value.device}, but the step's tensors are on {device}"
        )


def _objective_scale(owner: str, name: str, value: object) -> float | Tensor:
    """A finite float >= 0, or a detached, finite, non-negative float tensor ``[num_envs]``."""
    if not isinstance(value, Tensor):
        return non_negative_float(owner, name, value)
    if not value.is_floating_point() or value.ndim != 1 or value.numel() == 0:
        raise ConfigError(
            f"{owner}.{name} tensor must be a non-empty float tensor of shape [num_envs], "
            f"got dtype {value.dtype} and shape {list(value.shape)}"
        )
    if value.requires_grad:
        raise ConfigError(
            f"{owner}.{name} must be detached (requires_grad=False); call .detach() first"
        )
    # Checked once per rollout, not per step: the host sync is acceptable here.
    if not bool(torch.isfinite(value).all()) or bool((value < 0).any()):
        raise ConfigError(f"{owner}.{name} must be finite and >= 0, got {value.tolist()}")
    return value


@final
@_validation.no_type_check
@dataclass(frozen=True, slots=True, kw_only=True)
class DifferentiableRolloutSpec:
    """The plan a scheduled differentiable env returns for one complete rollout.

    Example:
        >>> spec = DifferentiableRolloutSpec(num_steps=200, metadata={"difficulty": 0.5})
        >>> spec.num_steps, spec.objective_scale, dict(spec.metadata)
        (200, 1.0, {'difficulty': 0.5})
        >>> DifferentiableRolloutSpec(num_steps=0)
        Traceback (most recent call last):
        ...
        typedrl.errors.ConfigError: DifferentiableRolloutSpec.num_steps must be a positive int,
        got 0 (type int)
    """

    num_steps: int = field(metadata=check(positive_int))
    """Full horizon of the rollout, in env steps (a positive ``int``, not a ``bool``)."""

    objective_scale: float | ObjectiveScale = field(default=1.0, metadata=check(_objective_scale))
    """Weight of the rollout's objective: a finite float >= 0, or a detached,
    finite, non-negative float tensor ``[num_envs]``."""

    metadata: Mapping[str, float] = field(default_factory=dict, metadata=check(float_mapping))
    """Scalars describing the rollout (difficulty, curriculum stage), for logging.
    Stored as a read-only copy."""

    def __post_init__(self) -> None:
        _config_fields.validate(self)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationResult:
    """What an :class:`~typedrl.protocols.Evaluator` returns.

    Example:
        >>> result = EvaluationResult(
        ...     metrics={"return_mean": 480.0, "length_mean": 480.0}, score=480.0, num_items=10
        ... )
        >>> result.score, result.num_items
        (480.0, 10)
    """

    metrics: Mapping[str, float] = field(metadata=check(float_mapping))
    """Named finite scalars (mean/std return, length, success rate...). Read-only copy."""

    score: float = field(metadata=check(finite_float))
    """The single finite number best-checkpoint selection maximises."""

    num_items: int = field(metadata=check(positive_int))
    """How many items (completed episodes) the metrics summarise; at least 1."""

    def __post_init__(self) -> None:
        _config_fields.validate(self)


@runtime_checkable
class SupportsStep(Protocol):
    """What :func:`step_env` needs of an env: the ``step`` of :class:`~typedrl.protocols.VecEnv`."""

    def step(self, action: Action, /) -> StepResult: ...


# Errors that already say what went wrong in typedrl's words: they pass through
# with a note naming the step, instead of being wrapped.
_PASS_THROUGH = (ConfigError, EnvContractError, NonFiniteError, EnvError)


def step_env(env: SupportsStep, action: Action, *, step: int, iteration: int) -> StepResult:
    """``env.step(action)``; an exception of the env's own becomes :class:`EnvError`.

    Args:
        env: The env to step (a :class:`~typedrl.protocols.VecEnv`).
        action: The action batch.
        step: The step of the rollout, named in the message.
        iteration: The trainer's iteration, named in the message.

    Raises:
        EnvError: The env raised an exception of its own: the message names
            the env's type, the exception's type, the step and the iteration,
            and the exception is chained as ``__cause__``.
        ConfigError, EnvContractError, NonFiniteError: Raised by the env as
            they are, with a note naming the step and the iteration.

    Example:
        >>> import torch
        >>> from typedrl.testing import CountingVecEnv
        >>> env = CountingVecEnv(num_envs=2, terminate_after=3)
        >>> _ = env.reset(seed=0)
        >>> step_env(env, torch.zeros(2, 1), step=0, iteration=0).reward.shape
        torch.Size([2])
    """
    try:
        return env.step(action)
    except Exception as error:
        where = f"step {step} of iteration {iteration}"
        if isinstance(error, _PASS_THROUGH):
            error.add_note(f"raised by the env at {where}")
            raise
        raise EnvError(
            f"the env ({type(env).__name__}) raised {type(error).__name__} at {where}: {error}"
        ) from error
