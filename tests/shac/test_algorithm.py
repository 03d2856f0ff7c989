"""Tests for typedrl.shac._algorithm: SHAC's update, its actor and critic, cut rows, metrics."""

import dataclasses
import itertools
import math
from collections.abc import Callable

import pytest
import torch
from torch import nn

from tests.loggers import RecordingLogger
from tests.shac.windows import (
    F64,
    FeaturePolicy,
    FitCall,
    FixedWindow,
    GradientsAtWindowEnd,
    assert_bit_identical,
    assert_same_weights,
    cartpole_trainer,
    critic_steps,
    make_shac,
    one_update,
    set_linear_critic,
    shac_of,
    snapshot,
    window_rollout,
    window_shac,
)
from typedrl.apg import DifferentiableCollector, DifferentiableRollout
from typedrl.distributed import SingleProcess
from typedrl.errors import ConfigError
from typedrl.shac import SHAC, SHACConfig
from typedrl.testing import QuadraticEnv
from typedrl.training import RunOptions

# ---------------------------------------------------------------- construction


def test_shac_refuses_a_policy_without_features() -> None:
    """The critic's input is policy.features(obs): a policy without it is refused."""
    with pytest.raises(ConfigError, match=r"SHAC needs a policy with features\(obs\)"):
        SHAC(
            nn.Linear(1, 1),
            SHACConfig(),
            dist=SingleProcess(),
            planned_updates=10,
            seed=0,
            feature_width=1,
        )


def test_critic_follows_the_policy_dtype_and_the_config() -> None:
    """The critic is an MLP of the configured widths in the policy's dtype; the target a copy."""
    policy = FeaturePolicy()
    shac = make_shac(policy, feature_width=2, critic_hidden=(8, 4), critic_layer_norm=True)
    linear = [layer for layer in shac.critic if isinstance(layer, nn.Linear)]
    assert [(layer.in_features, layer.out_features) for layer in linear] == [(2, 8), (8, 4), (4, 1)]
    assert sum(isinstance(layer, nn.LayerNorm) for layer in shac.critic) == 2
    assert all(p.dtype == F64 for p in shac.critic.parameters())
    assert_same_weights(dict(shac.critic.state_dict()), dict(shac.target_critic.state_dict()))
    assert not any(p.requires_grad for p in shac.target_critic.parameters())


# ---------------------------------------------------------------- actor and critic gradients


def test_critic_gets_no_gradient_from_the_actor_loss() -> None:
    """The actor's backward reaches the policy through V' but leaves both critics untouched."""
    trainer = cartpole_trainer(normalize_observations=True)
    shac = shac_of(trainer)
    trainer.collector.reset(seed=0)
    critics = [*shac.critic.parameters(), *shac.target_critic.parameters()]
    spy = GradientsAtWindowEnd(trainer.collector, [*critics, *shac.parameters])
    shac.update(spy, num_steps=8)
    assert all(grad is None for grad in spy.grads[: len(critics)])
    grads = spy.grads[len(critics) :]
    assert all(g is not None and bool(torch.isfinite(g).all()) for g in grads)
    assert any(g is not None and bool(g.abs().sum() > 0) for g in grads)


def test_the_value_path_reaches_the_actions() -> None:
    """With zero rewards, the gradient comes through V'(s_T) alone: a pure value path."""
    env = QuadraticEnv(num_envs=3, horizon=100, dtype="float64")
    policy = FeaturePolicy()
    shac = make_shac(policy, feature_width=1)
    set_linear_critic(shac, [2.0], 0.0)
    collector = DifferentiableCollector(env)
    collector.reset(seed=0)
    rollout = collector.collect(policy, num_steps=1)
    zeroed = dataclasses.replace(rollout, rewards=rollout.rewards * 0.0)
    window = FixedWindow(zeroed, [policy.linear.weight, policy.linear.bias])
    shac.update(window, num_steps=1)
    x0 = rollout.observations["obs"][0, :, 0].detach()
    gamma = shac.config.actor.gamma
    # J = gamma * V(x0 + w x0 + b) / N with V(x) = 2 x: dJ/dw = 2 gamma mean(x0), dJ/db = 2 gamma.
    weight, bias = window.grads
    assert weight is not None
    assert bias is not None
    torch.testing.assert_close(weight.reshape(()), -2.0 * gamma * x0.mean(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(
        bias.reshape(()), torch.tensor(-2.0 * gamma, dtype=F64), rtol=1e-12, atol=1e-12
    )


def test_critic_loss_decreases_over_its_iterations(
    fit_calls: Callable[[SHAC], list[FitCall]],
) -> None:
    """Refitting the critic pass after pass on one fixed window lowers its squared error."""
    torch.manual_seed(0)
    trainer = cartpole_trainer(
        num_envs=8,
        segment_length=16,
        total_updates=1,
        shac={
            "critic_iterations": 1,
            "critic_minibatches": 4,
            "critic_learning_rate_schedule": "constant",
        },
    )
    shac = shac_of(trainer)
    calls = fit_calls(shac)
    trainer.train()
    features, targets, mask = calls[0]

    def error() -> float:
        with torch.no_grad():
            prediction = shac.critic(features).squeeze(-1)
        return float((prediction - targets)[mask].square().mean())

    errors = [error()]
    losses = []
    for _ in range(16):
        loss, _norm, _ = shac._fit_critic(features, targets, mask)
        losses.append(loss)
        errors.append(error())
    # Pass after pass, each lower than the one before: 0.098 -> 0.068 with this seed.
    assert all(after < before for before, after in itertools.pairwise(errors)), errors
    assert errors[-1] < 0.8 * errors[0], errors
    assert sum(losses[-4:]) < sum(losses[:4]), losses


@pytest.mark.parametrize(
    ("num_envs", "segment_length"),
    [(4, 4), (2, 8), (3, 3)],
    # 16 samples in 4 minibatches of 4; 16 again; 9 samples in minibatches of 3, 2, 2 and 2.
    ids=["even", "even-long", "uneven"],
)
def test_critic_takes_iterations_times_minibatches_steps(
    num_envs: int, segment_length: int
) -> None:
    """Each applied update steps the critic critic_iterations * critic_minibatches times."""
    trainer = cartpole_trainer(
        num_envs=num_envs,
        segment_length=segment_length,
        total_updates=2,
        shac={"critic_iterations": 3, "critic_minibatches": 4},
    )
    trainer.train()
    assert critic_steps(shac_of(trainer)) == 2 * 3 * 4


def test_a_row_both_terminated_and_truncated_bootstraps_nothing() -> None:
    """Termination wins over truncation at the same step: no bootstrap, as in compute_gae."""
    policy, shac = window_shac()
    both = torch.tensor([[True]])
    rollout = window_rollout(
        rewards=torch.ones(1, 1, dtype=F64),
        values=torch.zeros(1, 1, dtype=F64),
        next_values=torch.full((1, 1), 10.0, dtype=F64),
        terminated=both,
        truncated=both.clone(),
        scale=policy.scale,
    )
    # The one step's reward alone: train/objective is the objective per row and step.
    assert one_update(shac, rollout)["train/objective"] == 1.0


# ---------------------------------------------------------------- cut rows


def _exploding_window(
    value: float, *, reward_too: bool
) -> tuple[FeaturePolicy, SHAC, DifferentiableRollout]:
    """A 4-step window of 3 rows where row 1's terminal observation at step 1 explodes."""
    policy, shac = window_shac(critic_iterations=1, critic_minibatches=1)
    steps, rows = 4, 3
    generator = torch.Generator().manual_seed(0)
    values = torch.rand(steps, rows, generator=generator, dtype=F64)
    next_values = torch.cat((values[1:], torch.rand(1, rows, generator=generator, dtype=F64)))
    rewards = torch.rand(steps, rows, generator=generator, dtype=F64)
    truncated = torch.zeros(steps, rows, dtype=torch.bool)
    # The env reports the exploded row as truncated and resets it.
    truncated[1, 1] = True
    next_values[1, 1] = value
    rollout = window_rollout(
        rewards=rewards,
        values=values,
        next_values=next_values,
        terminated=torch.zeros_like(truncated),
        truncated=truncated,
        scale=policy.scale,
    )
    if reward_too:
        # The exploded reward is added off the graph: a NaN inside it would also make the
        # actor's gradient NaN (0 * NaN in the backward) and skip the update.
        spike = torch.zeros(steps, rows, dtype=F64)
        spike[1, 1] = value
        rollout = dataclasses.replace(rollout, rewards=rollout.rewards + spike)
    return policy, shac, rollout


@pytest.mark.parametrize("value", [math.nan, math.inf, 1e9])
def test_an_exploded_row_is_cut_and_counted(value: float) -> None:
    """A non-finite or too large terminal observation cuts its row: counted, no bootstrap."""
    _policy, shac, rollout = _exploding_window(value, reward_too=False)
    metrics = one_update(shac, rollout)
    assert metrics["train/skipped_nonfinite"] == 0.0
    assert metrics["train/cut_rows"] == 1.0
    assert math.isfinite(metrics["loss/critic"])
    assert all(bool(torch.isfinite(p).all()) for p in shac.critic.parameters())


@pytest.mark.parametrize("value", [math.nan, 1e9])
def test_a_cut_rows_reward_never_reaches_the_critic_targets(
    value: float, fit_calls: Callable[[SHAC], list[FitCall]]
) -> None:
    """The reward of a cut step is left out of the critic's targets, as it is of the objective."""
    _policy, shac, rollout = _exploding_window(value, reward_too=True)
    calls = fit_calls(shac)
    metrics = one_update(shac, rollout)
    assert metrics["train/cut_rows"] == 1.0
    _features, targets, _mask = calls[0]
    assert bool(torch.isfinite(targets).all())
    assert float(targets.abs().max()) < 10.0
    assert math.isfinite(metrics["loss/critic"])


def test_cut_rows_count_the_reported_update_only() -> None:
    """train/cut_rows counts the cuts of the update it reports, a skipped one's too."""
    policy, shac, exploded = _exploding_window(math.nan, reward_too=False)
    # A NaN reward on a row that is not cut makes the gradient non-finite: the update is skipped.
    poisoned = window_rollout(
        rewards=torch.where(
            torch.arange(3) == 0,
            torch.full((4, 3), math.nan, dtype=F64),
            torch.ones(4, 3, dtype=F64),
        ),
        values=exploded.observations["obs"][..., 1].detach(),
        next_values=exploded.terminal_observations["obs"][..., 1].detach(),
        terminated=exploded.terminated,
        truncated=exploded.truncated,
        scale=policy.scale,
    )
    skipped = one_update(shac, poisoned)
    assert skipped["train/skipped_nonfinite"] == 1.0
    assert skipped["train/cut_rows"] == 1.0
    never = torch.zeros(4, 3, dtype=torch.bool)
    clean = window_rollout(
        rewards=torch.ones(4, 3, dtype=F64),
        values=torch.zeros(4, 3, dtype=F64),
        next_values=torch.zeros(4, 3, dtype=F64),
        terminated=never,
        truncated=never,
        scale=policy.scale,
    )
    assert one_update(shac, clean)["train/cut_rows"] == 0.0


def test_a_nonfinite_critic_minibatch_leaves_the_critic_as_it_was() -> None:
    """A minibatch whose critic gradient is non-finite changes neither critic nor optimizer."""
    policy, shac = window_shac(critic_iterations=2, critic_minibatches=2)
    never = torch.zeros(4, 3, dtype=torch.bool)
    generator = torch.Generator().manual_seed(1)
    rollout = window_rollout(
        rewards=torch.rand(4, 3, generator=generator, dtype=F64),
        values=torch.rand(4, 3, generator=generator, dtype=F64),
        next_values=torch.rand(4, 3, generator=generator, dtype=F64),
        terminated=never,
        truncated=never,
        scale=policy.scale,
    )
    one_update(shac, rollout)
    before = snapshot(shac)
    features = torch.rand(12, 2, generator=generator, dtype=F64)
    targets = torch.full((12,), math.nan, dtype=F64)
    shac._fit_critic(features, targets, torch.ones(12, dtype=torch.bool))
    after = snapshot(shac)
    assert_bit_identical(before["critic"], after["critic"], "critic")
    assert_bit_identical(before["critic_optimizer"], after["critic_optimizer"], "critic_optimizer")


# ---------------------------------------------------------------- metrics

SHAC_METRICS = {
    "loss/critic",
    "critic/value_mean",
    "critic/target_mean",
    "critic/explained_variance",
    "train/critic_grad_norm",
    "train/critic_learning_rate",
    "train/cut_rows",
}


def test_metrics_keys_and_values() -> None:
    """An update reports the critic's metrics next to APG's, all finite."""
    logger = RecordingLogger()
    trainer = cartpole_trainer(
        total_updates=3, options=RunOptions(progress=False, loggers=[logger])
    )
    trainer.train()
    assert len(logger.records) == 3
    for record in logger.records:
        assert record.keys() >= SHAC_METRICS
        assert {"loss/policy", "train/objective", "train/grad_norm"} <= record.keys()
        assert all(math.isfinite(record[key]) for key in SHAC_METRICS)
        assert record["train/cut_rows"] == 0.0
        assert record["loss/critic"] >= 0.0
        assert record["train/critic_grad_norm"] >= 0.0
        assert record["critic/explained_variance"] <= 1.0


def test_critic_learning_rate_metric_is_the_rate_the_update_used() -> None:
    """Like train/learning_rate, train/critic_learning_rate is the rate of the reported update."""
    logger = RecordingLogger()
    trainer = cartpole_trainer(
        total_updates=4, options=RunOptions(progress=False, loggers=[logger])
    )
    trainer.train()
    actor = [record["train/learning_rate"] for record in logger.records]
    critic = [record["train/critic_learning_rate"] for record in logger.records]
    # Both decay linearly over the 4 planned updates: 1, 3/4, 1/2, 1/4 of the initial rate.
    fractions = [1.0, 0.75, 0.5, 0.25]
    assert actor == pytest.approx([2e-3 * f for f in fractions])
    assert critic == pytest.approx([1e-3 * f for f in fractions])
