"""Tests for typedrl.ppo._algorithm: PPO's update on its own, fed by a collector."""

import math
from typing import Any

import pytest
import torch
from lightning_fabric import Fabric
from tensordict import TensorDict

from tests.ppo._envs import RandomWalkEnv
from typedrl.distributed import SingleProcess
from typedrl.errors import ConfigError, StateError
from typedrl.normalization import RewardNormalizer
from typedrl.policies import MLPActorCritic
from typedrl.ppo import PPO, OnPolicyCollector, OnPolicyRollout, PPOAgent, PPOConfig
from typedrl.ppo._algorithm import UPDATE_METRICS
from typedrl.training import (
    GeneratorState,
    GradientStep,
    UpdateOutcome,
    build_optimizer,
    setup_module_and_optimizer,
)

SMALL: dict[str, Any] = {"actor_hidden": (8,), "critic_hidden": (8,)}


def _ppo(config: PPOConfig, *, num_envs: int = 2) -> tuple[PPO, OnPolicyCollector]:
    """A PPO built as PPOAgent builds it, and a collector on a RandomWalkEnv."""
    env = RandomWalkEnv(num_envs=num_envs)
    fabric = Fabric(accelerator="cpu", devices=1)
    fabric.launch()
    torch.manual_seed(0)
    policy = PPOAgent.build_policy(config, env.single_observation_space, env.single_action_space)
    assert isinstance(policy, MLPActorCritic)
    optimizer = build_optimizer(
        list(policy.parameters()),
        name="adam",
        learning_rate=config.learning_rate,
        eps=config.adam_eps,
    )
    model, wrapped = setup_module_and_optimizer(
        fabric, policy, optimizer, forward_methods=("evaluate_tensors",)
    )
    ppo = PPO(
        policy,
        config,
        model=model,
        optimizer=wrapped,
        fabric=fabric,
        dist=SingleProcess(),
        num_minibatches=config.minibatches_per_epoch(num_envs=num_envs),
        sampler_seed=0,
    )
    collector = OnPolicyCollector(env, num_steps=config.num_steps, dist=SingleProcess())
    collector.reset(seed=0)
    collector.register(policy)
    return ppo, collector


def _mlp(ppo: PPO) -> MLPActorCritic:
    """The PPO's policy: the config's MLP here."""
    policy = ppo.policy
    assert isinstance(policy, MLPActorCritic)
    return policy


def _collect(ppo: PPO, collector: OnPolicyCollector, num_steps: int) -> OnPolicyRollout:
    return collector.collect(_mlp(ppo), num_steps=num_steps)


def _weights(ppo: PPO) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in ppo.policy.state_dict().items()}


def test_update_returns_an_applied_outcome_with_every_metric() -> None:
    """One update: applied, UPDATE_METRICS' metrics (no approximate bootstrap), weights moved."""
    config = PPOConfig(
        total_timesteps=64, num_steps=8, batch_size=4, num_mini_epochs=2, seed=1, **SMALL
    )
    ppo, collector = _ppo(config)
    before = _weights(ppo)
    outcome = ppo.update(_collect(ppo, collector, 8), env_steps=0, iteration=0)
    assert isinstance(outcome, UpdateOutcome)
    assert outcome.applied
    expected = [name for name in UPDATE_METRICS if name != "train/approximate_bootstrap"]
    assert list(outcome.metrics) == expected
    assert outcome.metrics["train/skipped_updates"] == 0.0
    assert outcome.metrics["train/learning_rate"] == config.learning_rate
    assert all(math.isfinite(value) for value in outcome.metrics.values())
    after = _weights(ppo)
    assert any(not torch.equal(before[name], after[name]) for name in before)


def test_linear_schedule_follows_the_env_steps_passed_in() -> None:
    """The linear rate is learning_rate * (1 - env_steps / total_timesteps), from the argument."""
    config = PPOConfig(
        total_timesteps=64,
        num_steps=8,
        batch_size=8,
        num_mini_epochs=1,
        learning_rate=1e-3,
        learning_rate_schedule="linear",
        **SMALL,
    )
    ppo, collector = _ppo(config)
    rates = []
    for env_steps in (48, 16, 64):
        outcome = ppo.update(_collect(ppo, collector, 8), env_steps=env_steps, iteration=0)
        rates.append(outcome.metrics["train/learning_rate"])
    assert rates == pytest.approx([2.5e-4, 7.5e-4, 0.0])
    assert ppo.learning_rate == 0.0
    assert ppo.optimizer.param_groups[0]["lr"] == 0.0


def test_learning_rate_is_the_optimizer_groups() -> None:
    """The rate in force is read from the optimizer (a loaded checkpoint's rate continues)."""
    constant = PPOConfig(num_steps=8, batch_size=8, num_mini_epochs=1, **SMALL)
    ppo, collector = _ppo(constant)
    ppo.optimizer.param_groups[0]["lr"] = 0.01
    assert ppo.learning_rate == 0.01
    outcome = ppo.update(_collect(ppo, collector, 8), env_steps=0, iteration=0)
    assert outcome.metrics["train/learning_rate"] == 0.01
    adaptive = PPOConfig(
        num_steps=8,
        batch_size=4,
        num_mini_epochs=1,
        learning_rate_schedule="adaptive",
        desired_kl=10.0,
        max_learning_rate=1.0,
        **SMALL,
    )
    ppo, collector = _ppo(adaptive)
    ppo.optimizer.param_groups[0]["lr"] = 0.01
    rate = ppo.update(_collect(ppo, collector, 8), env_steps=0, iteration=0).metrics[
        "train/learning_rate"
    ]
    # KL below desired_kl / 2 grows the rate by 1.5 per minibatch (not on a KL of exactly 0,
    # as the first minibatch may have): from the group's 0.01, not from learning_rate.
    growths = math.log(rate / 0.01, 1.5)
    assert round(growths) in (3, 4)
    assert growths == pytest.approx(round(growths))


def test_nonfinite_update_is_reported_as_not_applied() -> None:
    """NaN advantages: every minibatch skipped, applied=False, weights and moments untouched."""
    config = PPOConfig(total_timesteps=64, num_steps=8, batch_size=8, num_mini_epochs=1, **SMALL)
    ppo, collector = _ppo(config)
    rollout = _collect(ppo, collector, 8)
    poisoned = rollout.data.clone()
    poisoned["reward"] = torch.full_like(poisoned["reward"], math.nan)
    before = _weights(ppo)
    outcome = ppo.update(
        OnPolicyRollout(
            data=poisoned,
            last_value=rollout.last_value,
            has_final_value=rollout.has_final_value,
            approximate_bootstrap=True,
            episodes=rollout.episodes,
        ),
        env_steps=0,
        iteration=0,
    )
    assert not outcome.applied
    assert outcome.metrics["train/skipped_updates"] == 1.0
    assert outcome.metrics["train/approximate_bootstrap"] == 1.0
    assert ppo.optimizer.state_dict()["state"] == {}
    after = _weights(ppo)
    trainable = [name for name, _ in ppo.policy.named_parameters()]
    assert all(torch.equal(before[name], after[name]) for name in trainable)


def test_update_refuses_a_rollout_of_another_size() -> None:
    """A rollout of another number of minibatches raises StateError (DDP would hang)."""
    config = PPOConfig(total_timesteps=64, num_steps=8, batch_size=4, num_mini_epochs=1, **SMALL)
    ppo, _ = _ppo(config)
    shorter = OnPolicyCollector(RandomWalkEnv(num_envs=2), num_steps=4, dist=SingleProcess())
    shorter.reset(seed=0)
    shorter.register(_mlp(ppo))
    with pytest.raises(StateError, match=r"into 2 minibatches of 4, expected the 4"):
        ppo.update(shorter.collect(_mlp(ppo), num_steps=4), env_steps=0, iteration=3)


def test_state_names_the_checkpointed_objects() -> None:
    """state(): the optimizer as 'policy'; per rank 'sampler' and, when enabled, the normaliser."""
    plain, _ = _ppo(PPOConfig(num_steps=8, batch_size=8, **SMALL))
    state = plain.state()
    assert dict(state.optimizers) == {"policy": plain.optimizer}
    assert list(state.rank_local) == ["sampler"]
    sampler = state.rank_local["sampler"]
    assert isinstance(sampler, GeneratorState)
    assert sampler.generator is plain.sampler
    normalised, _ = _ppo(PPOConfig(num_steps=8, batch_size=8, normalize_rewards=True, **SMALL))
    rank_local = normalised.state().rank_local
    assert list(rank_local) == ["sampler", "reward_normalizer"]
    assert isinstance(rank_local["reward_normalizer"], RewardNormalizer)


def test_observation_normaliser_updates_after_the_minibatches() -> None:
    """The normaliser's statistics change only after the update, from the epoch's observations."""
    config = PPOConfig(
        num_steps=8, batch_size=8, num_mini_epochs=1, normalize_observations=True, **SMALL
    )
    ppo, collector = _ppo(config)
    normalizers = _mlp(ppo).obs_normalizers
    assert normalizers is not None
    normalizer = normalizers["obs"]
    counts: list[float] = []
    evaluate = ppo._evaluate

    def recording(obs: TensorDict, action: torch.Tensor) -> tuple[Any, Any, Any]:
        counts.append(float(normalizer.count))  # type: ignore[arg-type]
        return evaluate(obs, action)

    ppo._evaluate = recording
    ppo.update(_collect(ppo, collector, 8), env_steps=0, iteration=0)
    assert counts
    assert all(count == counts[0] for count in counts)
    assert float(normalizer.count) == counts[0] + 16  # type: ignore[arg-type]


# ---------------------------------------------------------------- the kernel as PPO uses it


def _sgd_layer() -> tuple[torch.nn.Linear, torch.optim.SGD]:
    torch.manual_seed(3)
    layer = torch.nn.Linear(3, 2)
    return layer, torch.optim.SGD(layer.parameters(), lr=0.1)


def test_in_place_kernel_clips_like_the_packed_one() -> None:
    """in_place=True: per-tensor norm, nothing packed, the same clipped step to rounding."""
    results = []
    for in_place in (False, True):
        layer, optimizer = _sgd_layer()
        kernel = GradientStep(
            list(layer.parameters()),
            optimizer,
            dist=SingleProcess(),
            max_grad_norm=0.1,
            synchronised=True,
            in_place=in_place,
        )
        (layer(torch.ones(4, 3)) * 10.0).sum().backward()
        grads = [p.grad for p in layer.parameters() if p.grad is not None]
        reduced = kernel.reduce()
        if in_place:
            assert reduced.flat.numel() == 0
            assert torch.equal(
                reduced.norm, torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
            )
        kernel.apply(reduced)
        assert all(p.grad is None for p in layer.parameters())
        results.append([p.detach().clone() for p in layer.parameters()])
    for packed, in_place_value in zip(*results, strict=True):
        torch.testing.assert_close(in_place_value, packed)


def test_in_place_kernel_refuses_what_it_cannot_do() -> None:
    """in_place needs synchronised gradients and packs no statistics: ConfigError otherwise."""
    layer, optimizer = _sgd_layer()
    parameters = list(layer.parameters())
    with pytest.raises(ConfigError, match="needs synchronised=True"):
        GradientStep(parameters, optimizer, dist=SingleProcess(), max_grad_norm=None, in_place=True)
    kernel = GradientStep(
        parameters,
        optimizer,
        dist=SingleProcess(),
        max_grad_norm=None,
        synchronised=True,
        in_place=True,
    )
    with pytest.raises(ConfigError, match="packs nothing"):
        kernel.reduce(torch.ones(1))
