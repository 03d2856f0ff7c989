"""Tests for typedrl.policies._factory.PolicyFactory."""

from typing import Any

import gymnasium as gym
import pytest
from torch import nn

from typedrl.errors import ConfigError
from typedrl.policies import DifferentiableMLPPolicy, MLPActorCritic, PolicyFactory
from typedrl.testing import TinyActorCritic

BOX = gym.spaces.Box(-1.0, 1.0, (3,))
DISCRETE = gym.spaces.Discrete(2)


def not_a_module(observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> int:
    """A factory that returns something else than a module."""
    del observation_space, action_space
    return 3


def test_build_calls_the_factory_with_the_spaces_and_kwargs() -> None:
    """factory(observation_space, action_space, **kwargs): a class is a factory too."""
    factory = PolicyFactory("typedrl.testing:TinyActorCritic", kwargs={"hidden": 8})
    policy = factory.build(BOX, DISCRETE)
    assert isinstance(policy, TinyActorCritic)
    assert policy.body[0].out_features == 8
    dotted = PolicyFactory("typedrl.policies:MLPActorCritic", kwargs={"actor_hidden": [4]})
    assert isinstance(dotted.build(BOX, DISCRETE), MLPActorCritic)


def test_round_trip_through_plain_values() -> None:
    """to_dict gives JSON-like values; from_dict reads them back equal."""
    factory = PolicyFactory("my_pkg.nets:make", kwargs={"hidden": [32, 32], "act": "tanh"})
    values = factory.to_dict()
    assert values == {"target": "my_pkg.nets:make", "kwargs": {"hidden": [32, 32], "act": "tanh"}}
    assert PolicyFactory.from_dict(values) == factory
    assert PolicyFactory.from_dict({"target": "m:f"}).kwargs == {}


@pytest.mark.parametrize(
    ("target", "kwargs", "message"),
    [
        ("my_pkg.nets.make", {}, r"target must be 'package\.module:function', got 'my_pkg"),
        ("my_pkg:", {}, r"target must be 'package\.module:function'"),
        (3, {}, r"target must be 'package\.module:function', got 3 \(type int\)"),
        ("m:f", {"sizes": (32, 32)}, r"PolicyFactory\.kwargs\['sizes'\] must be JSON-like"),
        ("m:f", [("a", 1)], r"kwargs must be a mapping of names to JSON-like values"),
    ],
)
def test_invalid_values_are_refused(target: object, kwargs: object, message: str) -> None:
    """The target's form and the kwargs' JSON-likeness are checked at construction."""
    with pytest.raises(ConfigError, match=message):
        PolicyFactory(target, kwargs=kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("target", "kwargs", "message"),
    [
        ("no_such_pkg.nets:make", {}, r"cannot import no_such_pkg\.nets .*PYTHONPATH"),
        ("typedrl.testing:NoSuchPolicy", {}, r"typedrl\.testing has no attribute 'NoSuchPolicy'"),
        ("typedrl.testing:__doc__", {}, r"is not callable"),
        ("typedrl.testing:TinyActorCritic", {"width": 3}, r"kwargs \{'width': 3\} raised Type"),
        (f"{__name__}:not_a_module", {}, r"must return a torch\.nn\.Module, got 3"),
    ],
)
def test_build_failures_are_one_config_error(
    target: str, kwargs: dict[str, Any], message: str
) -> None:
    """An unimportable, missing, uncallable or failing factory names itself in one line."""
    with pytest.raises(ConfigError, match=message) as raised:
        PolicyFactory(target, kwargs=kwargs).build(BOX, DISCRETE)
    assert "\n" not in str(raised.value)


def test_from_dict_names_where_the_values_came_from() -> None:
    """A malformed mapping names its place (config.yaml's policy:, a checkpoint's field)."""
    with pytest.raises(ConfigError, match=r"^policy must be a mapping with 'target'"):
        PolicyFactory.from_dict({"kwargs": {}})
    with pytest.raises(ConfigError, match=r"^run\.policy: PolicyFactory\.target must be"):
        PolicyFactory.from_dict({"target": "nope"}, where="run.policy")


def test_the_differentiable_policy_takes_its_mask_as_a_list() -> None:
    """A recorded observation_normalize_mask (a list of bools) rebuilds the policy's mask."""
    factory = PolicyFactory(
        "typedrl.policies:DifferentiableMLPPolicy",
        kwargs={"normalize_observations": True, "observation_normalize_mask": [True, False, True]},
    )
    policy = factory.build(BOX, gym.spaces.Box(-1.0, 1.0, (1,)))
    assert isinstance(policy, DifferentiableMLPPolicy)
    assert policy.observation_normalize_mask.tolist() == [True, False, True]


def test_a_module_built_by_hand_is_a_module() -> None:
    """build returns the factory's module itself (no copy, no wrapper)."""
    module = PolicyFactory("torch.nn:Identity").build(BOX, DISCRETE)
    assert type(module) is nn.Identity
