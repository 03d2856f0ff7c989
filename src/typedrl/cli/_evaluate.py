"""``typedrl evaluate``: score a checkpoint's deterministic policy on an env."""

import argparse
import json
from pathlib import Path

from typedrl.errors import ConfigError

__all__ = ["add_evaluate_parser", "run_evaluate"]


def add_evaluate_parser(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Add the ``evaluate`` subcommand."""
    evaluate = commands.add_parser(
        "evaluate", help="evaluate a checkpoint (PPO, APG or SHAC) with deterministic actions"
    )
    evaluate.add_argument("checkpoint", type=Path)
    evaluate.add_argument(
        "env_id",
        nargs="?",
        default=None,
        help="the env to score on (default: the env the checkpoint was trained on)",
    )
    evaluate.add_argument("--episodes", type=int, default=32)
    evaluate.add_argument("--num-envs", type=int, default=8)
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.set_defaults(handler=run_evaluate)


def run_evaluate(args: argparse.Namespace) -> int:
    """Load a checkpoint's policy and evaluate it; print the metrics as JSON."""
    import torch  # noqa: PLC0415

    from typedrl.agents import PPOAgent, PPOConfig  # noqa: PLC0415
    from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig  # noqa: PLC0415
    from typedrl.checkpoint import load_checkpoint, load_into  # noqa: PLC0415
    from typedrl.envs import make  # noqa: PLC0415
    from typedrl.evaluation import EpisodeEvaluator  # noqa: PLC0415
    from typedrl.protocols import SupportsObservationNormalizeMask  # noqa: PLC0415

    checkpoint = load_checkpoint(args.checkpoint)
    env_id = args.env_id if args.env_id is not None else checkpoint.env_id
    if env_id is None:
        raise ConfigError(
            f"{args.checkpoint} does not record the env it was trained on (it was saved "
            "without RunOptions.env_id); name the env: typedrl evaluate CHECKPOINT ENV_ID"
        )
    env = make(env_id, num_envs=args.num_envs, seed=args.seed)
    try:
        # The observation normalisers are part of the model and of its saved state.
        model: torch.nn.Module
        if checkpoint.kind == PPOAgent.kind:
            model = PPOAgent.build_policy(
                PPOConfig.from_dict(checkpoint.config),
                env.single_observation_space,
                env.single_action_space,
            )
        else:
            model = DifferentiableTrainer.build_policy(
                DifferentiableTrainerConfig.from_dict(checkpoint.config),
                env.single_observation_space,
                env.single_action_space,
                observation_normalize_mask=(
                    env.observation_normalize_mask
                    if isinstance(env, SupportsObservationNormalizeMask)
                    else None
                ),
            )
        load_into(model, checkpoint.modules["policy"], name="policy", path=args.checkpoint)
        evaluator = EpisodeEvaluator(env, num_episodes=args.episodes, seed=args.seed)
        with torch.no_grad():
            result = evaluator.evaluate(model)
    finally:
        env.close()
    report = {"env_id": env_id, "score": result.score, "episodes": result.num_items}
    print(json.dumps({**report, **result.metrics}))
    return 0
