"""Env steps and wall time APG and PPO need to reach the same return, in one run.

For each built-in continuous env, APG (:class:`~typedrl.apg.DifferentiableTrainer`,
its default settings with a small batch: few envs, short segments) and PPO
(:class:`~typedrl.agents.PPOAgent`, settings that learn the task) train one
after the other in the same process until a deterministic evaluation reaches the
env's target return, or until their budget is spent. Both are scored by the
same evaluation: an :class:`~typedrl.evaluation.EpisodeEvaluator` over
``--eval-episodes`` episodes from the same fixed, seeded starts, every
``eval_every`` env steps of each algorithm (so a reported count is at most one
interval above the true one). PPO's Gaussian actions are clipped to the action
bounds by the env (as Stable-Baselines3 does); APG squashes them with tanh.

Targets (mean deterministic return):

- PointMass (200 steps): -20, the point mass parked on its goal (final distance a
  few percent of the initial one);
- Reacher (100 steps): -25, the fingertip within about a fifth of its initial
  distance (about the best PPO holds in 1M steps here);
- Pendulum (200 steps): -200, swung up and held from every start.

Reported per env: the env steps each needed, their ratio (PPO / APG, goal >= 10x
on PointMass and Reacher), and the training time each needed (iterations only,
evaluations excluded) with its ratio. Each algorithm's best evaluated return is
reported too.

Usage:
    python benchmarks/apg_vs_ppo.py --json
    python benchmarks/apg_vs_ppo.py --env typedrl/Reacher-v0 --seed 1
"""

import argparse
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from typedrl.agents import PPOAgent, PPOConfig
from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.envs import make
from typedrl.evaluation import EpisodeEvaluator
from typedrl.training import AbstractTrainer, RunOptions

_CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}
_EVAL_SEED = 12_345

_PPO_GOAL_TASK = {
    "num_steps": 64,
    "batch_size": 256,
    "num_mini_epochs": 10,
    "learning_rate": 1e-3,
    "normalize_observations": True,
    "log_std_init": -0.5,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Setup:
    """One algorithm's settings on one env."""

    num_envs: int
    budget: int
    """Env steps at most."""
    eval_every: int
    """Env steps between two evaluations."""
    config: Mapping[str, Any] = field(default_factory=dict)
    """Config fields besides the budget and the seed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One env, its target return and both algorithms' settings."""

    target: float
    apg: Setup
    ppo: Setup


TASKS: dict[str, Task] = {
    "typedrl/PointMass-v0": Task(
        target=-20.0,
        apg=Setup(num_envs=4, budget=50_000, eval_every=256, config={"segment_length": 8}),
        ppo=Setup(num_envs=16, budget=500_000, eval_every=4_096, config=_PPO_GOAL_TASK),
    ),
    "typedrl/Reacher-v0": Task(
        target=-25.0,
        apg=Setup(num_envs=16, budget=200_000, eval_every=1_024, config={"segment_length": 4}),
        ppo=Setup(
            num_envs=16,
            budget=1_000_000,
            eval_every=8_192,
            config={**_PPO_GOAL_TASK, "gamma": 0.9},
        ),
    ),
    "typedrl/Pendulum-v0": Task(
        target=-200.0,
        apg=Setup(num_envs=4, budget=300_000, eval_every=2_048, config={"segment_length": 32}),
        # The Pendulum-v1 preset of `typedrl train`.
        ppo=Setup(
            num_envs=8,
            budget=500_000,
            eval_every=4_096,
            config={
                "num_steps": 256,
                "batch_size": 256,
                "num_mini_epochs": 10,
                "learning_rate": 1e-3,
                "gamma": 0.9,
                "gae_lambda": 0.95,
                "normalize_observations": True,
                "normalize_rewards": True,
                "log_std_init": -0.5,
            },
        ),
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How one algorithm's race to the target went."""

    reached: bool
    env_steps: int
    """Env steps at the first evaluation at or above the target (or at the end)."""
    train_seconds: float
    """Time spent in training iterations up to then (evaluations excluded)."""
    best_return: float
    evaluations: int


def _race(
    trainer: AbstractTrainer,
    evaluator: EpisodeEvaluator,
    *,
    target: float,
    setup: Setup,
    clock: Callable[[], float],
) -> Outcome:
    trainer.setup()
    trainer._prepare()  # the first reset, as fit() does
    train_seconds, best, evaluations = 0.0, -math.inf, 0
    next_eval = setup.eval_every
    while trainer.env_steps < setup.budget:
        start = clock()
        # One iteration of fit's loop.
        steps = trainer._train_iteration().env_steps
        train_seconds += clock() - start
        trainer.iteration += 1
        trainer.env_steps += steps
        if trainer.env_steps < next_eval:
            continue
        while next_eval <= trainer.env_steps:
            next_eval += setup.eval_every
        score = evaluator.evaluate(trainer.policy).score
        evaluations += 1
        best = max(best, score)
        if score >= target:
            return Outcome(
                reached=True,
                env_steps=trainer.env_steps,
                train_seconds=train_seconds,
                best_return=best,
                evaluations=evaluations,
            )
    return Outcome(
        reached=False,
        env_steps=trainer.env_steps,
        train_seconds=train_seconds,
        best_return=best,
        evaluations=evaluations,
    )


def _evaluator(env_id: str, episodes: int) -> EpisodeEvaluator:
    # The same starts for both algorithms; actions beyond the bounds are clipped.
    env = make(env_id, num_envs=episodes, seed=_EVAL_SEED, clip_actions=True)
    return EpisodeEvaluator(env, num_episodes=episodes, seed=_EVAL_SEED)


def _apg(env_id: str, setup: Setup, seed: int) -> DifferentiableTrainer:
    env = make(env_id, num_envs=setup.num_envs, seed=seed)
    config = DifferentiableTrainerConfig(total_timesteps=setup.budget, seed=seed, **setup.config)
    return DifferentiableTrainer(
        env=env, config=config, options=RunOptions(progress=False, loggers=[])
    )


def _ppo(env_id: str, setup: Setup, seed: int) -> PPOAgent:
    env = make(env_id, num_envs=setup.num_envs, seed=seed, clip_actions=True)
    config = PPOConfig(total_timesteps=setup.budget, seed=seed, **setup.config)
    return PPOAgent(env=env, config=config, options=RunOptions(progress=False, loggers=[]))


def _compare(
    env_id: str, *, seed: int, episodes: int, target: float, clock: Callable[[], float]
) -> dict[str, Any]:
    task = TASKS[env_id]
    apg = _race(
        _apg(env_id, task.apg, seed),
        _evaluator(env_id, episodes),
        target=target,
        setup=task.apg,
        clock=clock,
    )
    ppo = _race(
        _ppo(env_id, task.ppo, seed),
        _evaluator(env_id, episodes),
        target=target,
        setup=task.ppo,
        clock=clock,
    )
    both = apg.reached and ppo.reached
    result: dict[str, Any] = {
        "env_id": env_id,
        "seed": seed,
        "target_return": target,
        "steps_ratio": ppo.env_steps / apg.env_steps if both else None,
        "time_ratio": ppo.train_seconds / apg.train_seconds if both else None,
    }
    for name, outcome, setup in (("apg", apg, task.apg), ("ppo", ppo, task.ppo)):
        result[name] = {
            "reached": outcome.reached,
            "env_steps": outcome.env_steps,
            "train_seconds": outcome.train_seconds,
            "best_return": outcome.best_return,
            "evaluations": outcome.evaluations,
            "num_envs": setup.num_envs,
            "eval_every": setup.eval_every,
            "budget": setup.budget,
            "config": dict(setup.config),
        }
    return result


def _steps(outcome: Mapping[str, Any]) -> str:
    reached = outcome["reached"]
    return f"{outcome['env_steps']:,}" if reached else f">{outcome['env_steps']:,}"


def _ratio(value: float | None) -> str:
    return f"{value:.1f}x" if value is not None else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", action="append", choices=sorted(TASKS), help="default: all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="ENV_ID=RETURN",
        help="override an env's target return",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument(
        "--clock",
        choices=sorted(_CLOCKS),
        default="wall",
        help="wall clock (default) or the thread's CPU time (steadier on a shared machine)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object per env")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    targets = {env_id: task.target for env_id, task in TASKS.items()}
    for item in args.target:
        env_id, _, value = item.partition("=")
        if env_id not in TASKS or not value:
            parser.error(f"--target expects ENV_ID=RETURN with ENV_ID in {sorted(TASKS)}")
        targets[env_id] = float(value)
    if not args.json:
        print(
            f"{'env':<22} {'target':>7} {'APG steps':>10} {'PPO steps':>10} {'ratio':>7} "
            f"{'APG s':>7} {'PPO s':>7} {'ratio':>7} {'APG best':>9} {'PPO best':>9}"
        )
    for env_id in args.env or list(TASKS):
        result = _compare(
            env_id,
            seed=args.seed,
            episodes=args.eval_episodes,
            target=targets[env_id],
            clock=_CLOCKS[args.clock],
        )
        if args.json:
            print(json.dumps(result), flush=True)
            continue
        apg, ppo = result["apg"], result["ppo"]
        print(
            f"{env_id:<22} {targets[env_id]:>7.1f} {_steps(apg):>10} {_steps(ppo):>10} "
            f"{_ratio(result['steps_ratio']):>7} {apg['train_seconds']:>7.1f} "
            f"{ppo['train_seconds']:>7.1f} {_ratio(result['time_ratio']):>7} "
            f"{apg['best_return']:>9.1f} {ppo['best_return']:>9.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
