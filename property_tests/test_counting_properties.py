"""Property tests: CountingVecEnv matches a per-row reference model under autoreset."""

import torch
from hypothesis import given
from hypothesis import strategies as st

from property_tests import strategies
from typedrl.testing import CountingVecEnv


@st.composite
def _setups(draw: st.DrawFn) -> tuple[int, list[int] | None, list[int] | None, int]:
    num_envs = draw(st.integers(1, 5))
    terminate = draw(strategies.episode_limits(num_envs))
    truncate = draw(strategies.episode_limits(num_envs))
    num_steps = draw(st.integers(1, 20))
    return num_envs, terminate, truncate, num_steps


@given(setup=_setups())
def test_counting_env_matches_reference(
    setup: tuple[int, list[int] | None, list[int] | None, int],
) -> None:
    """Every row's obs, reward, flags and terminal obs equal a hand-stepped reference."""
    num_envs, terminate, truncate, num_steps = setup
    env = CountingVecEnv(num_envs=num_envs, terminate_after=terminate, truncate_after=truncate)
    env.reset(seed=0)
    t = [0] * num_envs
    episode = [0] * num_envs
    for _ in range(num_steps):
        result = env.step(torch.zeros(num_envs, 1))
        assert result.final_obs is not None
        for row in range(num_envs):
            t[row] += 1
            term = terminate is not None and t[row] == terminate[row]
            trunc = truncate is not None and t[row] == truncate[row]
            assert result.final_obs["obs"][row].tolist() == [t[row], episode[row], row]
            assert result.reward[row].item() == t[row]
            assert bool(result.terminated[row]) == term
            assert bool(result.truncated[row]) == trunc
            if term or trunc:
                t[row] = 0
                episode[row] += 1
            assert result.obs["obs"][row].tolist() == [t[row], episode[row], row]
        assert bool(result.valid.all())
