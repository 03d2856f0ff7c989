"""Small envs for the agent tests: a checkpointable random walk and a NaN-reward wrapper."""

from typing import Any, final

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from typedrl._results import StepResult
from typedrl.protocols import VecEnv
from typedrl.testing import VecEnvWrapper
from typedrl.types import Action, Obs

__all__ = ["NaNRewardEnv", "RandomWalkEnv", "StepCounter"]


@final
class RandomWalkEnv:
    """A seeded 1-D random walk whose state (generator included) is checkpointable.

    Observation ``[x, t / max_steps]``; the action pushes ``x``; reward ``-x^2``.
    A row terminates when ``|x| > 1.5`` and is truncated after ``max_steps``
    steps; rows that end are reset in the same step (``final_obs`` holds the
    terminal observation). Every step draws the same number of random numbers,
    so the stream depends only on the seed and the actions.
    """

    def __init__(self, *, num_envs: int, seed: int = 0, max_steps: int = 5) -> None:
        self._num_envs = num_envs
        self._max_steps = max_steps
        self._generator = torch.Generator().manual_seed(seed)
        self._x = torch.zeros(num_envs)
        self._t = torch.zeros(num_envs, dtype=torch.int64)
        self.steps_taken = 0

    @property
    def num_envs(self) -> int:
        """Number of rows."""
        return self._num_envs

    @property
    def device(self) -> torch.device:
        """Always the CPU."""
        return torch.device("cpu")

    @property
    def single_observation_space(self) -> gym.Space[Any]:
        """``Box(-inf, inf, (2,))``."""
        return gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)

    @property
    def single_action_space(self) -> gym.Space[Any]:
        """``Box(-1, 1, (1,))``."""
        return gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    @property
    def provides_final_obs(self) -> bool:
        """Terminal observations are exact."""
        return True

    def _observe(self, x: torch.Tensor, t: torch.Tensor) -> Obs:
        features = torch.stack((x, t.float() / self._max_steps), dim=-1)
        return TensorDict({"obs": features}, batch_size=[self._num_envs])

    def _initial(self) -> torch.Tensor:
        return torch.rand(self._num_envs, generator=self._generator) * 2.0 - 1.0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Draw fresh starts (reseeding the generator when ``seed`` is given)."""
        del options
        if seed is not None:
            self._generator.manual_seed(seed)
        self._x = self._initial()
        self._t = torch.zeros(self._num_envs, dtype=torch.int64)
        return self._observe(self._x, self._t), {}

    def step(self, action: Action) -> StepResult:
        """Move, reward, end and reset rows."""
        self.steps_taken += 1
        noise = 0.1 * torch.randn(self._num_envs, generator=self._generator)
        x = self._x + 0.2 * action[:, 0].clamp(-1.0, 1.0) + noise
        t = self._t + 1
        terminated = x.abs() > 1.5
        truncated = (t >= self._max_steps) & ~terminated
        done = terminated | truncated
        final_obs = self._observe(x, t)
        fresh = self._initial()
        self._x = torch.where(done, fresh, x)
        self._t = torch.where(done, torch.zeros_like(t), t)
        return StepResult(
            self._observe(self._x, self._t),
            -x.square(),
            terminated,
            truncated,
            {},
            final_obs=final_obs,
        )

    def close(self) -> None:
        """Nothing to release."""

    def state_dict(self) -> dict[str, Any]:
        """Generator state, positions and step counters."""
        return {
            "generator": self._generator.get_state(),
            "x": self._x.clone(),
            "t": self._t.clone(),
        }

    def load_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore :meth:`state_dict` exactly."""
        self._generator.set_state(state_dict["generator"])
        self._x = state_dict["x"].clone()
        self._t = state_dict["t"].clone()


@final
class NaNRewardEnv(VecEnvWrapper):
    """Wraps a VecEnv and returns a NaN reward in row 0 at step ``nan_at`` (counted from 0)."""

    def __init__(self, env: VecEnv, *, nan_at: int) -> None:
        super().__init__(env)
        self.nan_at = nan_at
        self.steps_taken = 0

    def step(self, action: Action) -> StepResult:
        """Step the wrapped env, spoiling one reward at ``nan_at``."""
        result = self.env.step(action)
        reward = result.reward.clone()
        if self.steps_taken == self.nan_at:
            reward[0] = float("nan")
        self.steps_taken += 1
        return StepResult(
            result.obs,
            reward,
            result.terminated,
            result.truncated,
            result.info,
            final_obs=result.final_obs,
            valid=result.valid,
        )


@final
class StepCounter(VecEnvWrapper):
    """Wraps a VecEnv and counts its steps and resets (to show evaluation leaves it alone)."""

    def __init__(self, env: VecEnv) -> None:
        super().__init__(env)
        self.steps_taken = 0
        self.resets = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Reset the wrapped env and count it."""
        self.resets += 1
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Action) -> StepResult:
        """Step the wrapped env and count it."""
        self.steps_taken += 1
        return self.env.step(action)
