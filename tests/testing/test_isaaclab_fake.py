"""Tests for the Isaac Lab fakes in typedrl.testing._isaaclab_fake."""

from typing import Any

import pytest
import torch
from torch import Tensor

from typedrl.envs._isaaclab import IsaacLabEnvLike, IsaacLabObs
from typedrl.testing._isaaclab_fake import FakeDirectRLEnv, FakeManagerBasedRLEnv, FakeRLEnvCfg

FakeEnv = FakeManagerBasedRLEnv | FakeDirectRLEnv
FAKES = [FakeManagerBasedRLEnv, FakeDirectRLEnv]


def _make(kind: type[FakeEnv], **cfg: Any) -> FakeEnv:
    cfg.setdefault("seed", 0)
    return kind(FakeRLEnvCfg(**cfg))


def _policy(obs: IsaacLabObs) -> Tensor:
    policy = obs["policy"]
    assert isinstance(policy, Tensor)
    return policy


@pytest.mark.parametrize("kind", FAKES)
def test_surface(kind: type[FakeEnv]) -> None:
    """The fakes expose Isaac Lab's attributes with upstream's types."""
    env = _make(kind, num_envs=3, sim_dt=0.05, decimation=2, episode_length_s=1.0)
    assert isinstance(env, IsaacLabEnvLike)
    assert env.unwrapped is env
    assert env.num_envs == 3
    assert env.device == "cpu"
    assert env.physics_dt == 0.05
    assert env.step_dt == pytest.approx(0.1)
    assert env.max_episode_length_s == 1.0
    assert env.max_episode_length == 10
    assert env.observation_space.shape is None
    assert env.action_space.shape == (3, 2)
    assert env.single_action_space.shape == (2,)
    assert float(env.single_action_space.high[0]) == float("inf")


@pytest.mark.parametrize("kind", FAKES)
def test_step_order_and_counters(kind: type[FakeEnv]) -> None:
    """Physics moves points by decimation * sim_dt * action; counters advance per step."""
    env = _make(kind, num_envs=2, termination_radius=100.0)
    obs, _ = env.reset(seed=0)
    start = _policy(obs)
    obs, reward, terminated, time_outs, _ = env.step(torch.ones(2, 2))
    expected = start + 0.05 * torch.ones(2, 2) + 0.05 * torch.ones(2, 2)
    assert torch.equal(_policy(obs), expected)
    assert torch.equal(reward, -(expected**2).sum(-1))
    assert env.episode_length_buf.tolist() == [1, 1]
    assert env.common_step_counter == 1
    assert terminated.dtype == torch.bool
    assert time_outs.dtype == torch.bool
    assert reward.dtype == torch.float32


@pytest.mark.parametrize("kind", FAKES)
def test_time_out_resets_rows(kind: type[FakeEnv]) -> None:
    """Rows time out when episode_length_buf reaches max_episode_length and restart at 0."""
    env = _make(kind, num_envs=2, episode_length_s=0.3, termination_radius=100.0)
    env.reset(seed=0)
    for _ in range(2):
        _, _, _, time_outs, _ = env.step(torch.zeros(2, 2))
        assert not time_outs.any()
    _, _, terminated, time_outs, _ = env.step(torch.zeros(2, 2))
    assert time_outs.tolist() == [True, True]
    assert terminated.tolist() == [False, False]
    assert env.episode_length_buf.tolist() == [0, 0]
    assert env.common_step_counter == 3


@pytest.mark.parametrize("kind", FAKES)
def test_termination_threshold(kind: type[FakeEnv]) -> None:
    """A row terminates when a coordinate leaves the termination radius."""
    env = _make(kind, num_envs=2, termination_radius=0.5, init_range=0.0)
    env.reset(seed=0)
    action = torch.tensor([[0.0, -6.0], [4.0, 4.0]])
    _, _, terminated, _, _ = env.step(action)
    assert terminated.tolist() == [True, False]
    assert env.position[0].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("kind", FAKES)
def test_persistent_buffers_and_extras(kind: type[FakeEnv]) -> None:
    """Flags (and the manager-based reward) are buffers reused in place; extras is one dict."""
    env = _make(kind, num_envs=2)
    env.reset(seed=0)
    first = env.step(torch.zeros(2, 2))
    second = env.step(torch.zeros(2, 2))
    assert first[2] is second[2]
    assert first[3] is second[3]
    assert first[4] is second[4] is env.extras
    assert (first[1] is second[1]) == (kind is FakeManagerBasedRLEnv)


@pytest.mark.parametrize("kind", FAKES)
def test_final_obs_written_only_when_rows_end_and_left_stale(kind: type[FakeEnv]) -> None:
    """extras['final_obs'] holds pre-reset observations of all rows and is never deleted."""
    env = _make(kind, num_envs=2, termination_radius=0.5, init_range=0.0, compute_final_obs=True)
    env.reset(seed=0)
    env.step(torch.zeros(2, 2))
    assert "final_obs" not in env.extras
    action = torch.tensor([[6.0, 0.0], [1.0, 0.0]])
    obs, _, terminated, _, extras = env.step(action)
    assert terminated.tolist() == [True, False]
    final_policy = _policy(extras["final_obs"])
    assert final_policy[0].tolist() == pytest.approx([0.6, 0.0])
    assert torch.equal(final_policy[1], _policy(obs)[1])
    stale = extras["final_obs"]
    env.step(torch.zeros(2, 2))
    assert env.extras["final_obs"] is stale


@pytest.mark.parametrize("kind", FAKES)
def test_no_final_obs_without_flag(kind: type[FakeEnv]) -> None:
    """Without compute_final_obs nothing is written."""
    env = _make(kind, num_envs=1, episode_length_s=0.1)
    env.reset(seed=0)
    _, _, _, time_outs, extras = env.step(torch.zeros(1, 2))
    assert time_outs.tolist() == [True]
    assert "final_obs" not in extras


def test_manager_based_log_is_a_new_dict_on_reset_steps() -> None:
    """The manager-based env builds a new extras['log'] on steps that reset rows only."""
    env = _make(FakeManagerBasedRLEnv, num_envs=2, episode_length_s=0.2, termination_radius=100.0)
    _, extras = env.reset(seed=0)
    after_reset = extras["log"]
    env.step(torch.zeros(2, 2))
    assert env.extras["log"] is after_reset
    env.step(torch.zeros(2, 2))
    log = env.extras["log"]
    assert log is not after_reset
    assert set(log) == {
        "Episode_Reward/distance",
        "Metrics/success_rate",
        "Episode_Termination/out_of_bounds",
        "Episode_Termination/time_out",
    }


def test_direct_log_is_one_dict_updated_in_place() -> None:
    """The direct task writes new values into the one extras['log'] dict, as the cartpole does."""
    env = _make(FakeDirectRLEnv, num_envs=2, episode_length_s=0.2, termination_radius=100.0)
    _, extras = env.reset(seed=0)
    log = extras["log"]
    first = log["Metrics/success_rate"]
    env.step(torch.zeros(2, 2))
    assert env.extras["log"]["Metrics/success_rate"] is first
    env.step(torch.zeros(2, 2))
    assert env.extras["log"] is log
    assert log["Metrics/success_rate"] is not first
    assert log["Metrics/success_rate"].item() == 1.0


@pytest.mark.parametrize("kind", FAKES)
def test_log_values_are_float_tensors_as_upstream(kind: type[FakeEnv]) -> None:
    """Log values are 0-d float32 tensors; termination shares count all rows' last episodes."""
    env = _make(kind, num_envs=4, episode_length_s=0.2, termination_radius=1.5, init_range=0.0)
    env.reset(seed=0)
    # Rows 0 and 1 leave the bounds in the first step; rows 2 and 3 time out at the second.
    push = torch.tensor([[20.0, 0.0], [-20.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    _, _, terminated, _, extras = env.step(push)
    assert terminated.tolist() == [True, True, False, False]
    log = dict(extras["log"])
    for value in log.values():
        assert isinstance(value, Tensor)
        assert value.shape == ()
        assert value.dtype == torch.float32
    assert log["Episode_Termination/out_of_bounds"].item() == 0.5
    assert log["Episode_Termination/time_out"].item() == 0.0
    assert log["Metrics/success_rate"].item() == 0.0
    _, _, _, time_outs, extras = env.step(torch.zeros(4, 2))
    assert time_outs.tolist() == [False, False, True, True]
    log = extras["log"]
    # Rows 0 and 1 still count their last (out-of-bounds) episode.
    assert log["Episode_Termination/out_of_bounds"].item() == 0.5
    assert log["Episode_Termination/time_out"].item() == 0.5
    assert log["Metrics/success_rate"].item() == 1.0


def test_manager_based_partial_reset() -> None:
    """ManagerBasedRLEnv.reset takes env_ids as a tensor or a slice."""
    env = FakeManagerBasedRLEnv(FakeRLEnvCfg(num_envs=3, termination_radius=100.0))
    env.reset(seed=0)
    env.step(torch.ones(3, 2))
    env.reset(torch.tensor([1]))
    assert env.episode_length_buf.tolist() == [1, 0, 1]
    env.reset(slice(0, 1))
    assert env.episode_length_buf.tolist() == [0, 0, 1]
    env.reset()
    assert env.episode_length_buf.tolist() == [0, 0, 0]


@pytest.mark.parametrize("kind", FAKES)
def test_seeding(kind: type[FakeEnv]) -> None:
    """reset(seed=...) and cfg.seed make the fakes deterministic."""
    first = _policy(_make(kind, seed=5).reset()[0])
    again = _policy(_make(kind, seed=5).reset()[0])
    assert torch.equal(first, again)
    env = _make(kind, seed=None)
    seeded = _policy(env.reset(seed=5)[0])
    assert torch.equal(_policy(_make(kind, seed=None).reset(seed=5)[0]), seeded)
    assert torch.equal(_policy(env.reset(seed=5)[0]), seeded)
    assert not torch.equal(_policy(env.reset(seed=6)[0]), seeded)
    assert kind.seed(7) == 7
    assert 0 <= kind.seed() < 10_000


@pytest.mark.parametrize("critic", ["concatenated", "nested", "none"])
def test_observation_groups_match_spaces(critic: str) -> None:
    """Every observation leaf has the shape its space declares."""
    env = _make(FakeDirectRLEnv, num_envs=2, critic=critic)
    obs, _ = env.reset(seed=0)
    assert set(obs) == set(env.single_observation_space.spaces)
    for group, space in env.single_observation_space.spaces.items():
        value = obs[group]
        if isinstance(value, Tensor):
            assert value.shape == (2, *(space.shape or ()))
        else:
            for term, leaf in value.items():
                assert leaf.shape == (2, *(space[term].shape or ()))  # type: ignore[index]


def test_close() -> None:
    """close() marks the env closed and may be called twice."""
    env = _make(FakeManagerBasedRLEnv)
    env.close()
    env.close()
    assert env.is_closed


@pytest.mark.parametrize("kind", FAKES)
@pytest.mark.parametrize("seed", [-2, 2**32])
def test_seed_range_as_upstream(kind: type[FakeEnv], seed: int) -> None:
    """Seeds outside [0, 2**32) raise ValueError, as Isaac Lab's NumPy seeding does."""
    env = _make(kind, num_envs=1)
    with pytest.raises(ValueError, match="Seed must be between"):
        env.reset(seed=seed)
