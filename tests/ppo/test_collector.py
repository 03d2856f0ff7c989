"""Tests for typedrl.ppo._collector: the on-policy collector and its errors."""

import copy
from typing import Any

import pytest
import torch
from tensordict import TensorDict

from tests.ppo._envs import RandomWalkEnv
from typedrl._results import StepResult
from typedrl.errors import (
    CheckpointError,
    ConfigError,
    EnvContractError,
    EnvError,
    NonFiniteError,
)
from typedrl.policies import MLPActorCritic
from typedrl.ppo import OnPolicyCollector
from typedrl.protocols import Collector, VecEnv
from typedrl.testing import CountingVecEnv, VecEnvWrapper
from typedrl.types import Action


class _Spoiled(VecEnvWrapper):
    """Steps the wrapped env and lets ``spoil(step, result)`` rewrite the result."""

    def __init__(self, env: VecEnv, spoil: Any) -> None:
        super().__init__(env)
        self.spoil = spoil
        self.steps_taken = 0

    def step(self, action: Action) -> StepResult:
        result: StepResult = self.spoil(self.steps_taken, self.env.step(action))
        self.steps_taken += 1
        return result


def _policy(env: VecEnv) -> MLPActorCritic:
    torch.manual_seed(0)
    return MLPActorCritic(env.single_observation_space, env.single_action_space)


def _collector(env: VecEnv, num_steps: int = 8) -> OnPolicyCollector:
    collector = OnPolicyCollector(env, num_steps=num_steps)
    collector.reset(seed=0)
    return collector


def _with(result: StepResult, **changes: Any) -> StepResult:
    fields: dict[str, Any] = {
        "obs": result.obs,
        "reward": result.reward,
        "terminated": result.terminated,
        "truncated": result.truncated,
        "info": result.info,
        "final_obs": result.final_obs,
        "valid": result.valid,
    }
    fields.update(changes)
    return StepResult(
        fields["obs"],
        fields["reward"],
        fields["terminated"],
        fields["truncated"],
        fields["info"],
        final_obs=fields["final_obs"],
        valid=fields["valid"],
    )


def _nan_in_row(obs: TensorDict, row: int) -> TensorDict:
    spoiled = obs.clone()
    spoiled["obs"][row] = float("nan")
    return spoiled


def test_is_a_collector_and_collects_an_epoch() -> None:
    """It implements the Collector protocol; shapes, bootstrap flags and episodes are right."""
    env = CountingVecEnv(num_envs=3, terminate_after=[2, 4, 4], truncate_after=3)
    collector = _collector(env)
    assert isinstance(collector, Collector)
    policy = _policy(env)
    policy.train()
    rollout = collector.collect(policy, num_steps=8)
    assert policy.training  # the mode is restored
    assert rollout.data.batch_size == torch.Size([8, 3])
    assert rollout.last_value.shape == (3,)
    assert rollout.has_final_value.shape == (8,)
    assert not rollout.approximate_bootstrap
    # Rows 1 and 2 are truncated after 3 steps (before they terminate at 4).
    assert bool(rollout.has_final_value[2])
    assert int(rollout.episodes.ended.sum()) == 4 + 2 + 2


def test_refuses_a_wrong_length_and_a_missing_reset() -> None:
    """collect() needs a reset first and the buffer's number of steps."""
    env = CountingVecEnv(num_envs=2, terminate_after=3)
    collector = OnPolicyCollector(env, num_steps=4)
    with pytest.raises(ConfigError, match="call reset"):
        collector.collect(_policy(env), num_steps=4)
    collector.reset(seed=0)
    with pytest.raises(ConfigError, match="num_steps must be 4"):
        collector.collect(_policy(env), num_steps=5)


def test_missing_final_obs_breaks_the_contract() -> None:
    """provides_final_obs=True with final_obs=None raises EnvContractError naming the step."""
    env = _Spoiled(
        CountingVecEnv(num_envs=2, truncate_after=3),
        lambda step, result: _with(result, final_obs=None) if step == 2 else result,
    )
    collector = _collector(env)
    with pytest.raises(EnvContractError, match="final_obs=None at step 2"):
        collector.collect(_policy(env), num_steps=8)


def test_a_nan_observation_is_named_with_its_row_and_step() -> None:
    """A NaN observation is reported as one (key, row, step), not as the reward it spoils."""

    def spoil(step: int, result: StepResult) -> StepResult:
        if step != 5:
            return result
        reward = result.reward.clone()
        reward[1] = float("nan")  # what a diverged state does to the reward too
        return _with(result, obs=_nan_in_row(result.obs, 1), reward=reward)

    env = _Spoiled(CountingVecEnv(num_envs=3, terminate_after=50), spoil)
    with pytest.raises(NonFiniteError) as info:
        _collector(env).collect(_policy(env), num_steps=8, iteration=4)
    message = str(info.value)
    assert "non-finite observation 'obs' in env row 1 at step 5 of iteration 4" in message
    assert "reward 'reward'" in message  # listed as also non-finite at that step


def test_a_nan_terminal_observation_is_named() -> None:
    """A NaN terminal observation of a truncated row is named as such, with its row."""

    def spoil(step: int, result: StepResult) -> StepResult:
        if step != 2 or result.final_obs is None:
            return result
        return _with(result, final_obs=_nan_in_row(result.final_obs, 0))

    env = _Spoiled(CountingVecEnv(num_envs=2, truncate_after=3), spoil)
    with pytest.raises(
        NonFiniteError, match="terminal observation 'final_obs' in env row 0 at step 2"
    ):
        _collector(env).collect(_policy(env), num_steps=8)


def test_an_env_exception_is_chained_with_the_iteration_and_step() -> None:
    """The env's own exception becomes EnvError naming iteration and step, chained."""

    def spoil(step: int, result: StepResult) -> StepResult:
        if step == 3:
            raise ZeroDivisionError("physics blew up")
        return result

    env = _Spoiled(CountingVecEnv(num_envs=2, terminate_after=50), spoil)
    with pytest.raises(EnvError, match="ZeroDivisionError at step 3 of iteration 7") as info:
        _collector(env).collect(_policy(env), num_steps=8, iteration=7)
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_state_round_trip_continues_the_same_episodes() -> None:
    """state_dict/load_state_dict continue exactly; an env without state asks for a reset."""
    first = _collector(RandomWalkEnv(num_envs=2, seed=1))
    policy = _policy(first.env)
    first.collect(policy, num_steps=8)
    state = copy.deepcopy(first.state_dict())  # saved at once, as a checkpoint does
    second = OnPolicyCollector(RandomWalkEnv(num_envs=2, seed=9), num_steps=8)
    second.load_state_dict(state)
    assert not second.needs_reset
    # second registers its keys inside collect(): that forward must draw no random numbers.
    torch.manual_seed(3)
    expected = first.collect(policy, num_steps=8).data.clone()
    torch.manual_seed(3)
    got = second.collect(policy, num_steps=8).data
    assert torch.equal(expected["reward"], got["reward"])
    stateless = _collector(CountingVecEnv(num_envs=2, terminate_after=3))
    assert stateless.state_dict() == {}
    stateless.load_state_dict({})
    assert stateless.needs_reset


def test_a_mismatched_state_names_the_key_and_shows_shapes_not_values() -> None:
    """A state saved with other num_envs names the key and its shape, never the values."""
    saved = _collector(RandomWalkEnv(num_envs=3)).state_dict()
    saved["episode_return"] = torch.arange(3000, dtype=torch.float64)
    collector = OnPolicyCollector(RandomWalkEnv(num_envs=3), num_steps=8)
    with pytest.raises(CheckpointError) as info:
        collector.load_state_dict(saved)
    message = str(info.value)
    assert "'episode_return' must be a tensor of shape [3]" in message
    assert "shape [3000]" in message
    assert "2999" not in message
    assert "tensor(" not in message


class _Float64(VecEnvWrapper):
    """Declares the wrapped env's float32 space but returns float64 observations."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[TensorDict, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        return obs.double(), info

    def step(self, action: Action) -> StepResult:
        return _with(result := self.env.step(action), obs=result.obs.double())


def test_observations_of_another_dtype_than_the_space_are_refused() -> None:
    """float64 observations in a float32 Box raise EnvContractError before the first epoch."""
    env = _Float64(CountingVecEnv(num_envs=2))
    with pytest.raises(
        EnvContractError,
        match=r"^_Float64.reset\(\): observation 'obs' expected torch.float32 \(.*\), "
        "got torch.float64",
    ):
        _collector(env).collect(_policy(env), num_steps=8)
