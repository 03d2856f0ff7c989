"""Tests for typedrl.apg._cut_rows: rows cut for an exploded observation stay masked until reset."""

import math

import pytest
import torch
from tensordict import TensorDict

from tests.apg.broken_envs import NaNRow, point_mass
from tests.loggers import RecordingLogger
from typedrl.apg import (
    DifferentiableCollector,
    DifferentiableTrainer,
    DifferentiableTrainerConfig,
    SHACConfig,
)
from typedrl.apg._cut_rows import RowGate, exploded_rows
from typedrl.errors import CheckpointError
from typedrl.testing import LinearDifferentiablePolicy, QuadraticEnv
from typedrl.training import RunOptions


def test_exploded_rows_of_every_floating_leaf() -> None:
    """A row is cut when any float feature of any key is non-finite or beyond the limit."""
    obs = TensorDict(
        {
            "a": torch.tensor([[0.0, 1.0], [0.0, math.inf], [0.0, 0.0], [0.0, 0.0]]),
            "b": torch.tensor([[0.5], [0.0], [-2.0], [0.0]]),
            "count": torch.tensor([[10**9], [0], [0], [0]]),
        },
        batch_size=[4],
    )
    assert exploded_rows(obs, 1.0).tolist() == [False, True, True, False]


def test_the_gate_leaves_the_gradient_alone_until_it_is_closed() -> None:
    """A rollout that failed before its end never armed its gate: the gradient passes."""
    action = torch.ones(2, 1, requires_grad=True)
    torch.autograd.backward(RowGate().attach(action, 0).sum())
    assert action.grad is not None
    assert action.grad.tolist() == [[1.0], [1.0]]


def sick_rollout_collector(*, start: int, limit: float | None = 1e6) -> DifferentiableCollector:
    """A collector over 3 rows of a QuadraticEnv whose row 0 turns NaN at global step ``start``."""
    collector = DifferentiableCollector(
        NaNRow(QuadraticEnv(num_envs=3, horizon=100), start=start), observation_limit=limit
    )
    collector.reset(seed=0)
    return collector


def test_a_cut_row_is_masked_until_the_env_ends_it() -> None:
    """Row 0 explodes at step 2: cut step kept without reward, then invalid and zeroed."""
    collector = sick_rollout_collector(start=2)
    policy = LinearDifferentiablePolicy(obs_dim=1, act_dim=1)
    rollout = collector.collect(policy, num_steps=5)
    assert rollout.valid[:, 0].tolist() == [True, True, True, False, False]
    assert rollout.valid[:, 1:].all()
    # The policy acted on zeros once the row was masked; nothing stored is NaN.
    assert rollout.observations["obs"][3:, 0].tolist() == [[0.0], [0.0]]
    for tensor in (rollout.rewards, rollout.observations["obs"], rollout.actions):
        assert bool(torch.isfinite(tensor).all())
    assert rollout.rewards[2:, 0].tolist() == [0.0, 0.0, 0.0]
    assert bool(torch.isnan(rollout.terminal_observations["obs"][2, 0]).all())
    assert rollout.terminal_observations["obs"][3:, 0].tolist() == [[0.0], [0.0]]
    # The NaN inside the env never reaches the policy's gradient.
    torch.autograd.backward(torch.where(rollout.valid, rollout.rewards, 0.0).sum())
    assert policy.linear.weight.grad is not None
    assert bool(torch.isfinite(policy.linear.weight.grad).all())
    # The next rollout starts masked: the row stays so until the env ends its episode.
    collector.detach_state()
    assert not collector.collect(policy, num_steps=3).valid[:, 0].any()


def test_without_a_limit_nothing_is_masked() -> None:
    """observation_limit=None (APG): the NaN row's steps stay valid and reach the gradient."""
    collector = sick_rollout_collector(start=2, limit=None)
    policy = LinearDifferentiablePolicy(obs_dim=1, act_dim=1)
    rollout = collector.collect(policy, num_steps=5)
    assert rollout.valid.all()
    torch.autograd.backward(rollout.rewards.sum())
    assert policy.linear.weight.grad is not None
    assert not bool(torch.isfinite(policy.linear.weight.grad).all())


def test_the_mask_survives_a_checkpoint_and_reset_clears_it() -> None:
    """masked_rows travels with the collector state; a reset unmasks every row."""

    def sick_point_mass() -> DifferentiableCollector:
        env = NaNRow(point_mass(num_envs=3, max_episode_steps=100), start=0)
        collector = DifferentiableCollector(env, observation_limit=1e6)
        collector.reset(seed=0)
        return collector

    collector = sick_point_mass()
    policy = LinearDifferentiablePolicy(obs_dim=6, act_dim=2)
    collector.collect(policy, num_steps=2)
    state = collector.state_dict()
    assert state["masked_rows"].tolist() == [True, False, False]
    restored = sick_point_mass()
    restored.load_state_dict(state)
    assert not restored.collect(policy, num_steps=1).valid[0, 0]
    with pytest.raises(CheckpointError, match=r"'masked_rows' must be a tensor of shape \[3\]"):
        restored.load_state_dict({**state, "masked_rows": torch.zeros(2, dtype=torch.bool)})
    restored.reset(seed=1)
    assert restored.state_dict()["masked_rows"].tolist() == [False, False, False]


def test_shac_keeps_learning_after_a_row_goes_nan_and_never_ends() -> None:
    """SHAC: row 0 NaN from step 5 to past the run's end; every update is applied, one cut."""
    logger = RecordingLogger()
    trainer = DifferentiableTrainer(
        env=NaNRow(point_mass(max_episode_steps=1000), start=5),
        config=DifferentiableTrainerConfig(
            total_updates=5,
            segment_length=4,
            hidden=(8,),
            algorithm=SHACConfig(critic_hidden=(8,), critic_iterations=1),
        ),
        options=RunOptions(progress=False, loggers=[logger]),
    )
    trainer.train()
    assert [record["train/skipped_nonfinite"] for record in logger.records] == [0.0] * 5
    # Counted once, in the window of step 5; the masked steps after it are not cut again.
    assert [record["train/cut_rows"] for record in logger.records] == [0.0, 1.0, 0.0, 0.0, 0.0]
    assert all(math.isfinite(record["loss/critic"]) for record in logger.records)
    assert trainer.algorithm.counters.state_dict() == {"applied": 5, "skipped": 0}
    assert all(bool(torch.isfinite(p).all()) for p in trainer.model.parameters())
