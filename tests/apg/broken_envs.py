"""Differentiable envs broken on purpose, and the factories `typedrl train` tests name."""

from collections.abc import Iterable
from typing import Any

import torch
from tensordict import TensorDict

from typedrl._results import StepResult
from typedrl.envs import make
from typedrl.protocols import DifferentiableVecEnv, SupportsStateDict
from typedrl.testing import DifferentiableVecEnvWrapper
from typedrl.types import Action, Obs


def point_mass(
    num_envs: int = 4,
    seed: int | None = 0,
    max_episode_steps: int = 6,
    device: torch.device | str = "cpu",
) -> DifferentiableVecEnv:
    """The built-in PointMass with short episodes."""
    env = make(
        "typedrl/PointMass-v0",
        num_envs=num_envs,
        seed=seed,
        device=device,
        env_kwargs={"max_episode_steps": max_episode_steps},
    )
    assert isinstance(env, DifferentiableVecEnv)
    return env


def _replace(result: StepResult, **fields: Any) -> StepResult:
    """``result`` with some of its fields replaced."""
    values: dict[str, Any] = {
        "obs": result.obs,
        "reward": result.reward,
        "terminated": result.terminated,
        "truncated": result.truncated,
        "final_obs": result.final_obs,
        **fields,
    }
    return StepResult(
        values["obs"],
        values["reward"],
        values["terminated"],
        values["truncated"],
        {},
        final_obs=values["final_obs"],
        valid=result.valid,
    )


class DetachedReward(DifferentiableVecEnvWrapper):
    """The wrapped env with its reward cut from the graph (``.detach()``) at chosen global steps.

    Every step by default: the reward then does not depend on the action at all.
    """

    def __init__(self, env: DifferentiableVecEnv, *, steps: Iterable[int] | None = None) -> None:
        super().__init__(env)
        self.steps = None if steps is None else set(steps)
        self.steps_taken = 0

    def step(self, action: Action) -> StepResult:
        """The wrapped env's step, its reward detached where chosen."""
        step = self.steps_taken
        self.steps_taken += 1
        result = self.env.step(action)
        if self.steps is not None and step not in self.steps:
            return result
        return _replace(result, reward=result.reward.detach())


class NaNReward(DifferentiableVecEnvWrapper):
    """Row 0's reward is NaN, on the graph, at chosen global steps (a diverging simulator)."""

    def __init__(self, env: DifferentiableVecEnv, *, steps: Iterable[int]) -> None:
        super().__init__(env)
        self.steps = set(steps)
        self.steps_taken = 0

    def step(self, action: Action) -> StepResult:
        """The wrapped env's step, row 0's reward times NaN where chosen."""
        step = self.steps_taken
        self.steps_taken += 1
        result = self.env.step(action)
        if step not in self.steps:
            return result
        poison = torch.ones_like(result.reward)
        poison[0] = torch.nan
        return _replace(result, reward=result.reward * poison)


class SingularReward(DifferentiableVecEnvWrapper):
    """A finite reward whose gradient is not: ``r + sqrt(|0 * a|)`` (an overflowing backward)."""

    def step(self, action: Action) -> StepResult:
        """The wrapped env's step, its reward given a term of value 0 and derivative NaN."""
        result = self.env.step(action)
        singular = (0.0 * action.sum(dim=-1)).abs().sqrt()
        return _replace(result, reward=result.reward + singular.to(result.reward.dtype))


class NaNRow(DifferentiableVecEnvWrapper):
    """From global step ``start``, row 0 turns NaN (keeping its graph) until the env ends it.

    Its observations, terminal observation and reward are multiplied by NaN, as
    a diverged simulator's are; a policy that acts on them feeds NaN back into
    the wrapped env. The env does not end the row: only its time limit does.
    """

    def __init__(self, env: DifferentiableVecEnv, *, start: int) -> None:
        super().__init__(env)
        self.start = start
        self.steps_taken = 0
        self.sick = False

    def _poisoned(self, obs: Obs) -> Obs:
        def poison(leaf: torch.Tensor) -> torch.Tensor:
            scale = torch.ones(leaf.shape[0], 1, dtype=leaf.dtype, device=leaf.device)
            scale[0] = torch.nan
            return leaf * scale

        poisoned = obs.apply(poison)
        assert isinstance(poisoned, TensorDict)
        return poisoned

    def step(self, action: Action) -> StepResult:
        """The wrapped env's step, row 0 poisoned from ``start`` until its episode ends."""
        step = self.steps_taken
        self.steps_taken += 1
        result = self.env.step(action)
        self.sick = self.sick or step == self.start
        if not self.sick:
            return result
        ended = bool(result.terminated[0] | result.truncated[0])
        scale = torch.ones_like(result.reward)
        scale[0] = torch.nan
        final_obs = result.final_obs
        assert final_obs is not None
        poisoned = _replace(
            result,
            obs=result.obs if ended else self._poisoned(result.obs),
            reward=result.reward * scale,
            final_obs=self._poisoned(final_obs),
        )
        self.sick = not ended
        return poisoned

    def detach_state(self) -> Obs:
        """The wrapped env's detached state, row 0 still NaN while it is sick."""
        obs = self.differentiable_env.detach_state()
        return self._poisoned(obs) if self.sick else obs

    def state_dict(self) -> dict[str, Any]:
        """The wrapped env's state (it must have one) and the row's sickness."""
        env = self.env
        assert isinstance(env, SupportsStateDict)
        return {"env": env.state_dict(), "sick": self.sick, "steps_taken": self.steps_taken}

    def load_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore :meth:`state_dict`."""
        env = self.env
        assert isinstance(env, SupportsStateDict)
        env.load_state_dict(state_dict["env"])
        self.sick, self.steps_taken = state_dict["sick"], state_dict["steps_taken"]


def detached_point_mass(
    *, num_envs: int, seed: int | None, device: torch.device | str
) -> DetachedReward:
    """A vector factory: PointMass (200-step episodes) whose reward is detached from the graph."""
    return DetachedReward(point_mass(num_envs, seed, 200, device))


def nan_point_mass(*, num_envs: int, seed: int | None, device: torch.device | str) -> NaNReward:
    """A vector factory: PointMass, 10-step episodes, row 0's reward NaN on global steps 40-119.

    A short evaluation (a few episodes) ends before step 40 and stays finite.
    """
    return NaNReward(point_mass(num_envs, seed, 10, device), steps=range(40, 120))
