"""What a task adds to an MJCF model: reset distribution, observation, reward, termination."""

import abc
from dataclasses import dataclass
from pathlib import Path

from jaxtyping import Float
from torch import Tensor

from typedrl._validation import describe, positive_int
from typedrl.errors import ConfigError
from typedrl.types import Done, ObsVector, Reward

__all__ = ["MujocoState", "MujocoTask", "MujocoTaskSpec"]

_Draws = Float[Tensor, "num_envs num_draws"]


@dataclass(frozen=True, slots=True)
class MujocoState:
    """The physical state of every row, as the task hooks see it.

    Attributes:
        qpos: Generalised positions, ``[num_envs, nq]``.
        qvel: Generalised velocities, ``[num_envs, nv]``.
        act: Actuator activations, ``[num_envs, na]`` (``na`` is often 0).
    """

    qpos: Float[Tensor, "num_envs nq"]
    qvel: Float[Tensor, "num_envs nv"]
    act: Float[Tensor, "num_envs na"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MujocoTaskSpec:
    """The static description of a task: its model and the shape of its observations."""

    model_path: Path
    """The MJCF file (read once, when the env is built; nothing is downloaded)."""

    frame_skip: int = 1
    """Physics steps per env step; the control interval is ``frame_skip * timestep``."""

    solver_iterations: int = 4
    """Iterations of the constraint solver (and of its line search) per physics step.

    The solver always runs exactly this many (the early exit does not batch), so
    fewer iterations are faster; models with many contacts need more for a
    smooth, accurate step (an ant-like model needs about 16).
    """

    max_episode_steps: int
    """Default time limit of the task."""

    observation_high: tuple[float, ...]
    """Symmetric bounds of each observation feature (``math.inf`` for unbounded)."""

    observation_normalize_mask: tuple[bool, ...]
    """Per feature, whether a trainer may normalise it (``False`` for cosines, sines)."""

    num_initial_draws: int
    """Uniforms in ``(0, 1]`` that :meth:`MujocoTask.initial_state` takes per episode."""

    def __post_init__(self) -> None:
        owner = type(self).__name__
        if not self.model_path.is_file():
            raise ConfigError(f"{owner}.model_path: no MJCF file at {str(self.model_path)!r}")
        for name in ("frame_skip", "solver_iterations", "max_episode_steps", "num_initial_draws"):
            positive_int(owner, name, getattr(self, name))
        if not self.observation_high or not all(h > 0 for h in self.observation_high):
            raise ConfigError(
                f"{owner}.observation_high must be a non-empty tuple of positive floats, "
                f"got {describe(self.observation_high)}"
            )
        if len(self.observation_normalize_mask) != len(self.observation_high):
            raise ConfigError(
                f"{owner}.observation_normalize_mask must hold one bool per observation feature "
                f"({len(self.observation_high)}), got {describe(self.observation_normalize_mask)}"
            )


class MujocoTask(abc.ABC):
    """The task hooks of a :class:`~typedrl.envs.mujoco.MujocoVecEnv`, batched over rows.

    A task names its MJCF model in :attr:`spec` and maps the model's state to
    what an agent sees and is paid. Every hook runs on whole batches with plain
    torch ops; :meth:`observe`, :meth:`reward` and :meth:`terminated` are
    called with states that carry the autograd graph, so keep them
    differentiable (smooth, no in-place changes to the inputs).
    :meth:`initial_state` runs without a graph.
    """

    @property
    @abc.abstractmethod
    def spec(self) -> MujocoTaskSpec:
        """The model file, frame skip, solver iterations and observation layout."""

    @abc.abstractmethod
    def initial_state(
        self, uniform: _Draws, *, qpos0: Float[Tensor, " nq"], na: int
    ) -> MujocoState:
        """Map ``spec.num_initial_draws`` uniforms in ``(0, 1]`` per row to initial states.

        Args:
            uniform: ``[num_envs, num_initial_draws]``, a pure function of
                ``(seed, row, episode)``.
            qpos0: The model's reference configuration.
            na: Number of actuator activations.
        """

    @abc.abstractmethod
    def observe(self, state: MujocoState) -> ObsVector:
        """The observation vector ``[num_envs, obs_dim]`` of ``state``."""

    @abc.abstractmethod
    def reward(
        self,
        state: MujocoState,
        action: Float[Tensor, "num_envs act_dim"],
        next_state: MujocoState,
        *,
        dt: float,
    ) -> Reward:
        """The reward of ``state -> next_state`` under ``action``; ``dt``: the control interval."""

    @abc.abstractmethod
    def terminated(self, next_state: MujocoState) -> Done:
        """Rows whose ``next_state`` ends the episode."""
