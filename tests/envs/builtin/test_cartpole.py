"""CartPole against Gymnasium's CartPole-v1, and its continuous variant."""

import math
from typing import Any, cast

import gymnasium as gym
import numpy as np
import pytest
import torch

from typedrl.envs.builtin import CartPole


def test_discrete_matches_gymnasium_over_whole_episodes() -> None:
    """Discrete CartPole (float64) follows Gymnasium's CartPole-v1 episode after episode."""
    num_envs = 6
    env = CartPole(num_envs=num_envs, dtype="float64")
    obs, _ = env.reset(seed=0)
    references = [cast(Any, gym.make("CartPole-v1").unwrapped) for _ in range(num_envs)]
    for row, reference in enumerate(references):
        reference.reset(seed=row)
        reference.state = obs["obs"][row].numpy().copy()
    generator = torch.Generator().manual_seed(0)
    episodes = 0
    for _ in range(300):
        action = torch.randint(0, 2, (num_envs,), generator=generator)
        result = env.step(action)
        assert result.final_obs is not None
        assert torch.equal(result.reward, torch.ones(num_envs, dtype=torch.float64))
        for row, reference in enumerate(references):
            _, reward, terminated, _, _ = reference.step(int(action[row]))
            assert np.allclose(result.final_obs["obs"][row].numpy(), reference.state, atol=1e-9)
            assert bool(result.terminated[row]) == terminated
            assert reward == 1.0
            if bool(result.done[row]):
                episodes += 1
                reference.reset()
                reference.state = result.obs["obs"][row].numpy().copy()
    assert episodes > 20
    for reference in references:
        reference.close()


def test_float32_one_step_matches_gymnasium() -> None:
    """In float32, one step from the same state matches Gymnasium to float32 tolerance."""
    env = CartPole(num_envs=64)
    obs, _ = env.reset(seed=1)
    action = torch.arange(64) % 2
    result = env.step(action)
    reference = cast(Any, gym.make("CartPole-v1").unwrapped)
    reference.reset(seed=0)
    assert result.final_obs is not None
    for row in range(64):
        reference.state = obs["obs"][row].numpy().astype(np.float64)
        next_obs, _, _, _, _ = reference.step(int(action[row]))
        assert np.allclose(result.final_obs["obs"][row].numpy(), next_obs, atol=1e-6)
    reference.close()


def test_spaces_and_limits() -> None:
    """Discrete(2) or Box(-1, 1, (1,)) actions; Gymnasium's bounds; 500-step episodes."""
    discrete = CartPole(num_envs=1)
    continuous = CartPole(num_envs=1, action_mode="continuous")
    assert discrete.single_action_space == gym.spaces.Discrete(2)
    assert discrete.action_mode == "discrete"
    assert continuous.action_mode == "continuous"
    box = continuous.single_action_space
    assert isinstance(box, gym.spaces.Box)
    assert box.shape == (1,)
    assert float(box.low[0]) == -1.0
    assert float(box.high[0]) == 1.0
    assert discrete.single_observation_space == gym.make("CartPole-v1").observation_space
    assert discrete.max_episode_steps == 500


def test_continuous_reward_is_the_documented_surrogate() -> None:
    """r = cos(theta') - 0.1 (x' / 2.4)^2 - 0.01 a^2; termination is Gymnasium's."""
    env = CartPole(num_envs=3, action_mode="continuous", dtype="float64")
    env.reset(seed=0)
    action = torch.tensor([[0.5], [-1.0], [0.0]], dtype=torch.float64)
    result = env.step(action)
    assert result.final_obs is not None
    x = result.final_obs["obs"][:, 0]
    theta = result.final_obs["obs"][:, 2]
    expected = torch.cos(theta) - 0.1 * (x / 2.4) ** 2 - 0.01 * action[:, 0] ** 2
    torch.testing.assert_close(result.reward, expected)


def test_continuous_force_scales_like_discrete_push() -> None:
    """A continuous action of +1 or -1 equals the discrete push right or left."""
    discrete = CartPole(num_envs=2, dtype="float64")
    continuous = CartPole(num_envs=2, action_mode="continuous", dtype="float64")
    discrete.reset(seed=5)
    continuous.reset(seed=5)
    left = discrete.step(torch.tensor([1, 0]))
    right = continuous.step(torch.tensor([[1.0], [-1.0]], dtype=torch.float64))
    torch.testing.assert_close(left.obs["obs"], right.obs["obs"])


@pytest.mark.parametrize("angle", [0.25, -0.25])
def test_terminates_beyond_twelve_degrees(angle: float) -> None:
    """A pole beyond 12 degrees terminates the episode (and the row restarts)."""
    env = CartPole(num_envs=1, dtype="float64")
    env.reset(seed=0)
    env._state = torch.tensor([[0.0, 0.0, angle, 0.0]], dtype=torch.float64)
    result = env.step(torch.tensor([1]))
    assert bool(result.terminated[0])
    assert result.final_obs is not None
    assert abs(float(result.final_obs["obs"][0, 2])) > 12 * 2 * math.pi / 360
    assert float(result.obs["obs"].abs().max()) <= 0.05


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_discrete_push_side_for_any_integer_dtype_and_value(dtype: torch.dtype) -> None:
    """Any action above 0 pushes right and any other pushes left, whatever the integer dtype."""
    values = [0, 1, 7, 0] if dtype == torch.uint8 else [0, 1, 7, -3]
    reference = CartPole(num_envs=4, dtype="float64")
    env = CartPole(num_envs=4, dtype="float64")
    reference.reset(seed=2)
    env.reset(seed=2)
    expected = reference.step(torch.tensor([0, 1, 1, 0])).obs["obs"]
    assert torch.equal(env.step(torch.tensor(values, dtype=dtype)).obs["obs"], expected)
    # Every row would differ had it been pushed the other way.
    flipped = CartPole(num_envs=4, dtype="float64")
    flipped.reset(seed=2)
    other_side = flipped.step(torch.tensor([1, 0, 0, 1])).obs["obs"]
    assert bool((other_side != expected).any(dim=1).all())
