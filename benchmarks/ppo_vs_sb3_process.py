"""Whole processes: ``typedrl train CartPole-v1`` as shipped against Stable-Baselines3.

Each side is one fresh process that trains PPO on Gymnasium's CartPole-v1
with 8 synchronous envs and Stable-Baselines3's default hyper-parameters
(2048 steps per env per epoch, minibatches of 64, 10 passes, Adam 3e-4,
[64, 64] tanh networks, no observation normalisation) for the same budget, on
one CPU thread; the time is the process's wall clock from start to exit, so
imports, env creation, compiling and the final evaluation count. typedrl
runs as a user runs it: eagerly, as shipped, or with ``--compile``
(``typedrl train --compile``), whose first minibatch compiles inside the
timed process, on torch's compile cache as this machine holds it (after the
first such run, a warm one).

A round runs SB3, then typedrl. The ratio is SB3's seconds over typedrl's,
the median over the rounds.

Needs Stable-Baselines3 in the benchmark's environment:
    pip install stable-baselines3
    python benchmarks/ppo_vs_sb3_process.py --rounds 3
    python benchmarks/ppo_vs_sb3_process.py --rounds 3 --compile
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

NUM_ENVS = 8
_SB3_DEFAULTS = {
    "num_steps": 2048,
    "batch_size": 64,
    "num_mini_epochs": 10,
    "learning_rate": 3e-4,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_range": 0.2,
    "value_loss_coef": 0.5,
    "entropy_coef": 0.0,
    "max_grad_norm": 0.5,
    "actor_hidden": "[64, 64]",
    "critic_hidden": "[64, 64]",
    "activation": "tanh",
    "normalize_observations": "false",
    "normalize_advantages": "true",
}

_SB3_SCRIPT = """
import sys, torch
torch.set_num_threads(1)
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
env = make_vec_env("CartPole-v1", n_envs={num_envs}, seed=0)
PPO("MlpPolicy", env, seed=0, device="cpu").learn(total_timesteps={timesteps})
"""


def _timed(command: Sequence[str], env: Mapping[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(list(command), env=dict(env), check=True, capture_output=True, text=True)
    return time.perf_counter() - started


def _typedrl(timesteps: int, run_dir: Path, *extra: str) -> list[str]:
    flags = [arg for name, value in _SB3_DEFAULTS.items() for arg in ("--set", f"{name}={value}")]
    return [
        sys.executable,
        "-m",
        "typedrl",
        "train",
        "CartPole-v1",
        "--num-envs",
        str(NUM_ENVS),
        "--vectorization",
        "sync",
        "--total-timesteps",
        str(timesteps),
        "--seed",
        "0",
        "--no-progress",
        "--run-dir",
        str(run_dir),
        "--overwrite",
        *flags,
        *extra,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timesteps", type=int, default=3 * 2048 * NUM_ENVS)
    parser.add_argument("--compile", action="store_true", help="typedrl train --compile")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    rows: list[dict[str, float]] = []
    extra = ("--compile",) if args.compile else ()
    with tempfile.TemporaryDirectory() as root:
        sb3 = [
            sys.executable,
            "-c",
            _SB3_SCRIPT.format(num_envs=NUM_ENVS, timesteps=args.timesteps),
        ]
        for round_index in range(args.rounds):
            sb3_s = _timed(sb3, environment)
            typedrl_s = _timed(_typedrl(args.timesteps, Path(root) / "run", *extra), environment)
            rows.append({"sb3_s": sb3_s, "typedrl_s": typedrl_s})
            if not args.json:
                print(
                    f"round {round_index}: SB3 {sb3_s:.1f} s, typedrl {typedrl_s:.1f} s "
                    f"({sb3_s / typedrl_s:.2f}x)"
                )
    ratio = statistics.median(row["sb3_s"] / row["typedrl_s"] for row in rows)
    result = {"timesteps": args.timesteps, "compile": args.compile, "rounds": rows, "ratio": ratio}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"median: {ratio:.2f}x SB3")


if __name__ == "__main__":
    main()
