"""A Gymnasium wrapper keeping some entries of a flat ``Box`` observation (partial views)."""

from collections.abc import Sequence
from typing import Any, final

import gymnasium as gym
import numpy as np
import numpy.typing as npt

from typedrl.errors import ConfigError

__all__ = ["KeepObservationIndices"]


@final
class KeepObservationIndices(gym.ObservationWrapper[npt.NDArray[Any], Any, npt.NDArray[Any]]):
    """Keep the entries ``indices`` of a 1-D ``Box`` observation, in that order; drop the rest.

    Makes a fully observed env partially observed: on CartPole,
    ``indices=[0, 2]`` keeps the cart position and the pole angle and hides
    both velocities, which a memoryless policy cannot recover from one
    observation (a recurrent one can). From the command line:
    ``--wrapper 'typedrl.envs:KeepObservationIndices(indices=[0, 2])'``.

    Args:
        env: A single Gymnasium env with a 1-D ``Box`` observation space.
        indices: Entries to keep (distinct, in range).

    Raises:
        ConfigError: The observation space is not a 1-D ``Box``, or an index
            is out of range or repeated.

    Example:
        >>> env = KeepObservationIndices(gym.make("CartPole-v1"), indices=[0, 2])
        >>> env.observation_space.shape, env.reset(seed=0)[0].shape
        ((2,), (2,))
    """

    def __init__(self, env: gym.Env[npt.NDArray[Any], Any], *, indices: Sequence[int]) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise ConfigError(
                f"KeepObservationIndices needs a 1-D Box observation space, got {space}"
            )
        size = space.shape[0]
        kept = [int(i) for i in indices]
        if not kept or len(set(kept)) != len(kept) or not all(0 <= i < size for i in kept):
            raise ConfigError(
                f"KeepObservationIndices: indices must be distinct entries of [0, {size}), "
                f"got {list(indices)}"
            )
        self._indices = np.asarray(kept, dtype=np.int64)
        self.observation_space = gym.spaces.Box(
            low=space.low[self._indices], high=space.high[self._indices], dtype=space.dtype
        )

    def observation(self, observation: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """The kept entries of ``observation``."""
        kept: npt.NDArray[Any] = observation[self._indices]
        return kept
