"""PPO minibatch updates, eager against ``PPOConfig(compile=True)``, in one process.

Two agents train on Gymnasium's CartPole-v1 with one env and
Stable-Baselines3's default hyper-parameters (2048 steps per epoch, minibatches
of 64, 10 passes: 320 minibatch updates per epoch, [64, 64] tanh networks),
on one CPU thread. Each collects one epoch; its first update is a warm-up (the
compiled agent compiles there: its seconds are reported). Then the two update
on their epochs in turn, swapping order every round, so that machine load
affects both alike. The figure is the median ratio of milliseconds per
minibatch update (eager / compiled) over the rounds.

    python benchmarks/ppo_compile_speed.py --rounds 6
"""

import argparse
import json
import statistics
import time

import torch

from typedrl.envs import make
from typedrl.ppo import OnPolicyRollout, PPOAgent, PPOConfig
from typedrl.training import RunOptions


def _agent(*, compile: bool) -> tuple[PPOAgent, OnPolicyRollout, float]:
    """An agent, one collected epoch, and the seconds of its first update (compiling)."""
    agent = PPOAgent(
        env=make("CartPole-v1", num_envs=1, seed=0),
        config=PPOConfig(compile=compile),
        options=RunOptions(progress=False, loggers=[]),
    )
    agent.setup()
    agent._prepare()  # the first reset, as fit() does
    rollout = agent.collector.collect(agent.model_unwrapped, num_steps=agent.config.num_steps)
    started = time.perf_counter()
    agent.algorithm.update(rollout, env_steps=0, iteration=0)
    return agent, rollout, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="updates of each, in turn")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    torch.set_num_threads(1)
    eager, compiled = _agent(compile=False), _agent(compile=True)
    ms: dict[str, list[float]] = {"eager": [], "compiled": []}
    for index in range(args.rounds):
        order = (("eager", eager), ("compiled", compiled))
        for name, (agent, rollout, _) in order if index % 2 == 0 else order[::-1]:
            started = time.perf_counter()
            agent.algorithm.update(rollout, env_steps=0, iteration=0)
            ms[name].append((time.perf_counter() - started) * 1e3 / agent.num_minibatches)
    ratios = [e / c for e, c in zip(ms["eager"], ms["compiled"], strict=True)]
    result = {
        "eager_ms": statistics.median(ms["eager"]),
        "compiled_ms": statistics.median(ms["compiled"]),
        "ratio": statistics.median(ratios),
        "first_update_s": {"eager": eager[2], "compiled": compiled[2]},
        "rounds": args.rounds,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"eager      {result['eager_ms']:.2f} ms per minibatch update (median)")
    print(f"compiled   {result['compiled_ms']:.2f} ms per minibatch update (median)")
    print(f"ratio      {result['ratio']:.2f}x (eager / compiled, median of paired rounds)")
    print(f"first update: eager {eager[2]:.1f} s, compiled {compiled[2]:.1f} s (compiling)")


if __name__ == "__main__":
    main()
