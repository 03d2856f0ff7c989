"""PPO's results pinned to values recorded from a known-good version of the agent.

Moving code between modules (the trainer core, the collector) must not change
what PPO computes: these short runs' final weights are compared with sums
recorded before such moves. When a change is meant to alter the results (a new
seed derivation, say), re-record the numbers in a commit of its own.
"""

import torch

from typedrl.agents import PPOAgent, PPOConfig
from typedrl.envs import make
from typedrl.training import RunOptions

# Per parameter of the final policy: (sum, sum of absolute values), in float64.
PINNED_PENDULUM: dict[str, tuple[float, float]] = {
    "log_std": (0.0015955374110490084, 0.0015955374110490084),
    "obs_normalizers.obs.running_mean": (0.1713166067096003, 1.1652209886030203),
    "obs_normalizers.obs.running_var": (11.898449548303839, 11.898449548303839),
    "actor.0.weight": (1.1820632657036185, 14.011267938651145),
    "actor.0.bias": (0.005121887967106886, 0.03116810267965775),
    "actor.2.weight": (0.003102230723015964, 0.0696314120432362),
    "actor.2.bias": (0.0013577104546129704, 0.0013577104546129704),
    "critic.0.weight": (2.916266355663538, 13.77240857295692),
    "critic.0.bias": (-0.030009896494448185, 0.25496180448681116),
    "critic.2.weight": (-1.1515346430242062, 3.332885954529047),
    "critic.2.bias": (-0.015714608132839203, 0.015714608132839203),
}
PINNED_CARTPOLE: dict[str, tuple[float, float]] = {
    "log_std": (0.0, 0.0),
    "actor.0.weight": (-0.21236107125878334, 18.059340696781874),
    "actor.0.bias": (-0.031023557297885418, 0.2025574864819646),
    "actor.2.weight": (-0.009170331060886383, 0.7694111336022615),
    "actor.2.bias": (9.313225746154785e-09, 0.028303200379014015),
    "critic.0.weight": (1.3228377304039896, 18.29427887732163),
    "critic.0.bias": (-0.07207007706165314, 0.5760485902428627),
    "critic.2.weight": (-1.3805730007588863, 3.4623494185507298),
    "critic.2.bias": (0.03585901856422424, 0.03585901856422424),
}


def _fingerprint(agent: PPOAgent) -> dict[str, tuple[float, float]]:
    return {
        name: (float(value.double().sum()), float(value.double().abs().sum()))
        for name, value in agent.model_unwrapped.state_dict().items()
        if value.is_floating_point()
    }


def _pendulum_run() -> PPOAgent:
    env = make("typedrl/Pendulum-v0", num_envs=4, seed=3, env_kwargs={"max_episode_steps": 20})
    config = PPOConfig(
        total_timesteps=4 * 32 * 3,
        num_steps=32,
        batch_size=32,
        num_mini_epochs=2,
        learning_rate=1e-3,
        learning_rate_schedule="linear",
        normalize_observations=True,
        normalize_rewards=True,
        actor_hidden=(16,),
        critic_hidden=(16,),
        seed=5,
    )
    agent = PPOAgent(env=env, config=config, options=RunOptions(progress=False))
    agent.fit()
    env.close()
    return agent


def _cartpole_run() -> PPOAgent:
    env = make("typedrl/CartPole-v0", num_envs=8, seed=1)
    config = PPOConfig(
        total_timesteps=8 * 16 * 3,
        num_steps=16,
        batch_size=64,
        num_mini_epochs=2,
        learning_rate=3e-3,
        actor_hidden=(16,),
        critic_hidden=(16,),
        seed=2,
    )
    agent = PPOAgent(env=env, config=config, options=RunOptions(progress=False))
    agent.fit()
    env.close()
    return agent


def _assert_pinned(agent: PPOAgent, pinned: dict[str, tuple[float, float]]) -> None:
    found = _fingerprint(agent)
    assert found.keys() == pinned.keys()
    for name, (total, absolute) in pinned.items():
        got = found[name]
        assert torch.allclose(
            torch.tensor(got, dtype=torch.float64),
            torch.tensor((total, absolute), dtype=torch.float64),
            rtol=1e-6,
            atol=1e-7,
        ), f"{name}: recorded {(total, absolute)}, got {got}"


def test_continuous_run_matches_the_recorded_weights() -> None:
    """Pendulum with both normalisers and a linear schedule ends with the recorded weights."""
    _assert_pinned(_pendulum_run(), PINNED_PENDULUM)


def test_discrete_run_matches_the_recorded_weights() -> None:
    """Built-in discrete CartPole ends with the recorded weights."""
    _assert_pinned(_cartpole_run(), PINNED_CARTPOLE)
