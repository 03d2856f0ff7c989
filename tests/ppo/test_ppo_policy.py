"""Tests for PPOAgent(policy=..., policy_factory=...): a user's actor-critic, trained, rebuilt."""

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from tests.multiprocess import run_two_ranks
from tests.training.test_fabric import launch_two_rank_fabric
from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.checkpoint import load_checkpoint
from typedrl.envs import make
from typedrl.errors import CheckpointError, ConfigError
from typedrl.policies import (
    DifferentiableMLPPolicy,
    MLPActorCritic,
    PolicyFactory,
    RecurrentActorCritic,
)
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.protocols import VecEnv
from typedrl.restore import restore_policy
from typedrl.testing import TinyActorCritic
from typedrl.training import RunOptions

ENV_ID = "typedrl/CartPole-v0"
TINY = PolicyFactory("typedrl.testing:TinyActorCritic", kwargs={"hidden": 8})
GRU = PolicyFactory("typedrl.policies:RecurrentActorCritic", kwargs={"hidden_size": 8})


def _config(total_timesteps: int = 64) -> PPOConfig:
    return PPOConfig(
        total_timesteps=total_timesteps, num_steps=16, batch_size=32, num_mini_epochs=1
    )


def _env() -> VecEnv:
    return make(ENV_ID, num_envs=2, seed=0)


def _agent(run_dir: Path, total_timesteps: int = 64, **policy: object) -> PPOAgent:
    return PPOAgent(
        env=_env(),
        config=_config(total_timesteps),
        options=RunOptions(run_dir=run_dir, env_id=ENV_ID, progress=False),
        **policy,  # type: ignore[arg-type]
    )


def _same_actions(first: object, second: object) -> bool:
    obs = TensorDict({"obs": torch.randn(5, 4)}, batch_size=[5])
    acts = [p.act(obs, deterministic=True)["action"] for p in (first, second)]  # type: ignore[attr-defined]
    return bool((acts[0] == acts[1]).all())


def test_a_user_policy_trains_and_its_checkpoint_rebuilds_it(tmp_path: Path) -> None:
    """The factory is recorded; restore_policy rebuilds the trained policy from the file alone."""
    agent = _agent(tmp_path, policy_factory=TINY)
    result = agent.fit()
    assert (result.iterations, result.env_steps) == (2, 64)
    last = tmp_path / "checkpoints" / "last.ckpt"
    checkpoint = load_checkpoint(last)
    assert checkpoint.policy_factory == TINY
    restored = restore_policy(checkpoint, _env(), path=last)
    assert isinstance(restored, TinyActorCritic)
    assert _same_actions(restored, agent.policy)


def test_a_user_policy_resumes_and_another_factory_is_refused(tmp_path: Path) -> None:
    """A resumed run continues the same policy; a checkpoint of another factory is refused."""
    _agent(tmp_path, policy_factory=TINY).fit()
    last = tmp_path / "checkpoints" / "last.ckpt"
    resumed = _agent(tmp_path, total_timesteps=128, policy_factory=TINY)
    resumed.load(last)
    assert resumed.fit().env_steps == 128
    other = PolicyFactory("typedrl.testing:TinyActorCritic", kwargs={"hidden": 16})
    with pytest.raises(CheckpointError, match=r"saved with the policy factory .*hidden': 8"):
        _agent(tmp_path, total_timesteps=128, policy_factory=other).load(last)


def test_a_policy_without_factory_trains_but_cannot_be_rebuilt(tmp_path: Path) -> None:
    """No factory: training works; restoring says, in one line, what to pass."""
    env = _env()
    policy = TinyActorCritic(env.single_observation_space, env.single_action_space)
    _agent(tmp_path, policy=policy).fit()
    last = tmp_path / "checkpoints" / "last.ckpt"
    checkpoint = load_checkpoint(last)
    assert checkpoint.policy_factory is None
    with pytest.raises(ConfigError, match=r"the run recorded no policy factory .*--policy") as err:
        restore_policy(checkpoint, env, path=last)
    assert "\n" not in str(err.value)


def test_a_user_policy_follows_the_config_compile_flag() -> None:
    """The config alone picks the update path, for a user's policy as for the built-in MLP."""
    eager = PPOConfig(total_timesteps=64, num_steps=16, batch_size=32)
    assert PPOAgent(env=_env(), config=eager, policy_factory=TINY).update_path == "eager"
    compiled = PPOConfig(total_timesteps=64, num_steps=16, batch_size=32, compile=True)
    assert PPOAgent(env=_env(), config=compiled, policy_factory=TINY).update_path == "compiled"


def test_a_factory_builds_the_same_weights_from_the_same_seed() -> None:
    """The factory's policy draws from the run's "init" stream; the caller's generator is kept."""
    env = _env()
    state = torch.get_rng_state()
    first = PPOAgent(env=env, config=_config(), policy_factory=TINY)
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(123)  # the global stream a script left behind does not matter
    second = PPOAgent(env=_env(), config=_config(), policy_factory=TINY)
    for name, value in first._given_policy.state_dict().items():  # type: ignore[union-attr]
        assert torch.equal(value, second._given_policy.state_dict()[name])  # type: ignore[union-attr]


def test_the_default_policy_records_the_builtin_factory(tmp_path: Path) -> None:
    """Without policy=, the checkpoint names typedrl's MLP with the config's network fields."""
    agent = _agent(tmp_path)
    agent.fit()
    checkpoint = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    space = agent.env.single_observation_space
    assert checkpoint.policy_factory == PPOAgent.default_policy_factory(agent.config, space)
    assert isinstance(checkpoint.policy_factory, PolicyFactory)
    assert checkpoint.policy_factory.target == "typedrl.policies:MLPActorCritic"
    assert isinstance(agent.policy, MLPActorCritic)


def test_the_differentiable_trainer_records_its_factory(tmp_path: Path) -> None:
    """DifferentiableTrainer(policy_factory=...) builds, records and rebuilds the policy."""
    factory = PolicyFactory(
        "typedrl.policies:DifferentiableMLPPolicy", kwargs={"hidden": [8], "squash": False}
    )
    env = make("typedrl/PointMass-v0", num_envs=2, seed=0)
    trainer = DifferentiableTrainer(
        env=env,
        config=DifferentiableTrainerConfig(total_updates=2, segment_length=4),
        policy_factory=factory,
        options=RunOptions(run_dir=tmp_path, env_id="typedrl/PointMass-v0", progress=False),
    )
    trainer.train()
    last = tmp_path / "checkpoints" / "last.ckpt"
    checkpoint = load_checkpoint(last)
    assert checkpoint.policy_factory == trainer.policy_factory == factory
    restored = restore_policy(checkpoint, env, path=last)
    assert isinstance(restored, DifferentiableMLPPolicy)
    assert not restored.squash


def _ddp_worker(rank: int, port: int, out_dir: str, factory: PolicyFactory) -> None:
    fabric = launch_two_rank_fabric(rank, port)
    result: dict[str, Any]
    try:
        agent = PPOAgent(
            env=make(ENV_ID, num_envs=2, seed=rank),
            config=_config(),
            policy_factory=factory,
            fabric=fabric,
            options=RunOptions(progress=False, loggers=[]),
        )
        agent.fit()
        result = {
            "parameters": {k: v.detach().clone() for k, v in agent.model.state_dict().items()}
        }
    except Exception as error:
        result = {"error": f"{type(error).__name__}: {error}"}
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")


@pytest.mark.distributed
@pytest.mark.parametrize("factory", [TINY, GRU], ids=["user", "recurrent"])
def test_ddp_trains_a_user_policy_through_evaluate(tmp_path: Path, factory: PolicyFactory) -> None:
    """2 gloo ranks: the policy's evaluate (a recurrent one's sequence re-run) goes through
    DDP's forward; the ranks' weights stay identical."""
    run_two_ranks(_ddp_worker, str(tmp_path), factory)
    first, second = (torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in (0, 1))
    assert "error" not in first, first.get("error")
    assert "error" not in second, second.get("error")
    assert first["parameters"].keys() == second["parameters"].keys()
    for key, value in first["parameters"].items():
        torch.testing.assert_close(value, second["parameters"][key], rtol=0, atol=0)


def test_the_default_factory_records_the_encoder_only_for_images() -> None:
    """Without an image the factory is the one earlier releases recorded; with one it has both."""
    config = PPOConfig(encoder="small", image_features=32)
    box = gym.spaces.Box(-1.0, 1.0, (3,))
    assert "encoder" not in PPOAgent.default_policy_factory(config, box).kwargs
    image = gym.spaces.Dict(
        {"image": gym.spaces.Box(0, 255, (7, 7, 3), np.uint8), "x": gym.spaces.Box(-1, 1, (2,))}
    )
    factory = PPOAgent.default_policy_factory(config, image)
    assert (factory.kwargs["encoder"], factory.kwargs["image_features"]) == ("small", 32)
    policy = factory.build(image, gym.spaces.Discrete(3))
    assert isinstance(policy, MLPActorCritic)
    assert policy.actor_encoding.images[0].features == 32
    built = PPOAgent.build_policy(config, image, gym.spaces.Discrete(3))
    assert built.state_dict().keys() == policy.state_dict().keys()


def test_a_factory_recorded_before_encoders_rebuilds_the_flat_mlp() -> None:
    """A recorded MLPActorCritic factory without encoder reads images as plain features."""
    image = gym.spaces.Box(0, 255, (7, 7, 3), np.uint8)
    old = PolicyFactory("typedrl.policies:MLPActorCritic", kwargs={"actor_hidden": [8]})
    policy = old.build(image, gym.spaces.Discrete(3))
    assert isinstance(policy, MLPActorCritic)
    assert not policy.actor_encoding.has_images
    assert policy.actor[0].in_features == 147


def test_a_recurrent_core_makes_the_default_policy_recurrent() -> None:
    """``core: gru`` gives a RecurrentActorCritic with the config's widths and encoder."""
    config = PPOConfig(
        num_steps=16,
        batch_size=32,
        core="lstm",
        core_hidden_size=12,
        core_layers=2,
        actor_hidden=(16,),
        critic_hidden=(24,),
        encoder="small",
        image_features=32,
    )
    image = gym.spaces.Dict(
        {"image": gym.spaces.Box(0, 255, (7, 7, 3), np.uint8), "x": gym.spaces.Box(-1, 1, (2,))}
    )
    factory = PPOAgent.default_policy_factory(config, image)
    assert factory.target == "typedrl.policies:RecurrentActorCritic"
    assert factory.kwargs["core"] == "lstm"
    policy = PPOAgent.build_policy(config, image, gym.spaces.Discrete(3))
    assert isinstance(policy, RecurrentActorCritic)
    assert (policy.hidden_size, policy.num_layers) == (12, 2)
    assert set(policy.state_specs) == {"h", "c"}
    assert policy.encoding.images[0].features == 32
    assert policy.actor[0].out_features == 16
    assert policy.critic[0].out_features == 24
    with pytest.raises(ConfigError, match=r"PPOConfig\.core"):
        PPOConfig(core="transformer")  # type: ignore[arg-type]
    # Minibatches of whole env rollouts: the refusal comes with the config, before any run.
    with pytest.raises(
        ConfigError, match=r"core 'gru' trains on whole env rollouts.*batch_size=96"
    ):
        PPOConfig(core="gru", num_steps=32, batch_size=100)
    with pytest.raises(ConfigError, match="compile does not apply to core 'lstm'"):
        PPOConfig(core="lstm", num_steps=32, batch_size=64, compile=True)
