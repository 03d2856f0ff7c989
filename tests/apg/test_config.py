"""Tests for typedrl.apg._config and _trainer_config: validation, derived values, round trips."""

import json
from typing import Any

import pytest

from typedrl.apg import APGConfig, DifferentiableTrainerConfig
from typedrl.errors import ConfigError

# ---------------------------------------------------------------- APGConfig


def test_apg_min_learning_rate_above_learning_rate_is_refused() -> None:
    """A schedule cannot end above where it starts; equal bounds are fine."""
    with pytest.raises(
        ConfigError, match=r"min_learning_rate \(0\.1\) must not exceed learning_rate \(0\.01\)"
    ):
        APGConfig(learning_rate=0.01, min_learning_rate=0.1)
    assert APGConfig(learning_rate=0.01, min_learning_rate=0.01).min_learning_rate == 0.01


def test_apg_valid_edge_values_are_accepted_and_normalised() -> None:
    """Boundary values pass; ints become floats and a list of betas a tuple."""
    config = APGConfig(
        learning_rate=1,
        gamma=1,
        momentum=0,
        betas=[0, 0.5],  # type: ignore[arg-type]
        weight_decay=0,
        entropy_coef=0,
        max_grad_norm=None,
        skip_grad_norm_above=2,
        optimizer="sgd",
        learning_rate_schedule="cosine",
        nonfinite="raise",
    )
    assert config.betas == (0.0, 0.5)
    assert isinstance(config.betas, tuple)
    assert all(isinstance(beta, float) for beta in config.betas)
    assert isinstance(config.learning_rate, float)
    assert isinstance(config.gamma, float)
    assert config.gamma == 1.0
    assert config.skip_grad_norm_above == 2.0
    assert isinstance(config.skip_grad_norm_above, float)
    assert APGConfig(gamma=0.0).gamma == 0.0


def test_apg_defaults() -> None:
    """The documented defaults: Adam at 3e-3, gamma 0.99, clipping at 1.0, skip non-finite."""
    config = APGConfig()
    assert (config.optimizer, config.learning_rate, config.gamma) == ("adam", 3e-3, 0.99)
    assert config.max_grad_norm == 1.0
    assert config.skip_grad_norm_above is None
    assert config.learning_rate_schedule == "constant"
    assert config.nonfinite == "skip"


def test_apg_is_frozen() -> None:
    """Fields cannot be reassigned after validation."""
    config = APGConfig()
    with pytest.raises(AttributeError):
        config.gamma = 0.5  # type: ignore[misc]


def test_apg_to_dict_from_dict_round_trip() -> None:
    """to_dict gives JSON-like values (betas a list) and from_dict rebuilds an equal config."""
    config = APGConfig(
        learning_rate=3e-4,
        optimizer="adamw",
        betas=(0.8, 0.95),
        weight_decay=0.01,
        learning_rate_schedule="linear",
        min_learning_rate=1e-5,
        gamma=0.95,
        entropy_coef=0.01,
        max_grad_norm=None,
        skip_grad_norm_above=100.0,
        nonfinite="raise",
    )
    data = config.to_dict()
    assert data["betas"] == [0.8, 0.95]
    assert json.loads(json.dumps(data)) == data
    rebuilt = APGConfig.from_dict(json.loads(json.dumps(data)))
    assert rebuilt == config
    assert rebuilt.betas == (0.8, 0.95)
    assert APGConfig.from_dict({}) == APGConfig()


# ---------------------------------------------------------------- DifferentiableTrainerConfig

_OWNER = "DifferentiableTrainerConfig"


@pytest.mark.parametrize(
    "budget",
    [{}, {"total_timesteps": 100, "total_updates": 10}, {"total_timesteps": None}],
    ids=["neither", "both", "neither-explicit"],
)
def test_trainer_needs_exactly_one_budget(budget: dict[str, Any]) -> None:
    """Both or neither budget raises ConfigError naming both fields."""
    found = "both" if len([v for v in budget.values() if v is not None]) == 2 else "neither"
    with pytest.raises(
        ConfigError,
        match=rf"{_OWNER} needs exactly one budget, total_timesteps or total_updates, got {found}",
    ):
        DifferentiableTrainerConfig(**budget)


@pytest.mark.parametrize(("segment_length", "update_horizon"), [(16, 24), (16, 8), (3, 10)])
def test_update_horizon_must_be_a_multiple_of_segment_length(
    segment_length: int, update_horizon: int
) -> None:
    """In segmented mode an update is a whole number of segments; the message names both."""
    with pytest.raises(
        ConfigError,
        match=rf"{_OWNER}\.update_horizon \({update_horizon}\) must be a multiple of "
        rf"segment_length \({segment_length}\)",
    ):
        DifferentiableTrainerConfig(
            total_updates=1, segment_length=segment_length, update_horizon=update_horizon
        )


def test_complete_mode_horizon_need_not_be_a_multiple() -> None:
    """A complete rollout's horizon is free of segment_length."""
    config = DifferentiableTrainerConfig(
        total_updates=1, rollout_mode="complete", segment_length=16, update_horizon=24
    )
    assert config.horizon == 24


def test_gradient_accumulation_is_refused_in_segmented_mode() -> None:
    """Accumulating microbatches applies to complete rollouts only; the fields are named."""
    with pytest.raises(
        ConfigError,
        match=r"gradient_accumulation_steps \(2\) applies to rollout_mode='complete' only",
    ):
        DifferentiableTrainerConfig(total_updates=1, gradient_accumulation_steps=2)
    config = DifferentiableTrainerConfig(
        total_updates=1, rollout_mode="complete", gradient_accumulation_steps=2
    )
    assert config.gradient_accumulation_steps == 2


@pytest.mark.parametrize(
    ("fields", "horizon", "steps_per_update"),
    [
        ({"segment_length": 16}, 16, 16),
        ({"segment_length": 8, "update_horizon": 32}, 32, 32),
        ({"rollout_mode": "complete", "segment_length": 10}, 10, 10),
        (
            {"rollout_mode": "complete", "update_horizon": 7, "gradient_accumulation_steps": 3},
            7,
            21,
        ),
    ],
)
def test_horizon_and_steps_per_update(
    fields: dict[str, Any], horizon: int, steps_per_update: int
) -> None:
    """The horizon defaults to one segment; a complete update spans its microbatches."""
    config = DifferentiableTrainerConfig(total_updates=1, **fields)
    assert config.horizon == horizon
    assert config.steps_per_update == steps_per_update


def test_trainer_valid_edge_values_are_accepted_and_normalised() -> None:
    """Boundary values pass; a hidden list becomes a tuple and ints become floats."""
    config = DifferentiableTrainerConfig(
        total_timesteps=1,
        segment_length=1,
        update_horizon=1,
        hidden=[8, 4],  # type: ignore[arg-type]
        adjoint_max_norm=2,
        observation_clip=5,
        log_std_init=0,
        seed=2**32 - 1,
    )
    assert config.hidden == (8, 4)
    assert isinstance(config.adjoint_max_norm, float)
    assert isinstance(config.observation_clip, float)
    assert isinstance(config.log_std_init, float)
    assert DifferentiableTrainerConfig(total_updates=1, hidden=()).hidden == ()


def test_trainer_is_frozen() -> None:
    """Fields cannot be reassigned after validation."""
    config = DifferentiableTrainerConfig(total_updates=1)
    with pytest.raises(AttributeError):
        config.segment_length = 4  # type: ignore[misc]


def test_trainer_to_dict_from_dict_round_trip() -> None:
    """to_dict gives JSON-like values (the algorithm a dict); from_dict rebuilds an equal config."""
    config = DifferentiableTrainerConfig(
        total_updates=7,
        rollout_mode="complete",
        segment_length=4,
        update_horizon=12,
        gradient_accumulation_steps=3,
        normalize_observations=True,
        clip_actions=True,
        adjoint_max_norm=5.0,
        hidden=(16, 8),
        activation="tanh",
        layer_norm=True,
        squash_actions=False,
        log_std_init=-0.5,
        learn_log_std=False,
        observation_clip=4.0,
        algorithm=APGConfig(optimizer="sgd", momentum=0.9, learning_rate_schedule="cosine"),
        seed=123,
        extra={"note": "run", "tags": [1, 2.5, None, True]},
    )
    data = config.to_dict()
    assert data["hidden"] == [16, 8]
    assert data["algorithm"] == config.algorithm.to_dict()
    assert json.loads(json.dumps(data)) == data
    rebuilt = DifferentiableTrainerConfig.from_dict(json.loads(json.dumps(data)))
    assert rebuilt == config
    assert rebuilt.hidden == (16, 8)
    assert rebuilt.algorithm == config.algorithm
