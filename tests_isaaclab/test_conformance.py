"""The conformance checker on Isaac Lab's real cartpole tasks (kit-less, Newton, CPU)."""

import pytest

from tests_isaaclab._real import DIRECT_TASK, MANAGER_TASK, make_real
from typedrl.envs import check_vec_env
from typedrl.protocols import VecEnv


@pytest.mark.parametrize("env_id", [MANAGER_TASK, DIRECT_TASK])
@pytest.mark.parametrize("is_finite_horizon", [False, True])
@pytest.mark.parametrize("compute_final_obs", [True, False])
def test_check_vec_env_passes(
    env_id: str, *, is_finite_horizon: bool, compute_final_obs: bool
) -> None:
    """Both tasks pass every rule, finite and infinite horizon, with and without final_obs."""
    # Episodes of 0.3 s (18 steps) end by time-out inside the checker's rollouts, and
    # actions of up to 1 (100 N) push some carts off the rail (terminations).
    env = make_real(
        env_id,
        num_envs=8,
        seed=0,
        compute_final_obs=compute_final_obs,
        is_finite_horizon=is_finite_horizon,
        episode_length_s=0.3,
    )
    try:
        assert isinstance(env, VecEnv)
        assert env.provides_final_obs is compute_final_obs
        assert env.is_finite_horizon is is_finite_horizon
        report = check_vec_env(env, seed=0, num_steps=40, max_examples=4, min_episode_length=2)
        report.raise_if_failed()
        # With final_obs the terminal observations are checked; without, that none appear.
        rule = "final_obs.terminal" if compute_final_obs else "final_obs.absent"
        assert rule in report.checks_run
    finally:
        env.close()
