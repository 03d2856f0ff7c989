"""The base of the MJCF backends' envs: the task's spec sets the spaces, its hooks score steps."""

import abc
from collections.abc import Sequence
from typing import Any, Final, Generic, TypeVar, Unpack

from jaxtyping import Float
from torch import Tensor

from typedrl.envs._mjcf_task import MjcfTask, StateT
from typedrl.envs.builtin._base import BaseTorchVecEnv, EnvLayout, EnvOptions
from typedrl.types import ContinuousAction, Done, ObsVector, Reward

__all__ = ["BaseMjcfVecEnv"]

# The backend's per-row state tensor.
_State = Float[Tensor, "num_envs state_dim"]
TaskT = TypeVar("TaskT", bound=MjcfTask[Any])
"""The backend's task base (``MujocoTask``, ``NewtonTask``)."""


class BaseMjcfVecEnv(BaseTorchVecEnv, Generic[TaskT, StateT]):
    """A :class:`~typedrl.envs.BaseTorchVecEnv` over an MJCF model, driven by an :class:`MjcfTask`.

    The task's spec gives the time limit, the observation layout and the
    number of reset draws; its hooks give the observation, the reward and the
    termination of every step, from the state view :meth:`_view` makes of the
    state tensor. A backend implements :meth:`_view`, ``_initial_state`` and
    ``_dynamics`` (its physics).

    Args:
        task: The task hooks.
        control_dt: Seconds of simulated time per env step (the reward's ``dt``).
        action_high: Bounds ``h`` of the ``Box(-h, h)`` actions.
        num_envs: Number of rows.
        **options: :class:`~typedrl.envs.EnvOptions`; the time limit is the
            task's unless ``max_episode_steps`` says otherwise.
    """

    def __init__(
        self,
        *,
        task: TaskT,
        control_dt: float,
        action_high: Sequence[float],
        num_envs: int,
        **options: Unpack[EnvOptions],
    ) -> None:
        spec = task.spec
        layout = EnvLayout(
            observation_high=spec.observation_high,
            observation_normalize_mask=spec.observation_normalize_mask,
            action_space=action_high,
            num_initial_draws=spec.num_initial_draws,
            max_episode_steps=spec.max_episode_steps,
        )
        super().__init__(num_envs=num_envs, layout=layout, **options)
        self.task: Final = task
        """The task hooks."""
        self.control_dt: Final = control_dt
        """Seconds of simulated time per env step (the reward's ``dt``)."""

    @abc.abstractmethod
    def _view(self, state: _State) -> StateT:
        """The rows' state as the task hooks take it."""

    def _reward(self, state: _State, action: ContinuousAction, next_state: _State) -> Reward:
        return self.task.reward(
            self._view(state), action, self._view(next_state), dt=self.control_dt
        )

    def _terminated(self, next_state: _State) -> Done:
        return self.task.terminated(self._view(next_state))

    def _observe(self, state: _State) -> ObsVector:
        return self.task.observe(self._view(state))
