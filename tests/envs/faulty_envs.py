"""Gymnasium envs with one fault each, as a user might write them, named by factory.

The command-line tests train and check them as ``tests.envs.faulty_envs:<factory>``;
the adapter tests build them directly. Each env is well behaved until step
:data:`FAULT_STEP` of an episode (or, for the seed faults, until it is reset
with a large seed).
"""

from typing import Any, Literal, SupportsFloat, TypeAlias

import gymnasium as gym
import numpy as np

FAULT_STEP = 3
"""The step of an episode (counted from 1) at which a faulty env first misbehaves."""

Fault: TypeAlias = Literal[
    "none", "wide_obs", "nan_obs", "inf_reward", "raise_in_step", "raise_in_reset"
]


class FaultyEnv(gym.Env[np.ndarray, np.int64]):
    """A two-value observation, two actions, reward 1 and ``fault`` from :data:`FAULT_STEP` on.

    ``"wide_obs"`` returns three values where its space says two; ``"nan_obs"``
    NaN observations; ``"inf_reward"`` an infinite reward; ``"raise_in_step"``
    and ``"raise_in_reset"`` raise ``RuntimeError`` (the latter on the first
    reset after an episode ended). Episodes are truncated after
    ``max_episode_steps`` steps.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's class attribute

    def __init__(self, fault: Fault = "none", *, max_episode_steps: int = 8) -> None:
        if max_episode_steps <= 0:
            raise ValueError(f"max_episode_steps must be positive, got {max_episode_steps}")
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.fault = fault
        self.max_episode_steps = max_episode_steps
        self._t = 0
        self._episodes = 0

    def _obs(self) -> np.ndarray:
        faulty = self._t >= FAULT_STEP
        if faulty and self.fault == "wide_obs":
            return np.zeros(3, np.float32)
        value = np.nan if faulty and self.fault == "nan_obs" else 0.5
        return np.full(2, value, np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode."""
        super().reset(seed=seed)
        if self.fault == "raise_in_reset" and self._episodes > 0:
            raise RuntimeError("the simulator lost its scene")
        self._episodes += 1
        self._t = 0
        return self._obs(), {}

    def step(
        self, action: np.int64
    ) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        """Advance one step."""
        self._t += 1
        faulty = self._t >= FAULT_STEP
        if faulty and self.fault == "raise_in_step":
            raise RuntimeError("physics exploded\nat joint 3")
        reward = np.inf if faulty and self.fault == "inf_reward" else 1.0
        return self._obs(), reward, False, self._t >= self.max_episode_steps, {}


class SmallSeedsEnv(gym.Env[np.ndarray, np.int64]):
    """An env that refuses seeds from ``2**31`` on (an int32 seed in its simulator)."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's class attribute

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.seeds: list[int | None] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode; a seed beyond int32 raises ``ValueError``."""
        if seed is not None and not 0 <= seed < 2**31:
            raise ValueError(f"Seed must be between 0 and 2**31 - 1, got {seed}")
        self.seeds.append(seed)
        return np.zeros(2, np.float32), {}

    def step(
        self, action: np.int64
    ) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        """Advance one step."""
        return np.zeros(2, np.float32), 1.0, False, False, {}


class LegacySeedsEnv(gym.Env[np.ndarray, np.int64]):
    """An env that seeds NumPy's legacy ``RandomState``, as dm_control does: seeds below 2**32."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - Gymnasium's class attribute

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._random = np.random.RandomState(0)
        self._t = 0
        self.seeds: list[int] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Start an episode; ``RandomState(seed)`` refuses a seed from 2**32 on."""
        if seed is not None:
            self._random = np.random.RandomState(seed)
            self.seeds.append(seed)
        self._t = 0
        return self._random.uniform(-1, 1, 2).astype(np.float32), {}

    def step(
        self, action: np.int64
    ) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        """Advance one step; episodes last 8 steps."""
        self._t += 1
        obs = self._random.uniform(-1, 1, 2).astype(np.float32)
        return obs, 1.0, False, self._t >= 8, {}


def wide_obs() -> FaultyEnv:
    """Three observation values where the space says two, from step 3."""
    return FaultyEnv("wide_obs")


def nan_obs() -> FaultyEnv:
    """NaN observations from step 3."""
    return FaultyEnv("nan_obs")


def inf_reward() -> FaultyEnv:
    """An infinite reward at step 3."""
    return FaultyEnv("inf_reward")


def raise_in_step() -> FaultyEnv:
    """``step`` raises RuntimeError at step 3."""
    return FaultyEnv("raise_in_step")


def raise_in_reset() -> FaultyEnv:
    """``reset`` raises RuntimeError once an episode has ended."""
    return FaultyEnv("raise_in_reset", max_episode_steps=2)


def bounded(max_episode_steps: int = 8) -> FaultyEnv:
    """A well-behaved env whose constructor refuses a non-positive ``max_episode_steps``."""
    return FaultyEnv(max_episode_steps=max_episode_steps)


def small_seeds() -> SmallSeedsEnv:
    """An env that refuses seeds from 2**31 on."""
    return SmallSeedsEnv()


def legacy_seeds() -> LegacySeedsEnv:
    """An env that seeds NumPy's legacy RandomState (seeds below 2**32 only)."""
    return LegacySeedsEnv()


def broken() -> FaultyEnv:
    """A factory that raises before it builds anything."""
    raise FileNotFoundError("assets/robot.xml not found")
