"""A one-step image env whose answer is only in the image, for testing image encoders."""

from typing import Any, final

import gymnasium as gym
import numpy as np

__all__ = ["QuadrantImageEnv"]


@final
class QuadrantImageEnv(gym.Env[np.ndarray, np.int64]):
    """Find the quadrant of the lit cell: a one-step task only the image can solve.

    Each episode draws one cell of a ``size x size`` grayscale image
    (``uint8``, HxWx1, every pixel 0 but the cell, 255) from the env's seeded
    generator. The action ``Discrete(4)`` names a quadrant (``0`` top left,
    ``1`` top right, ``2`` bottom left, ``3`` bottom right); the reward is 1
    for the quadrant holding the cell, else 0, and the episode terminates.
    A random policy earns 0.25 per episode, one that reads the image 1.

    Example:
        >>> env = QuadrantImageEnv()
        >>> obs, _ = env.reset(seed=0)
        >>> row, column = np.argwhere(obs[..., 0] == 255)[0]
        >>> env.step(np.int64(2 * (row >= 4) + (column >= 4)))[1:3]
        (1.0, True)
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's class attribute

    def __init__(self, *, size: int = 8) -> None:
        if size < 8 or size % 2:
            raise ValueError(f"QuadrantImageEnv: size must be an even int >= 8, got {size!r}")
        self.size = size
        self.observation_space = gym.spaces.Box(0, 255, (size, size, 1), np.uint8)
        self.action_space = gym.spaces.Discrete(4)
        self._quadrant = 0
        self._image = np.zeros((size, size, 1), dtype=np.uint8)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Light a new random cell; ``seed`` reseeds the generator."""
        super().reset(seed=seed)
        row, column = (int(value) for value in self.np_random.integers(0, self.size, 2))
        half = self.size // 2
        self._quadrant = 2 * (row >= half) + (column >= half)
        self._image = np.zeros((self.size, self.size, 1), dtype=np.uint8)
        self._image[row, column, 0] = 255
        return self._image.copy(), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Score the named quadrant and end the episode."""
        reward = 1.0 if int(action) == self._quadrant else 0.0
        return self._image.copy(), reward, True, False, {}
