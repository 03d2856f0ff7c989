"""Whole processes: ``typedrl train --algo shac`` against DiffRL's reference ``shac.py``.

SHAC's reference code is DiffRL's ``algorithms/shac.py`` (Xu et al., ICLR
2022). It is not a package: pass a checkout of its repository with
``--diffrl``. Its own environments run on dflex, which needs CUDA; here both
sides train on the same env, typedrl's built-in ``typedrl/CartPoleSwingUp-v0``,
so the comparison is of the two trainers alone. ``shac.py`` reaches the env
through a small adapter module put in place of DiffRL's ``envs`` package (and
an empty ``dflex`` module: ``shac.py`` imports it but calls nothing in it). The
adapter maps the typedrl env's step onto DiffRL's ``(obs, reward, done,
{"obs_before_reset": ...})``, detaches the state in ``clear_grad`` and returns
the detached observation from ``initialize_trajectory``, as DiffRL's envs do.

Settings, both sides: DiffRL's ``examples/cfg/shac/cartpole_swing_up.yaml`` (64
envs, windows of 32 steps, [64, 64] ELU networks with LayerNorm, actor
learning rate 1e-2, critic 1e-3, Adam betas (0.7, 0.95), 16 critic passes of
4 minibatches, TD(lambda=0.95) targets, target critic alpha 0.2, observation
normalisation, gradient norm clipped at 1) for ``--epochs`` windows, one
torch thread. Each side is one fresh process; its wall clock from start to
exit counts imports, env creation, the final evaluation (64 episodes each)
and the files each writes (DiffRL: its ``.pt`` policies and TensorBoard log;
typedrl: its run folder). Training alone is timed too: DiffRL from the start
of ``SHAC.train`` to its final evaluation, typedrl from its ``summary.json``.
The rounds alternate which side goes first; the ratios are DiffRL's seconds
over typedrl's, medians over the rounds.

Needs ``tensorboardX`` (DiffRL's logger) next to typedrl:
    pip install tensorboardX
    python benchmarks/shac_vs_diffrl.py --diffrl PATH/TO/DiffRL --rounds 3
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
from typing import Any

ENV_ID = "typedrl/CartPoleSwingUp-v0"
NUM_ENVS = 64
WINDOW = 32
EVAL_EPISODES = 64

# DiffRL's examples/cfg/shac/cartpole_swing_up.yaml, as typedrl settings.
_TYPEDRL_SETTINGS = {
    "segment_length": WINDOW,
    "normalize_observations": "true",
    "hidden": "[64,64]",
    "activation": "elu",
    "layer_norm": "true",
    "algorithm.actor.learning_rate": 1e-2,
    "algorithm.actor.betas": "[0.7,0.95]",
    "algorithm.actor.gamma": 0.99,
    "algorithm.actor.max_grad_norm": 1.0,
    "algorithm.critic_learning_rate": 1e-3,
    "algorithm.critic_betas": "[0.7,0.95]",
    "algorithm.critic_max_grad_norm": 1.0,
    "algorithm.critic_hidden": "[64,64]",
    "algorithm.critic_activation": "elu",
    "algorithm.critic_layer_norm": "true",
    "algorithm.critic_iterations": 16,
    "algorithm.critic_minibatches": 4,
    "algorithm.gae_lambda": 0.95,
    "algorithm.target_alpha": 0.2,
    "algorithm.normalize_returns": "false",
}

_DIFFRL_SCRIPT = r'''
import json, sys, time, types
started = time.perf_counter()
import torch
torch.set_num_threads(1)
sys.path.insert(0, {diffrl!r})
sys.modules["dflex"] = types.ModuleType("dflex")

import typedrl.envs


class TypedRLEnv:
    """A typedrl differentiable vector env behind DiffRL's env interface."""

    def __init__(self, num_envs, device, render, seed, episode_length, stochastic_init,
                 MM_caching_frequency, no_grad):
        self.env = typedrl.envs.make({env_id!r}, num_envs=num_envs, device=str(device))
        self.num_envs = num_envs
        self.num_obs = self.env.single_observation_space.shape[0]
        self.num_actions = self.env.single_action_space.shape[0]
        self.episode_length = self.env.max_episode_steps
        self.seed = seed
        self.obs = None

    def reset(self):
        obs, _ = self.env.reset(seed=self.seed)
        self.seed = None
        self.obs = obs["obs"]
        return self.obs

    def clear_grad(self):
        if self.obs is not None:
            self.obs = self.env.detach_state()["obs"]

    def initialize_trajectory(self):
        self.clear_grad()
        return self.obs

    def step(self, actions):
        result = self.env.step(actions)
        self.obs = result.obs["obs"]
        done = result.terminated | result.truncated
        return self.obs, result.reward, done, {{"obs_before_reset": result.final_obs["obs"]}}


envs = types.ModuleType("envs")
envs.TypedRLEnv = TypedRLEnv
sys.modules["envs"] = envs

from algorithms.shac import SHAC

marks = {{}}
evaluate_policy = SHAC.evaluate_policy


def timed_evaluate(self, num_games, deterministic=False):
    marks["train_end"] = time.perf_counter()
    loss, discounted, length = evaluate_policy(self, num_games, deterministic)
    marks["eval_return"] = -float(loss)
    return loss, discounted, length


SHAC.evaluate_policy = timed_evaluate
config = {{
    "params": {{
        "diff_env": {{"name": "TypedRLEnv", "stochastic_env": True, "episode_length": 500}},
        "network": {{
            "actor": "ActorStochasticMLP",
            "actor_mlp": {{"units": [64, 64], "activation": "elu"}},
            "critic": "CriticMLP",
            "critic_mlp": {{"units": [64, 64], "activation": "elu"}},
        }},
        "config": {{
            "name": "typedrl_cartpole_swing_up_shac",
            "actor_learning_rate": 1e-2,
            "critic_learning_rate": 1e-3,
            "lr_schedule": "linear",
            "target_critic_alpha": 0.2,
            "obs_rms": True,
            "ret_rms": False,
            "critic_iterations": 16,
            "critic_method": "td-lambda",
            "lambda": 0.95,
            "num_batch": 4,
            "gamma": 0.99,
            "betas": [0.7, 0.95],
            "max_epochs": {epochs},
            "steps_num": {window},
            "grad_norm": 1.0,
            "truncate_grads": True,
            "num_actors": {num_envs},
            "save_interval": 100,
            "player": {{"determenistic": True, "games_num": 4, "num_actors": 4}},
        }},
        "general": {{
            "seed": 0,
            "device": "cpu",
            "render": False,
            "train": True,
            "logdir": {logdir!r},
        }},
    }}
}}
agent = SHAC(config)
marks["train_start"] = time.perf_counter()
agent.train()
print(json.dumps({{
    "train_s": marks["train_end"] - marks["train_start"],
    "env_steps": agent.step_count,
    "eval_return": marks["eval_return"],
    "training_return": -float(agent.episode_loss_meter.get_mean()),
}}))
'''


def _run(command: Sequence[str], env: Mapping[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(list(command), env=dict(env), capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{command[:4]} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def _diffrl(diffrl: Path, epochs: int, logdir: Path) -> list[str]:
    script = _DIFFRL_SCRIPT.format(
        diffrl=str(diffrl),
        env_id=ENV_ID,
        epochs=epochs,
        window=WINDOW,
        num_envs=NUM_ENVS,
        logdir=str(logdir),
    )
    return [sys.executable, "-c", script]


def _typedrl(epochs: int, run_dir: Path) -> list[str]:
    flags = [
        arg for name, value in _TYPEDRL_SETTINGS.items() for arg in ("--set", f"{name}={value}")
    ]
    return [
        sys.executable,
        "-m",
        "typedrl",
        "train",
        "--algo",
        "shac",
        ENV_ID,
        "--num-envs",
        str(NUM_ENVS),
        "--total-timesteps",
        str(epochs * WINDOW * NUM_ENVS),
        "--seed",
        "0",
        "--eval-episodes",
        str(EVAL_EPISODES),
        "--no-progress",
        "--run-dir",
        str(run_dir),
        "--overwrite",
        *flags,
    ]


def _diffrl_side(diffrl: Path, epochs: int, folder: Path, env: Mapping[str, str]) -> dict[str, Any]:
    seconds, stdout = _run(_diffrl(diffrl, epochs, folder / "diffrl"), env)
    result = json.loads(stdout.strip().splitlines()[-1])
    return {"process_s": seconds, **result}


def _typedrl_side(epochs: int, folder: Path, env: Mapping[str, str]) -> dict[str, Any]:
    run_dir = folder / "typedrl"
    seconds, _ = _run(_typedrl(epochs, run_dir), env)
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "process_s": seconds,
        "train_s": float(summary["wall_time_s"]),
        "env_steps": int(summary["global_step"]),
        "eval_return": float(summary["final_eval_return_mean"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--diffrl", type=Path, required=True, help="a checkout of DiffRL")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=200, help="windows of 32 steps per run")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if not (args.diffrl / "algorithms" / "shac.py").is_file():
        sys.exit(f"--diffrl {args.diffrl}: expected a DiffRL checkout with algorithms/shac.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as root:
        for round_index in range(args.rounds):
            folder = Path(root) / f"round{round_index}"
            folder.mkdir()
            if round_index % 2 == 0:
                reference = _diffrl_side(args.diffrl, args.epochs, folder, env)
                ours = _typedrl_side(args.epochs, folder, env)
            else:
                ours = _typedrl_side(args.epochs, folder, env)
                reference = _diffrl_side(args.diffrl, args.epochs, folder, env)
            if reference["env_steps"] != ours["env_steps"]:
                sys.exit(
                    f"env steps differ: DiffRL {reference['env_steps']}, "
                    f"typedrl {ours['env_steps']}"
                )
            row = {
                "diffrl": reference,
                "typedrl": ours,
                "process_ratio": reference["process_s"] / ours["process_s"],
                "train_ratio": reference["train_s"] / ours["train_s"],
            }
            rows.append(row)
            if not args.json:
                print(
                    f"round {round_index}: DiffRL {reference['process_s']:.1f} s "
                    f"(training {reference['train_s']:.1f} s, eval return "
                    f"{reference['eval_return']:.1f}), typedrl {ours['process_s']:.1f} s "
                    f"(training {ours['train_s']:.1f} s, eval return {ours['eval_return']:.1f}): "
                    f"{row['process_ratio']:.2f}x whole process, {row['train_ratio']:.2f}x training"
                )
    result = {
        "env_id": ENV_ID,
        "num_envs": NUM_ENVS,
        "epochs": args.epochs,
        "env_steps": rows[0]["typedrl"]["env_steps"],
        "rounds": rows,
        "process_ratio": statistics.median(row["process_ratio"] for row in rows),
        "train_ratio": statistics.median(row["train_ratio"] for row in rows),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"median: {result['process_ratio']:.2f}x DiffRL's whole process, "
            f"{result['train_ratio']:.2f}x its training loop"
        )


if __name__ == "__main__":
    main()
