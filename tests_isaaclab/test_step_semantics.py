"""Terminated, time-out and terminal-observation handling, step by step, against the raw env.

Each test first steps the raw Isaac Lab env (``IsaacLabVecEnv.env``) with a fixed action
sequence and records what it returns, then rebuilds the task with the same seed and
replays the sequence through the adapter. The simulation is deterministic on the CPU, so
every adapter output must equal the mapping of the raw output of the same step.
"""

from dataclasses import dataclass

import pytest
import torch
from torch import Tensor

from tests_isaaclab._real import DIRECT_TASK, MANAGER_TASK, make_real

NUM_ENVS = 6
NUM_STEPS = 70
EPISODE_LENGTH_S = 0.5
"""30 env steps of 1/60 s."""

MAX_CART_POS = 3.0
"""Both tasks terminate a row whose cart leaves [-3, 3] m."""


@dataclass(frozen=True)
class _RawStep:
    obs: Tensor
    reward: Tensor
    terminated: Tensor
    time_outs: Tensor
    final_obs: Tensor | None


def _actions() -> list[Tensor]:
    """Rows 0-1 push hard (the cart leaves the rail), rows 2-5 stay still (time-outs)."""
    push = torch.tensor([1.0, -1.0, 0.0, 0.0, 0.0, 0.0])[:, None]
    return [push.clone() for _ in range(NUM_STEPS)]


def _raw_rollout(env_id: str, *, compute_final_obs: bool) -> tuple[Tensor, list[_RawStep]]:
    env = make_real(
        env_id,
        num_envs=NUM_ENVS,
        seed=3,
        compute_final_obs=compute_final_obs,
        episode_length_s=EPISODE_LENGTH_S,
    )
    try:
        raw = env.env
        obs, _ = raw.reset(seed=3)
        first = obs["policy"]
        assert isinstance(first, Tensor)
        start = first.clone()
        steps: list[_RawStep] = []
        for action in _actions():
            obs, reward, terminated, time_outs, extras = raw.step(action)
            policy = obs["policy"]
            assert isinstance(policy, Tensor)
            done = bool((terminated | time_outs).any())
            final = extras["final_obs"]["policy"].clone() if compute_final_obs and done else None
            steps.append(
                _RawStep(
                    policy.clone(), reward.clone(), terminated.clone(), time_outs.clone(), final
                )
            )
        return start, steps
    finally:
        env.close()


@pytest.mark.parametrize("env_id", [MANAGER_TASK, DIRECT_TASK])
@pytest.mark.parametrize("is_finite_horizon", [False, True])
def test_adapter_maps_every_step_of_the_raw_env(env_id: str, *, is_finite_horizon: bool) -> None:
    """Flags, rewards, observations and final_obs equal the raw env's, mapped as documented."""
    start, raw_steps = _raw_rollout(env_id, compute_final_obs=True)
    env = make_real(
        env_id,
        num_envs=NUM_ENVS,
        seed=3,
        compute_final_obs=True,
        is_finite_horizon=is_finite_horizon,
        episode_length_s=EPISODE_LENGTH_S,
    )
    saw_termination = saw_time_out = False
    try:
        obs, _ = env.reset(seed=3)
        torch.testing.assert_close(obs["policy"], start, rtol=0.0, atol=0.0)
        for index, (action, raw) in enumerate(zip(_actions(), raw_steps, strict=True)):
            result = env.step(action)
            where = f"step {index}"
            torch.testing.assert_close(result.obs["policy"], raw.obs, rtol=0, atol=0, msg=where)
            torch.testing.assert_close(result.reward, raw.reward, rtol=0, atol=0, msg=where)
            if is_finite_horizon:
                expected_terminated = raw.terminated | raw.time_outs
                expected_truncated = torch.zeros_like(raw.time_outs)
            else:
                expected_terminated = raw.terminated
                expected_truncated = raw.time_outs
            assert torch.equal(result.terminated, expected_terminated), where
            assert torch.equal(result.truncated, expected_truncated), where
            done = raw.terminated | raw.time_outs
            assert result.final_obs is not None
            final = result.final_obs["policy"]
            if raw.final_obs is None:
                assert not done.any(), where
                assert torch.equal(final, result.obs["policy"]), where
                continue
            # Rows that ended carry the raw terminal observation, the others this step's.
            assert torch.equal(final[done], raw.final_obs[done]), where
            assert torch.equal(final[~done], raw.obs[~done]), where
            # The terminal observation is the state before the reset, not the reset state.
            assert not torch.equal(final[done], raw.obs[done]), where
            ended_out = raw.terminated
            if ended_out.any():
                saw_termination = True
                assert (final[ended_out, 0].abs() > MAX_CART_POS).all(), where
                # Reset states are drawn from the task's ranges: |cart| <= 1 m, |pole| <= pi/4.
                assert (result.obs["policy"][ended_out, 0].abs() <= 1.0).all(), where
            if (raw.time_outs & ~raw.terminated).any():
                saw_time_out = True
                assert (final[raw.time_outs, 0].abs() <= MAX_CART_POS).all(), where
    finally:
        env.close()
    assert saw_termination
    assert saw_time_out


@pytest.mark.parametrize("env_id", [MANAGER_TASK, DIRECT_TASK])
def test_without_compute_final_obs(env_id: str) -> None:
    """Without compute_final_obs the adapter provides no final_obs and keeps the raw flags."""
    start, raw_steps = _raw_rollout(env_id, compute_final_obs=False)
    env = make_real(
        env_id,
        num_envs=NUM_ENVS,
        seed=3,
        compute_final_obs=False,
        episode_length_s=EPISODE_LENGTH_S,
    )
    try:
        assert not env.provides_final_obs
        obs, _ = env.reset(seed=3)
        assert torch.equal(obs["policy"], start)
        ended = 0
        for index, (action, raw) in enumerate(zip(_actions(), raw_steps, strict=True)):
            result = env.step(action)
            assert result.final_obs is None, f"step {index}"
            assert torch.equal(result.terminated, raw.terminated), f"step {index}"
            assert torch.equal(result.truncated, raw.time_outs), f"step {index}"
            assert torch.equal(result.obs["policy"], raw.obs), f"step {index}"
            ended += int((raw.terminated | raw.time_outs).sum())
        assert ended > 0
    finally:
        env.close()


@pytest.mark.parametrize("env_id", [MANAGER_TASK, DIRECT_TASK])
def test_episode_logs_surface_on_reset_steps(env_id: str) -> None:
    """info['log'] appears exactly on steps where some row reset, for both tasks' log styles."""
    env = make_real(env_id, num_envs=NUM_ENVS, seed=3, episode_length_s=EPISODE_LENGTH_S)
    try:
        _, info = env.reset(seed=3)
        assert "Metrics/success_rate" in info["log"]
        for index, action in enumerate(_actions()):
            result = env.step(action)
            assert ("log" in result.info) == bool(result.done.any()), f"step {index}"
            if "log" in result.info:
                rate = result.info["log"]["Metrics/success_rate"]
                assert isinstance(rate, Tensor)
                assert rate.shape == ()
    finally:
        env.close()
