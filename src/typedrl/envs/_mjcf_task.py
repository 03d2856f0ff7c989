"""The task contract the MJCF backends share (mujoco-torch, Newton): spec fields, step hooks."""

import abc
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from jaxtyping import Float
from torch import Tensor

from typedrl import _config_fields
from typedrl._config_fields import check, sequence_of
from typedrl._validation import describe, positive_float, positive_int
from typedrl.errors import ConfigError
from typedrl.types import Done, ObsVector, Reward

__all__ = ["BaseMjcfTaskSpec", "MjcfTask"]

StateT = TypeVar("StateT")
"""The state of every row as a backend's task hooks see it (``MujocoState``, ``NewtonState``)."""


def _model_file(owner: str, name: str, value: object) -> Path:
    """Check a path (``str`` or :class:`os.PathLike`) of an existing file; give a ``Path``."""
    if not isinstance(value, str | os.PathLike):
        raise ConfigError(f"{owner}.{name} must be a pathlib.Path, got {describe(value)}")
    if not Path(value).is_file():
        raise ConfigError(f"{owner}.{name}: no model file at {str(value)!r}")
    return Path(value)


def _bound(owner: str, name: str, value: object) -> float:
    """Check a real number greater than zero, ``math.inf`` included (an unbounded feature)."""
    if isinstance(value, float) and value == math.inf:
        return math.inf
    try:
        return positive_float(owner, name, value)
    except ConfigError:  # one message that names the unbounded choice
        raise ConfigError(
            f"{owner}.{name} must be a float > 0 (math.inf: unbounded), got {describe(value)}"
        ) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseMjcfTaskSpec:
    """What every MJCF task declares: its model file, time limit, observations and reset draws.

    Each backend's spec (:class:`~typedrl.envs.mujoco.MujocoTaskSpec`,
    :class:`~typedrl.envs.newton.NewtonTaskSpec`) adds its physics settings.
    Each field declares its check (the one config validator of
    :mod:`typedrl._config_fields`); a spec refuses an invalid value with a
    :class:`~typedrl.errors.ConfigError` that names it.
    """

    model_path: Path = field(metadata=check(_model_file))
    """The model file (read once, when the env is built; nothing is downloaded).

    MJCF for every backend; the Newton backend also reads URDF and USD
    (:class:`~typedrl.envs.newton.NewtonTaskSpec`).
    """

    max_episode_steps: int = field(metadata=check(positive_int))
    """Default time limit of the task."""

    observation_high: tuple[float, ...] = field(
        metadata=check(sequence_of(_bound, expected="a tuple of floats > 0"))
    )
    """Symmetric bounds of each observation feature (``math.inf`` for unbounded)."""

    observation_normalize_mask: tuple[bool, ...] = field(
        metadata=check(sequence_of(_config_fields.boolean, expected="a tuple of bools"))
    )
    """Per feature, whether a trainer may normalise it (``False`` for cosines, sines)."""

    num_initial_draws: int = field(metadata=check(positive_int))
    """Uniforms in ``(0, 1]`` that the task's ``initial_state`` takes per episode."""

    def __post_init__(self) -> None:
        _config_fields.validate(self)
        self._check_rules(type(self).__name__)

    def _check_rules(self, owner: str) -> None:
        """Check the rules that span fields (after each field's own check)."""
        high, mask = self.observation_high, self.observation_normalize_mask
        if not high or len(mask) != len(high):
            raise ConfigError(
                f"{owner}.observation_normalize_mask must hold one bool per observation "
                f"feature, and observation_high at least one feature; got {len(mask)} and "
                f"{len(high)}"
            )


class MjcfTask(abc.ABC, Generic[StateT]):
    """The hooks every task over an MJCF model implements, whatever physics steps it.

    The backends' task bases (:class:`~typedrl.envs.mujoco.MujocoTask`,
    :class:`~typedrl.envs.newton.NewtonTask`) add their spec and their reset
    distribution. Every hook runs on whole batches with plain torch ops.
    """

    @property
    @abc.abstractmethod
    def spec(self) -> BaseMjcfTaskSpec:
        """The model file, physics settings and observation layout."""

    @abc.abstractmethod
    def observe(self, state: StateT) -> ObsVector:
        """The observation vector ``[num_envs, obs_dim]`` of ``state``."""

    @abc.abstractmethod
    def reward(
        self,
        state: StateT,
        action: Float[Tensor, "num_envs act_dim"],
        next_state: StateT,
        *,
        dt: float,
    ) -> Reward:
        """The reward of ``state -> next_state`` under ``action``; ``dt``: the control interval."""

    @abc.abstractmethod
    def terminated(self, next_state: StateT) -> Done:
        """Rows whose ``next_state`` ends the episode."""
