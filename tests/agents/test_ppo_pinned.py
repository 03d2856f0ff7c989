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
    "log_std": (0.0005184072651900351, 0.0005184072651900351),
    "obs_normalizers.obs.running_mean": (-1.6830529775394516, 1.6830529775394516),
    "obs_normalizers.obs.running_var": (11.116415496245105, 11.116415496245105),
    "actor.0.weight": (-3.8005561330355704, 13.971026784274727),
    "actor.0.bias": (0.0018447741895215586, 0.04027998405217659),
    "actor.2.weight": (0.02511062847042922, 0.06532367061299738),
    "actor.2.bias": (0.0012659935746341944, 0.0012659935746341944),
    "critic.0.weight": (-4.0548371113836765, 14.24066662415862),
    "critic.0.bias": (0.050054511870257556, 0.23845124326180667),
    "critic.2.weight": (0.39525610115379095, 3.012202442623675),
    "critic.2.bias": (-0.015815235674381256, 0.015815235674381256),
}
PINNED_CARTPOLE: dict[str, tuple[float, float]] = {
    "log_std": (0.0, 0.0),
    "actor.0.weight": (-1.8724123516003601, 18.958445454307366),
    "actor.0.bias": (0.02290204429300502, 0.058144856768194586),
    "actor.2.weight": (0.006787480786442757, 0.7213061470538378),
    "actor.2.bias": (0.0, 0.028007494285702705),
    "critic.0.weight": (1.6481127068400383, 19.08990626782179),
    "critic.0.bias": (-0.07216652855277061, 0.5780933015048504),
    "critic.2.weight": (-0.517788365483284, 3.2823168262839317),
    "critic.2.bias": (0.03606462851166725, 0.03606462851166725),
}


def _fingerprint(agent: PPOAgent) -> dict[str, tuple[float, float]]:
    return {
        name: (float(value.double().sum()), float(value.double().abs().sum()))
        for name, value in agent.model_unwrapped.state_dict().items()
        if value.is_floating_point()
    }


def _pendulum_run() -> PPOAgent:
    # Recorded with unclipped torques (make's clip_actions was False by default then).
    env = make(
        "typedrl/Pendulum-v0",
        num_envs=4,
        seed=3,
        clip_actions=False,
        env_kwargs={"max_episode_steps": 20},
    )
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
