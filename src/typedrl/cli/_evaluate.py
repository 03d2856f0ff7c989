"""``typedrl evaluate``: score a checkpoint's deterministic policy on an env."""

import argparse
import contextlib
import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typedrl.cli._parser import (
    Commands,
    add_checkpoint_argument,
    add_command,
    add_env_kwargs_argument,
)
from typedrl.errors import ConfigError

if TYPE_CHECKING:
    from typedrl.restore import CheckpointLocation, RestoredPolicy, TrainedEnv

__all__ = ["EVAL_ROWS", "add_evaluate_parser", "rows_for", "run_evaluate"]


def add_evaluate_parser(commands: Commands) -> None:
    """Add the ``evaluate`` subcommand."""
    evaluate = add_command(commands, "evaluate", handler=run_evaluate)
    add_checkpoint_argument(evaluate)
    evaluate.add_argument(
        "env_id",
        nargs="?",
        default=None,
        help="the env to score on (default: the env the checkpoint was trained on, with the "
        "env options of its run folder's config.yaml)",
    )
    evaluate.add_argument("--episodes", type=int, default=32, help="episodes to score")
    evaluate.add_argument(
        "--num-envs",
        type=int,
        default=8,
        help="env rows (lowered to a divisor of --episodes, so every row plays as many)",
    )
    evaluate.add_argument("--seed", type=int, default=0, help="reset seed")
    evaluate.add_argument(
        "--json",
        type=Path,
        dest="json_path",
        metavar="PATH",
        help="where to write the statistics (default: RUN_DIR/eval.json, or beside the file)",
    )
    add_env_kwargs_argument(
        evaluate,
        help="keyword arguments of the env's constructor, over the run's own (repeatable)",
    )
    evaluate.add_argument(
        "--video", type=Path, metavar="PATH", help="also record deterministic episodes as an MP4"
    )
    evaluate.add_argument(
        "--video-episodes", type=int, default=1, help="episodes in the video (default 1)"
    )


EVAL_ROWS = 8
"""At most this many rows in the evaluation env of a training run (``typedrl train``), which
``typedrl evaluate`` rebuilds to replay what training recorded."""


def rows_for(episodes: int, num_envs: int) -> int:
    """The largest number of rows up to ``num_envs`` that divides ``episodes``."""
    return max(rows for rows in range(1, min(episodes, num_envs) + 1) if episodes % rows == 0)


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        raise ConfigError(f"typedrl evaluate {name} must be a positive int, got {value}")


def _check_video(path: Path, spec: "TrainedEnv") -> None:
    """Fail before any episode is played if the video cannot be written.

    A built-in env is built with one row, without stepping it, to ask whether
    it renders; Gymnasium envs are checked by
    :func:`~typedrl.recording.record_video` itself.
    """
    from typedrl.envs._make import BUILTIN_PREFIX  # noqa: PLC0415 - keep `typedrl --help` fast
    from typedrl.envs.builtin import BaseTorchVecEnv  # noqa: PLC0415
    from typedrl.recording import require_video_writer  # noqa: PLC0415

    if path.suffix.lower() != ".mp4":
        raise ConfigError(f"--video writes an MP4 file; expected a path ending in .mp4, got {path}")
    require_video_writer()
    if spec.env_id.startswith(BUILTIN_PREFIX):
        env = spec.make(num_envs=1, seed=0)
        env.close()
        if not isinstance(env, BaseTorchVecEnv) or not env.renders:
            raise ConfigError(
                f"--video needs an env that renders frames; the built-in env {spec.env_id!r} "
                f"({type(env).__name__}) does not render. Record a built-in torch env "
                "(for example typedrl/Pendulum-v0) or a Gymnasium env that renders rgb_array "
                "frames"
            )


def _table(metrics: dict[str, float], episodes: int) -> str:
    """Return and length statistics as a small aligned table."""
    columns = ("mean", "std", "min", "max")
    lines = [f"{'':<8}" + "".join(f"{name:>12}" for name in columns)]
    for row in ("return", "length"):
        cells = "".join(f"{metrics[f'{row}_{name}']:>12.2f}" for name in columns)
        lines.append(f"{row:<8}{cells}")
    if "success_rate" in metrics:
        lines.append(f"{'success':<8}{metrics['success_rate']:>12.2%}")
    lines.append(f"{'episodes':<8}{episodes:>12d}")
    return "\n".join(lines)


def _env_settings(spec: "TrainedEnv") -> str:
    """The env options the evaluation applies besides the id, as one line ("" if none)."""
    parts = []
    if spec.env_kwargs:
        parts.append(f"env_kwargs={dict(spec.env_kwargs)}")
    if spec.wrappers:
        parts.append(f"wrappers={list(spec.wrappers)}")
    if spec.clip_actions is not None:
        parts.append(f"clip_actions={spec.clip_actions}")
    return ", ".join(parts)


def _print_env_options(spec: "TrainedEnv", trained: "TrainedEnv", *, from_flags: bool) -> None:
    """Print the env options the evaluation applies and where they came from, if any."""
    settings = _env_settings(spec)
    if settings:
        sources = [str(spec.config_file)] if _env_settings(trained) else []
        sources += ["--env-kwargs"] if from_flags else []
        print(f"env options {settings} (from {' and '.join(sources)})")


def _training_record(location: "CheckpointLocation") -> str | None:
    """What training recorded for a run's ``best.ckpt``, and the flags that replay it.

    ``None`` for other checkpoints, for runs without a ``summary.json`` or a
    best score, and for multi-process runs (their evaluation envs are not
    one seeded env). The trainer's evaluation env has
    ``rows_for(eval_episodes, min(num_envs, 8))`` rows and the run seed's
    ``"eval_env"`` stream of rank 0.
    """
    from typedrl.runs import CONFIG_FILE, read_run_config  # noqa: PLC0415
    from typedrl.seeding import derive_seed  # noqa: PLC0415
    from typedrl.training import SUMMARY_FILE  # noqa: PLC0415

    run_dir = location.run_dir
    if run_dir is None or location.path.name != "best.ckpt":
        return None
    summary_file, config_file = run_dir / SUMMARY_FILE, run_dir / CONFIG_FILE
    if not summary_file.is_file() or not config_file.is_file():
        return None
    recorded = json.loads(summary_file.read_text()).get("best_eval_return_mean")
    document = read_run_config(config_file)
    run = document.get("run") or {}
    # A run of several ranks evaluated on every rank's env: no one command replays that.
    ranks = (run.get("devices") or 1) * (run.get("num_nodes") or 1)
    if recorded is None or ranks != 1:
        return None
    episodes = run.get("eval_episodes", 16)
    rows = rows_for(episodes, min(int(document.get("num_envs", EVAL_ROWS)), EVAL_ROWS))
    seed = derive_seed(int(document.get("seed", 0)), "eval_env", rank=0)
    return (
        f"training    best.ckpt scored return {recorded:.2f} over {episodes} episodes "
        f"(--episodes {episodes} --num-envs {rows} --seed {seed} replays that evaluation)"
    )


def run_evaluate(args: argparse.Namespace) -> int:
    """Evaluate a run or checkpoint (PPO, APG or SHAC) with deterministic actions.

    Play episodes with the deterministic policy of a run folder (its best.ckpt, else
    last.ckpt) or of a checkpoint file, print return and length statistics, write them as
    JSON and, with --video, record an MP4.
    """
    import torch  # noqa: PLC0415 - keep `typedrl --help` fast

    from typedrl.checkpoint import load_checkpoint  # noqa: PLC0415
    from typedrl.cli._config import parse_env_kwargs  # noqa: PLC0415
    from typedrl.evaluation import EpisodeEvaluator  # noqa: PLC0415
    from typedrl.recording import EpisodeRecorder  # noqa: PLC0415
    from typedrl.restore import (  # noqa: PLC0415
        algorithm_of,
        locate_checkpoint,
        restore_policy,
        trained_env,
    )

    _check_positive("--episodes", args.episodes)
    _check_positive("--num-envs", args.num_envs)
    _check_positive("--video-episodes", args.video_episodes)
    location = locate_checkpoint(args.checkpoint)
    checkpoint = load_checkpoint(location.path)
    if args.env_id is None and checkpoint.env_id is None:
        raise ConfigError(
            f"{location.path} does not record the env it was trained on (it was saved "
            "without RunOptions.env_id); name the env: typedrl evaluate CHECKPOINT ENV_ID"
        )
    algorithm = algorithm_of(checkpoint, path=location.path)
    trained = trained_env(checkpoint, location, env_id=args.env_id)
    # --env-kwargs go over the run's own.
    spec = dataclasses.replace(
        trained, env_kwargs={**trained.env_kwargs, **parse_env_kwargs(args.env_kwargs)}
    )
    env_id = spec.env_id
    if args.video is not None:
        _check_video(args.video, spec)
    json_path: Path = args.json_path or (
        location.run_dir / "eval.json"
        if location.choice != "file" and location.run_dir is not None
        else location.path.with_name(f"{location.path.stem}.eval.json")
    )
    rows = rows_for(args.episodes, args.num_envs)
    which = {"best": " (the run's best)", "last": " (the run's last; it has no best)"}
    print(f"checkpoint  {location.path}{which.get(location.choice, '')}")
    print(f"env         {env_id} ({algorithm}, {rows} rows, seed {args.seed})")
    _print_env_options(spec, trained, from_flags=bool(args.env_kwargs))
    recorded = _training_record(location)
    if recorded is not None:
        print(recorded)
    env = EpisodeRecorder(spec.make(num_envs=rows, seed=args.seed))
    try:
        model = restore_policy(checkpoint, env, path=location.path)
        evaluator = EpisodeEvaluator(env, num_episodes=args.episodes, seed=args.seed)
        with torch.no_grad():
            result = evaluator.evaluate(model)
    finally:
        env.close()
    lengths = env.first_lengths(args.episodes // rows)
    metrics: dict[str, float] = {
        **result.metrics,
        "length_std": float(lengths.std(unbiased=False)),
        "length_min": float(lengths.min()),
        "length_max": float(lengths.max()),
    }
    report: dict[str, Any] = {
        "checkpoint": str(location.path),
        "kind": checkpoint.kind,
        "algorithm": algorithm,
        "env_id": env_id,
        "seed": args.seed,
        "episodes": result.num_items,
        "score": result.score,
        **{name: metrics[name] for name in sorted(metrics)},
    }
    print()
    print(_table(metrics, result.num_items))
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n")
    print(f"\nwrote       {json_path}")
    if args.video is not None:
        _record_video(model, spec, args)
    return 0


@contextlib.contextmanager
def _headless_sdl() -> Iterator[None]:
    """``SDL_VIDEODRIVER=dummy`` unless set, for the recording only; restored afterwards.

    rgb_array frames need no window; without it SDL (pygame's renders) complains about
    the display.
    """
    if "SDL_VIDEODRIVER" in os.environ:
        yield
        return
    os.environ["SDL_VIDEODRIVER"] = "dummy"
    try:
        yield
    finally:
        os.environ.pop("SDL_VIDEODRIVER", None)


def _record_video(model: "RestoredPolicy", spec: "TrainedEnv", args: argparse.Namespace) -> None:
    """Record ``--video-episodes`` deterministic episodes of ``model`` to ``--video``."""
    from typedrl.recording import record_video  # noqa: PLC0415 - keep `typedrl --help` fast

    with _headless_sdl():
        video = record_video(
            model,
            spec.env_id,
            path=args.video,
            episodes=args.video_episodes,
            seed=args.seed,
            env_kwargs=spec.env_kwargs,
            wrappers=spec.wrappers,
            clip_actions=spec.clip_actions,
        )
    print(f"wrote       {video.path} ({video.frames} frames, {video.seconds:.1f} s)")
