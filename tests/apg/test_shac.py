"""Tests for typedrl.apg._shac: SHAC's critic, metrics, checkpoints, resume and DDP."""

import copy
import dataclasses
import itertools
import json
import math
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import TensorDict
from torch import Tensor, nn

from tests.loggers import RecordingLogger
from tests.multiprocess import run_in_fresh_process, run_two_ranks
from tests.training.test_fabric import launch_two_rank_fabric
from typedrl.apg import (
    APGConfig,
    DifferentiableCollector,
    DifferentiableRollout,
    DifferentiableTrainer,
    DifferentiableTrainerConfig,
    SHACConfig,
    UpdateData,
)
from typedrl.apg._rollout import first_done_mask
from typedrl.apg._shac import SHAC
from typedrl.checkpoint import load_checkpoint
from typedrl.distributed import SingleProcess
from typedrl.envs import make
from typedrl.episodes import EpochEpisodes
from typedrl.errors import ConfigError
from typedrl.testing import QuadraticEnv
from typedrl.training import RunOptions

F64 = torch.float64
ENV_ID = "typedrl/CartPoleSwingUp-v0"

# ---------------------------------------------------------------- shared helpers


class FeaturePolicy(nn.Module):
    """A deterministic linear policy ``a = w x + b`` on the first feature, with a reward scale.

    ``features(obs)`` is the observation itself, or ``[x, x^2]`` with ``squared``, so
    that a linear critic over the features is a known function of the observation.
    """

    def __init__(self, *, squared: bool = False, weight: float = -0.5, bias: float = 0.1) -> None:
        super().__init__()
        self.linear = nn.Linear(1, 1).to(F64)
        self.scale = nn.Parameter(torch.ones((), dtype=F64))
        self.squared = squared
        with torch.no_grad():
            self.linear.weight.fill_(weight)
            self.linear.bias.fill_(bias)

    @property
    def reparameterized(self) -> bool:
        """Deterministic actions keep the graph to the parameters."""
        return True

    def features(self, obs: TensorDict) -> Tensor:
        """The observation, or ``[x, x^2]`` of its single feature."""
        x: Tensor = obs["obs"]
        return torch.cat((x, x.square()), dim=-1) if self.squared else x

    def act(self, obs: TensorDict, *, deterministic: bool = False) -> TensorDict:
        """``a = w x + b`` on the first feature (``deterministic`` changes nothing)."""
        del deterministic
        action: Tensor = self.linear(obs["obs"][:, :1])
        return TensorDict({"action": action}, batch_size=obs.batch_size, device=obs.device)


def make_shac(
    policy: nn.Module,
    *,
    feature_width: int,
    actor: APGConfig | None = None,
    planned_updates: int | None = 100,
    **fields: Any,
) -> SHAC:
    """SHAC with a linear critic (no hidden layer, no LayerNorm) fitted in 2 passes, unless
    ``fields`` say otherwise."""
    values: dict[str, Any] = {
        "critic_hidden": (),
        "critic_layer_norm": False,
        "critic_iterations": 2,
        **fields,
    }
    if actor is not None:
        values["actor"] = actor
    return SHAC(
        policy,
        SHACConfig(**values),
        dist=SingleProcess(),
        planned_updates=planned_updates,
        seed=0,
        feature_width=feature_width,
    )


def set_linear_critic(
    shac: SHAC, weight: list[float], bias: float, *, target_only: bool = False
) -> None:
    """Make the (target) critic ``V(f) = weight . f + bias`` (a critic without hidden layers)."""
    networks = [shac.target_critic] if target_only else [shac.critic, shac.target_critic]
    for network in networks:
        (layer,) = network
        assert isinstance(layer, nn.Linear)
        with torch.no_grad():
            layer.weight.copy_(torch.tensor([weight], dtype=layer.weight.dtype))
            layer.bias.fill_(bias)


def window_rollout(
    *,
    rewards: Tensor,
    values: Tensor,
    next_values: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    scale: Tensor,
) -> DifferentiableRollout:
    """A window of observations ``[0, values[t]]`` and terminal ones ``[0, next_values[t]]``.

    With the linear critic ``V(f) = f[1]`` (:func:`set_linear_critic` with weight ``[0, 1]``),
    ``V(s_t) = values[t]`` and ``V(final_obs_t) = next_values[t]``. The rewards are multiplied
    by ``scale`` (a policy parameter), so the loss has a gradient.
    """
    steps, rows = rewards.shape

    def observe(column: Tensor) -> TensorDict:
        obs = torch.stack((torch.zeros_like(column), column), dim=-1)
        return TensorDict({"obs": obs}, batch_size=list(column.shape))

    flags = torch.zeros(steps, rows, dtype=torch.bool)
    return DifferentiableRollout(
        initial_observation=observe(values[0]),
        observations=observe(values),
        actions=torch.zeros(steps, rows, 1, dtype=F64),
        rewards=rewards * scale,
        entropies=torch.zeros(steps, rows, dtype=F64),
        terminated=terminated,
        truncated=truncated,
        valid=~flags,
        alive_mask=first_done_mask(terminated | truncated),
        terminal_observations=observe(next_values),
        final_observation=observe(next_values[-1]),
        episodes=EpochEpisodes(
            returns=torch.zeros(steps, rows, dtype=F64),
            lengths=torch.zeros(steps, rows, dtype=torch.int64),
            ended=flags.clone(),
            return_so_far=torch.zeros(rows, dtype=F64),
            length_so_far=torch.zeros(rows, dtype=torch.int64),
        ),
        adjoint=None,
    )


def window_shac(**fields: Any) -> tuple[FeaturePolicy, SHAC]:
    """SHAC on :func:`window_rollout` data: the target critic reads ``V = obs[1]``."""
    policy = FeaturePolicy()
    shac = make_shac(policy, feature_width=2, **fields)
    set_linear_critic(shac, [0.0, 1.0], 0.0)
    return policy, shac


FitCall = tuple[Tensor, Tensor, Tensor]


def record_fit_calls(shac: SHAC, monkeypatch: pytest.MonkeyPatch) -> list[FitCall]:
    """Record the (features, targets, mask) of every critic fit of ``shac``, then fit as usual."""
    calls: list[FitCall] = []
    original = shac._fit_critic

    def fit(
        features: Tensor, targets: Tensor, mask: Tensor, window_sums: Tensor | None = None
    ) -> tuple[float, float, list[float]]:
        calls.append((features.clone(), targets.clone(), mask.clone()))
        return original(features, targets, mask, window_sums)

    monkeypatch.setattr(shac, "_fit_critic", fit)
    return calls


@pytest.fixture
def fit_calls(monkeypatch: pytest.MonkeyPatch) -> Callable[[SHAC], list[FitCall]]:
    """:func:`record_fit_calls` with the test's monkeypatch."""
    return lambda shac: record_fit_calls(shac, monkeypatch)


def one_update(shac: SHAC, rollout: DifferentiableRollout) -> dict[str, float]:
    """Begin, accumulate one window, finish: SHAC's update."""
    shac.begin_update()
    shac.accumulate_segment(rollout)
    return shac.finish_update(UpdateData.of([rollout])).metrics


def snapshot(shac: SHAC) -> dict[str, Any]:
    """Deep copies of every piece of SHAC's state (weights, optimizers, schedulers, sampler)."""
    return {
        "policy": copy.deepcopy(shac.policy.state_dict()),
        "critic": copy.deepcopy(shac.critic.state_dict()),
        "target_critic": copy.deepcopy(shac.target_critic.state_dict()),
        "optimizer": copy.deepcopy(shac.optimizer.state_dict()),
        "critic_optimizer": copy.deepcopy(shac.critic_optimizer.state_dict()),
        "scheduler": copy.deepcopy(shac.scheduler.state_dict()),
        "critic_scheduler": copy.deepcopy(shac.critic_scheduler.state_dict()),
        "sampler": shac.sampler.get_state().clone(),
        "return_normalizer": (
            None
            if shac.return_normalizer is None
            else copy.deepcopy(shac.return_normalizer.state_dict())
        ),
    }


def _bytes(tensor: Tensor) -> bytes:
    return bytes(tensor.detach().cpu().contiguous().numpy().tobytes())


def assert_bit_identical(a: Any, b: Any, where: str = "state") -> None:
    """Nested dicts, lists and tensors equal bit for bit (dtype and shape included)."""
    if isinstance(a, Tensor):
        assert isinstance(b, Tensor), where
        assert a.dtype == b.dtype, where
        assert a.shape == b.shape, where
        assert _bytes(a) == _bytes(b), f"{where} differs"
    elif isinstance(a, dict):
        assert isinstance(b, dict), where
        assert a.keys() == b.keys(), f"{where}: keys differ"
        for key in a:
            assert_bit_identical(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple), where
        assert len(a) == len(b), f"{where}: lengths differ"
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_bit_identical(x, y, f"{where}[{index}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def cartpole_trainer(
    *,
    num_envs: int = 4,
    segment_length: int = 8,
    total_updates: int = 2,
    shac: dict[str, Any] | None = None,
    options: RunOptions | None = None,
    seed: int = 0,
    **fields: Any,
) -> DifferentiableTrainer:
    """A small SHAC trainer on the built-in swing-up."""
    config = DifferentiableTrainerConfig(
        total_updates=total_updates,
        segment_length=segment_length,
        hidden=(16,),
        algorithm=SHACConfig(**{"critic_hidden": (16,), **(shac or {})}),
        seed=seed,
        **fields,
    )
    return DifferentiableTrainer(
        env=make(ENV_ID, num_envs=num_envs, seed=seed),
        config=config,
        options=options or RunOptions(progress=False, loggers=[]),
    )


def shac_of(trainer: DifferentiableTrainer) -> SHAC:
    """The trainer's algorithm, which is SHAC."""
    trainer.setup()
    algorithm = trainer.algorithm
    assert isinstance(algorithm, SHAC)
    return algorithm


def weights(trainer: DifferentiableTrainer) -> dict[str, Tensor]:
    """Policy, critic, target critic and return-normaliser tensors, by prefixed name."""
    shac = shac_of(trainer)
    named: dict[str, Tensor] = {}
    modules: dict[str, nn.Module] = {
        "policy": trainer.model,
        "critic": shac.critic,
        "target_critic": shac.target_critic,
    }
    if shac.return_normalizer is not None:
        modules["return_normalizer"] = shac.return_normalizer
    for prefix, module in modules.items():
        for key, value in module.state_dict().items():
            named[f"{prefix}.{key}"] = value.detach().clone()
    return named


def assert_same_weights(a: dict[str, Tensor], b: dict[str, Tensor]) -> None:
    """Same names, bit-identical tensors."""
    assert a.keys() == b.keys()
    different = [key for key in a if not torch.equal(a[key], b[key])]
    assert not different, f"tensors differ: {different}"


def critic_steps(shac: SHAC) -> int:
    """Optimizer steps the critic took (Adam's step count)."""
    state = shac.critic_optimizer.state_dict()["state"]
    return int(state[0]["step"]) if state else 0


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


def test_complete_rollouts_are_refused() -> None:
    """SHAC learns from windows of a running env; a complete rollout raises ConfigError."""
    policy, shac = window_shac()
    never = torch.zeros(3, 2, dtype=torch.bool)
    rollout = window_rollout(
        rewards=torch.ones(3, 2, dtype=F64),
        values=torch.zeros(3, 2, dtype=F64),
        next_values=torch.zeros(3, 2, dtype=F64),
        terminated=never,
        truncated=never,
        scale=policy.scale,
    )
    shac.begin_update()
    with pytest.raises(ConfigError, match=r"use rollout_mode='segmented'"):
        shac.accumulate_complete_rollout(rollout)
    shac.cancel_update()


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
    rollout = trainer.collector.collect(trainer.policy, num_steps=8)  # type: ignore[arg-type]
    shac.begin_update()
    shac.accumulate_segment(rollout)
    assert all(p.grad is None for p in shac.critic.parameters())
    assert all(p.grad is None for p in shac.target_critic.parameters())
    grads = [p.grad for p in shac.parameters]
    assert all(g is not None and bool(torch.isfinite(g).all()) for g in grads)
    assert any(g is not None and bool(g.abs().sum() > 0) for g in grads)
    shac.cancel_update()


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
    shac.begin_update()
    shac.accumulate_segment(zeroed)
    x0 = rollout.observations["obs"][0, :, 0].detach()
    gamma = shac.config.gamma
    # J = gamma * V(x0 + w x0 + b) / N with V(x) = 2 x: dJ/dw = 2 gamma mean(x0), dJ/db = 2 gamma.
    assert policy.linear.weight.grad is not None
    assert policy.linear.bias.grad is not None
    torch.testing.assert_close(
        policy.linear.weight.grad.reshape(()), -2.0 * gamma * x0.mean(), rtol=1e-12, atol=1e-12
    )
    torch.testing.assert_close(
        policy.linear.bias.grad.reshape(()),
        torch.tensor(-2.0 * gamma, dtype=F64),
        rtol=1e-12,
        atol=1e-12,
    )
    shac.cancel_update()


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
    _loss, objective, _entropy, _discount = shac._segment_loss(rollout, torch.ones(1, dtype=F64))
    assert float(objective.detach()) == 1.0


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


# ---------------------------------------------------------------- checkpoints


def test_checkpoint_holds_both_critics_optimizers_schedulers_and_the_sampler(
    tmp_path: Path,
) -> None:
    """last.ckpt holds both critics, both optimizers and schedulers, and the critic sampler."""
    trainer = cartpole_trainer(
        shac={"normalize_returns": True},
        options=RunOptions(run_dir=tmp_path, loggers=[], progress=False),
    )
    trainer.train()
    checkpoint = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    shac = shac_of(trainer)
    assert {"policy", "critic", "target_critic", "return_normalizer", "algorithm"} <= set(
        checkpoint.modules
    )
    assert "critic_sampler.rank0" in checkpoint.modules
    assert set(checkpoint.optimizers) == {"policy", "critic"}
    assert set(checkpoint.schedulers) == {"policy", "critic"}
    assert_same_weights(checkpoint.modules["critic"], dict(shac.critic.state_dict()))
    assert_same_weights(checkpoint.modules["target_critic"], dict(shac.target_critic.state_dict()))
    assert checkpoint.modules["algorithm"] == {"applied": 2, "skipped": 0}
    assert checkpoint.optimizers["critic"]["state"][0]["step"] == critic_steps(shac)
    assert checkpoint.schedulers["critic"]["last_epoch"] == 2
    assert checkpoint.config["algorithm"] == trainer.config.algorithm.to_dict()


RESUME_UPDATES = (3, 2)
RESUME_SHAC: dict[str, Any] = {
    "normalize_returns": True,
    "critic_iterations": 2,
    "critic_minibatches": 2,
}


def resume_trainer(
    run_dir: Path | None, logger: RecordingLogger | None = None
) -> DifferentiableTrainer:
    """The trainer of the resume test: N + M planned updates (linear schedules), normalised."""
    return cartpole_trainer(
        num_envs=3,
        segment_length=4,
        total_updates=sum(RESUME_UPDATES),
        shac=RESUME_SHAC,
        normalize_observations=True,
        layer_norm=True,
        options=RunOptions(
            run_dir=run_dir, loggers=[] if logger is None else [logger], progress=False
        ),
        seed=7,
    )


def _resume_in_fresh_process(checkpoint: str, out: str, threads: int) -> None:
    # The parent's thread count: a reduction split over other threads rounds differently.
    torch.set_num_threads(threads)
    trainer = resume_trainer(None)
    trainer.load(checkpoint)
    result = trainer.train()
    shac = shac_of(trainer)
    torch.save(
        {
            "iterations": result.iterations,
            "weights": weights(trainer),
            "optimizers": {
                "policy": shac.optimizer.state_dict(),
                "critic": shac.critic_optimizer.state_dict(),
            },
            "sampler": shac.sampler.get_state(),
        },
        out,
    )


def test_resume_is_bit_exact_in_a_fresh_process(tmp_path: Path) -> None:
    """N + M updates equal N updates (stopped by a signal), saved, resumed in a new process, M."""
    uninterrupted = resume_trainer(None)
    uninterrupted.train()
    previous = signal.getsignal(signal.SIGINT)
    first, _second = RESUME_UPDATES

    def interrupt(metrics: dict[str, float]) -> None:
        if metrics.get("time/iteration") == float(first):
            os.kill(os.getpid(), signal.SIGINT)

    stopped = resume_trainer(tmp_path, RecordingLogger(on_log=interrupt))
    result = stopped.train()
    assert signal.getsignal(signal.SIGINT) is previous
    assert (result.iterations, result.stopped_by_signal) == (first, True)
    assert any(
        not torch.equal(value, weights(uninterrupted)[key])
        for key, value in weights(stopped).items()
    )
    out = tmp_path / "resumed.pt"
    run_in_fresh_process(
        _resume_in_fresh_process,
        str(tmp_path / "checkpoints" / "last.ckpt"),
        str(out),
        torch.get_num_threads(),
    )
    resumed: dict[str, Any] = torch.load(out, weights_only=True)
    assert resumed["iterations"] == sum(RESUME_UPDATES)
    assert_same_weights(weights(uninterrupted), resumed["weights"])
    shac = shac_of(uninterrupted)
    assert_bit_identical(shac.optimizer.state_dict(), resumed["optimizers"]["policy"], "policy")
    assert_bit_identical(
        shac.critic_optimizer.state_dict(), resumed["optimizers"]["critic"], "critic"
    )
    assert torch.equal(shac.sampler.get_state(), resumed["sampler"])


# ---------------------------------------------------------------- distributed


def _ddp_worker(rank: int, port: int, out_dir: str) -> None:
    fabric = launch_two_rank_fabric(rank, port)
    result: dict[str, Any] = {}
    try:
        config = DifferentiableTrainerConfig(
            total_updates=3,
            segment_length=4,
            hidden=(16,),
            normalize_observations=True,
            algorithm=SHACConfig(
                critic_hidden=(16,),
                critic_iterations=2,
                critic_minibatches=4,
                normalize_returns=True,
            ),
            seed=5,
        )
        # 2 and 4 rows: 8 and 16 samples, 4 minibatches of 2 and of 4.
        env = make(ENV_ID, num_envs=(2, 4)[rank], seed=30 + rank, device=fabric.device)
        trainer = DifferentiableTrainer(
            env=env, config=config, fabric=fabric, options=RunOptions(progress=False, loggers=[])
        )
        initial = weights(trainer)
        fit = trainer.train()
        shac = shac_of(trainer)
        result = {
            "initial": initial,
            "weights": weights(trainer),
            "iterations": fit.iterations,
            "applied": shac.counters["applied"],
            "critic_steps": critic_steps(shac),
        }
    except Exception as error:
        result = {"error": f"{type(error).__name__}: {error}"}
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")


def _results(out_dir: Path) -> Iterator[dict[str, Any]]:
    for rank in (0, 1):
        yield torch.load(out_dir / f"rank{rank}.pt", weights_only=False)


@pytest.mark.distributed
def test_ddp_ranks_hold_identical_actor_critic_and_target(tmp_path: Path) -> None:
    """2 gloo ranks with 2 and 4 rows: identical policy, critic, target critic and statistics."""
    run_two_ranks(_ddp_worker, str(tmp_path))
    first, second = _results(tmp_path)
    assert "error" not in first, first.get("error")
    assert "error" not in second, second.get("error")
    assert first["iterations"] == second["iterations"] == 3
    assert first["applied"] == second["applied"] == 3
    assert first["critic_steps"] == second["critic_steps"] == 3 * 2 * 4
    assert_same_weights(first["initial"], second["initial"])
    assert_same_weights(first["weights"], second["weights"])
    moved = [
        k for k in first["weights"] if not torch.equal(first["weights"][k], first["initial"][k])
    ]
    assert any(k.startswith("policy.") for k in moved)
    assert any(k.startswith("critic.") for k in moved)
    assert any(k.startswith("target_critic.") for k in moved)


def _ddp_uneven_worker(rank: int, port: int, out_dir: str) -> None:
    fabric = launch_two_rank_fabric(rank, port)
    message = ""
    try:
        config = DifferentiableTrainerConfig(
            total_updates=2,
            segment_length=3,
            hidden=(8,),
            algorithm=SHACConfig(critic_hidden=(8,), critic_iterations=1, critic_minibatches=4),
        )
        env = make(ENV_ID, num_envs=(3, 4)[rank], seed=rank, device=fabric.device)
        DifferentiableTrainer(
            env=env, config=config, fabric=fabric, options=RunOptions(progress=False, loggers=[])
        ).train()
    except Exception as error:
        message = f"{type(error).__name__}: {error}"
    torch.save({"message": message}, Path(out_dir) / f"rank{rank}.pt")


@pytest.mark.distributed
def test_ddp_ranks_with_uneven_windows_train_the_critic_alike(tmp_path: Path) -> None:
    """Ranks of 3 and 4 rows (windows of 9 and 12 samples) train without error."""
    run_two_ranks(_ddp_uneven_worker, str(tmp_path))
    first, second = _results(tmp_path)
    assert first["message"] == second["message"] == ""


def test_the_run_summary_names_shac(tmp_path: Path) -> None:
    """summary.json says "shac" for a SHAC run (the checkpoint kind stays "apg")."""
    trainer = cartpole_trainer(
        options=RunOptions(run_dir=tmp_path, progress=False, loggers=[]), total_updates=1
    )
    assert trainer.algorithm_name == "shac"
    trainer.train()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["algorithm"] == "shac"
    assert load_checkpoint(tmp_path / "checkpoints" / "last.ckpt").kind == "apg"
