"""Cost of one APG update against the forward-only rollout of the same length.

For each built-in differentiable env, a :class:`~typedrl.apg.DifferentiableTrainer`
with the default settings (one segment of ``--segment-length`` steps per update)
runs, alternately on the same env and policy:

- ``forward``: the rollout of one update under :func:`torch.no_grad` (the
  collector stepping the env with the policy, no graph kept);
- ``graph``: the same rollout with autograd recording (the graph is dropped);
- ``update``: one full APG update (rollout with the graph, the backward through
  the env and the policy, gradient clipping, Adam, the normaliser update).

Each repeat times the three back to back, so machine load affects them alike;
the first repeats are a warm-up. The reported figures are the medians over the
repeats of ``update / forward`` (the cost of differentiating through the
simulator, goal <= 3x) and ``graph / forward``.

Usage:
    python benchmarks/apg_backward_cost.py --num-envs 64 --repeats 30 --json
"""

import argparse
import json
import statistics
import time
from collections.abc import Callable

import torch

from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.envs import make
from typedrl.training import RunOptions

ENV_IDS = (
    "typedrl/PointMass-v0",
    "typedrl/Reacher-v0",
    "typedrl/Pendulum-v0",
    "typedrl/CartPoleSwingUp-v0",
)
_CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}


def _trainer(
    env_id: str, *, num_envs: int, segment_length: int, seed: int
) -> DifferentiableTrainer:
    env = make(env_id, num_envs=num_envs, seed=seed)
    config = DifferentiableTrainerConfig(
        total_updates=1_000_000, segment_length=segment_length, seed=seed
    )
    trainer = DifferentiableTrainer(
        env=env, config=config, options=RunOptions(progress=False, loggers=[])
    )
    trainer.setup()
    trainer._prepare()  # the first reset, as fit() does
    return trainer


def _measure(
    env_id: str,
    *,
    num_envs: int,
    segment_length: int,
    repeats: int,
    warmup: int,
    seed: int,
    clock: Callable[[], float],
) -> dict[str, float | str | int | list[float]]:
    trainer = _trainer(env_id, num_envs=num_envs, segment_length=segment_length, seed=seed)
    collector, policy = trainer.collector, trainer.policy

    def forward() -> None:
        with torch.no_grad():
            collector.collect(policy, num_steps=segment_length)  # type: ignore[arg-type]

    def graph() -> None:
        collector.collect(policy, num_steps=segment_length)  # type: ignore[arg-type]
        collector.detach_state()

    def update() -> None:
        # One iteration of fit's loop.
        trainer.env_steps += trainer._train_iteration().env_steps
        trainer.iteration += 1

    timings: dict[str, list[float]] = {"forward": [], "graph": [], "update": []}
    runs = {"forward": forward, "graph": graph, "update": update}
    for repeat in range(warmup + repeats):
        for name, run in runs.items():
            start = clock()
            run()
            elapsed = clock() - start
            if repeat >= warmup:
                timings[name].append(elapsed)
    update_ratios = [u / f for u, f in zip(timings["update"], timings["forward"], strict=True)]
    graph_ratios = [g / f for g, f in zip(timings["graph"], timings["forward"], strict=True)]
    forward_rate = num_envs * segment_length / statistics.median(timings["forward"])
    return {
        "env_id": env_id,
        "num_envs": num_envs,
        "segment_length": segment_length,
        "update_over_forward": statistics.median(update_ratios),
        "graph_over_forward": statistics.median(graph_ratios),
        "update_over_forward_per_repeat": update_ratios,
        "forward_env_steps_per_s": forward_rate,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", action="append", choices=ENV_IDS, help="default: all")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--segment-length", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
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
    if not args.json:
        print(f"{'env':<28} {'update/forward':>15} {'graph/forward':>14} {'forward steps/s':>16}")
    for env_id in args.env or ENV_IDS:
        result = _measure(
            env_id,
            num_envs=args.num_envs,
            segment_length=args.segment_length,
            repeats=args.repeats,
            warmup=args.warmup,
            seed=args.seed,
            clock=_CLOCKS[args.clock],
        )
        if args.json:
            print(json.dumps(result))
        else:
            update, graph = result["update_over_forward"], result["graph_over_forward"]
            rate = result["forward_env_steps_per_s"]
            print(f"{env_id:<28} {update:>14.2f}x {graph:>13.2f}x {rate:>16,.0f}")


if __name__ == "__main__":
    main()
