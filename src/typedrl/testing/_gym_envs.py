"""Small Gymnasium envs with random episode ends, for testing adapters against references."""

from typing import Any, final

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

__all__ = ["RandomEndsEnv", "RandomEndsVectorEnv"]


@final
class RandomEndsEnv(gym.Env[np.ndarray, np.int64]):
    """A single Gymnasium env whose episodes end at random, reproducibly per seed.

    Observation ``[t, u, episode]`` (float32): the step in the episode, a
    uniform number drawn at reset from the env's seeded generator, and the
    episode counter. Action ``Discrete(3)``; reward ``t + 0.5 * action``. Each
    step terminates with probability ``terminate_prob`` (drawn from the seeded
    generator) and truncates when ``t`` reaches ``max_steps``.

    Example:
        >>> env = RandomEndsEnv(terminate_prob=0.0, max_steps=2)
        >>> obs, _ = env.reset(seed=0)
        >>> _ = env.step(np.int64(1))
        >>> env.step(np.int64(1))[3]
        True
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's class attribute

    def __init__(self, *, terminate_prob: float = 0.1, max_steps: int = 10) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self.terminate_prob = terminate_prob
        self.max_steps = max_steps
        self._t = 0
        self._u = 0.0
        self._episode = -1

    def _obs(self) -> np.ndarray:
        return np.array([self._t, self._u, self._episode], dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new episode; ``seed`` reseeds the generator."""
        super().reset(seed=seed)
        self._t = 0
        self._u = float(self.np_random.random())
        self._episode += 1
        return self._obs(), {"episode_start": self._episode}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Advance one step."""
        self._t += 1
        reward = float(self._t) + 0.5 * float(action)
        terminated = bool(self.np_random.random() < self.terminate_prob)
        truncated = self._t >= self.max_steps
        return self._obs(), reward, terminated, truncated, {}


@final
class RandomEndsVectorEnv(gym.vector.VectorEnv[np.ndarray, np.ndarray, np.ndarray]):
    """A NumPy vector env of :class:`RandomEndsEnv` rows that resets inside the next step.

    Like Gymnasium's own ``vector_entry_point`` envs (for example its NumPy
    ``CartPoleVectorEnv``) it uses ``NEXT_STEP`` autoreset and ignores
    ``options["reset_mask"]``: a row that ended is reset during the following
    ``step`` (reward 0, flags False), while the other rows take a real step.
    Row ``i`` behaves exactly like a ``RandomEndsEnv`` seeded with ``seed + i``.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP}  # noqa: RUF012

    def __init__(self, *, num_envs: int, terminate_prob: float = 0.1, max_steps: int = 10) -> None:
        self.num_envs = num_envs
        self._envs = [
            RandomEndsEnv(terminate_prob=terminate_prob, max_steps=max_steps)
            for _ in range(num_envs)
        ]
        self.single_observation_space = self._envs[0].observation_space
        self.single_action_space = self._envs[0].action_space
        batch_space = gym.vector.utils.batch_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._prev_done = np.zeros(num_envs, dtype=np.bool_)

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every row (``options`` is ignored, ``reset_mask`` included)."""
        seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else seed
        rows = [
            env.reset(seed=None if seeds is None else seeds[i])[0]
            for i, env in enumerate(self._envs)
        ]
        self._prev_done[:] = False
        return np.stack(rows), {}

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step rows; rows that ended on the previous step are reset instead."""
        obs, rewards = [], np.zeros(self.num_envs)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        for i, env in enumerate(self._envs):
            if self._prev_done[i]:
                obs.append(env.reset()[0])
                continue
            row_obs, rewards[i], terminated[i], truncated[i], _ = env.step(actions[i])
            obs.append(row_obs)
        self._prev_done = terminated | truncated
        return np.stack(obs), rewards, terminated, truncated, {}
