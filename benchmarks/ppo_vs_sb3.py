"""PPO throughput: typedrl's PPOAgent against Stable-Baselines3's PPO, in the same run.

Both train on Gymnasium's CartPole-v1 with 8 synchronous envs and
Stable-Baselines3's default PPO hyper-parameters (2048 steps per env per epoch,
minibatches of 64, 10 passes, Adam 3e-4, [64, 64] tanh actor and critic), for
the same number of env steps, on one CPU thread. The reported figure is the
ratio of env steps per second (typedrl / SB3); the two runs alternate so that
machine load affects both alike.

Needs Stable-Baselines3 in the benchmark's environment:
    pip install stable-baselines3
    python benchmarks/ppo_vs_sb3.py --timesteps 32768 --rounds 2
"""

import argparse
import json
import statistics
import time

import torch

from typedrl.agents import PPOAgent, PPOConfig
from typedrl.envs import make

NUM_ENVS = 8


def _typedrl_rate(timesteps: int, seed: int) -> float:
    env = make("CartPole-v1", num_envs=NUM_ENVS, seed=seed)
    config = PPOConfig(
        total_timesteps=timesteps,
        num_steps=2048,
        batch_size=64,
        num_mini_epochs=10,
        learning_rate=3e-4,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.2,
        value_loss_coef=0.5,
        entropy_coef=0.0,
        max_grad_norm=0.5,
        seed=seed,
    )
    agent = PPOAgent(env=env, config=config, progress=False)
    agent.setup()
    start = time.perf_counter()
    result = agent.fit()
    elapsed = time.perf_counter() - start
    env.close()
    return float(result["env_steps"]) / elapsed


def _sb3_rate(timesteps: int, seed: int) -> float:
    from stable_baselines3 import PPO  # noqa: PLC0415 - optional benchmark dependency
    from stable_baselines3.common.env_util import make_vec_env  # noqa: PLC0415

    env = make_vec_env("CartPole-v1", n_envs=NUM_ENVS, seed=seed)
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0)
    start = time.perf_counter()
    model.learn(total_timesteps=timesteps)
    elapsed = time.perf_counter() - start
    env.close()
    return float(model.num_timesteps) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=32_768)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    ours, theirs, ratios = [], [], []
    for round_index in range(args.rounds):
        typedrl_rate = _typedrl_rate(args.timesteps, round_index)
        sb3_rate = _sb3_rate(args.timesteps, round_index)
        ours.append(typedrl_rate)
        theirs.append(sb3_rate)
        ratios.append(typedrl_rate / sb3_rate)
    result = {
        "typedrl_env_steps_per_s": statistics.median(ours),
        "sb3_env_steps_per_s": statistics.median(theirs),
        "ratio": statistics.median(ratios),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"typedrl PPO   {result['typedrl_env_steps_per_s']:>9,.0f} env-steps/s")
        print(f"SB3 PPO       {result['sb3_env_steps_per_s']:>9,.0f} env-steps/s")
        print(f"ratio         {result['ratio']:>9.2f}x (typedrl / SB3, median)")


if __name__ == "__main__":
    main()
