"""Tests for typedrl.protocols: the mocks conform, non-conforming objects do not."""

from typing import Any

import gymnasium as gym
import pytest
import torch

from typedrl import protocols
from typedrl.policies import DifferentiableMLPPolicy, MLPActorCritic, RecurrentActorCritic
from typedrl.testing import (
    ConstantPolicy,
    ContactQuadraticEnv,
    CounterState,
    CountingVecEnv,
    EpisodeReturnEvaluator,
    LinearActorCritic,
    LinearDifferentiablePolicy,
    QuadraticEnv,
    ScheduledQuadraticEnv,
    TinyActorCritic,
    TransitionCollector,
)


def _conforming() -> list[tuple[type[Any], object]]:
    counting = CountingVecEnv(num_envs=2, truncate_after=2)
    box = gym.spaces.Box(-1.0, 1.0, (3,))
    mlp = MLPActorCritic(box, gym.spaces.Discrete(2))
    return [
        (protocols.VecEnv, counting),
        (protocols.DifferentiableVecEnv, QuadraticEnv(num_envs=2)),
        (protocols.SupportsObservationNormalizeMask, QuadraticEnv(num_envs=2)),
        (protocols.SupportsContactForces, ContactQuadraticEnv(num_envs=2)),
        (protocols.DifferentiableVecEnv, ContactQuadraticEnv(num_envs=2)),
        (protocols.ScheduledDifferentiableVecEnv, ScheduledQuadraticEnv(num_envs=2, horizons=[2])),
        (protocols.Policy, ConstantPolicy(torch.zeros(1))),
        (protocols.ActorCritic, LinearActorCritic(obs_dim=3, act_dim=1)),
        (protocols.ActorCritic, TinyActorCritic(box, gym.spaces.Discrete(2))),
        (protocols.TensorActorCritic, mlp),
        (protocols.StatefulActorCritic, RecurrentActorCritic(box, gym.spaces.Discrete(2))),
        (protocols.SupportsNormalizerUpdate, mlp),
        (protocols.SupportsNormalizerUpdate, DifferentiableMLPPolicy(box, box)),
        (protocols.SupportsDeterministicActor, mlp),
        (protocols.SupportsDeterministicActor, DifferentiableMLPPolicy(box, box)),
        (protocols.DifferentiablePolicy, LinearDifferentiablePolicy(obs_dim=1, act_dim=1)),
        (protocols.Collector, TransitionCollector(counting)),
        (protocols.Evaluator, EpisodeReturnEvaluator(counting, num_episodes=2)),
        (protocols.SupportsStateDict, CounterState()),
        (protocols.SupportsStateDict, torch.nn.Linear(1, 1)),
        (protocols.SupportsStateDict, torch.optim.SGD(torch.nn.Linear(1, 1).parameters())),
    ]


@pytest.mark.parametrize(("protocol", "obj"), _conforming(), ids=lambda x: type(x).__name__)
def test_mock_satisfies_protocol(protocol: type[Any], obj: object) -> None:
    """Every protocol has a mock implementation that isinstance accepts."""
    assert isinstance(obj, protocol)


def test_every_protocol_has_a_mock() -> None:
    """No public protocol lacks a conforming object (typedrl.testing's, a policy's, torch's)."""
    covered = {protocol for protocol, _ in _conforming()}
    public = {
        getattr(protocols, name)
        for name in protocols.__all__
        if getattr(getattr(protocols, name), "_is_protocol", False)
    }
    assert public == covered


class _NotAnEnv:
    """Has reset and step but none of the properties."""

    def reset(self) -> None: ...

    def step(self, action: object) -> None: ...


@pytest.mark.parametrize(
    ("protocol", "obj"),
    [
        (protocols.VecEnv, _NotAnEnv()),
        (protocols.VecEnv, object()),
        (protocols.DifferentiableVecEnv, CountingVecEnv(num_envs=1)),
        (protocols.SupportsObservationNormalizeMask, CountingVecEnv(num_envs=1)),
        (protocols.ScheduledDifferentiableVecEnv, QuadraticEnv(num_envs=1)),
        (protocols.Policy, torch.nn.Linear(1, 1)),
        (protocols.ActorCritic, ConstantPolicy(torch.zeros(1))),
        (protocols.TensorActorCritic, LinearActorCritic(obs_dim=1, act_dim=1)),
        (protocols.SupportsNormalizerUpdate, LinearActorCritic(obs_dim=1, act_dim=1)),
        (protocols.SupportsDeterministicActor, LinearActorCritic(obs_dim=1, act_dim=1)),
        (protocols.DifferentiablePolicy, LinearActorCritic(obs_dim=1, act_dim=1)),
        (protocols.Collector, CountingVecEnv(num_envs=1)),
        (protocols.Evaluator, TransitionCollector(CountingVecEnv(num_envs=1))),
        (protocols.SupportsStateDict, ConstantPolicy.act),
    ],
    ids=lambda x: type(x).__name__,
)
def test_non_conforming_object_is_rejected(protocol: type[Any], obj: object) -> None:
    """Objects missing a protocol member fail the isinstance check."""
    assert not isinstance(obj, protocol)


def test_protocols_reexport_value_types() -> None:
    """The value types are reachable from typedrl.protocols as documented."""
    import typedrl

    assert protocols.StepResult is typedrl.StepResult
    assert protocols.DifferentiableRolloutSpec is typedrl.DifferentiableRolloutSpec
    assert protocols.EvaluationResult is typedrl.EvaluationResult
