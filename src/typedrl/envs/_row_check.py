"""The observation-shape check of one row of a Gymnasium vector env built from a single-env factory.

Gymnasium's ``SyncVectorEnv`` copies each row's observation into one batch
array and, when a row's observation does not have the space's shape, raises
NumPy's ``ValueError: Output array is the wrong shape``, which names neither
the row nor the shapes. :class:`RowShapeCheck` wraps each row's env and says
both first.
"""

from typing import Any, SupportsFloat, final

import gymnasium as gym
import numpy as np

from typedrl._validation import describe
from typedrl.errors import EnvContractError

__all__ = ["RowShapeCheck"]


@final
class RowShapeCheck(gym.Wrapper[Any, Any, Any, Any]):
    """Check the shape of every observation of one row against its observation space.

    A ``Dict`` or other composite space is passed through unchecked (the
    adapter checks each leaf of the batch); a shape mismatch raises
    :class:`~typedrl.errors.EnvContractError` naming the env, the row, the
    call, the step of the episode, the shape that came and the one expected.
    A well-shaped NumPy observation costs one attribute read and one tuple
    comparison.

    Args:
        env: One row's env.
        row: The row's index in the vector env.
        env_id: The env's id, for the message.

    Example:
        >>> import numpy as np
        >>> class Wide(gym.Env):
        ...     observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        ...     action_space = gym.spaces.Discrete(2)
        ...     def reset(self, *, seed=None, options=None):
        ...         return np.zeros(3, np.float32), {}
        >>> RowShapeCheck(Wide(), row=1, env_id="my_envs:make").reset()
        Traceback (most recent call last):
        ...
        typedrl.errors.EnvContractError: the env 'my_envs:make' returned an observation of shape
        [3] in row 1 from reset(), expected [2] (the shape of its observation_space
        Box(-1.0, 1.0, (2,), float32))
    """

    def __init__(self, env: gym.Env[Any, Any], *, row: int, env_id: str) -> None:
        super().__init__(env)
        self._row = row
        self._env_id = env_id
        space = env.observation_space
        leaf = (
            gym.spaces.Box,
            gym.spaces.Discrete,
            gym.spaces.MultiDiscrete,
            gym.spaces.MultiBinary,
        )
        shape = space.shape if isinstance(space, leaf) else None
        self._shape = tuple(shape) if shape is not None else None
        self._episode_steps = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """The env's ``reset``, its observation's shape checked."""
        obs, info = self.env.reset(seed=seed, options=options)
        self._episode_steps = 0
        self._check(obs, "reset()")
        return obs, info

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """The env's ``step``, its observation's shape checked."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._episode_steps += 1
        if not (type(obs) is np.ndarray and obs.shape == self._shape) and self._shape is not None:
            self._check(obs, f"step {self._episode_steps} of its episode")
        return obs, reward, terminated, truncated, info

    def _check(self, obs: Any, call: str) -> None:
        expected = self._shape
        if expected is None:
            return
        try:
            got: object = list(np.shape(obs))
        except ValueError:  # a ragged sequence has no shape
            got = f"{describe(obs)} (no shape)"
        if got != list(expected):
            raise EnvContractError(
                f"the env {self._env_id!r} returned an observation of shape {got} in row "
                f"{self._row} from {call}, expected {list(expected)} (the shape of its "
                f"observation_space {self.env.observation_space!r})"
            )
