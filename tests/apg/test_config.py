"""Tests for typedrl.apg._config and _trainer_config: validation, derived values, round trips."""

import json
import math
from typing import Any

import numpy as np
import pytest

from typedrl.apg import APGConfig, DifferentiableTrainerConfig
from typedrl.errors import ConfigError

# ---------------------------------------------------------------- APGConfig

_NOT_POSITIVE = (0.0, -1e-3, True, math.nan, math.inf, "0.1", None)
_NOT_NON_NEGATIVE = (-0.1, False, math.nan, math.inf, "0", None)

APG_INVALID: list[tuple[str, Any]] = [
    *((name, value) for name in ("learning_rate", "adam_eps") for value in _NOT_POSITIVE),
    *(
        (name, value)
        for name in ("weight_decay", "min_learning_rate", "entropy_coef")
        for value in _NOT_NON_NEGATIVE
    ),
    *(("gamma", value) for value in (-0.01, 1.01, True, math.nan, "0.9", None)),
    *(("momentum", value) for value in (1.0, -0.1, 1.5, math.nan, True, None)),
    *(
        ("betas", value)
        for value in (
            (0.9,),
            (0.9, 0.99, 0.999),
            (0.9, 1.0),
            (-0.1, 0.9),
            (0.9, math.nan),
            (0.9, True),
            ("a", "b"),
            "ab",
            0.9,
            None,
        )
    ),
    *(
        (name, value)
        for name in ("max_grad_norm", "skip_grad_norm_above")
        for value in (0.0, -1.0, True, math.nan, math.inf, "1")
    ),
    *(("optimizer", value) for value in ("rmsprop", "Adam", None, 1)),
    *(("learning_rate_schedule", value) for value in ("step", "exponential", None)),
    *(("nonfinite", value) for value in ("ignore", "warn", None, False)),
]


@pytest.mark.parametrize(("name", "value"), APG_INVALID)
def test_apg_invalid_field_raises_config_error_naming_it(name: str, value: Any) -> None:
    """Every invalid APGConfig value raises ConfigError naming the field."""
    with pytest.raises(ConfigError, match=rf"APGConfig\.{name}"):
        APGConfig(**{name: value})


def test_apg_invalid_value_is_shown() -> None:
    """The message shows the value that came."""
    with pytest.raises(ConfigError, match=r"APGConfig\.gamma must lie in \[0, 1\], got 1\.5"):
        APGConfig(gamma=1.5)
    with pytest.raises(ConfigError, match=r"optimizer must be one of \['adam', 'adamw', 'sgd'\]"):
        APGConfig(optimizer="rmsprop")  # type: ignore[arg-type]


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


def test_apg_from_dict_rejects_unknown_keys() -> None:
    """A typo in a field name is an error that lists the valid fields."""
    with pytest.raises(ConfigError, match=r"no fields \['gama'\]; valid fields: .*'gamma'"):
        APGConfig.from_dict({"gama": 0.9})


def test_apg_from_dict_validates() -> None:
    """Values read back are validated like constructor arguments."""
    with pytest.raises(ConfigError, match=r"APGConfig\.betas"):
        APGConfig.from_dict({"betas": [0.9]})


# ---------------------------------------------------------------- DifferentiableTrainerConfig

_OWNER = "DifferentiableTrainerConfig"
_BOOL_FIELDS = (
    "normalize_observations",
    "clip_actions",
    "layer_norm",
    "squash_actions",
    "learn_log_std",
)
_NOT_POSITIVE_INT = (0, -1, True, 2.0, "8", None)

TRAINER_INVALID: list[tuple[dict[str, Any], str]] = [
    *(({"total_updates": value}, "total_updates") for value in (0, -1, True, 2.0, "8")),
    *(({"total_timesteps": value}, "total_timesteps") for value in (0, -5, False, 1e3, "100")),
    *(
        ({"total_updates": 1, "rollout_mode": value}, "rollout_mode")
        for value in ("tbptt", "Segmented", None, 0)
    ),
    *(
        ({"total_updates": 1, "segment_length": value}, "segment_length")
        for value in _NOT_POSITIVE_INT
    ),
    *(
        (
            {"total_updates": 1, "rollout_mode": "complete", "gradient_accumulation_steps": value},
            "gradient_accumulation_steps",
        )
        for value in _NOT_POSITIVE_INT
    ),
    *(
        ({"total_updates": 1, "update_horizon": value}, "update_horizon")
        for value in (0, -4, True, 32.0, "32")
    ),
    *(
        ({"total_updates": 1, name: value}, name)
        for name in _BOOL_FIELDS
        for value in ("yes", None, 2, 0.5)
    ),
    *(
        ({"total_updates": 1, "adjoint_max_norm": value}, "adjoint_max_norm")
        for value in (0.0, -1.0, True, math.nan, math.inf, "1")
    ),
    *(
        ({"total_updates": 1, "observation_clip": value}, "observation_clip")
        for value in (0.0, -1.0, True, math.nan, math.inf, None)
    ),
    *(
        ({"total_updates": 1, "log_std_init": value}, "log_std_init")
        for value in (math.inf, -math.inf, math.nan, True, "0", None)
    ),
    *(
        ({"total_updates": 1, "hidden": value}, "hidden")
        for value in (64, "64", (64, 0), (64, -1), (64, True), (64.0,), None)
    ),
    *(({"total_updates": 1, "activation": value}, "activation") for value in ("gelu", None, 1)),
    *(
        ({"total_updates": 1, "algorithm": value}, "algorithm")
        for value in ({"gamma": 0.9}, None, "apg")
    ),
    *(({"total_updates": 1, "seed": value}, "seed") for value in (-1, True, 1.0, 2**32, "0")),
    *(
        ({"total_updates": 1, "extra": value}, "extra")
        for value in ([1, 2], {1: "a"}, {"x": np.float64(1.0)}, {"shape": (1, 2)}, None)
    ),
]


@pytest.mark.parametrize(("fields", "name"), TRAINER_INVALID)
def test_trainer_invalid_field_raises_config_error_naming_it(
    fields: dict[str, Any], name: str
) -> None:
    """Every invalid DifferentiableTrainerConfig value raises ConfigError naming the field."""
    with pytest.raises(ConfigError, match=rf"{_OWNER}\.{name}"):
        DifferentiableTrainerConfig(**fields)


@pytest.mark.parametrize("value", [1, 0])
@pytest.mark.parametrize("name", _BOOL_FIELDS)
def test_trainer_bool_fields_refuse_ints(name: str, value: int) -> None:
    """A bool field refuses the ints 1 and 0, as PPOConfig does."""
    fields: dict[str, Any] = {"total_updates": 1, name: value}
    with pytest.raises(ConfigError, match=rf"{_OWNER}\.{name} must be a bool"):
        DifferentiableTrainerConfig(**fields)


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


def test_trainer_from_dict_rejects_unknown_keys() -> None:
    """Unknown keys, top-level or in the algorithm, are errors that list the valid fields."""
    with pytest.raises(
        ConfigError, match=r"DifferentiableTrainerConfig has no fields \['horizon'\]; valid fields"
    ):
        DifferentiableTrainerConfig.from_dict({"total_updates": 1, "horizon": 8})
    with pytest.raises(ConfigError, match=r"APGConfig has no fields \['lr'\]"):
        DifferentiableTrainerConfig.from_dict({"total_updates": 1, "algorithm": {"lr": 0.1}})
