"""Tests for typedrl.shac._config: validation, defaults, round trips, the trainer's rules."""

import dataclasses
import itertools
import json
from typing import Any

import pytest

from tests.shac.windows import FeaturePolicy, make_shac
from typedrl.apg import APGConfig, DifferentiableTrainerConfig
from typedrl.errors import ConfigError
from typedrl.shac import SHACConfig


def test_defaults() -> None:
    """Xu et al.'s CartPoleSwingUp settings, with an actor learning rate of 2e-3 (not 1e-2)."""
    config = SHACConfig()
    actor = config.actor
    assert (actor.learning_rate, actor.betas, actor.learning_rate_schedule) == (
        2e-3,
        (0.7, 0.95),
        "linear",
    )
    assert (actor.max_grad_norm, actor.gamma, actor.optimizer) == (1.0, 0.99, "adam")
    assert (config.critic_learning_rate, config.critic_betas) == (1e-3, (0.7, 0.95))
    assert config.critic_learning_rate_schedule == "linear"
    assert config.critic_min_learning_rate == 0.0
    assert (config.gae_lambda, config.target_alpha) == (0.95, 0.2)
    assert (config.critic_iterations, config.critic_minibatches) == (16, 4)
    assert (config.critic_hidden, config.critic_activation, config.critic_layer_norm) == (
        (64, 64),
        "elu",
        True,
    )
    assert config.critic_max_grad_norm == 1.0
    assert config.normalize_returns is False


def test_valid_edge_values_are_accepted_and_normalised() -> None:
    """Edge values of the ranges are accepted; ints become floats and lists tuples."""
    config = SHACConfig(
        critic_learning_rate=1,
        observation_limit=10,
        critic_max_grad_norm=None,
        gae_lambda=0,
        target_alpha=1,
        critic_iterations=1,
        critic_minibatches=1,
        critic_betas=[0, 0.5],  # type: ignore[arg-type]
        critic_hidden=[8],  # type: ignore[arg-type]
    )
    assert isinstance(config.critic_learning_rate, float)
    assert isinstance(config.observation_limit, float)
    assert (config.gae_lambda, config.target_alpha) == (0.0, 1.0)
    assert config.critic_betas == (0.0, 0.5)
    assert config.critic_hidden == (8,)
    assert config.critic_max_grad_norm is None
    assert SHACConfig(target_alpha=0.0, gae_lambda=1.0).target_alpha == 0.0
    assert SHACConfig(critic_hidden=()).critic_hidden == ()


def test_the_critic_floor_may_equal_the_critic_rate_and_not_exceed_it() -> None:
    """critic_min_learning_rate, like the actor's floor, lies in [0, critic_learning_rate]."""
    assert SHACConfig(critic_min_learning_rate=1e-3).critic_min_learning_rate == 1e-3
    assert isinstance(SHACConfig(critic_min_learning_rate=0).critic_min_learning_rate, float)
    with pytest.raises(
        ConfigError,
        match=r"SHACConfig\.critic_min_learning_rate \(0\.002\) must not exceed "
        r"critic_learning_rate \(0\.001\)",
    ):
        SHACConfig(critic_min_learning_rate=2e-3)


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_the_critic_schedule_ends_at_its_floor(schedule: str) -> None:
    """The critic's decaying learning rate ends at critic_min_learning_rate, then stays there."""
    shac = make_shac(
        FeaturePolicy(),
        feature_width=1,
        planned_updates=4,
        critic_learning_rate_schedule=schedule,
        critic_min_learning_rate=1e-5,
    )
    rates = []
    for _ in range(6):
        rates.append(shac.critic_optimizer.param_groups[0]["lr"])
        shac.critic_optimizer.step()
        shac.critic_scheduler.step()
    assert rates[0] == pytest.approx(1e-3)
    assert rates[4:] == pytest.approx([1e-5, 1e-5])
    assert all(later < earlier for earlier, later in itertools.pairwise(rates[:5]))


def test_is_frozen() -> None:
    """Fields cannot be reassigned after validation."""
    config = SHACConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.target_alpha = 0.5  # type: ignore[misc]


def test_to_dict_from_dict_round_trip() -> None:
    """to_dict gives JSON-like values (actor a dict, tuples lists); from_dict rebuilds it."""
    config = SHACConfig(
        actor=APGConfig(learning_rate=2e-3, betas=(0.8, 0.9), gamma=0.95, nonfinite="raise"),
        critic_learning_rate=5e-4,
        critic_betas=(0.5, 0.9),
        critic_learning_rate_schedule="cosine",
        critic_min_learning_rate=1e-5,
        critic_max_grad_norm=None,
        critic_hidden=(32, 16, 8),
        critic_activation="tanh",
        critic_layer_norm=False,
        critic_iterations=3,
        critic_minibatches=2,
        gae_lambda=0.9,
        target_alpha=0.5,
        normalize_returns=True,
        observation_limit=1e3,
    )
    data = config.to_dict()
    assert data["actor"] == config.actor.to_dict()
    assert (data["critic_betas"], data["critic_hidden"]) == ([0.5, 0.9], [32, 16, 8])
    assert json.loads(json.dumps(data)) == data
    rebuilt = SHACConfig.from_dict(json.loads(json.dumps(data)))
    assert rebuilt == config
    assert isinstance(rebuilt.actor, APGConfig)
    assert (rebuilt.critic_betas, rebuilt.critic_hidden) == ((0.5, 0.9), (32, 16, 8))
    assert SHACConfig.from_dict({}) == SHACConfig()


# ---------------------------------------------------------------- DifferentiableTrainerConfig


@pytest.mark.parametrize(
    "fields",
    [
        {"rollout_mode": "complete"},
        {"rollout_mode": "complete", "update_horizon": 8},
        {"update_horizon": 32},
        {"update_horizon": 64},
    ],
    ids=["complete", "complete-horizon", "two-segments", "four-segments"],
)
def test_trainer_refuses_shac_outside_one_segmented_window(fields: dict[str, Any]) -> None:
    """SHAC needs rollout_mode='segmented' and one window of segment_length steps per update."""
    with pytest.raises(
        ConfigError, match=r"DifferentiableTrainerConfig: SHAC learns from one window"
    ) as raised:
        DifferentiableTrainerConfig(
            total_updates=1, segment_length=16, algorithm=SHACConfig(), **fields
        )
    assert f"rollout_mode={fields.get('rollout_mode', 'segmented')!r}" in str(raised.value)


def test_trainer_accepts_shac_with_update_horizon_equal_to_the_window() -> None:
    """update_horizon equal to segment_length is one window, which SHAC accepts."""
    config = DifferentiableTrainerConfig(
        total_updates=1, segment_length=16, update_horizon=16, algorithm=SHACConfig()
    )
    assert (config.horizon, config.steps_per_update) == (16, 16)


def test_trainer_round_trip_keeps_the_shac_config() -> None:
    """A trainer config with SHAC round-trips through JSON to an equal config holding SHAC."""
    config = DifferentiableTrainerConfig(
        total_timesteps=4096,
        segment_length=8,
        normalize_observations=True,
        layer_norm=True,
        algorithm=SHACConfig(target_alpha=0.4, critic_hidden=(16,), normalize_returns=True),
    )
    data = json.loads(json.dumps(config.to_dict()))
    assert data["algorithm"] == config.algorithm.to_dict()
    rebuilt = DifferentiableTrainerConfig.from_dict(data)
    assert rebuilt == config
    assert isinstance(rebuilt.algorithm, SHACConfig)
    assert rebuilt.algorithm.critic_hidden == (16,)
