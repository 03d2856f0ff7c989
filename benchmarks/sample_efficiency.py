"""Env steps and wall time PPO, APG and SHAC need to reach the same return, in one run.

For each built-in env, each algorithm trains in turn in the same process until a
deterministic evaluation reaches the env's target return, or until its budget is
spent: PPO (:class:`~typedrl.ppo.PPOAgent`, settings that learn the task), APG
and SHAC (:class:`~typedrl.apg.DifferentiableTrainer` with
:class:`~typedrl.apg.APGConfig` or :class:`~typedrl.apg.SHACConfig`). All are
scored by the same evaluation: an :class:`~typedrl.evaluation.EpisodeEvaluator`
over ``--eval-episodes`` episodes from the same fixed, seeded starts, every
``eval_every`` env steps of each algorithm (so a reported count is at most one
interval above the true one). PPO's Gaussian actions are clipped to the action
bounds by the env (as Stable-Baselines3 does); APG and SHAC squash them with tanh.

Targets (mean deterministic return):

- PointMass (200 steps): -20, the point mass parked on its goal (final distance a
  few percent of the initial one);
- Reacher (100 steps): -25, the fingertip within about a fifth of its initial
  distance (about the best PPO holds in 1M steps here);
- Pendulum (200 steps): -200, swung up and held from every start;
- CartPoleSwingUp (500 steps, reward at most 1 per step): 400, swung up and held
  upright and centred for most of the episode.

Reported per env and algorithm: the env steps it needed, the training time it
needed (iterations only, evaluations excluded), its best evaluated return, and
the ratios of PPO's steps and time to each differentiable algorithm's. With
``--plot DIR`` the learning curves (evaluated return against env steps and
against training time) are written as ``DIR/sample_efficiency_<env>.png``.

Usage:
    python benchmarks/sample_efficiency.py --json
    python benchmarks/sample_efficiency.py --env typedrl/Pendulum-v0 --seed 1
    python benchmarks/sample_efficiency.py --plot docs/_static/benchmarks
"""

import argparse
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.envs import make
from typedrl.evaluation import EpisodeEvaluator
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.training import AbstractTrainer, RunOptions

Algorithm = Literal["ppo", "apg", "shac"]
ALGORITHMS: tuple[Algorithm, ...] = ("ppo", "apg", "shac")

CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}
_EVAL_SEED = 12_345

_PPO_GOAL_TASK = {
    "num_steps": 64,
    "batch_size": 256,
    "num_mini_epochs": 10,
    "learning_rate": 1e-3,
    "normalize_observations": True,
    "log_std_init": -0.5,
}
# The paper's network for SHAC's actor and critic: [64, 64] ELU with LayerNorm. The
# race uses small batches (the most sample-efficient setting found) with 4 critic
# passes per window instead of the paper's 16: with 16 or 8 envs a window holds a
# quarter or an eighth of the paper's data.
_SHAC = {"segment_length": 32, "normalize_observations": True, "layer_norm": True}
_SMALL_SHAC = {**_SHAC, "algorithm": {"critic_iterations": 4, "actor": {"learning_rate": 5e-3}}}


@dataclass(frozen=True, slots=True, kw_only=True)
class Setup:
    """One algorithm's settings on one env."""

    num_envs: int
    budget: int
    """Env steps at most."""
    eval_every: int
    """Env steps between two evaluations."""
    config: Mapping[str, Any] = field(default_factory=dict)
    """Config fields besides the budget and the seed (SHAC: its algorithm under
    ``algorithm``, with at least an ``actor`` entry)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One env, its target return and each algorithm's settings."""

    target: float
    setups: Mapping[Algorithm, Setup]


TASKS: dict[str, Task] = {
    "typedrl/PointMass-v0": Task(
        target=-20.0,
        setups={
            "apg": Setup(num_envs=4, budget=50_000, eval_every=256, config={"segment_length": 8}),
            "ppo": Setup(num_envs=16, budget=500_000, eval_every=4_096, config=_PPO_GOAL_TASK),
        },
    ),
    "typedrl/Reacher-v0": Task(
        target=-25.0,
        setups={
            "apg": Setup(
                num_envs=16, budget=200_000, eval_every=1_024, config={"segment_length": 4}
            ),
            "shac": Setup(
                num_envs=8,
                budget=200_000,
                eval_every=512,
                config={
                    **_SHAC,
                    "segment_length": 4,
                    "algorithm": {
                        "critic_iterations": 4,
                        "critic_minibatches": 1,
                        "actor": {"learning_rate": 1e-2},
                    },
                },
            ),
            "ppo": Setup(
                num_envs=16,
                budget=1_000_000,
                eval_every=8_192,
                config={**_PPO_GOAL_TASK, "gamma": 0.9},
            ),
        },
    ),
    "typedrl/Pendulum-v0": Task(
        target=-200.0,
        setups={
            "apg": Setup(
                num_envs=4, budget=300_000, eval_every=2_048, config={"segment_length": 32}
            ),
            "shac": Setup(num_envs=16, budget=600_000, eval_every=4_096, config=_SMALL_SHAC),
            # The Pendulum-v1 settings of `typedrl train`.
            "ppo": Setup(
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
        },
    ),
    "typedrl/CartPoleSwingUp-v0": Task(
        target=400.0,
        setups={
            "shac": Setup(num_envs=16, budget=1_000_000, eval_every=8_192, config=_SMALL_SHAC),
            "ppo": Setup(
                num_envs=256,
                budget=10_000_000,
                eval_every=65_536,
                config={
                    "num_steps": 32,
                    "batch_size": 2048,
                    "num_mini_epochs": 5,
                    "learning_rate": 1e-3,
                    "learning_rate_schedule": "adaptive",
                    "gamma": 0.99,
                    "gae_lambda": 0.95,
                    "normalize_observations": True,
                    "activation": "elu",
                    "log_std_init": -0.5,
                    "max_grad_norm": 1.0,
                },
            ),
        },
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """One evaluation on an algorithm's way to the target."""

    env_steps: int
    train_seconds: float
    score: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How one algorithm's race to the target went."""

    reached: bool
    env_steps: int
    """Env steps at the first evaluation at or above the target (or at the end)."""
    train_seconds: float
    """Time spent in training iterations up to then (evaluations excluded)."""
    best_return: float
    curve: tuple[Point, ...]


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
    train_seconds, best = 0.0, -math.inf
    curve = [Point(env_steps=0, train_seconds=0.0, score=evaluator.evaluate(trainer.policy).score)]
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
        curve.append(Point(env_steps=trainer.env_steps, train_seconds=train_seconds, score=score))
        best = max(best, score)
        if score >= target:
            break
    return Outcome(
        reached=best >= target,
        env_steps=trainer.env_steps,
        train_seconds=train_seconds,
        best_return=best,
        curve=tuple(curve),
    )


def _evaluator(env_id: str, episodes: int) -> EpisodeEvaluator:
    # The same starts for every algorithm; actions beyond the bounds are clipped.
    env = make(env_id, num_envs=episodes, seed=_EVAL_SEED, clip_actions=True)
    return EpisodeEvaluator(env, num_episodes=episodes, seed=_EVAL_SEED)


def _trainer(algorithm: Algorithm, env_id: str, setup: Setup, seed: int) -> AbstractTrainer:
    if algorithm == "ppo":
        env = make(env_id, num_envs=setup.num_envs, seed=seed, clip_actions=True)
        config = PPOConfig(total_timesteps=setup.budget, seed=seed, **setup.config)
        return PPOAgent(env=env, config=config, options=RunOptions(progress=False, loggers=[]))
    env = make(env_id, num_envs=setup.num_envs, seed=seed)
    values = {**setup.config, "total_timesteps": setup.budget, "seed": seed}
    return DifferentiableTrainer(
        env=env,
        config=DifferentiableTrainerConfig.from_dict(values),
        options=RunOptions(progress=False, loggers=[]),
    )


def compare(
    env_id: str,
    *,
    seed: int,
    episodes: int,
    target: float,
    clock: Callable[[], float],
    algorithms: tuple[Algorithm, ...] = ALGORITHMS,
) -> dict[str, Any]:
    """Race every algorithm that has settings for ``env_id`` to ``target``."""
    task = TASKS[env_id]
    outcomes: dict[str, Outcome] = {}
    result: dict[str, Any] = {"env_id": env_id, "seed": seed, "target_return": target}
    for algorithm in algorithms:
        setup = task.setups.get(algorithm)
        if setup is None:
            continue
        torch.manual_seed(seed)
        outcome = _race(
            _trainer(algorithm, env_id, setup, seed),
            _evaluator(env_id, episodes),
            target=target,
            setup=setup,
            clock=clock,
        )
        outcomes[algorithm] = outcome
        result[algorithm] = {
            "reached": outcome.reached,
            "env_steps": outcome.env_steps,
            "train_seconds": outcome.train_seconds,
            "best_return": outcome.best_return,
            "num_envs": setup.num_envs,
            "eval_every": setup.eval_every,
            "budget": setup.budget,
            "config": dict(setup.config),
            "curve": [[p.env_steps, p.train_seconds, p.score] for p in outcome.curve],
        }
    ppo = outcomes.get("ppo")
    for name, outcome in outcomes.items():
        if name == "ppo" or ppo is None:
            continue
        both = ppo.reached and outcome.reached
        result[f"ppo_over_{name}_steps"] = ppo.env_steps / outcome.env_steps if both else None
        result[f"ppo_over_{name}_time"] = (
            ppo.train_seconds / outcome.train_seconds if both else None
        )
    return result


def plot(result: Mapping[str, Any], directory: Path) -> Path:
    """Write the learning curves of one env's race as a PNG; return its path."""
    import matplotlib  # noqa: PLC0415 - only for --plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, (by_steps, by_time) = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    for algorithm in ALGORITHMS:
        if algorithm not in result:
            continue
        # The evaluation before training (at 0 steps) has no place on a log axis.
        curve = [point for point in result[algorithm]["curve"] if point[0] > 0]
        steps = [point[0] for point in curve]
        seconds = [point[1] for point in curve]
        scores = [point[2] for point in curve]
        by_steps.plot(steps, scores, marker=".", label=algorithm.upper())
        by_time.plot(seconds, scores, marker=".", label=algorithm.upper())
    for axes, label in ((by_steps, "env steps"), (by_time, "training time [s]")):
        axes.axhline(result["target_return"], color="grey", linestyle="--", linewidth=1)
        axes.set_xscale("log")
        axes.set_xlabel(label)
        axes.set_ylabel("deterministic eval return")
        axes.grid(alpha=0.3)
    by_steps.legend()
    figure.suptitle(f"{result['env_id']} (seed {result['seed']}; dashed: target)")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"sample_efficiency_{result['env_id'].replace('/', '-')}.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def _steps(outcome: Mapping[str, Any] | None) -> str:
    if outcome is None:
        return "-"
    reached = outcome["reached"]
    return f"{outcome['env_steps']:,}" if reached else f">{outcome['env_steps']:,}"


def _seconds(outcome: Mapping[str, Any] | None) -> str:
    return "-" if outcome is None else f"{outcome['train_seconds']:.1f}"


def _ratio(value: float | None) -> str:
    return f"{value:.1f}x" if value is not None else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", action="append", choices=sorted(TASKS), help="default: all")
    parser.add_argument(
        "--algo", action="append", choices=ALGORITHMS, help="default: every one with settings"
    )
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
        choices=sorted(CLOCKS),
        default="wall",
        help="wall clock (default) or the thread's CPU time (steadier on a shared machine)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object per env")
    parser.add_argument("--plot", type=Path, metavar="DIR", help="write learning curves here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    targets = {env_id: task.target for env_id, task in TASKS.items()}
    for item in args.target:
        env_id, _, value = item.partition("=")
        if env_id not in TASKS or not value:
            parser.error(f"--target expects ENV_ID=RETURN with ENV_ID in {sorted(TASKS)}")
        targets[env_id] = float(value)
    algorithms = tuple(args.algo) if args.algo else ALGORITHMS
    if not args.json:
        print(
            f"{'env':<28} {'target':>7} {'algo':>5} {'env steps':>11} {'train s':>8} "
            f"{'best':>8} {'PPO/it steps':>13} {'PPO/it time':>12}"
        )
    for env_id in args.env or list(TASKS):
        result = compare(
            env_id,
            seed=args.seed,
            episodes=args.eval_episodes,
            target=targets[env_id],
            clock=CLOCKS[args.clock],
            algorithms=algorithms,
        )
        if args.plot is not None:
            plot(result, args.plot)
        if args.json:
            print(json.dumps(result), flush=True)
            continue
        for algorithm in algorithms:
            outcome = result.get(algorithm)
            if outcome is None:
                continue
            print(
                f"{env_id:<28} {targets[env_id]:>7.1f} {algorithm:>5} {_steps(outcome):>11} "
                f"{_seconds(outcome):>8} {outcome['best_return']:>8.1f} "
                f"{_ratio(result.get(f'ppo_over_{algorithm}_steps')):>13} "
                f"{_ratio(result.get(f'ppo_over_{algorithm}_time')):>12}",
                flush=True,
            )


if __name__ == "__main__":
    main()
