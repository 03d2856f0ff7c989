"""Tests for typedrl.ppo._ppo: PPOAgent end to end, on tiny runs."""

import math
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from lightning_fabric import Fabric
from lightning_fabric.plugins.precision import MixedPrecision
from tensordict import TensorDict
from torch import Tensor, nn

from tests.loggers import RecordingLogger
from tests.multiprocess import run_in_fresh_process, run_two_ranks
from tests.ppo._envs import NaNRewardEnv, RandomWalkEnv, StepCounter
from tests.training.test_fabric import launch_two_rank_fabric
from typedrl._results import EvaluationResult, StepResult
from typedrl.checkpoint import load_checkpoint, save_checkpoint
from typedrl.envs import GymnasiumVecEnv, make
from typedrl.errors import CheckpointError, ConfigError, NonFiniteError
from typedrl.normalization import RunningMeanStd
from typedrl.policies import MLPActorCritic
from typedrl.ppo import OnPolicyRollout, PPOAgent, PPOConfig
from typedrl.protocols import VecEnv
from typedrl.testing import CountingVecEnv, RandomEndsVectorEnv
from typedrl.training import RunOptions

SMALL: dict[str, Any] = {"actor_hidden": (8,), "critic_hidden": (8,)}


def _mlp(agent: PPOAgent) -> MLPActorCritic:
    """The agent's policy: the config's MLP here."""
    policy = agent.model_unwrapped
    assert isinstance(policy, MLPActorCritic)
    return policy


def _obs_normalizer(agent: PPOAgent) -> RunningMeanStd:
    """The observation normaliser inside the agent's model (normalize_observations=True)."""
    normalizers = _mlp(agent).obs_normalizers
    assert normalizers is not None
    normalizer = normalizers["obs"]
    assert isinstance(normalizer, RunningMeanStd)
    return normalizer


def count_optimizer_steps(agent: PPOAgent) -> list[float]:
    """Wrap the agent's optimizer step; return the list of learning rates it ran with."""
    agent.setup()
    rates: list[float] = []
    optimizer = agent.algorithm.optimizer
    step = optimizer.step

    def counting_step(*args: Any, **kwargs: Any) -> Any:
        rates.append(float(optimizer.param_groups[0]["lr"]))
        return step(*args, **kwargs)

    optimizer.step = counting_step  # type: ignore[method-assign]
    return rates


def parameters(agent: PPOAgent) -> dict[str, Tensor]:
    return {k: v.detach().clone() for k, v in agent.model_unwrapped.state_dict().items()}


def assert_same_parameters(a: dict[str, Tensor], b: dict[str, Tensor]) -> None:
    assert a.keys() == b.keys()
    different = [key for key in a if not torch.equal(a[key], b[key])]
    assert not different, f"parameters differ: {different}"


# ---------------------------------------------------------------- fit, counters, metrics


METRIC_KEYS = {
    "time/sps",
    "time/iteration_seconds",
    "episode/return_mean",
    "episode/length_mean",
    "loss/policy",
    "loss/value",
    "loss/entropy",
    "loss/total",
    "train/approx_kl",
    "train/clip_fraction",
    "train/explained_variance",
    "train/grad_norm",
    "train/learning_rate",
    "train/skipped_updates",
}


def test_fit_on_cartpole_counts_epochs_steps_and_minibatches() -> None:
    """CartPole-v1, 4 envs: counters, metric keys and exactly ceil(...) updates per epoch."""
    env = make("CartPole-v1", num_envs=4, seed=0)
    config = PPOConfig(total_timesteps=256, num_steps=32, batch_size=48, num_mini_epochs=2, **SMALL)
    logger = RecordingLogger()
    agent = PPOAgent(env=env, config=config, options=RunOptions(loggers=[logger], progress=False))
    rates = count_optimizer_steps(agent)
    result = agent.fit()
    assert (result.iterations, result.env_steps) == (2, 256)
    assert (agent.iteration, agent.env_steps) == (2, 256)
    per_epoch = math.ceil(4 * 32 * 2 / 48)
    assert per_epoch == config.minibatches_per_epoch(num_envs=4) == agent.num_minibatches == 6
    assert len(rates) == 2 * per_epoch
    assert len(logger.records) == 2
    for record in logger.records:
        assert record.keys() >= METRIC_KEYS
        assert "train/approximate_bootstrap" not in record
        assert all(math.isfinite(value) for value in record.values())
    assert logger.records[-1]["time/env_steps"] == 256.0
    assert logger.finalized == ["success"]
    assert result.metrics["loss/policy"] == logger.records[-1]["loss/policy"]
    env.close()


def test_fit_on_builtin_pendulum_with_linear_schedule() -> None:
    """typedrl/Pendulum-v0: linear LR decay per epoch, truncations bootstrapped, episodes logged."""
    env = make("typedrl/Pendulum-v0", num_envs=2, seed=0, env_kwargs={"max_episode_steps": 8})
    config = PPOConfig(
        total_timesteps=96,
        num_steps=16,
        batch_size=16,
        num_mini_epochs=1,
        learning_rate=3e-3,
        learning_rate_schedule="linear",
        normalize_observations=True,
        normalize_rewards=True,
        **SMALL,
    )
    logger = RecordingLogger()
    agent = PPOAgent(env=env, config=config, options=RunOptions(loggers=[logger], progress=False))
    rates = count_optimizer_steps(agent)
    agent.fit()
    expected = [3e-3 * (1 - 32 * k / 96) for k in range(3)]
    assert [record["train/learning_rate"] for record in logger.records] == pytest.approx(expected)
    assert rates == pytest.approx([rate for rate in expected for _ in range(2)])
    assert all(record["episode/length_mean"] == 8.0 for record in logger.records)
    assert int(_obs_normalizer(agent).count) == 96


def test_fit_on_counting_env_with_discrete_actions() -> None:
    """CountingVecEnv with Discrete actions: episode statistics are exact."""
    env = CountingVecEnv(num_envs=3, terminate_after=[2, 4, 4], action_space="discrete")
    config = PPOConfig(total_timesteps=24, num_steps=8, batch_size=12, num_mini_epochs=1, **SMALL)
    logger = RecordingLogger()
    agent = PPOAgent(env=env, config=config, options=RunOptions(loggers=[logger], progress=False))
    agent.fit()
    # Per epoch: row 0 ends 4 episodes of length 2 (return 3), rows 1, 2 two of length 4 (10).
    assert logger.records[0]["episode/length_mean"] == pytest.approx((4 * 2 + 4 * 4) / 8)
    assert logger.records[0]["episode/return_mean"] == pytest.approx((4 * 3 + 4 * 10) / 8)


def test_adaptive_learning_rate_stays_within_bounds() -> None:
    """The KL-adaptive schedule moves the LR by factors of 1.5 and clamps it to its bounds."""
    env = RandomWalkEnv(num_envs=2)
    down = PPOConfig(
        total_timesteps=32,
        num_steps=8,
        batch_size=4,
        num_mini_epochs=2,
        learning_rate=1e-3,
        learning_rate_schedule="adaptive",
        desired_kl=1e-12,
        min_learning_rate=2e-4,
        **SMALL,
    )
    agent = PPOAgent(env=env, config=down, options=RunOptions(progress=False))
    rates = count_optimizer_steps(agent)
    agent.fit()
    assert rates[0] == pytest.approx(1e-3)
    assert all(2e-4 <= rate <= 1e-3 for rate in rates)
    assert rates[-1] == pytest.approx(2e-4)
    assert agent.algorithm.learning_rate == pytest.approx(2e-4)

    up = PPOConfig(
        total_timesteps=32,
        num_steps=8,
        batch_size=4,
        num_mini_epochs=2,
        learning_rate=1e-3,
        learning_rate_schedule="adaptive",
        desired_kl=10.0,
        max_learning_rate=3e-3,
        **SMALL,
    )
    agent = PPOAgent(env=RandomWalkEnv(num_envs=2), config=up, options=RunOptions(progress=False))
    rates = count_optimizer_steps(agent)
    agent.fit()
    assert all(1e-3 <= rate <= 3e-3 for rate in rates)
    assert rates[-1] == pytest.approx(3e-3)


def test_target_kl_stops_an_epoch_early() -> None:
    """Once the approximate KL exceeds target_kl, the epoch's remaining minibatches are skipped."""
    config = PPOConfig(
        total_timesteps=32,
        num_steps=8,
        batch_size=4,
        num_mini_epochs=4,
        learning_rate=0.05,
        target_kl=1e-7,
        **SMALL,
    )
    agent = PPOAgent(
        env=RandomWalkEnv(num_envs=2), config=config, options=RunOptions(progress=False)
    )
    rates = count_optimizer_steps(agent)
    agent.fit()
    full = 2 * agent.num_minibatches
    assert agent.num_minibatches == 16
    # The first minibatch's KL is ~0 (the policy has not moved yet); the second's is not.
    assert 2 <= len(rates) <= 4 < full


# ---------------------------------------------------------------- advantages


def hand_gae(
    *,
    env: CountingVecEnv,
    num_steps: int,
    value: Callable[[Tensor], Tensor],
    gamma: float,
    lam: float,
    exact: bool,
) -> tuple[Tensor, Tensor]:
    """GAE for one epoch of a CountingVecEnv, written out row by row in plain Python."""
    obs, _ = env.reset()
    steps: list[tuple[Tensor, StepResult]] = []
    for _ in range(num_steps):
        result = env.step(torch.zeros(env.num_envs, 1))
        steps.append((obs["obs"], result))
        obs = result.obs
    last = value(obs["obs"])
    advantages = torch.zeros(num_steps, env.num_envs, dtype=torch.float64)
    for row in range(env.num_envs):
        next_advantage = 0.0
        for t in reversed(range(num_steps)):
            current, result = steps[t]
            v = float(value(current)[row])
            if bool(result.terminated[row]):
                bootstrap = 0.0
            elif bool(result.truncated[row]):
                if exact:
                    assert result.final_obs is not None
                    bootstrap = float(value(result.final_obs["obs"])[row])
                else:
                    bootstrap = v  # the documented approximation: V(obs_t)
            elif t + 1 < num_steps:
                bootstrap = float(value(steps[t + 1][0])[row])
            else:
                bootstrap = float(last[row])
            delta = float(result.reward[row]) + gamma * bootstrap - v
            done = bool(result.terminated[row] | result.truncated[row])
            next_advantage = delta + (0.0 if done else gamma * lam * next_advantage)
            advantages[t, row] = next_advantage
    values = torch.stack([value(current) for current, _ in steps]).double()
    return advantages, advantages + values


class _Formula(nn.Module):
    """A critic network replaced by a formula of the features, ``[batch, 1]``."""

    def __init__(self, formula: Callable[[Tensor], Tensor]) -> None:
        super().__init__()
        self.formula = formula
        # The model reads its dtype from the critic's first parameter.
        self.dtype_carrier = nn.Parameter(torch.zeros(()), requires_grad=False)

    def forward(self, features: Tensor) -> Tensor:
        return self.formula(features).unsqueeze(-1)


@pytest.mark.parametrize("exact", [True, False])
def test_truncations_bootstrap_from_the_final_observation(exact: bool) -> None:
    """Truncated rows bootstrap from V(final_obs) (or V(obs_t) without it); terminated don't."""

    def value(features: Tensor) -> Tensor:
        # V(obs) = 10 t + episode + 0.5 row: distinct values for every observation.
        return 10.0 * features[:, 0] + features[:, 1] + 0.5 * features[:, 2]

    def make_env() -> CountingVecEnv:
        return CountingVecEnv(
            num_envs=3,
            truncate_after=[3, 5, 4],
            terminate_after=[7, 2, 4],
            provides_final_obs=exact,
        )

    config = PPOConfig(
        total_timesteps=24,
        num_steps=8,
        batch_size=24,
        num_mini_epochs=1,
        gamma=0.9,
        gae_lambda=0.8,
        **SMALL,
    )
    logger = RecordingLogger()
    agent = PPOAgent(
        env=make_env(), config=config, options=RunOptions(loggers=[logger], progress=False)
    )
    agent.setup()
    # The critic itself computes the formula, so every path to V (collection, value()) uses it.
    _mlp(agent).critic = _Formula(value)  # type: ignore[assignment]
    computed: list[tuple[Tensor, Tensor]] = []
    advantages_of = agent.algorithm._advantages

    def recording(rollout: OnPolicyRollout) -> tuple[Tensor, Tensor]:
        result = advantages_of(rollout)
        computed.append(result)
        return result

    agent.algorithm._advantages = recording  # type: ignore[method-assign]
    agent.fit()
    expected_advantages, expected_returns = hand_gae(
        env=make_env(), num_steps=8, value=value, gamma=0.9, lam=0.8, exact=exact
    )
    advantages, returns = computed[0]
    # The agent computes in float32: compare at float32 precision.
    torch.testing.assert_close(advantages.double(), expected_advantages, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(returns.double(), expected_returns, rtol=1e-5, atol=1e-5)
    if exact:
        assert "train/approximate_bootstrap" not in logger.records[0]
    else:
        assert logger.records[0]["train/approximate_bootstrap"] == 1.0


# ---------------------------------------------------------------- ghost transitions


class Recorder:
    """Wraps a VecEnv and keeps every step's reward, done and valid flags."""

    def __init__(self, env: VecEnv) -> None:
        self.env = env
        self.steps: list[tuple[Tensor, Tensor, Tensor]] = []
        self.num_envs = env.num_envs
        self.device = env.device
        self.single_observation_space = env.single_observation_space
        self.single_action_space = env.single_action_space
        self.provides_final_obs = env.provides_final_obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[TensorDict, dict[str, Any]]:
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Tensor) -> StepResult:
        result = self.env.step(action)
        self.steps.append((result.reward.double(), result.done, result.valid))
        return result

    def close(self) -> None:
        self.env.close()


def test_ghost_transitions_never_train_and_are_not_counted() -> None:
    """NEXT_STEP ghosts: poisoned ghost samples leave the loss finite; episode stats skip them."""
    raw = RandomEndsVectorEnv(num_envs=3, terminate_prob=0.3, max_steps=4)
    env = Recorder(GymnasiumVecEnv(raw, default_seed=3))
    config = PPOConfig(
        total_timesteps=48,
        num_steps=16,
        batch_size=12,
        num_mini_epochs=2,
        nonfinite_gradients="raise",
        **SMALL,
    )
    logger = RecordingLogger()
    agent = PPOAgent(env=env, config=config, options=RunOptions(loggers=[logger], progress=False))
    agent.setup()
    stacked = agent.collector.buffer.stacked
    ghosts_seen: list[int] = []

    def poisoned() -> TensorDict:
        data = stacked().clone()
        ghost = ~data["valid"]
        ghosts_seen.append(int(ghost.sum()))
        nan = torch.tensor(float("nan"))
        for key in ("reward", "log_prob", "final_value"):
            data[key] = torch.where(ghost, nan, data[key])
        return data

    agent.collector.buffer.stacked = poisoned  # type: ignore[method-assign]
    agent.fit()
    assert sum(ghosts_seen) > 0, "the env produced no ghost step; change the seed"
    for record in logger.records:
        assert record["train/skipped_updates"] == 0.0
        assert all(math.isfinite(v) for v in record.values())
    assert all(bool(torch.isfinite(p).all()) for p in agent.model_unwrapped.parameters())
    # Episode statistics from the recorded steps, counting valid steps only.
    for epoch, record in enumerate(logger.records):
        lengths, returns = [], []
        running = torch.zeros(3, dtype=torch.float64)
        length = torch.zeros(3)
        for t, (reward, done, valid) in enumerate(env.steps):
            running += torch.where(valid, reward, 0.0)
            length += valid.double().float()
            for row in range(3):
                if bool(done[row] & valid[row]) and t // 16 == epoch:
                    lengths.append(float(length[row]))
                    returns.append(float(running[row]))
            running = torch.where(done, 0.0, running)
            length = torch.where(done, 0.0, length)
        assert record["episode/length_mean"] == pytest.approx(sum(lengths) / len(lengths))
        assert record["episode/return_mean"] == pytest.approx(sum(returns) / len(returns))


# ---------------------------------------------------------------- non-finite values


def test_nan_reward_raises_before_any_update() -> None:
    """A NaN reward raises NonFiniteError naming the step; no optimizer step was taken."""
    env = NaNRewardEnv(CountingVecEnv(num_envs=2, truncate_after=3), nan_at=3)
    config = PPOConfig(total_timesteps=16, num_steps=8, batch_size=8, num_mini_epochs=1, **SMALL)
    agent = PPOAgent(env=env, config=config, options=RunOptions(progress=False))
    rates = count_optimizer_steps(agent)
    before = parameters(agent)
    with pytest.raises(
        NonFiniteError, match="non-finite reward 'reward' in env row 0 at step 3 of iteration 0"
    ):
        agent.fit()
    assert rates == []
    assert_same_parameters(before, parameters(agent))


def nan_value_during_updates(agent: PPOAgent) -> None:
    """Make the critic's output NaN whenever gradients are on (updates, not collection)."""

    def hook(module: nn.Module, inputs: Any, output: Tensor) -> Tensor | None:
        del module, inputs
        return output * float("nan") if torch.is_grad_enabled() else None

    _mlp(agent).critic.register_forward_hook(hook)


def test_nonfinite_gradients_are_skipped() -> None:
    """A NaN loss skips the update, counts it in train/skipped_updates, and changes nothing."""
    config = PPOConfig(total_timesteps=16, num_steps=8, batch_size=8, num_mini_epochs=1, **SMALL)
    logger = RecordingLogger()
    agent = PPOAgent(
        env=RandomWalkEnv(num_envs=2),
        config=config,
        options=RunOptions(loggers=[logger], progress=False),
    )
    rates = count_optimizer_steps(agent)
    nan_value_during_updates(agent)
    before = parameters(agent)
    agent.fit()
    assert rates == []
    assert [record["train/skipped_updates"] for record in logger.records] == [1.0]
    assert_same_parameters(before, parameters(agent))


def test_nonfinite_gradients_raise_when_configured() -> None:
    """nonfinite_gradients='raise' turns a NaN gradient into NonFiniteError."""
    config = PPOConfig(
        total_timesteps=16,
        num_steps=8,
        batch_size=8,
        num_mini_epochs=1,
        nonfinite_gradients="raise",
        **SMALL,
    )
    agent = PPOAgent(
        env=RandomWalkEnv(num_envs=2), config=config, options=RunOptions(progress=False)
    )
    agent.setup()
    nan_value_during_updates(agent)
    with pytest.raises(NonFiniteError, match=r"non-finite gradient norm \(nan\) in epoch 0"):
        agent.fit()


def _precision_fabric(precision: str) -> Fabric:
    """A single-process CPU Fabric; ``"16-mixed+scaler"`` is float16 AMP with a gradient scaler."""
    if precision == "16-mixed+scaler":
        plugin = MixedPrecision("16-mixed", "cpu", scaler=torch.amp.GradScaler("cpu"))
        fabric = Fabric(accelerator="cpu", devices=1, plugins=[plugin])
    else:
        fabric = Fabric(accelerator="cpu", devices=1, precision=precision)  # type: ignore[arg-type]
    fabric.launch()
    return fabric


def _final_grad_norm(precision: str) -> float:
    env = make("typedrl/CartPole-v0", num_envs=8, seed=0)
    config = PPOConfig(
        total_timesteps=8 * 32 * 2, num_steps=32, batch_size=64, num_mini_epochs=2, **SMALL
    )
    agent = PPOAgent(
        env=env,
        config=config,
        fabric=_precision_fabric(precision),
        options=RunOptions(progress=False, loggers=[]),
    )
    return agent.fit().metrics["train/grad_norm"]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed+scaler"])
def test_mixed_precision_measures_and_clips_unscaled_gradients(precision: str) -> None:
    """Under AMP the logged gradient norm is the true one (it was the loss-scaled one, ~6e4x)."""
    reference = _final_grad_norm("32-true")
    assert _final_grad_norm(precision) == pytest.approx(reference, rel=0.1)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_gradient_scaler_backs_off_on_overflowing_updates() -> None:
    """An overflowing update is skipped through the scaler, which lowers its scale."""
    config = PPOConfig(total_timesteps=16, num_steps=8, batch_size=8, num_mini_epochs=1, **SMALL)
    logger = RecordingLogger()
    agent = PPOAgent(
        env=RandomWalkEnv(num_envs=2),
        config=config,
        fabric=_precision_fabric("16-mixed+scaler"),
        options=RunOptions(loggers=[logger], progress=False),
    )
    agent.setup()
    scaler = agent.algorithm._scaler
    assert scaler is not None
    initial_scale = scaler.get_scale()
    nan_value_during_updates(agent)
    before = parameters(agent)
    agent.fit()
    assert [record["train/skipped_updates"] for record in logger.records] == [1.0]
    assert scaler.get_scale() < initial_scale
    assert_same_parameters(before, parameters(agent))


# ---------------------------------------------------------------- construction errors


def test_agent_exposes_the_algorithms_optimizer_normaliser_and_rate() -> None:
    """agent.optimizer, reward_normalizer and learning_rate are agent.algorithm's."""
    config = PPOConfig(
        num_steps=8, batch_size=8, learning_rate=2e-3, normalize_rewards=True, **SMALL
    )
    agent = PPOAgent(
        env=RandomWalkEnv(num_envs=2), config=config, options=RunOptions(progress=False)
    )
    agent.setup()
    algorithm = agent.algorithm
    assert agent.optimizer is algorithm.optimizer
    assert agent.reward_normalizer is algorithm.reward_normalizer is not None
    assert agent.learning_rate == algorithm.learning_rate == 2e-3
    algorithm.optimizer.param_groups[0]["lr"] = 1e-4
    assert agent.learning_rate == 1e-4


def test_construction_errors() -> None:
    """Bad arguments raise ConfigError with the offending value."""
    config = PPOConfig(num_steps=4, batch_size=64, **SMALL)
    with pytest.raises(ConfigError, match=r"batch_size \(64\) must be <= the number of samples"):
        PPOAgent(env=RandomWalkEnv(num_envs=2), config=config, options=RunOptions(progress=False))
    with pytest.raises(ConfigError, match=r"RunOptions\.eval_every_steps must be a positive int"):
        PPOAgent(
            env=RandomWalkEnv(num_envs=2),
            config=PPOConfig(),
            options=RunOptions(eval_every_steps=0),
        )


# ---------------------------------------------------------------- evaluation


def test_evaluation_uses_the_eval_env_only() -> None:
    """Scores come from the eval env; the training env's steps and resets are unaffected."""
    train_env = StepCounter(make("CartPole-v1", num_envs=2, seed=0))
    eval_env = StepCounter(make("CartPole-v1", num_envs=2, seed=1))
    config = PPOConfig(total_timesteps=64, num_steps=16, batch_size=16, num_mini_epochs=1, **SMALL)
    logger = RecordingLogger()
    agent = PPOAgent(
        env=train_env,
        config=config,
        eval_env=eval_env,
        options=RunOptions(eval_every_steps=32, eval_episodes=3, loggers=[logger], progress=False),
    )
    result = agent.fit()
    assert (train_env.steps_taken, train_env.resets) == (32, 1)
    # After epochs 1 (32 steps) and 2 (64 steps); the final policy is not evaluated twice.
    assert eval_env.resets == 2
    assert [("eval/score" in record) for record in logger.records] == [True, True]
    score = result.metrics["eval/score"]
    assert math.isfinite(score)
    assert result.best_score is not None
    assert result.best_score >= score


def test_best_checkpoint_only_on_strictly_better_finite_scores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """best.ckpt is written for 1.0 and 2.0, never for a tie or a worse score."""
    env = RandomWalkEnv(num_envs=2)
    config = PPOConfig(total_timesteps=80, num_steps=8, batch_size=8, num_mini_epochs=1, **SMALL)
    agent = PPOAgent(
        env=env,
        config=config,
        eval_env=RandomWalkEnv(num_envs=2, seed=1),
        options=RunOptions(run_dir=tmp_path, eval_every_steps=16, loggers=[], progress=False),
    )
    scores = iter([1.0, 1.0, 0.5, 2.0, 1.5])
    assert agent.evaluator is not None
    monkeypatch.setattr(
        agent.evaluator,
        "evaluate",
        lambda policy: EvaluationResult(metrics={}, score=next(scores), num_items=1),
    )
    saved: list[tuple[str, int]] = []
    save = agent.save

    def recording_save(path: str | Path | None) -> Path | None:
        saved.append((Path(path).name if path else "", agent.iteration))
        return save(path)

    monkeypatch.setattr(agent, "save", recording_save)
    result = agent.fit()
    assert [item for item in saved if item[0] == "best.ckpt"] == [
        ("best.ckpt", 1),
        ("best.ckpt", 4),
    ]
    assert result.best_score == 2.0
    assert load_checkpoint(tmp_path / "checkpoints" / "best.ckpt").best_score == 2.0


def test_evaluation_normalizes_observations_like_training() -> None:
    """With normalize_observations the evaluated policy sees normalised observations."""
    config = PPOConfig(
        total_timesteps=16,
        num_steps=8,
        batch_size=8,
        num_mini_epochs=1,
        normalize_observations=True,
        **SMALL,
    )
    agent = PPOAgent(
        env=RandomWalkEnv(num_envs=2),
        config=config,
        eval_env=RandomWalkEnv(num_envs=2, seed=5),
        options=RunOptions(eval_episodes=2, progress=False),
    )
    agent.fit()
    assert int(_obs_normalizer(agent).count) == 16
    seen: list[Tensor] = []
    _mlp(agent).actor.register_forward_pre_hook(
        lambda module, inputs: seen.append(inputs[0].clone())
    )
    obs, _ = RandomWalkEnv(num_envs=2, seed=5).reset(seed=agent.evaluator.seed)  # type: ignore[union-attr]
    agent.evaluate()
    torch.testing.assert_close(seen[0], _obs_normalizer(agent).normalize(obs["obs"]))


# ---------------------------------------------------------------- checkpoints


def test_checkpoint_files_and_load(tmp_path: Path) -> None:
    """last, best and epoch_<n> files are written; load restores model, optimizer, counters."""
    config = PPOConfig(total_timesteps=48, num_steps=8, batch_size=8, num_mini_epochs=1, **SMALL)
    agent = PPOAgent(
        env=RandomWalkEnv(num_envs=2),
        config=config,
        eval_env=RandomWalkEnv(num_envs=2, seed=1),
        options=RunOptions(
            eval_episodes=2, run_dir=tmp_path, checkpoint_every_iterations=2, progress=False
        ),
    )
    agent.fit()
    folder = tmp_path / "checkpoints"
    names = sorted(path.name for path in folder.iterdir())
    assert names == [
        "best.ckpt",
        "epoch_00000002.ckpt",
        "last.ckpt",
    ]
    assert (tmp_path / "metrics.csv").is_file()
    checkpoint = load_checkpoint(folder / "last.ckpt", expected_kind="ppo")
    assert checkpoint.counters == {"iteration": 3, "env_steps": 48}
    assert checkpoint.config == config.to_dict()
    assert "env" in checkpoint.modules["collector.rank0"]  # RandomWalkEnv has state_dict

    fresh = PPOAgent(
        env=RandomWalkEnv(num_envs=2, seed=9), config=config, options=RunOptions(progress=False)
    )
    fresh.load(folder / "last.ckpt")
    assert (fresh.iteration, fresh.env_steps, fresh.best_score) == (3, 48, agent.best_score)
    assert_same_parameters(parameters(agent), parameters(fresh))
    saved_state = agent.algorithm.optimizer.state_dict()["state"]
    loaded_state = fresh.algorithm.optimizer.state_dict()["state"]
    assert saved_state.keys() == loaded_state.keys()
    for key, value in saved_state.items():
        for name, tensor in value.items():
            assert torch.equal(tensor, loaded_state[key][name])
    assert fresh.collector._obs is not None
    assert agent.collector._obs is not None
    assert torch.equal(fresh.collector._obs["obs"], agent.collector._obs["obs"])


def test_load_refuses_a_checkpoint_of_another_architecture(tmp_path: Path) -> None:
    """Loading into a different network raises CheckpointError naming the file."""
    config = PPOConfig(total_timesteps=8, num_steps=4, batch_size=8, num_mini_epochs=1, **SMALL)
    PPOAgent(
        env=RandomWalkEnv(num_envs=2),
        config=config,
        options=RunOptions(run_dir=tmp_path, progress=False),
    ).fit()
    other = PPOConfig(
        total_timesteps=8, num_steps=4, batch_size=8, actor_hidden=(4,), critic_hidden=(8,)
    )
    agent = PPOAgent(
        env=RandomWalkEnv(num_envs=2), config=other, options=RunOptions(progress=False)
    )
    with pytest.raises(CheckpointError, match=r"last\.ckpt"):
        agent.load(tmp_path / "checkpoints" / "last.ckpt")


def test_load_refuses_a_checkpoint_of_another_config(tmp_path: Path) -> None:
    """Changed hyper-parameters are refused before anything is loaded, unless asked for."""
    config = PPOConfig(total_timesteps=8, num_steps=4, batch_size=8, num_mini_epochs=1, **SMALL)
    PPOAgent(
        env=RandomWalkEnv(num_envs=2),
        config=config,
        options=RunOptions(run_dir=tmp_path, progress=False),
    ).fit()
    checkpoint = tmp_path / "checkpoints" / "last.ckpt"
    changed = PPOConfig.from_dict({**config.to_dict(), "gamma": 0.5, "clip_range": 0.3})
    agent = PPOAgent(
        env=RandomWalkEnv(num_envs=2), config=changed, options=RunOptions(progress=False)
    )
    with pytest.raises(CheckpointError, match=r"clip_range: saved 0\.2, now 0\.3; gamma") as info:
        agent.load(checkpoint)
    assert "strict_config=False" in str(info.value)
    assert agent.iteration == 0
    # On purpose: the weights and counters are restored, the new config kept.
    agent.load(checkpoint, strict_config=False)
    assert agent.iteration == 1
    assert agent.config.gamma == 0.5
    # A field the checkpoint lacks (added to the config later) is not compared.
    saved = load_checkpoint(checkpoint)
    del saved.config["entropy_coef"]
    save_checkpoint(tmp_path / "older.ckpt", saved)
    PPOAgent(env=RandomWalkEnv(num_envs=2), config=config, options=RunOptions(progress=False)).load(
        tmp_path / "older.ckpt"
    )
    # The budget, compilation and bookkeeping may change freely.
    longer = PPOConfig.from_dict(
        {**config.to_dict(), "total_timesteps": 16, "extra": {"note": "resumed"}}
    )
    resumed = PPOAgent(
        env=RandomWalkEnv(num_envs=2), config=longer, options=RunOptions(progress=False)
    )
    resumed.load(checkpoint)
    assert resumed.fit().env_steps == 16


def test_checkpoint_from_an_older_release_resumes(tmp_path: Path) -> None:
    """A checkpoint without orthogonal_init and with compile_update loads and resumes.

    Such configs rebuild with the defaults (orthogonal initialisation; the
    weights come from the checkpoint anyway); compile_update, which compile
    replaced, reads as compile ("auto" runs eagerly) and is no change a resume refuses.
    """
    config = PPOConfig(total_timesteps=8, num_steps=4, batch_size=4, **SMALL)
    PPOAgent(
        env=RandomWalkEnv(num_envs=2),
        config=config,
        options=RunOptions(run_dir=tmp_path, progress=False),
    ).fit()
    saved = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    del saved.config["orthogonal_init"], saved.config["compile"]
    saved.config["compile_update"] = "auto"
    save_checkpoint(tmp_path / "older.ckpt", saved)
    rebuilt = PPOConfig.from_dict(load_checkpoint(tmp_path / "older.ckpt").config)
    assert (rebuilt.orthogonal_init, rebuilt.compile) == (True, False)
    agent = PPOAgent(
        env=RandomWalkEnv(num_envs=2), config=config, options=RunOptions(progress=False)
    )
    agent.load(tmp_path / "older.ckpt")
    assert agent.iteration == 1
    for name, value in saved.modules["policy"].items():
        torch.testing.assert_close(agent.model_unwrapped.state_dict()[name], value)


RESUME_CONFIG: dict[str, Any] = {
    "num_steps": 8,
    "batch_size": 6,
    "num_mini_epochs": 2,
    "normalize_observations": True,
    "normalize_rewards": True,
    "learning_rate_schedule": "adaptive",
    **SMALL,
}


def _resume_in_fresh_process(checkpoint: str, total: int, out: str) -> None:
    config = PPOConfig(total_timesteps=total, **RESUME_CONFIG)
    agent = PPOAgent(
        env=RandomWalkEnv(num_envs=3, seed=11), config=config, options=RunOptions(progress=False)
    )
    agent.load(checkpoint)
    agent.fit()
    torch.save(parameters(agent), out)


def test_resume_is_bit_exact_in_a_fresh_process(tmp_path: Path) -> None:
    """Train 2+2 epochs vs. 2, save, load in a new process, train 2: identical weights."""
    epoch_steps = 8 * 3

    def run(epochs: int, run_dir: Path | None) -> dict[str, Tensor]:
        config = PPOConfig(total_timesteps=epochs * epoch_steps, **RESUME_CONFIG)
        env = RandomWalkEnv(num_envs=3, seed=11)
        agent = PPOAgent(
            env=env, config=config, options=RunOptions(run_dir=run_dir, loggers=[], progress=False)
        )
        agent.fit()
        return parameters(agent)

    uninterrupted = run(4, None)
    first_half = run(2, tmp_path)
    assert any(not torch.equal(first_half[k], uninterrupted[k]) for k in uninterrupted)
    out = tmp_path / "resumed.pt"
    run_in_fresh_process(
        _resume_in_fresh_process,
        str(tmp_path / "checkpoints" / "last.ckpt"),
        4 * epoch_steps,
        str(out),
    )
    resumed: dict[str, Tensor] = torch.load(out, weights_only=True)
    assert_same_parameters(uninterrupted, resumed)


def test_resume_in_process_without_env_state_restarts_the_env(tmp_path: Path) -> None:
    """An env without state_dict is reset on load; training continues from the counters."""
    config = PPOConfig(total_timesteps=16, num_steps=4, batch_size=8, num_mini_epochs=1, **SMALL)
    PPOAgent(
        env=CountingVecEnv(num_envs=2, truncate_after=3),
        config=config,
        options=RunOptions(run_dir=tmp_path),
    ).fit()
    checkpoint = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert checkpoint.modules["collector.rank0"] == {}  # CountingVecEnv has no state_dict
    longer = PPOConfig(total_timesteps=24, num_steps=4, batch_size=8, num_mini_epochs=1, **SMALL)
    env = CountingVecEnv(num_envs=2, truncate_after=3)
    agent = PPOAgent(env=env, config=longer, options=RunOptions(progress=False))
    agent.load(tmp_path / "checkpoints" / "last.ckpt")
    result = agent.fit()
    assert (result.iterations, result.env_steps) == (3, 24)


# ---------------------------------------------------------------- signals


def test_sigint_during_fit_saves_and_returns(tmp_path: Path) -> None:
    """A SIGINT after the first epoch ends fit normally with last.ckpt written."""
    previous = signal.getsignal(signal.SIGINT)

    def interrupt_once(metrics: dict[str, float]) -> None:
        if "stopped_by_signal" not in metrics:
            os.kill(os.getpid(), signal.SIGINT)

    logger = RecordingLogger(on_log=interrupt_once)
    config = PPOConfig(total_timesteps=64, num_steps=8, batch_size=8, num_mini_epochs=1, **SMALL)
    agent = PPOAgent(
        env=RandomWalkEnv(num_envs=2),
        config=config,
        eval_env=RandomWalkEnv(num_envs=2, seed=1),
        options=RunOptions(run_dir=tmp_path, loggers=[logger], progress=False),
    )
    result = agent.fit()
    assert (result.iterations, result.env_steps) == (1, 16)
    assert result.metrics["stopped_by_signal"] == 1.0
    assert "eval/score" not in result.metrics  # no final evaluation after a stop request
    checkpoint = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert checkpoint.counters == {"iteration": 1, "env_steps": 16}
    assert signal.getsignal(signal.SIGINT) is previous


# ---------------------------------------------------------------- distributed


def _ddp_worker(rank: int, port: int, out_dir: str, num_envs: tuple[int, int], batch: int) -> None:
    fabric = launch_two_rank_fabric(rank, port)
    result: dict[str, Any] = {}
    try:
        config = PPOConfig(
            total_timesteps=2 * 8 * sum(num_envs),
            num_steps=8,
            batch_size=batch * num_envs[rank] // num_envs[0],
            num_mini_epochs=1,
            normalize_observations=True,
            normalize_rewards=True,
            target_kl=0.5,
            seed=3,
            **SMALL,
        )
        env = RandomWalkEnv(num_envs=num_envs[rank], seed=100 + rank)
        agent = PPOAgent(
            env=env, config=config, fabric=fabric, options=RunOptions(progress=False, loggers=[])
        )
        agent.fit()
        result = {
            "parameters": parameters(agent),
            "epoch": agent.iteration,
            "env_steps": agent.env_steps,
            "minibatches": agent.num_minibatches,
            "obs_count": int(_obs_normalizer(agent).count),
        }
    except Exception as error:
        result = {"error": f"{type(error).__name__}: {error}"}
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")


def _ddp_mismatch_worker(rank: int, port: int, out_dir: str) -> None:
    fabric = launch_two_rank_fabric(rank, port)
    # rank 0: 2 envs x 8 steps / 8 = 2 minibatches; rank 1: 16 / 4 = 4.
    message = ""
    config = PPOConfig(
        total_timesteps=64, num_steps=8, batch_size=(8, 4)[rank], num_mini_epochs=1, **SMALL
    )
    try:
        PPOAgent(
            env=RandomWalkEnv(num_envs=2),
            config=config,
            fabric=fabric,
            options=RunOptions(progress=False),
        )
    except Exception as error:
        message = f"{type(error).__name__}: {error}"
    # rank 1's batch_size exceeds its 16 samples: an invalid plan on one rank only.
    invalid = PPOConfig(
        total_timesteps=64, num_steps=8, batch_size=(8, 32)[rank], num_mini_epochs=1, **SMALL
    )
    try:
        PPOAgent(
            env=RandomWalkEnv(num_envs=2),
            config=invalid,
            fabric=fabric,
            options=RunOptions(progress=False),
        )
        invalid_message = ""
    except Exception as error:
        invalid_message = f"{type(error).__name__}: {error}"
    torch.save({"message": message, "invalid": invalid_message}, Path(out_dir) / f"rank{rank}.pt")


def _results(out_dir: Path) -> Iterator[dict[str, Any]]:
    for rank in (0, 1):
        yield torch.load(out_dir / f"rank{rank}.pt", weights_only=False)


@pytest.mark.distributed
def test_ddp_ranks_with_different_num_envs_train_identical_weights(tmp_path: Path) -> None:
    """2 gloo ranks with 2 and 4 envs (same minibatch count): identical weights after fit."""
    run_two_ranks(_ddp_worker, str(tmp_path), (2, 4), 4)
    first, second = _results(tmp_path)
    assert "error" not in first, first.get("error")
    assert "error" not in second, second.get("error")
    assert first["minibatches"] == second["minibatches"] == 4
    assert first["epoch"] == second["epoch"] == 2
    assert first["env_steps"] == second["env_steps"] == 96
    assert first["obs_count"] == second["obs_count"] == 96
    assert_same_parameters(first["parameters"], second["parameters"])


@pytest.mark.distributed
def test_ddp_minibatch_count_mismatch_raises_on_every_rank(tmp_path: Path) -> None:
    """Different minibatch counts raise DistributedError on both ranks, before any hang."""
    run_two_ranks(_ddp_mismatch_worker, str(tmp_path))
    first, second = _results(tmp_path)
    for result in (first, second):
        assert result["message"].startswith(
            "DistributedError: ranks disagree on the number of minibatches"
        )
        assert "rank 0: 2, rank 1: 4" in result["message"]
    # A plan invalid on rank 1 only is reported on both ranks instead of deadlocking:
    # rank 1 raises its own ConfigError, rank 0 learns of it.
    assert first["invalid"].startswith("DistributedError")
    assert "failed on rank 1, every rank stops: ConfigError: " in first["invalid"]
    assert second["invalid"].startswith("ConfigError")


def test_resume_is_bit_exact_on_a_builtin_env(tmp_path: Path) -> None:
    """The built-in envs checkpoint their state, so a resumed run matches an uninterrupted one."""
    epoch_steps = 8 * 3

    def agent_for(epochs: int, run_dir: Path | None) -> PPOAgent:
        config = PPOConfig(total_timesteps=epochs * epoch_steps, **RESUME_CONFIG)
        env = make("typedrl/Pendulum-v0", num_envs=3, seed=5)
        return PPOAgent(
            env=env, config=config, options=RunOptions(run_dir=run_dir, loggers=[], progress=False)
        )

    uninterrupted = agent_for(4, None)
    uninterrupted.fit()
    agent_for(2, tmp_path).fit()
    resumed = agent_for(4, None)
    resumed.load(tmp_path / "checkpoints" / "last.ckpt")
    resumed.fit()
    assert_same_parameters(parameters(uninterrupted), parameters(resumed))


def _ddp_resume_worker(rank: int, port: int, out_dir: str, epochs: int, resume: str) -> None:
    """Train to ``epochs`` epochs on 2 ranks, resuming from ``resume`` when given."""
    fabric = launch_two_rank_fabric(rank, port)
    result: dict[str, Any] = {}
    try:
        config = PPOConfig(total_timesteps=epochs * 8 * 5, **RESUME_CONFIG)
        env = make("typedrl/Pendulum-v0", num_envs=(2, 3)[rank], seed=40 + rank)
        run_dir = Path(out_dir) / "run" if not resume else None
        batch = PPOConfig.from_dict({**config.to_dict(), "batch_size": (4, 6)[rank]})
        agent = PPOAgent(
            env=env,
            config=batch,
            fabric=fabric,
            options=RunOptions(run_dir=run_dir, progress=False, loggers=[]),
        )
        if resume:
            agent.load(resume)
        agent.fit()
        result = {"parameters": parameters(agent), "env_steps": agent.env_steps}
    except Exception as error:
        result = {"error": f"{type(error).__name__}: {error}"}
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")


def _ddp_failed_load_worker(rank: int, port: int, out_dir: str, resume: str, case: str) -> None:
    """Resume with a changed gamma on rank 0 only (``case="config"``) or with a file
    missing on rank 1 only (``case="missing"``); record what each rank raised."""
    fabric = launch_two_rank_fabric(rank, port)
    result: dict[str, Any] = {}
    try:
        config = PPOConfig(total_timesteps=4 * 8 * 5, **RESUME_CONFIG)
        gamma = 0.9 if case == "config" and rank == 0 else config.gamma
        changes = {"batch_size": (4, 6)[rank], "gamma": gamma}
        if case == "missing" and rank == 1:
            resume += ".missing"
        env = make("typedrl/Pendulum-v0", num_envs=(2, 3)[rank], seed=40 + rank)
        agent = PPOAgent(
            env=env,
            config=PPOConfig.from_dict({**config.to_dict(), **changes}),
            fabric=fabric,
            options=RunOptions(progress=False, loggers=[]),
        )
        agent.load(resume)
        result = {"loaded": True}
    except CheckpointError as error:
        result = {"checkpoint_error": str(error)}
    except Exception as error:
        result = {"error": f"{type(error).__name__}: {error}"}
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")


@pytest.mark.distributed
def test_ddp_resume_is_bit_exact(tmp_path: Path) -> None:
    """2 ranks: 4 epochs vs 2 epochs, save, resume on 2 fresh ranks, 2 more: same weights."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for name, epochs, resume in (
        ("whole", 4, ""),
        ("half", 2, ""),
        ("resumed", 4, str(tmp_path / "half" / "run" / "checkpoints" / "last.ckpt")),
    ):
        folder = tmp_path / name
        folder.mkdir()
        run_two_ranks(_ddp_resume_worker, str(folder), epochs, resume)
        runs[name] = list(_results(folder))
        for result in runs[name]:
            assert "error" not in result, result.get("error")
    checkpoint = load_checkpoint(tmp_path / "half" / "run" / "checkpoints" / "last.ckpt")
    assert {"collector.rank0", "collector.rank1", "reward_normalizer.rank1"} <= set(
        checkpoint.modules
    )
    assert "env" in checkpoint.modules["collector.rank1"]
    for rank in (0, 1):
        assert_same_parameters(
            runs["whole"][rank]["parameters"], runs["resumed"][rank]["parameters"]
        )
    assert runs["resumed"][0]["env_steps"] == 4 * 8 * 5
    # A config changed on rank 0, or a file rank 1 cannot read, stops both ranks: no hang.
    for case, failing in (("config", 0), ("missing", 1)):
        folder = tmp_path / case
        folder.mkdir()
        run_two_ranks(
            _ddp_failed_load_worker,
            str(folder),
            str(tmp_path / "half" / "run" / "checkpoints" / "last.ckpt"),
            case,
        )
        results = list(_results(folder))
        assert "checkpoint_error" in results[failing], results[failing]
        # The other rank learns of it and stops too, naming the rank that failed.
        other = results[1 - failing]["error"]
        assert other.startswith("DistributedError: reading the checkpoint"), other
        assert f"failed on rank {failing}, every rank stops: CheckpointError: " in other
    rank0 = next(_results(tmp_path / "config"))
    assert "gamma: saved 0.99, now 0.9" in rank0["checkpoint_error"]


# ---------------------------------------------------------------- compile


def test_compile_is_single_process_only() -> None:
    """compile with several ranks is refused up front, in one line; update_path says it."""
    from typedrl.ppo._ppo import _require_single_process_compile

    config = PPOConfig(total_timesteps=64, num_steps=16, batch_size=32, compile=True)
    _require_single_process_compile(config, 1)
    with pytest.raises(ConfigError, match=r"compile is single-process only.*got 2 ranks"):
        _require_single_process_compile(config, 2)
    _require_single_process_compile(PPOConfig(), 2)
    env = RandomWalkEnv(num_envs=2)
    assert PPOAgent(env=env, config=config).update_path == "compiled"
    assert PPOAgent(env=env, config=PPOConfig(**SMALL)).update_path == "eager"


def _compare_compiled_update(out: str, precision: str) -> None:
    """An eager and a compiled run from the same seed, in ``precision``."""
    runs = []
    for compiled in (False, True):
        config = PPOConfig(
            total_timesteps=64, num_steps=16, batch_size=32, compile=compiled, **SMALL
        )
        agent = PPOAgent(
            env=make("CartPole-v1", num_envs=4, seed=0),
            config=config,
            fabric=Fabric(accelerator="cpu", devices=1, precision=precision),  # type: ignore[arg-type]
            options=RunOptions(progress=False, loggers=[]),
        )
        runs.append({"metrics": agent.fit().metrics, "parameters": parameters(agent)})
    torch.save(runs, out)


_COMPILE_TOLERANCES = {
    "32-true": (1e-4, 1e-5),
    "64-true": (1e-10, 1e-12),
    "bf16-mixed": (1e-2, 1e-3),
}


@pytest.mark.parametrize(
    "precision",
    [
        "32-true",
        # Each precision compiles anew: tens of seconds on a cold cache.
        pytest.param("64-true", marks=pytest.mark.slow),
        pytest.param("bf16-mixed", marks=pytest.mark.slow),
    ],
)
def test_compile_trains_like_the_eager_update(tmp_path: Path, precision: str) -> None:
    """compile=True trains as the eager update does, to floating-point rounding.

    In 64-true the two agree to about 1e-12; in bf16-mixed the loss compiles under
    Fabric's autocast. Runs in a fresh process: the test suite's runtime shape
    checks wrap every function, and torch.compile cannot trace through them
    (production code has no such wrappers).
    """
    out = tmp_path / "compiled.pt"
    run_in_fresh_process(_compare_compiled_update, str(out), precision)
    eager, compiled = torch.load(out, weights_only=False)
    rtol, atol = _COMPILE_TOLERANCES[precision]
    assert compiled["metrics"]["loss/total"] == pytest.approx(
        eager["metrics"]["loss/total"], rel=rtol
    )
    for name, value in eager["parameters"].items():
        assert compiled["parameters"][name].dtype == value.dtype
        torch.testing.assert_close(compiled["parameters"][name], value, rtol=rtol, atol=atol)
