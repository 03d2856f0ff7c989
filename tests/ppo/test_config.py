"""Tests for typedrl.ppo._config: PPOConfig validation, round trip and minibatch count."""

import math
from typing import Any

import numpy as np
import pytest

from typedrl.errors import ConfigError
from typedrl.ppo import PPOConfig


def test_numpy_scalar_in_extra_is_refused_at_construction() -> None:
    """A numpy float (a float subclass) fails when the config is built, not at the first save."""
    with pytest.raises(
        ConfigError,
        match=r"PPOConfig\.extra\['x'\] must be JSON-like .*float64\); convert it with float\(",
    ):
        PPOConfig(extra={"x": np.float64(1.0)})
    assert PPOConfig(extra={"x": float(np.float64(1.0))}).extra == {"x": 1.0}


def test_min_learning_rate_above_max_is_refused() -> None:
    """The adaptive schedule's bounds must be ordered."""
    with pytest.raises(ConfigError, match=r"min_learning_rate \(0.1\) must not exceed"):
        PPOConfig(min_learning_rate=0.1, max_learning_rate=0.01)
    PPOConfig(min_learning_rate=0.01, max_learning_rate=0.01)


def test_valid_edge_values_are_accepted() -> None:
    """Boundary values that make sense pass and ints become floats."""
    config = PPOConfig(
        gamma=0.0,
        gae_lambda=1,
        entropy_coef=0,
        target_kl=None,
        max_grad_norm=None,
        learning_rate=1,
        seed=2**32 - 1,
        actor_hidden=[8],  # type: ignore[arg-type]
        critic_hidden=(),
    )
    assert config.gae_lambda == 1.0
    assert isinstance(config.gae_lambda, float)
    assert isinstance(config.learning_rate, float)
    assert config.actor_hidden == (8,)
    assert config.critic_hidden == ()


def test_model_options_default_to_the_previous_behaviour() -> None:
    """Orthogonal init, tanh, [64, 64] networks and an eager update by default."""
    config = PPOConfig()
    assert config.orthogonal_init is True
    assert config.activation == "tanh"
    assert (config.actor_hidden, config.critic_hidden) == ((64, 64), (64, 64))
    assert config.compile is False
    assert PPOConfig(compile=True).compile is True
    for activation in ("tanh", "relu", "elu", "silu"):
        assert PPOConfig(activation=activation).activation == activation
    assert PPOConfig(orthogonal_init=False).orthogonal_init is False


def test_config_without_the_new_fields_loads_with_their_defaults() -> None:
    """A config dict saved before orthogonal_init existed rebuilds with the default."""
    data = PPOConfig(compile=True).to_dict()
    del data["orthogonal_init"]
    config = PPOConfig.from_dict(data)
    assert config.orthogonal_init is True
    assert config.compile is True


@pytest.mark.parametrize(("saved", "compiled"), [(True, True), (False, False), ("auto", False)])
def test_compile_update_of_an_older_release_reads_as_compile(saved: object, compiled: bool) -> None:
    """compile_update, which compile replaced: True compiles, "auto" and False run eagerly."""
    data = {**PPOConfig().to_dict(), "compile_update": saved}
    del data["compile"]
    assert PPOConfig.from_dict(data) == PPOConfig(compile=compiled)
    # A compile given beside it (a flag on a resumed run) wins.
    assert PPOConfig.from_dict({"compile_update": saved, "compile": True}).compile is True


@pytest.mark.parametrize("saved", [1, "yes", None])
def test_an_invalid_compile_update_names_the_field_and_its_new_name(saved: object) -> None:
    """Only the values older releases wrote are read."""
    with pytest.raises(ConfigError, match=r"PPOConfig\.compile_update \(now compile\) must be"):
        PPOConfig.from_dict({"compile_update": saved})


def test_config_is_frozen() -> None:
    """Fields cannot be reassigned after validation."""
    config = PPOConfig()
    with pytest.raises(AttributeError):
        config.gamma = 0.5  # type: ignore[misc]


def test_to_dict_from_dict_round_trip() -> None:
    """to_dict gives JSON-like values and from_dict rebuilds an equal config."""
    config = PPOConfig(
        num_steps=16,
        actor_hidden=(32, 16),
        target_kl=0.02,
        learning_rate_schedule="adaptive",
        orthogonal_init=False,
        activation="relu",
        compile=True,
        extra={"note": "run", "tags": [1, 2.5, None, True]},
    )
    data = config.to_dict()
    assert data["orthogonal_init"] is False
    assert data["compile"] is True
    assert data["actor_hidden"] == [32, 16]
    assert data["extra"] == {"note": "run", "tags": [1, 2.5, None, True]}
    assert PPOConfig.from_dict(data) == config


def test_from_dict_rejects_unknown_keys() -> None:
    """A typo in a field name is an error that lists the valid fields."""
    with pytest.raises(ConfigError, match=r"no fields \['gama'\]; valid fields: .*'gamma'"):
        PPOConfig.from_dict({"gama": 0.9})


@pytest.mark.parametrize(
    ("num_envs", "num_steps", "num_mini_epochs", "batch_size", "expected"),
    [(8, 128, 10, 256, 40), (4, 8, 1, 32, 1), (3, 5, 2, 4, 8), (1, 7, 3, 7, 3)],
)
def test_minibatches_per_epoch(
    num_envs: int, num_steps: int, num_mini_epochs: int, batch_size: int, expected: int
) -> None:
    """ceil(num_envs * num_steps * num_mini_epochs / batch_size)."""
    config = PPOConfig(num_steps=num_steps, num_mini_epochs=num_mini_epochs, batch_size=batch_size)
    assert config.minibatches_per_epoch(num_envs=num_envs) == expected
    assert expected == math.ceil(num_envs * num_steps * num_mini_epochs / batch_size)


@pytest.mark.parametrize("num_envs", [0, -2, True])
def test_minibatches_per_epoch_checks_num_envs(num_envs: Any) -> None:
    """num_envs must be a positive int."""
    with pytest.raises(ConfigError, match="num_envs"):
        PPOConfig().minibatches_per_epoch(num_envs=num_envs)


def test_the_image_encoder_fields_are_validated() -> None:
    """encoder is one of auto, nature, small, flatten; image_features a positive int or None."""
    assert (PPOConfig().encoder, PPOConfig().image_features) == ("auto", None)
    assert PPOConfig(encoder="nature", image_features=256).image_features == 256
    with pytest.raises(ConfigError, match=r"PPOConfig\.encoder"):
        PPOConfig(encoder="resnet")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"PPOConfig\.image_features"):
        PPOConfig(image_features=0)
