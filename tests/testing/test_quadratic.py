"""Tests for typedrl.testing.QuadraticEnv and ScheduledQuadraticEnv."""

import pytest
import torch

from typedrl.errors import CheckpointError, ConfigError, SpecError
from typedrl.testing import ContactQuadraticEnv, QuadraticEnv, ScheduledQuadraticEnv


def test_seeding_reproduces_initial_states() -> None:
    """The same seed gives the same initial states; another seed does not."""
    env = QuadraticEnv(num_envs=4)
    first, _ = env.reset(seed=3)
    again, _ = env.reset(seed=3)
    other, _ = env.reset(seed=4)
    assert torch.equal(first["obs"], again["obs"])
    assert not torch.equal(first["obs"], other["obs"])
    assert bool((first["obs"].abs() <= 1.0).all())


def test_dynamics_and_reward() -> None:
    """x' = x + a and reward = -x'^2."""
    env = QuadraticEnv(num_envs=2, horizon=5)
    obs, _ = env.reset(seed=0)
    action = torch.tensor([[0.5], [-0.25]])
    result = env.step(action)
    expected = obs["obs"] + action
    assert torch.allclose(result.obs["obs"], expected)
    assert torch.allclose(result.reward, -(expected**2).squeeze(-1))


def test_gradient_matches_finite_differences() -> None:
    """Autograd through three steps agrees with central finite differences (float64)."""
    env = QuadraticEnv(num_envs=1, horizon=10, dtype="float64")

    def objective(actions: torch.Tensor) -> torch.Tensor:
        env.reset(seed=7)
        total = torch.zeros((), dtype=torch.float64)
        for k in range(actions.shape[0]):
            total = total + env.step(actions[k].reshape(1, 1)).reward.sum()
        return total

    actions = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(objective(actions), actions)
    eps = 1e-6
    numeric = torch.zeros(3, dtype=torch.float64)
    for k in range(3):
        step = torch.zeros(3, dtype=torch.float64)
        step[k] = eps
        numeric[k] = (objective(actions.detach() + step) - objective(actions.detach() - step)) / (
            2 * eps
        )
    assert torch.allclose(grad, numeric, atol=1e-6)


def test_autoreset_cuts_the_graph_but_terminal_reward_keeps_it() -> None:
    """A truncated row restarts graph-free; its terminal reward and final_obs keep gradients."""
    env = QuadraticEnv(num_envs=2, horizon=1)
    env.reset(seed=0)
    action = torch.zeros(2, 1, requires_grad=True)
    result = env.step(action)
    assert result.truncated.tolist() == [True, True]
    assert result.reward.requires_grad
    assert result.final_obs is not None
    assert result.final_obs["obs"].requires_grad
    (grad,) = torch.autograd.grad(result.obs["obs"].sum(), action, allow_unused=True)
    assert grad is None or bool((grad == 0).all())


def test_detach_state_keeps_values_and_cuts_graph() -> None:
    """detach_state returns the same values without a graph and resets nothing."""
    env = QuadraticEnv(num_envs=2, horizon=10)
    env.reset(seed=0)
    result = env.step(torch.ones(2, 1, requires_grad=True))
    assert result.obs["obs"].requires_grad
    detached = env.detach_state()
    assert not detached["obs"].requires_grad
    assert torch.equal(detached["obs"], result.obs["obs"].detach())
    follow = env.step(torch.zeros(2, 1))
    assert not follow.reward.requires_grad
    assert follow.truncated.tolist() == [False, False]


def test_observation_normalize_mask() -> None:
    """The single feature may be normalised."""
    assert QuadraticEnv(num_envs=1).observation_normalize_mask.tolist() == [True]


def test_rejects_bad_inputs() -> None:
    """Bad configs and actions raise TypedRLError subclasses."""
    with pytest.raises(ConfigError, match="horizon"):
        QuadraticEnv(num_envs=1, horizon=0)
    env = QuadraticEnv(num_envs=2)
    env.reset()
    with pytest.raises(SpecError, match=r"shape \[2, 1\]"):
        env.step(torch.zeros(2))


def test_schedule_sets_horizon() -> None:
    """Each prepared rollout uses its scheduled horizon and reports it in metadata."""
    env = ScheduledQuadraticEnv(num_envs=2, horizons=[2, 3])
    spec = env.prepare_differentiable_rollout(1)
    assert spec.num_steps == 3
    assert spec.metadata["horizon"] == 3.0
    env.reset(seed=0)
    flags = [env.step(torch.zeros(2, 1)).truncated.tolist() for _ in range(3)]
    assert flags == [[False, False], [False, False], [True, True]]
    assert not env.detach_state()["obs"].requires_grad
    env.close()


def test_schedule_rejects_bad_values() -> None:
    """Empty schedules and negative rollout indices are rejected."""
    with pytest.raises(ConfigError, match="must not be empty"):
        ScheduledQuadraticEnv(num_envs=1, horizons=[])
    env = ScheduledQuadraticEnv(num_envs=1, horizons=[1])
    with pytest.raises(ConfigError, match="rollout_index must be a non-negative int, got -1"):
        env.prepare_differentiable_rollout(-1)


def test_contact_env_refuses_a_state_of_other_keys() -> None:
    """A state with other keys (here a wrapper's layout) raises CheckpointError naming both."""
    env = ContactQuadraticEnv(num_envs=2)
    with pytest.raises(
        CheckpointError,
        match=r"expected keys \['contact', 'generator', 't', 'x'\], got \['env', 'wrapper'\]",
    ):
        env.load_state_dict({"env": env.state_dict(), "wrapper": {}})
