"""Whole processes: ``typedrl train`` on Atari Pong against CleanRL's ``ppo_atari.py``.

CleanRL's PPO for Atari is a single script, ``cleanrl/ppo_atari.py``, not an
installable package: pass a checkout of its repository with ``--cleanrl``. The
script targets Gymnasium 0.29; it runs here under Gymnasium 1.x through a small
adapter (the command line below, before ``runpy`` runs the script): ale-py's
envs are registered (``gymnasium.register_envs(ale_py)``, which gives the
``PongNoFrameskip-v4`` id), and the two wrappers Gymnasium 1.0 renamed are
aliased to their new names (``GrayScaleObservation`` to
``GrayscaleObservation``, ``FrameStack(env, 4)`` to
``FrameStackObservation(env, 4)``). Under Gymnasium 1.x's autoreset the
vector env has no ``infos["final_info"]``, so the script logs no episode
returns; its training loop is unchanged.

Settings, both sides: Pong with 84x84 grayscale frames, a frame skip of 4 with
max-pooling of the last two frames, up to 30 no-op starts, the last 4 frames
stacked, no sticky actions; 8 synchronous envs, 128 steps per env per
rollout, 4 passes of 4 minibatches of 256, Adam 2.5e-4 (eps 1e-5) decayed
linearly to 0, gamma 0.99, GAE lambda 0.95, clip range 0.1 for the ratio and
the value (clipped value loss), entropy 0.01, value loss 0.5, gradient norm
0.5, advantages normalised per minibatch; the Nature CNN shared by a linear
actor and a linear critic, orthogonal initialisation; one torch thread.

What differs, because the two programs allow no closer match:

- Wrappers. CleanRL: ``PongNoFrameskip-v4`` with its own ``NoopResetEnv``,
  ``MaxAndSkipEnv``, ``EpisodicLifeEnv`` (Pong has no lives: no effect),
  ``FireResetEnv`` (presses FIRE on reset), ``ClipRewardEnv`` (Pong's rewards
  are -1, 0, 1 already), ``ResizeObservation`` then
  ``GrayscaleObservation``. typedrl: ``ALE/Pong-v5`` with ``frameskip=1`` and
  ``repeat_action_probability=0``, Gymnasium's ``AtariPreprocessing`` (no-ops,
  frame skip with max-pooling, grayscale from the emulator, resize) and
  ``FrameStackObservation``.
- Storage. CleanRL keeps the rollout's frames as float32; typedrl keeps
  them as uint8 and scales them in the policy.
- Extra work. typedrl plays one deterministic evaluation episode at the end
  (the least its ``train`` command allows) and writes its run folder
  (checkpoints, ``metrics.csv``, ``summary.json``, ``curve.png``, and a
  TensorBoard log where tensorboard is installed); CleanRL writes a
  TensorBoard log.

Each side is one fresh process, alternately first. Two rates are measured:
the whole process (env steps over the wall clock from start to exit,
imports, env creation, typedrl's evaluation and files included), and the
training loop at its steady state (the env steps of iterations 2 to the last
over their time: CleanRL's from the time of its first ``SPS:`` line to its
last, typedrl's from the ``time/iteration_seconds`` of its ``metrics.csv``,
which time each iteration's collection and update but not its logging).
The ratios are typedrl's rate over CleanRL's, medians over the rounds.

Needs ``tyro`` and ``tensorboard`` (CleanRL's command line and logger) and
ale-py next to typedrl:
    pip install tyro tensorboard ale-py
    python benchmarks/ppo_atari_vs_cleanrl.py --cleanrl PATH/TO/cleanrl --rounds 3 --iterations 4
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

NUM_ENVS = 8
NUM_STEPS = 128
ROLLOUT = NUM_ENVS * NUM_STEPS
SEED = 1

# CleanRL's ppo_atari.py defaults, as typedrl settings.
_TYPEDRL_SETTINGS = {
    "num_steps": NUM_STEPS,
    "batch_size": ROLLOUT // 4,
    "num_mini_epochs": 4,
    "learning_rate": 2.5e-4,
    "learning_rate_schedule": "linear",
    "adam_eps": 1e-5,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_range": 0.1,
    "clip_value_loss": "true",
    "entropy_coef": 0.01,
    "value_loss_coef": 0.5,
    "max_grad_norm": 0.5,
    "normalize_advantages": "true",
    "actor_hidden": "[]",
    "critic_hidden": "[]",
}

_CLEANRL_ADAPTER = r"""
import json, runpy, sys, time
started = time.perf_counter()
import torch
torch.set_num_threads(1)
import ale_py
import gymnasium
gymnasium.register_envs(ale_py)
gymnasium.wrappers.GrayScaleObservation = gymnasium.wrappers.GrayscaleObservation
gymnasium.wrappers.FrameStack = gymnasium.wrappers.FrameStackObservation
sys.path.insert(0, {cleanrl!r})
marks = []


def timed_print(*args, **kwargs):
    if args and args[0] == "SPS:":
        marks.append(time.perf_counter() - started)
    print(*args, **kwargs, file=sys.stderr)


script = {script!r}
sys.argv = [script, "--env-id", "PongNoFrameskip-v4", "--no-cuda", "--no-track",
            "--num-envs", "{num_envs}", "--num-steps", "{num_steps}",
            "--total-timesteps", "{total}", "--seed", "{seed}"]
runpy.run_path(script, init_globals={{"print": timed_print}}, run_name="__main__")
print(json.dumps({{"iteration_ends_s": marks}}))
"""


def _run(command: Sequence[str], env: Mapping[str, str], cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(
        list(command), env=dict(env), cwd=cwd, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{command[:4]} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def _cleanrl_side(
    cleanrl: Path, iterations: int, folder: Path, env: Mapping[str, str]
) -> dict[str, Any]:
    script = _CLEANRL_ADAPTER.format(
        cleanrl=str(cleanrl),
        script=str(cleanrl / "cleanrl" / "ppo_atari.py"),
        num_envs=NUM_ENVS,
        num_steps=NUM_STEPS,
        total=iterations * ROLLOUT,
        seed=SEED,
    )
    workdir = folder / "cleanrl"
    workdir.mkdir()
    seconds, stdout = _run([sys.executable, "-c", script], env, workdir)
    ends = json.loads(stdout.strip().splitlines()[-1])["iteration_ends_s"]
    if len(ends) != iterations:
        sys.exit(f"CleanRL ran {len(ends)} iterations, expected {iterations}")
    return {
        "process_s": seconds,
        "env_steps": iterations * ROLLOUT,
        "steady_s": ends[-1] - ends[0],
    }


def _typedrl(iterations: int, run_dir: Path) -> list[str]:
    flags = [
        arg for name, value in _TYPEDRL_SETTINGS.items() for arg in ("--set", f"{name}={value}")
    ]
    return [
        sys.executable,
        "-m",
        "typedrl",
        "train",
        "ale_py:ALE/Pong-v5",
        "--env-kwargs",
        "frameskip=1",
        "--env-kwargs",
        "repeat_action_probability=0.0",
        "--wrapper",
        "AtariPreprocessing(frame_skip=4,noop_max=30)",
        "--wrapper",
        "FrameStackObservation(stack_size=4)",
        "--num-envs",
        str(NUM_ENVS),
        "--total-timesteps",
        str(iterations * ROLLOUT),
        "--seed",
        str(SEED),
        "--eval-episodes",
        "1",
        "--threads",
        "1",
        "--no-progress",
        "--run-dir",
        str(run_dir),
        "--overwrite",
        *flags,
    ]


def _typedrl_side(iterations: int, folder: Path, env: Mapping[str, str]) -> dict[str, Any]:
    run_dir = folder / "typedrl"
    seconds, _ = _run(_typedrl(iterations, run_dir), env, folder)
    summary = json.loads((run_dir / "summary.json").read_text())
    with (run_dir / "metrics.csv").open(newline="") as file:
        logged = [row for row in csv.DictReader(file) if row["time/iteration_seconds"]]
    durations = [float(row["time/iteration_seconds"]) for row in logged]
    if len(durations) != iterations:
        sys.exit(f"typedrl logged {len(durations)} iterations, expected {iterations}")
    return {
        "process_s": seconds,
        "env_steps": int(summary["global_step"]),
        "steady_s": sum(durations[1:]),
        "collect_fraction": statistics.mean(
            float(row["time/collect_fraction"]) for row in logged[1:]
        ),
    }


def _rates(side: dict[str, Any], iterations: int) -> dict[str, Any]:
    return {
        **side,
        "process_steps_per_s": side["env_steps"] / side["process_s"],
        "steady_steps_per_s": (iterations - 1) * ROLLOUT / side["steady_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cleanrl", type=Path, required=True, help="a checkout of CleanRL")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--iterations", type=int, default=4, help=f"rollouts of {ROLLOUT} env steps per run (>= 2)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if not (args.cleanrl / "cleanrl" / "ppo_atari.py").is_file():
        sys.exit(f"--cleanrl {args.cleanrl}: expected a CleanRL checkout with cleanrl/ppo_atari.py")
    if args.iterations < 2:
        sys.exit(f"--iterations must be at least 2, got {args.iterations}")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as root:
        for round_index in range(args.rounds):
            folder = Path(root) / f"round{round_index}"
            folder.mkdir()
            if round_index % 2 == 0:
                reference = _cleanrl_side(args.cleanrl.resolve(), args.iterations, folder, env)
                ours = _typedrl_side(args.iterations, folder, env)
            else:
                ours = _typedrl_side(args.iterations, folder, env)
                reference = _cleanrl_side(args.cleanrl.resolve(), args.iterations, folder, env)
            if reference["env_steps"] != ours["env_steps"]:
                sys.exit(
                    f"env steps differ: CleanRL {reference['env_steps']}, "
                    f"typedrl {ours['env_steps']}"
                )
            reference = _rates(reference, args.iterations)
            ours = _rates(ours, args.iterations)
            row = {
                "cleanrl": reference,
                "typedrl": ours,
                "process_ratio": ours["process_steps_per_s"] / reference["process_steps_per_s"],
                "steady_ratio": ours["steady_steps_per_s"] / reference["steady_steps_per_s"],
            }
            rows.append(row)
            if not args.json:
                print(
                    f"round {round_index}: CleanRL {reference['process_s']:.1f} s "
                    f"({reference['steady_steps_per_s']:.1f} steps/s training), "
                    f"typedrl {ours['process_s']:.1f} s "
                    f"({ours['steady_steps_per_s']:.1f} steps/s training): "
                    f"{row['process_ratio']:.2f}x whole process, "
                    f"{row['steady_ratio']:.2f}x training",
                    flush=True,
                )
    result = {
        "env": "Pong",
        "num_envs": NUM_ENVS,
        "iterations": args.iterations,
        "env_steps": args.iterations * ROLLOUT,
        "rounds": rows,
        "process_ratio": statistics.median(row["process_ratio"] for row in rows),
        "steady_ratio": statistics.median(row["steady_ratio"] for row in rows),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"median: {result['steady_ratio']:.2f}x CleanRL's env steps/s in training, "
            f"{result['process_ratio']:.2f}x over the whole process"
        )


if __name__ == "__main__":
    main()
