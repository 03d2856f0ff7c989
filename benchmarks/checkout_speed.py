"""Iteration speed of PPO, APG and SHAC in two checkouts of the package, side by side.

A refactor must not slow training down. This script times the same short,
fixed-seed runs (the pinned runs of ``tests/pinned_runs.py``, made longer) in
fresh interpreters that import the package from each checkout's ``src``,
interleaved (A, B, A, B, ...) so that the shared machine's noise falls on both
alike, and reports each family's median time per iteration of B relative to A.

    python benchmarks/checkout_speed.py --baseline ../old-checkout --repeats 5

A ratio above 1 means the second checkout (this one, by default) is faster.

``--families ppo-4096`` times PPO on 4,096 envs of the built-in continuous
cart-pole with rsl_rl's cart-pole settings (``benchmarks/ppo_vs_rsl_rl.py``),
whose minibatches are large enough for the host allocator to matter;
``--candidate-env NAME=VALUE`` sets a variable for the candidate's processes
only (for example glibc's ``MALLOC_MMAP_THRESHOLD_``).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

# One timed run per family: built as the pinned runs are, with more iterations.
_RUN = """
import json, sys, time
import torch
torch.set_num_threads(1)
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.apg import APGConfig, DifferentiableTrainer, DifferentiableTrainerConfig, SHACConfig
from typedrl.envs import make
from typedrl.training import RunOptions

family = sys.argv[1]
options = RunOptions(progress=False, loggers=[])
if family == "ppo":
    trainer = PPOAgent(
        env=make("CartPole-v1", num_envs=8, seed=0),
        config=PPOConfig(total_timesteps=8 * 128 * 6, num_steps=128, batch_size=64, seed=0),
        options=options,
    )
elif family == "apg":
    trainer = DifferentiableTrainer(
        env=make("typedrl/Pendulum-v0", num_envs=64, seed=0),
        config=DifferentiableTrainerConfig(
            total_updates=30, segment_length=16, algorithm=APGConfig(learning_rate=1e-3), seed=0
        ),
        options=options,
    )
elif family == "ppo-4096":
    # rsl_rl's cart-pole settings, as benchmarks/ppo_vs_rsl_rl.py runs them.
    trainer = PPOAgent(
        env=make("typedrl/CartPoleContinuous-v0", num_envs=4096, seed=0),
        config=PPOConfig(
            total_timesteps=4096 * 16 * 8,
            num_steps=16,
            num_mini_epochs=5,
            batch_size=4096 * 16 // 4,
            learning_rate=1e-3,
            learning_rate_schedule="adaptive",
            desired_kl=0.01,
            clip_value_loss=True,
            value_loss_coef=1.0,
            entropy_coef=0.005,
            max_grad_norm=1.0,
            actor_hidden=(32, 32),
            critic_hidden=(32, 32),
            activation="elu",
            seed=0,
        ),
        options=options,
    )
else:
    trainer = DifferentiableTrainer(
        env=make("typedrl/CartPoleSwingUp-v0", num_envs=64, seed=0),
        config=DifferentiableTrainerConfig(
            total_updates=30, segment_length=32, algorithm=SHACConfig(), seed=0
        ),
        options=options,
    )
trainer.setup()
started = time.perf_counter()
result = trainer.fit()
print(json.dumps({"seconds_per_iteration": (time.perf_counter() - started) / result.iterations}))
"""


def _time(checkout: Path, family: str, extra_env: dict[str, str]) -> float:
    env = {
        **os.environ,
        "PYTHONPATH": str(checkout / "src"),
        "OMP_NUM_THREADS": "1",
        **extra_env,
    }
    completed = subprocess.run(
        [sys.executable, "-c", _RUN, family],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        cwd=checkout,
    )
    return float(json.loads(completed.stdout.strip().splitlines()[-1])["seconds_per_iteration"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, required=True, help="checkout A (the old one)")
    parser.add_argument("--candidate", type=Path, default=HERE, help="checkout B (default: this)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--families", nargs="+", default=["ppo", "apg", "shac"])
    parser.add_argument(
        "--candidate-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for the candidate's processes only (repeatable)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    candidate_env = dict(item.split("=", 1) for item in args.candidate_env)
    results: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    for family in args.families:
        times: dict[str, list[float]] = {"baseline": [], "candidate": []}
        for _ in range(args.repeats):
            times["baseline"].append(_time(args.baseline, family, {}))
            times["candidate"].append(_time(args.candidate, family, candidate_env))
        baseline = statistics.median(times["baseline"])
        candidate = statistics.median(times["candidate"])
        results[family] = {
            "baseline_s": baseline,
            "candidate_s": candidate,
            "speedup": baseline / candidate,
        }
        if not args.json:
            print(
                f"{family:8s} baseline {baseline * 1e3:8.1f} ms/iteration, candidate "
                f"{candidate * 1e3:8.1f} ms/iteration: {baseline / candidate:.3f}x",
                flush=True,
            )
    if args.json:
        print(json.dumps({"results": results, "seconds": time.perf_counter() - started}))


if __name__ == "__main__":
    main()
