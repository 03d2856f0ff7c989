"""Tests for PPO with a recurrent policy: the collector's rollout state, sequence minibatches."""

from collections.abc import Mapping
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict
from torch import Tensor, nn

from tests.ppo.test_ppo import assert_same_parameters, parameters
from typedrl.envs import make
from typedrl.errors import ConfigError, SpecError
from typedrl.policies import PolicyFactory, RecurrentActorCritic
from typedrl.ppo import OnPolicyCollector, PPOAgent, PPOConfig
from typedrl.ppo._collector import episode_boundary
from typedrl.protocols import StateSpec
from typedrl.testing import CountingVecEnv
from typedrl.training import RunOptions
from typedrl.types import Obs

GRU = PolicyFactory("typedrl.policies:RecurrentActorCritic", kwargs={"hidden_size": 8})
OPTIONS = RunOptions(progress=False, loggers=[])


def _policy(env: CountingVecEnv, core: str = "gru") -> RecurrentActorCritic:
    torch.manual_seed(0)
    return RecurrentActorCritic(
        env.single_observation_space,
        env.single_action_space,
        core=core,  # type: ignore[arg-type]
        hidden_size=4,
    )


@pytest.mark.parametrize("core", ["gru", "lstm"])
def test_rows_that_end_restart_from_the_initial_state(core: str) -> None:
    """The state a step reads is zero at the start and right after each episode's end."""
    env = CountingVecEnv(num_envs=2, terminate_after=3)
    policy = _policy(env, core)
    collector = OnPolicyCollector(env, num_steps=7)
    collector.reset(seed=0)
    data = collector.collect(policy, num_steps=7).data
    zero = ~data["state", "h"].reshape(7, 2, -1).any(dim=-1)
    # Episodes of 3 steps end at steps 2 and 5: steps 0, 3 and 6 read the initial state.
    expected = torch.tensor([True, False, False, True, False, False, True]).unsqueeze(1)
    assert torch.equal(zero, expected.expand(7, 2))
    if core == "lstm":
        assert torch.equal(~data["state", "c"].reshape(7, 2, -1).any(dim=-1), zero)


def test_the_state_continues_across_epochs_and_matches_the_sequence() -> None:
    """Epoch 2 starts from epoch 1's last state; re-running it reproduces the collection."""
    env = CountingVecEnv(num_envs=3, terminate_after=4)
    policy = _policy(env)
    collector = OnPolicyCollector(env, num_steps=6)
    collector.reset(seed=0)
    collector.collect(policy, num_steps=6)
    held = collector.state_dict()
    data = collector.collect(policy, num_steps=6).data
    assert data["state", "h"][0].abs().sum() > 0
    done = episode_boundary(data["terminated"], data["truncated"], data["valid"])
    log_prob, _, value = policy.evaluate_sequence(
        data["obs"], data["action"], data["state"][0], done
    )
    torch.testing.assert_close(log_prob, data["log_prob"])
    torch.testing.assert_close(value, data["value"])
    assert held == {}  # CountingVecEnv has no state_dict: nothing to resume from


def test_the_rollout_state_is_checkpointed() -> None:
    """state_dict holds the state; loading it continues with identical outputs."""
    env = make("typedrl/CartPole-v0", num_envs=2, seed=0)
    policy = RecurrentActorCritic(env.single_observation_space, env.single_action_space)
    collector = OnPolicyCollector(env, num_steps=5)
    collector.reset(seed=0)
    collector.collect(policy, num_steps=5)
    saved = collector.state_dict()
    assert set(saved["policy_state"]) == {"h"}
    torch.manual_seed(3)
    first = collector.collect(policy, num_steps=5).data.clone()
    collector.load_state_dict(saved)
    torch.manual_seed(3)
    second = collector.collect(policy, num_steps=5).data
    assert torch.equal(first["state", "h"], second["state", "h"])
    assert torch.equal(first["action"], second["action"])


class _Misdeclared(nn.Module):
    """A recurrent policy whose declared state disagrees with what it returns."""

    def __init__(self, inner: RecurrentActorCritic, specs: Mapping[str, StateSpec]) -> None:
        super().__init__()
        self.inner = inner
        self._specs = specs

    @property
    def state_specs(self) -> Mapping[str, StateSpec]:
        return self._specs

    def initial_state(self, num_rows: int, *, device: torch.device) -> TensorDict:
        return self.inner.initial_state(num_rows, device=device)

    def act_step(self, obs: Obs, state: TensorDict, *, deterministic: bool = False) -> Obs:
        return self.inner.act_step(obs, state, deterministic=deterministic)

    def value_step(self, obs: Obs, state: TensorDict) -> Tensor:
        return self.inner.value_step(obs, state)

    def evaluate_sequence(
        self, obs: Obs, action: Tensor, state: TensorDict, done: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        return self.inner.evaluate_sequence(obs, action, state, done)

    def act(self, obs: Obs, *, deterministic: bool = False) -> Obs:
        return self.inner.act(obs, deterministic=deterministic)

    def evaluate(self, obs: Obs, action: Tensor) -> Obs:
        return self.inner.evaluate(obs, action)

    def value(self, obs: Obs) -> Tensor:
        return self.inner.value(obs)


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        (
            {"h": StateSpec((1, 16), torch.float32)},
            r"state key 'h': expected shape \[1, 16\] and dtype float32 \(state_specs\), the "
            r"setup forward returned shape \[1, 8\] and dtype float32",
        ),
        (
            {"h": StateSpec((1, 8), torch.float32), "c": StateSpec((1, 8), torch.float32)},
            r"state key 'c': expected shape \[1, 8\] and dtype float32 \(state_specs\), the "
            r"setup forward returned no such key",
        ),
        ({}, r"state key 'h' of shape \[1, 8\] is not declared in state_specs"),
    ],
    ids=["shape", "missing", "undeclared"],
)
def test_state_specs_that_disagree_are_one_line_and_write_nothing(
    tmp_path: Path, specs: Mapping[str, StateSpec], message: str
) -> None:
    """A misdeclared state stops the agent at construction, in one line, before any file."""
    env = make("typedrl/CartPole-v0", num_envs=2, seed=0)
    inner = RecurrentActorCritic(
        env.single_observation_space, env.single_action_space, hidden_size=8
    )
    run_dir = tmp_path / "run"
    with pytest.raises(ConfigError, match=message) as raised:
        PPOAgent(
            env=env,
            config=PPOConfig(total_timesteps=32, num_steps=8, batch_size=16),
            policy=_Misdeclared(inner, specs),
            options=RunOptions(run_dir=run_dir, progress=False, loggers=[]),
        ).fit()
    assert "\n" not in str(raised.value)
    assert not run_dir.exists()


def test_the_buffer_checks_the_state_against_the_specs() -> None:
    """The collector's registration refuses a state the specs do not declare (SpecError)."""
    env = CountingVecEnv(num_envs=2, terminate_after=3)
    inner = _policy(env)
    collector = OnPolicyCollector(env, num_steps=4)
    collector.reset(seed=0)
    bad = _Misdeclared(inner, {"h": StateSpec((1, 4), torch.float64)})
    with pytest.raises(
        SpecError,
        match=r"key \('state', 'h'\): expected shape \[1, 4\], dtype "
        r"torch\.float64, got shape \[1, 4\], dtype torch\.float32",
    ):
        collector.register(bad)


def test_batch_size_must_be_whole_env_columns() -> None:
    """A batch_size that is not a multiple of num_steps is refused in one line."""
    env = make("typedrl/CartPole-v0", num_envs=4, seed=0)
    config = PPOConfig(total_timesteps=64, num_steps=8, batch_size=12)
    with pytest.raises(
        ConfigError,
        match=r"batch_size must be a multiple of num_steps \(8\), "
        r"got 12; e\.g\. batch_size=8$",
    ):
        PPOAgent(env=env, config=config, policy_factory=GRU, options=OPTIONS)
    compiled = PPOConfig(total_timesteps=64, num_steps=8, batch_size=16, compile=True)
    with pytest.raises(ConfigError, match=r"compile does not apply to a recurrent policy"):
        PPOAgent(env=env, config=compiled, policy_factory=GRU, options=OPTIONS)


def test_sequence_minibatches_take_the_agreed_count() -> None:
    """ceil(num_envs * num_steps * epochs / batch_size) updates of whole env columns."""
    env = make("typedrl/CartPole-v0", num_envs=5, seed=0)
    config = PPOConfig(total_timesteps=40, num_steps=8, batch_size=16, num_mini_epochs=3)
    agent = PPOAgent(env=env, config=config, policy_factory=GRU, options=OPTIONS)
    agent.fit()
    assert agent.algorithm.num_minibatches == 8  # ceil(5 * 8 * 3 / 16)
    assert int(agent.algorithm.optimizer.state_dict()["state"][0]["step"]) == 8


def test_resume_is_bit_exact_for_a_recurrent_policy(tmp_path: Path) -> None:
    """2 + 2 epochs from a checkpoint equal 4 straight epochs, weights and all."""

    def agent_for(epochs: int, run_dir: Path | None) -> PPOAgent:
        config = PPOConfig(
            total_timesteps=epochs * 3 * 8, num_steps=8, batch_size=16, num_mini_epochs=2, seed=4
        )
        env = make("typedrl/CartPole-v0", num_envs=3, seed=5)
        return PPOAgent(
            env=env,
            config=config,
            policy_factory=GRU,
            options=RunOptions(run_dir=run_dir, loggers=[], progress=False),
        )

    straight = agent_for(4, None)
    straight.fit()
    agent_for(2, tmp_path).fit()
    resumed = agent_for(4, None)
    resumed.load(tmp_path / "checkpoints" / "last.ckpt")
    resumed.fit()
    assert_same_parameters(parameters(straight), parameters(resumed))
