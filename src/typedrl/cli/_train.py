"""``typedrl train``: PPO, APG and SHAC from the command line."""

import argparse
import copy
import importlib.util
import json
import time
from pathlib import Path
from typing import Any, Literal

from typedrl.errors import ConfigError, MissingDependencyError

__all__ = [
    "APG_PRESETS",
    "DEFAULT_APG_ENV_ID",
    "DEFAULT_ENV_ID",
    "DEFAULT_SHAC_ENV_ID",
    "PRESETS",
    "SHAC_PRESETS",
    "add_train_parser",
]

DEFAULT_ENV_ID = "typedrl/CartPole-v0"
"""The env ``typedrl train`` uses when none is named: the built-in torch CartPole."""

DEFAULT_APG_ENV_ID = "typedrl/Reacher-v0"
"""The env ``typedrl train --algo apg`` uses when none is named: the built-in Reacher."""

DEFAULT_SHAC_ENV_ID = "typedrl/CartPoleSwingUp-v0"
"""The env ``typedrl train --algo shac`` uses when none is named: the paper's swing-up."""

PRESETS: dict[str, dict[str, Any]] = {
    "typedrl/CartPole-v0": {
        "num_envs": 32,
        "config": {
            "total_timesteps": 100_000,
            "num_steps": 32,
            "batch_size": 256,
            "num_mini_epochs": 10,
            "learning_rate": 1e-3,
            "learning_rate_schedule": "linear",
            "gamma": 0.98,
            "gae_lambda": 0.8,
        },
    },
    "CartPole-v1": {
        "num_envs": 8,
        "config": {
            "total_timesteps": 100_000,
            "num_steps": 32,
            "batch_size": 256,
            "num_mini_epochs": 20,
            "learning_rate": 1e-3,
            "learning_rate_schedule": "linear",
            "gamma": 0.98,
            "gae_lambda": 0.8,
        },
    },
    "Pendulum-v1": {
        "num_envs": 8,
        "config": {
            "total_timesteps": 200_000,
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
    },
}
"""Hyper-parameters known to work per env id (others start from :class:`PPOConfig`'s defaults)."""

APG_PRESETS: dict[str, dict[str, Any]] = {
    "typedrl/PointMass-v0": {
        "num_envs": 64,
        "config": {"total_timesteps": 100_000, "segment_length": 32},
    },
    "typedrl/Reacher-v0": {
        "num_envs": 64,
        "config": {"total_timesteps": 1_300_000, "segment_length": 32},
    },
    "typedrl/Pendulum-v0": {
        "num_envs": 64,
        "config": {"total_timesteps": 1_300_000, "segment_length": 32},
    },
}
"""APG settings known to work per built-in differentiable env (others: the config defaults).

Measured on seeds 0, 1 and 2 with the defaults (Adam 3e-3, normalised observations):
PointMass reaches 1-2% of its initial goal distance in 40 updates (82k steps), Reacher
3-6% in 600 updates (1.2M steps), Pendulum a deterministic return of -150 to -152 in 600
updates."""

SHAC_PRESETS: dict[str, dict[str, Any]] = {
    "typedrl/CartPoleSwingUp-v0": {
        "num_envs": 64,
        "config": {
            "total_timesteps": 2_000_000,
            "segment_length": 32,
            "normalize_observations": True,
            "layer_norm": True,
        },
    },
    "typedrl/Pendulum-v0": {
        "num_envs": 64,
        "config": {
            "total_timesteps": 2_048_000,
            "segment_length": 32,
            "normalize_observations": True,
            "layer_norm": True,
            "algorithm": {"actor": {"learning_rate": 2e-3}},
        },
    },
}
"""SHAC settings per built-in env: the paper's CartPoleSwingUp setup (64 envs, windows of
32 steps, observation normalisation, [64, 64] ELU networks with LayerNorm); on Pendulum the
same with an actor learning rate of 2e-3 (the paper's 1e-2 falls into a one-sided swing)
over 1000 updates."""


def _parse_override(text: str) -> tuple[str, Any]:
    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set expects KEY=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key.strip(), value


def add_train_parser(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add the ``train`` subcommand."""
    train = commands.add_parser(
        "train",
        help="train PPO (default) or APG on an env (default: a built-in torch env)",
        description=(
            "Train PPO or, with --algo apg, analytic policy gradients through a "
            "differentiable env. Known env ids start from tuned presets (PPO: "
            f"{', '.join(PRESETS)}; APG: {', '.join(APG_PRESETS)}); --set overrides any "
            "field of the algorithm's config (APG: DifferentiableTrainerConfig, and "
            "algorithm.<field> for its APGConfig)."
        ),
    )
    train.add_argument(
        "env_id",
        nargs="?",
        default=None,
        help=(
            f"an env id (default: {DEFAULT_ENV_ID} for PPO, {DEFAULT_APG_ENV_ID} for APG, "
            f"{DEFAULT_SHAC_ENV_ID} for SHAC)"
        ),
    )
    train.add_argument(
        "--algo",
        default="ppo",
        choices=["ppo", "apg", "shac"],
        help="ppo, apg (analytic policy gradients) or shac (short-horizon actor-critic)",
    )
    train.add_argument("--num-envs", type=int, help="env rows per rank (default: preset or 8)")
    train.add_argument("--total-timesteps", type=int, help="budget in env steps over all ranks")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--run-dir", type=Path, help="default: runs/<env>-<time>")
    train.add_argument("--accelerator", default="cpu", choices=["cpu", "cuda", "auto"])
    train.add_argument("--devices", type=int, default=1, help="processes (DDP when > 1)")
    train.add_argument("--vectorization", default="sync", choices=["sync", "async"])
    train.add_argument("--eval-every", type=int, help="evaluate every this many env steps")
    train.add_argument("--eval-episodes", type=int, default=16)
    train.add_argument("--checkpoint-every", type=int, help="write epoch_<n>.ckpt every n epochs")
    train.add_argument("--resume", type=Path, help="a checkpoint to resume from")
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a PPOConfig field (JSON values), e.g. --set learning_rate=3e-4",
    )
    train.add_argument(
        "--wandb-project", help="also log to this Weights & Biases project (needs wandb)"
    )
    train.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    train.set_defaults(handler=run_train)


def _config_for(env_id: str, args: argparse.Namespace) -> tuple[int, Any]:
    """The number of env rows and the config of ``args.algo`` for ``env_id``."""
    # Imported here to keep `typedrl --help` fast.
    from typedrl.agents import PPOConfig  # noqa: PLC0415
    from typedrl.apg import DifferentiableTrainerConfig  # noqa: PLC0415

    apg = args.algo in ("apg", "shac")
    presets = {"ppo": PRESETS, "apg": APG_PRESETS, "shac": SHAC_PRESETS}[args.algo]
    preset = presets.get(env_id, {})
    values: dict[str, Any] = copy.deepcopy(preset.get("config", {}))
    values["seed"] = args.seed
    if apg and "total_timesteps" not in values:
        values["total_timesteps"] = 200_000
    if args.algo == "shac":
        values.setdefault("algorithm", {}).setdefault("actor", {})
    if args.total_timesteps is not None:
        values["total_timesteps"] = args.total_timesteps
    for override in args.set:
        key, value = _parse_override(override)
        *groups, field = key.split(".")
        if groups and not (apg and groups[0] == "algorithm"):
            raise ConfigError(
                f"--set {key}: only the APG and SHAC configs have nested fields "
                "(algorithm.<field>, and algorithm.actor.<field> for SHAC)"
            )
        target = values
        for group in groups:
            target = target.setdefault(group, {})
        target[field] = value
    num_envs = args.num_envs if args.num_envs is not None else int(preset.get("num_envs", 8))
    if apg:
        if values.get("total_updates") is not None:
            values["total_timesteps"] = None
        return num_envs, DifferentiableTrainerConfig.from_dict(values)
    return num_envs, PPOConfig.from_dict(values)


def run_train(args: argparse.Namespace) -> int:
    """Train as the arguments say; print where the run went and its final score."""
    from lightning.fabric import Fabric  # noqa: PLC0415

    from typedrl.agents import PPOAgent  # noqa: PLC0415
    from typedrl.apg import DifferentiableTrainer  # noqa: PLC0415
    from typedrl.envs import make  # noqa: PLC0415
    from typedrl.logging import build_loggers  # noqa: PLC0415
    from typedrl.seeding import derive_seed  # noqa: PLC0415
    from typedrl.training import RunOptions  # noqa: PLC0415

    if args.env_id is None:
        args.env_id = {
            "ppo": DEFAULT_ENV_ID,
            "apg": DEFAULT_APG_ENV_ID,
            "shac": DEFAULT_SHAC_ENV_ID,
        }[args.algo]
    num_envs, config = _config_for(args.env_id, args)
    if args.wandb_project is not None and importlib.util.find_spec("wandb") is None:
        # Checked by every process before any starts, so that all of them stop.
        raise MissingDependencyError("--wandb-project needs W&B: pip install 'typedrl[wandb]'")
    fabric = Fabric(
        accelerator=args.accelerator,
        devices=args.devices,
        strategy="ddp" if args.devices > 1 else "auto",
    )
    fabric.launch()
    run_dir = args.run_dir or Path("runs") / (
        args.env_id.replace("/", "-") + time.strftime("-%Y%m%d-%H%M%S")
    )
    # Built before any env (nothing to close if W&B is missing); rank 0 logs: the
    # default loggers (CSV, TensorBoard when installed) plus W&B if asked.
    loggers = (
        build_loggers(run_dir, wandb_project=args.wandb_project, wandb_run_name=run_dir.name)
        if args.wandb_project is not None and fabric.is_global_zero
        else None
    )
    vectorization: Literal["sync", "async"] = (
        "async"
        if args.vectorization == "async" and not args.env_id.startswith("typedrl/")
        else "sync"
    )
    # The trainer resets both envs with these same derived seeds: the construction
    # seeds are the run's, never overridden by other values.
    rank = fabric.global_rank
    env = make(
        args.env_id,
        num_envs=num_envs,
        seed=derive_seed(args.seed, "env", rank=rank),
        device=fabric.device,
        vectorization=vectorization,
    )
    eval_env = make(
        args.env_id,
        num_envs=min(num_envs, 8),
        seed=derive_seed(args.seed, "eval_env", rank=rank),
        device=fabric.device,
        vectorization=vectorization,
    )
    trainer_type = DifferentiableTrainer if args.algo in ("apg", "shac") else PPOAgent
    agent = trainer_type(
        env=env,
        config=config,
        fabric=fabric,
        eval_env=eval_env,
        options=RunOptions(
            run_dir=run_dir,
            env_id=args.env_id,
            loggers=loggers,
            eval_every_steps=args.eval_every,
            eval_episodes=args.eval_episodes,
            checkpoint_every_iterations=args.checkpoint_every,
            progress=not args.no_progress,
        ),
    )
    try:
        if args.resume is not None:
            agent.load(args.resume)
        result = agent.fit()
    finally:
        env.close()
        eval_env.close()
    if fabric.is_global_zero:
        metrics = result.metrics
        print(f"run directory   {run_dir}")
        print(f"env steps       {result.env_steps:,}")
        print(f"iterations      {result.iterations:,}")
        print(f"wall time       {result.wall_seconds:,.1f} s")
        if "eval/score" in metrics:
            print(f"eval score      {metrics['eval/score']:.2f}")
        if result.best_score is not None:
            print(f"best score      {result.best_score:.2f}")
        print(f"checkpoints     {run_dir / 'checkpoints'}")
        if result.stopped_by_signal:
            last = run_dir / "checkpoints" / "last.ckpt"
            again = f"typedrl train {args.env_id} --algo {args.algo}"
            print(f"stopped by a signal; resume with: {again} --resume {last}")
    return 0
