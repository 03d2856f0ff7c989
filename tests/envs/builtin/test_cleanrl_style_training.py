"""A CleanRL-style PPO script, unmodified but for the env id, trains on the typedrl/ ids.

The loop is written the way CleanRL's single-file scripts are: ``gym.make`` thunks
in a ``SyncVectorEnv`` with ``RecordEpisodeStatistics``, NumPy observations turned
into tensors by the script, a rollout of fixed length, GAE, clipped minibatch
updates. Nothing in it knows typedrl.
"""

import math
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

import typedrl  # noqa: F401 - importing typedrl registers the typedrl/ ids


def _thunk(env_id: str) -> Callable[[], gym.Env[Any, Any]]:
    def thunk() -> gym.Env[Any, Any]:
        return gym.wrappers.RecordEpisodeStatistics(gym.make(env_id))

    return thunk


class _Agent(nn.Module):
    """Separate actor and critic MLPs; a categorical or a diagonal Gaussian policy."""

    def __init__(self, envs: gym.vector.VectorEnv[Any, Any, Any]) -> None:
        super().__init__()
        obs_dim = math.prod(envs.single_observation_space.shape or ())
        space = envs.single_action_space
        self.discrete = isinstance(space, gym.spaces.Discrete)
        shape = space.shape or ()
        out = int(space.n) if isinstance(space, gym.spaces.Discrete) else math.prod(shape)
        self.critic = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, 1))
        self.actor = nn.Sequential(nn.Linear(obs_dim, 64), nn.Tanh(), nn.Linear(64, out))
        self.log_std = nn.Parameter(torch.zeros(out))

    def sample(self, obs: Tensor) -> Tensor:
        out: Tensor = self.actor(obs)
        if self.discrete:
            return torch.multinomial(out.softmax(-1), 1).squeeze(-1)
        return out + self.log_std.exp() * torch.randn_like(out)

    def log_prob_and_entropy(self, obs: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
        out: Tensor = self.actor(obs)
        if self.discrete:
            log_p = out.log_softmax(-1)
            entropy = -(log_p.exp() * log_p).sum(-1)
            return log_p.gather(-1, action.unsqueeze(-1)).squeeze(-1), entropy
        z = (action - out) / self.log_std.exp()
        log_prob = (-0.5 * z.square() - self.log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        entropy = (0.5 + 0.5 * math.log(2 * math.pi) + self.log_std).sum().expand(len(obs))
        return log_prob, entropy


def _train(env_id: str, *, iterations: int, num_envs: int = 4, num_steps: int = 128) -> list[float]:
    """PPO as CleanRL writes it; returns the episodic returns in the order they ended."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    envs = gym.vector.SyncVectorEnv([_thunk(env_id) for _ in range(num_envs)])
    agent = _Agent(envs)
    optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-3, eps=1e-5)
    gamma, lam, clip = 0.99, 0.95, 0.2
    obs_np, _ = envs.reset(seed=0)
    envs.action_space.seed(0)
    next_obs = torch.as_tensor(obs_np, dtype=torch.float32)
    next_done = torch.zeros(num_envs)
    returns: list[float] = []
    for _ in range(iterations):
        obs, actions, log_probs, rewards, dones, values = [], [], [], [], [], []
        for _ in range(num_steps):
            with torch.no_grad():
                action = agent.sample(next_obs)
                log_probs.append(agent.log_prob_and_entropy(next_obs, action)[0])
                values.append(agent.critic(next_obs).squeeze(-1))
            obs.append(next_obs)
            dones.append(next_done)
            actions.append(action)
            obs_np, reward, terminated, truncated, info = envs.step(action.numpy())
            rewards.append(torch.as_tensor(reward, dtype=torch.float32))
            next_obs = torch.as_tensor(obs_np, dtype=torch.float32)
            next_done = torch.as_tensor(terminated | truncated, dtype=torch.float32)
            if "episode" in info:
                returns.extend(info["episode"]["r"][info["_episode"]].tolist())
        with torch.no_grad():
            next_value = agent.critic(next_obs).squeeze(-1)
            advantages = torch.zeros(num_steps, num_envs)
            last = torch.zeros(num_envs)
            for t in reversed(range(num_steps)):
                following = next_value if t == num_steps - 1 else values[t + 1]
                alive = 1.0 - (next_done if t == num_steps - 1 else dones[t + 1])
                delta = rewards[t] + gamma * following * alive - values[t]
                last = delta + gamma * lam * alive * last
                advantages[t] = last
            targets = advantages + torch.stack(values)
        b_obs, b_actions = torch.cat(obs), torch.cat(actions)
        b_log_probs, b_adv, b_targets = (
            torch.cat(log_probs),
            advantages.reshape(-1),
            targets.reshape(-1),
        )
        for _ in range(4):
            for index in torch.split(torch.randperm(num_steps * num_envs), 128):
                log_prob, entropy = agent.log_prob_and_entropy(b_obs[index], b_actions[index])
                ratio = (log_prob - b_log_probs[index]).exp()
                adv = (b_adv[index] - b_adv[index].mean()) / (b_adv[index].std() + 1e-8)
                policy_loss = -torch.min(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv).mean()
                value_loss = (
                    0.5 * (agent.critic(b_obs[index]).squeeze(-1) - b_targets[index]).square()
                )
                loss = policy_loss + 0.5 * value_loss.mean() - 0.01 * entropy.mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optimizer.step()
    envs.close()
    return returns


def test_a_cleanrl_style_ppo_script_learns_cartpole() -> None:
    """10k steps on typedrl/CartPole-v0: the last episodes last far longer than the first."""
    returns = _train("typedrl/CartPole-v0", iterations=20)
    first, last = np.mean(returns[:20]), np.mean(returns[-10:])
    # Seed 0: about 15 at first and about 195 at the end.
    assert first < 40.0
    assert last > 100.0, (first, last)


def test_a_cleanrl_style_ppo_script_runs_on_pendulum() -> None:
    """typedrl/Pendulum-v0 (Box actions): the script's episodes end at the 200-step limit."""
    # 600 steps a row: episodes end at steps 200 and 401 (Gymnasium's next-step autoreset).
    returns = _train("typedrl/Pendulum-v0", iterations=3, num_envs=2, num_steps=200)
    assert len(returns) == 4
    assert all(np.isfinite(returns))
