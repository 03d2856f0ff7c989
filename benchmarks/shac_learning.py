"""SHAC with its shipped settings on the built-in Pendulum and CartPoleSwingUp, per seed.

Trains :class:`~typedrl.apg.SHAC` through :class:`~typedrl.apg.DifferentiableTrainer`
with the tuned file ``typedrl/configs/shac/<env>.yaml`` (what ``typedrl train ENV
--algo shac`` uses) on each seed, then scores the final policy with deterministic
actions on 100 episodes from fixed, seeded starts (the same for every seed):

- Pendulum: the mean return; the goal is >= -200 on every seed;
- CartPoleSwingUp: the share of episodes that run to the time limit with the
  pole within 12 degrees of vertical for the whole last half (the env's
  ``info["is_success"]``, reported by the evaluator as ``success_rate``); the
  goal is >= 0.9 on every seed.

Prints one line (or JSON object) per run: return, success rate, env steps,
updates and wall time. Each run takes a few minutes on one CPU core.

Usage:
    python benchmarks/shac_learning.py
    python benchmarks/shac_learning.py --env typedrl/CartPoleSwingUp-v0 --seed 0 --json
"""

import argparse
import json
import time
from typing import Any

import torch

from typedrl import configs
from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.envs import make
from typedrl.evaluation import EpisodeEvaluator
from typedrl.training import RunOptions

GOALS = {
    "typedrl/Pendulum-v0": ("return_mean", -200.0),
    "typedrl/CartPoleSwingUp-v0": ("success_rate", 0.9),
}
_EVAL_SEED = 12_345


def run(env_id: str, seed: int, *, episodes: int) -> dict[str, Any]:
    """Train SHAC with the shipped settings on ``seed``; evaluate the final policy."""
    tuned = configs.load("shac", env_id)
    config = configs.build_config("shac", {**tuned.config, "seed": seed})
    assert isinstance(config, DifferentiableTrainerConfig)
    env = make(env_id, num_envs=tuned.num_envs, seed=seed)
    trainer = DifferentiableTrainer(
        env=env, config=config, options=RunOptions(progress=False, loggers=[])
    )
    start = time.perf_counter()
    result = trainer.fit()
    wall = time.perf_counter() - start
    eval_env = make(env_id, num_envs=episodes, seed=_EVAL_SEED)
    evaluation = EpisodeEvaluator(eval_env, num_episodes=episodes, seed=_EVAL_SEED).evaluate(
        trainer.policy
    )
    env.close()
    eval_env.close()
    metric, goal = GOALS[env_id]
    value = evaluation.metrics[metric]
    return {
        "env_id": env_id,
        "seed": seed,
        "return_mean": evaluation.metrics["return_mean"],
        "success_rate": evaluation.metrics.get("success_rate"),
        "goal": f"{metric} >= {goal}",
        "met": value >= goal,
        "env_steps": result.env_steps,
        "updates": result.iterations,
        "wall_seconds": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", action="append", choices=sorted(GOALS), help="default: both")
    parser.add_argument("--seed", action="append", type=int, help="default: 0, 1 and 2")
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--json", action="store_true", help="print one JSON object per run")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for env_id in args.env or list(GOALS):
        for seed in args.seed or [0, 1, 2]:
            outcome = run(env_id, seed, episodes=args.eval_episodes)
            if args.json:
                print(json.dumps(outcome), flush=True)
                continue
            success = outcome["success_rate"]
            print(
                f"{env_id:<28} seed {seed}  return {outcome['return_mean']:8.1f}  "
                f"success {'-' if success is None else f'{success:.2f}':>5}  "
                f"{'met' if outcome['met'] else 'NOT met'} ({outcome['goal']})  "
                f"{outcome['env_steps']:,} steps, {outcome['updates']} updates, "
                f"{outcome['wall_seconds']:.0f} s",
                flush=True,
            )


if __name__ == "__main__":
    main()
