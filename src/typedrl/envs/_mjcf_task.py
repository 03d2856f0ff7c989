"""The task contract the MJCF backends share (mujoco-torch, Newton): spec fields, step hooks."""

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Generic, TypeVar

from jaxtyping import Float
from torch import Tensor

from typedrl._validation import describe, positive_int
from typedrl.errors import ConfigError
from typedrl.types import Done, ObsVector, Reward

__all__ = ["BaseMjcfTaskSpec", "MjcfTask"]

StateT = TypeVar("StateT")
"""The state of every row as a backend's task hooks see it (``MujocoState``, ``NewtonState``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseMjcfTaskSpec:
    """What every MJCF task declares: its model file, time limit, observations and reset draws.

    Each backend's spec (:class:`~typedrl.envs.mujoco.MujocoTaskSpec`,
    :class:`~typedrl.envs.newton.NewtonTaskSpec`) adds its physics settings.
    """

    _MODEL_FILE: ClassVar[str] = "MJCF file"
    """What :attr:`model_path` names, in error messages."""

    model_path: Path
    """The model file (read once, when the env is built; nothing is downloaded).

    MJCF for every backend; the Newton backend also reads URDF and USD
    (:class:`~typedrl.envs.newton.NewtonTaskSpec`).
    """

    max_episode_steps: int
    """Default time limit of the task."""

    observation_high: tuple[float, ...]
    """Symmetric bounds of each observation feature (``math.inf`` for unbounded)."""

    observation_normalize_mask: tuple[bool, ...]
    """Per feature, whether a trainer may normalise it (``False`` for cosines, sines)."""

    num_initial_draws: int
    """Uniforms in ``(0, 1]`` that the task's ``initial_state`` takes per episode."""

    def __post_init__(self) -> None:
        self._check_layout(type(self).__name__)

    def _check_layout(self, owner: str) -> None:
        """Check the fields above; a bad one is a :class:`~typedrl.errors.ConfigError`."""
        if not isinstance(self.model_path, Path):
            raise ConfigError(
                f"{owner}.model_path must be a pathlib.Path, got {describe(self.model_path)}"
            )
        if not self.model_path.is_file():
            raise ConfigError(
                f"{owner}.model_path: no {self._MODEL_FILE} at {str(self.model_path)!r}"
            )
        for name in ("max_episode_steps", "num_initial_draws"):
            positive_int(owner, name, getattr(self, name))
        high, mask = self.observation_high, self.observation_normalize_mask
        if not high or not all(
            isinstance(h, int | float) and not isinstance(h, bool) and h > 0 for h in high
        ):
            raise ConfigError(
                f"{owner}.observation_high must be a non-empty tuple of positive floats, "
                f"got {describe(high)}"
            )
        if len(mask) != len(high) or not all(isinstance(flag, bool) for flag in mask):
            raise ConfigError(
                f"{owner}.observation_normalize_mask must hold one bool per observation feature "
                f"({len(high)}), got {describe(mask)}"
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
