"""Tests for typedrl.ahac._config: defaults, validation, round trips, the trainer's rules."""

import dataclasses
import typing

import pytest

from typedrl import configs
from typedrl._config_fields import field_checks
from typedrl.ahac import AHACConfig
from typedrl.apg import DifferentiableTrainerConfig
from typedrl.errors import ConfigError
from typedrl.shac import SHACConfig


def test_defaults_follow_the_authors_configuration() -> None:
    """ahac.yaml's values: horizon 8..64, C = 500, alpha = 5e-4, rates 2e-3, early stop."""
    config = AHACConfig()
    actor = config.actor
    assert (actor.learning_rate, actor.betas, actor.learning_rate_schedule) == (
        2e-3,
        (0.7, 0.95),
        "linear",
    )
    assert (actor.max_grad_norm, actor.gamma) == (1.0, 0.99)
    assert (config.horizon_min, config.horizon_max) == (8, 64)
    assert (config.contact_threshold, config.horizon_learning_rate) == (500.0, 5e-4)
    assert config.horizon_learning_rate_schedule == "linear"
    assert (config.critic_learning_rate, config.critic_betas) == (2e-3, (0.7, 0.95))
    assert (config.critic_iterations, config.critic_minibatches) == (64, 4)
    assert (config.critic_stop_tolerance, config.critic_stop_passes) == (0.2, 5)
    assert (config.critic_hidden, config.critic_activation, config.critic_layer_norm) == (
        (64, 64),
        "elu",
        True,
    )
    assert config.gae_lambda == 0.95


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"horizon_min": 8, "horizon_max": 8}, r"horizon_min \(8\) must be less than horizon_max"),
        ({"horizon_min": 0}, r"AHACConfig.horizon_min"),
        ({"contact_threshold": 0.0}, r"AHACConfig.contact_threshold"),
        ({"horizon_learning_rate": -1.0}, r"AHACConfig.horizon_learning_rate"),
        (
            {"horizon_learning_rate": 1e-3, "horizon_min_learning_rate": 1e-2},
            r"horizon_min_learning_rate",
        ),
        ({"critic_stop_passes": 1}, r"critic_stop_passes must be at least 2"),
        ({"critic_stop_tolerance": 0.0}, r"AHACConfig.critic_stop_tolerance"),
        ({"horizon_learning_rate_schedule": "step"}, r"horizon_learning_rate_schedule"),
    ],
)
def test_invalid_values_are_refused(fields: dict[str, object], message: str) -> None:
    """Each rule refuses with one line naming the field and the value."""
    with pytest.raises(ConfigError, match=message):
        AHACConfig(**fields)  # type: ignore[arg-type]


def test_the_fields_shared_with_shac_take_the_same_values() -> None:
    """Each field AHACConfig shares with SHACConfig has SHAC's type and check.

    The two classes declare them each (one base class would move AHAC's horizon
    fields behind the critic's in config.yaml); this keeps the copies alike.
    """
    ahac = {field.name: rule for field, rule in field_checks(AHACConfig)}
    shac = {field.name: rule for field, rule in field_checks(SHACConfig)}
    shared = ahac.keys() & shac.keys()
    assert sorted(shac.keys() - shared) == ["target_alpha"]
    assert len(shared) == 14
    ahac_hints, shac_hints = typing.get_type_hints(AHACConfig), typing.get_type_hints(SHACConfig)
    for name in shared:
        assert (ahac_hints[name], ahac[name]) == (shac_hints[name], shac[name]), name


def test_round_trip_and_partial_actor() -> None:
    """to_dict/from_dict round-trips; an actor dict keeps AHAC's actor defaults."""
    config = AHACConfig(horizon_min=4, critic_stop_tolerance=None, critic_hidden=(8,))
    assert AHACConfig.from_dict(config.to_dict()) == config
    partial = AHACConfig.from_dict({"actor": {"gamma": 0.98}})
    assert partial.actor == dataclasses.replace(AHACConfig().actor, gamma=0.98)


def test_the_trainer_config_tells_ahac_from_shac() -> None:
    """A saved AHAC trainer config rebuilds as AHAC; complete rollouts are refused."""
    config = DifferentiableTrainerConfig(total_updates=1, algorithm=AHACConfig(horizon_max=32))
    assert DifferentiableTrainerConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ConfigError, match=r"AHAC learns from one window of its adaptive horizon"):
        DifferentiableTrainerConfig(
            total_updates=1, rollout_mode="complete", algorithm=AHACConfig()
        )
    with pytest.raises(ConfigError, match=r"AHAC learns from one window"):
        DifferentiableTrainerConfig(total_updates=1, update_horizon=64, algorithm=AHACConfig())


def test_build_config_makes_an_ahac_config() -> None:
    """--algo ahac builds AHACConfig from few (or no) fields; --algo apg refuses AHAC's."""
    built = configs.build_config("ahac", {"algorithm": {"actor": {"learning_rate": 1e-3}}})
    assert isinstance(built, DifferentiableTrainerConfig)
    assert isinstance(built.algorithm, AHACConfig)
    assert built.algorithm.actor.learning_rate == 1e-3
    assert built.algorithm.actor.betas == (0.7, 0.95)
    empty = configs.build_config("ahac", {})
    assert isinstance(empty, DifferentiableTrainerConfig)
    assert isinstance(empty.algorithm, AHACConfig)
    with pytest.raises(ConfigError, match=r"algorithm has AHAC fields \['horizon_max'\]"):
        configs.build_config("apg", {"algorithm": {"horizon_max": 16}})
    with pytest.raises(ConfigError, match=r"horizon_maximum"):
        configs.build_config("ahac", {"algorithm": {"horizon_maximum": 16}})
