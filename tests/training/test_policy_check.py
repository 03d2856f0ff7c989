"""Tests for typedrl.training._policy_check: a policy that does not fit is refused at once."""

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from lightning_fabric import Fabric

from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.envs import make
from typedrl.errors import ConfigError
from typedrl.policies import PolicyFactory, RecurrentActorCritic
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.protocols import VecEnv
from typedrl.testing import LinearDifferentiablePolicy, TinyActorCritic
from typedrl.training import RunOptions
from typedrl.training._policy_check import zero_observation

CONFIG = PPOConfig(total_timesteps=64, num_steps=16, batch_size=32, num_mini_epochs=1)
OPTIONS = RunOptions(progress=False)
PENDULUM = gym.spaces.Box(-8.0, 8.0, (3,))


def _fabric(precision: Any = "32-true") -> Fabric:
    fabric = Fabric(accelerator="cpu", devices=1, precision=precision)
    fabric.launch()
    return fabric


def _cartpole() -> VecEnv:
    return make("typedrl/CartPole-v0", num_envs=2, seed=0)


def _ppo(policy: object, env: VecEnv | None = None, precision: Any = "32-true") -> PPOAgent:
    return PPOAgent(
        env=env if env is not None else _cartpole(),
        config=CONFIG,
        policy=policy,  # type: ignore[arg-type]
        fabric=_fabric(precision),
        options=OPTIONS,
    )


def test_a_fitting_policy_or_factory_is_taken() -> None:
    """A fitting policy trains; a factory alone builds it from the env's spaces."""
    env = _cartpole()
    policy = TinyActorCritic(env.single_observation_space, env.single_action_space)
    assert _ppo(policy, env).policy_factory is None
    factory = PolicyFactory("typedrl.testing:TinyActorCritic", kwargs={"hidden": 4})
    agent = PPOAgent(env=env, config=CONFIG, policy_factory=factory, options=OPTIONS)
    assert agent.policy_factory == factory
    agent.setup()
    assert isinstance(agent.policy, TinyActorCritic)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda env: TinyActorCritic(PENDULUM, env.single_action_space),
            r"does not fit the env's observation space Box\(4,\) float32, action space "
            r"Discrete\(2\): act on a zero observation raised RuntimeError: mat1 and mat2",
        ),
        (
            lambda env: TinyActorCritic(env.single_observation_space, gym.spaces.Box(-1, 1, (2,))),
            r"act returned an action of shape \[2, 2\] and dtype torch\.float32 for 2 rows, "
            r"expected shape \[2\] of integers",
        ),
        (
            lambda env: TinyActorCritic(
                env.single_observation_space, env.single_action_space
            ).double(),
            r"has float64 parameters, but this run \(Fabric's Precision\) trains float32 ones",
        ),
        (
            lambda env: TinyActorCritic(env.single_observation_space, env.single_action_space).to(
                "meta"
            ),
            r"the policy is on meta, the run on cpu; build it on the CPU or move it",
        ),
        (
            lambda env: torch.nn.Linear(4, 2),
            r"takes a torch\.nn\.Module implementing typedrl\.protocols\.ActorCritic, got Linear",
        ),
    ],
    ids=["observation", "action", "dtype", "device", "protocol"],
)
def test_a_policy_that_does_not_fit_is_one_config_error(build: Any, message: str) -> None:
    """Spaces, dtype, device and protocol are checked at construction, in one line."""
    env = _cartpole()
    with pytest.raises(ConfigError, match=r"^PPOAgent\(policy=\.\.\.\)[: ].*" + message) as raised:
        _ppo(build(env), env)
    assert "\n" not in str(raised.value)


def test_a_float64_policy_fits_a_64_true_run() -> None:
    """Under 64-true precision a float64 policy is the run's own dtype."""
    env = _cartpole()
    policy = TinyActorCritic(env.single_observation_space, env.single_action_space).double()
    _ppo(policy, env, precision="64-true")


def test_the_differentiable_trainer_checks_its_policy_alike() -> None:
    """DifferentiableTrainer refuses a policy built for other spaces, naming them."""
    env = make("typedrl/PointMass-v0", num_envs=2, seed=0)
    with pytest.raises(ConfigError, match=r"^DifferentiableTrainer\(policy=\.\.\.\): the policy"):
        DifferentiableTrainer(
            env=env,
            config=DifferentiableTrainerConfig(total_updates=1),
            policy=LinearDifferentiablePolicy(obs_dim=3, act_dim=2),
            fabric=_fabric(),
            options=OPTIONS,
        )


def test_a_bad_factory_is_one_config_error() -> None:
    """A factory that does not build, or a policy_factory that is no factory, stops at once."""
    with pytest.raises(ConfigError, match=r"cannot import no_such_pkg"):
        PPOAgent(
            env=_cartpole(),
            config=CONFIG,
            policy_factory=PolicyFactory("no_such_pkg:make"),
            options=OPTIONS,
        )
    with pytest.raises(ConfigError, match=r"policy_factory must be a PolicyFactory, got 'm:f'"):
        PPOAgent(
            env=_cartpole(),
            config=CONFIG,
            policy_factory="m:f",  # type: ignore[arg-type]
            options=OPTIONS,
        )


def test_zero_observation_follows_the_space() -> None:
    """A Box is "obs"; a Dict nests its keys; dtypes are the space's."""
    box = zero_observation(
        gym.spaces.Box(0, 255, (2, 2), dtype=np.uint8), rows=3, device=torch.device("cpu")
    )
    assert box is not None
    assert (box["obs"].shape, box["obs"].dtype) == ((3, 2, 2), torch.uint8)
    space = gym.spaces.Dict({"policy": PENDULUM, "critic": gym.spaces.Discrete(4)})
    nested = zero_observation(space, rows=2, device=torch.device("cpu"))
    assert nested is not None
    assert nested["policy"].shape == (2, 3)
    assert nested["critic"].dtype == torch.int64


def test_apg_refuses_a_recurrent_policy_in_one_line() -> None:
    """APG and SHAC backpropagate through single steps: a recurrent policy is refused."""
    env = make("typedrl/PointMass-v0", num_envs=2, seed=0)
    policy = RecurrentActorCritic(env.single_observation_space, env.single_action_space)
    with pytest.raises(
        ConfigError,
        match=r"^DifferentiableTrainer\(policy=\.\.\.\) does not train recurrent policies "
        r"\(RecurrentActorCritic declares a rollout state",
    ) as raised:
        DifferentiableTrainer(
            env=env,
            config=DifferentiableTrainerConfig(total_updates=1),
            policy=policy,
            fabric=_fabric(),
            options=OPTIONS,
        )
    assert "\n" not in str(raised.value)
