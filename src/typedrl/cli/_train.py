"""``typedrl train``: PPO, APG, SHAC or a registered algorithm from the command line."""

import argparse
import dataclasses
import importlib.util
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from typedrl.cli._config import (
    DEFAULT_ENV_IDS,
    CommandLayer,
    ResolvedRun,
    parse_env_kwargs,
    resolve,
)
from typedrl.cli._parser import (
    Commands,
    add_command,
    add_debug_flag,
    add_env_arguments,
    add_policy_arguments,
)
from typedrl.errors import ConfigError
from typedrl.runs import CONFIG_FILE, dump_run_config, write_run_config

if TYPE_CHECKING:
    import torch
    from lightning_fabric import Fabric

    from typedrl.cli._local_ranks import LocalRanks
    from typedrl.cli._run_folder import RunStart
    from typedrl.protocols import VecEnv
    from typedrl.training import AbstractTrainer, RunOptions, RunSummary

CURVE_FILE = "curve.png"
"""The learning curve ``typedrl train`` draws into the run folder (with the plot extra)."""


__all__ = ["add_train_parser", "default_run_dir", "run_train"]


def add_train_parser(commands: Commands) -> None:
    """Add the ``train`` subcommand."""
    train = add_command(commands, "train", handler=run_train)
    train.add_argument(
        "env_id",
        nargs="?",
        default=None,
        metavar="ENV",
        help=(
            "a Gymnasium id, a built-in id or module:callable, a factory of envs (default: "
            + ", ".join(f"{env} for {algo}" for algo, env in DEFAULT_ENV_IDS.items())
            + ")"
        ),
    )
    train.add_argument(
        "--algo",
        metavar="NAME",
        help="ppo (default), apg (analytic policy gradients), shac (short-horizon "
        "actor-critic), ahac (adaptive-horizon actor-critic), or an algorithm a package "
        "registers (typedrl.algorithms)",
    )
    train.add_argument("--num-envs", type=int, help="env rows per rank (default: tuned file or 8)")
    train.add_argument("--total-timesteps", type=int, help="budget in env steps over all ranks")
    train.add_argument("--seed", type=int, help="the run's seed (default 0)")
    train.add_argument(
        "--config", type=Path, help="a YAML file: a run's config.yaml or part of one"
    )
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a config field (JSON values), e.g. --set learning_rate=3e-4, "
        "--set algorithm.actor.learning_rate=2e-3",
    )
    train.add_argument("--run-dir", type=Path, help="default: runs/<algo>-<env>-<YYYYmmdd-HHMMSS>")
    train.add_argument(
        "--resume",
        metavar="RUN_DIR|CKPT|auto",
        help="continue a run folder (its config.yaml and last.ckpt) or a checkpoint file; "
        "auto: continue the run in --run-dir when it has a checkpoint, else start it there "
        "(one command line for the first start and every restart)",
    )
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run in --run-dir (its checkpoints, metrics and summary) with a new one",
    )
    train.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved config (config.yaml's format) and exit",
    )
    train.add_argument("--accelerator", choices=["cpu", "cuda", "auto"], help="default: cpu")
    train.add_argument(
        "--devices",
        type=int,
        help="processes per node (DDP when > 1 in all; default: as torchrun or srun launched, "
        "else 1)",
    )
    train.add_argument(
        "--num-nodes",
        type=int,
        help="nodes (default: as torchrun or srun launched, else 1); checked against the launch",
    )
    train.add_argument(
        "--vectorization", choices=["sync", "async"], help="Gymnasium envs (default: sync)"
    )
    add_env_arguments(train)
    add_policy_arguments(train)
    train.add_argument(
        "--clip-actions",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="clip Box actions to the action space's bounds before the env sees them "
        "(default: the env's own rule; the built-in envs clip)",
    )
    train.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="PPO: compile the minibatch update with torch.compile (--set compile=true; "
        "default: eager)",
    )
    train.add_argument("--eval-every", type=int, help="evaluate every this many env steps")
    train.add_argument("--eval-episodes", type=int, help="episodes per evaluation (default 16)")
    train.add_argument("--checkpoint-every", type=int, help="write epoch_<n>.ckpt every n epochs")
    train.add_argument(
        "--keep-checkpoints", type=int, metavar="N", help="keep only the newest N epoch_<n>.ckpt"
    )
    train.add_argument(
        "--wandb-project", help="also log to this Weights & Biases project (needs wandb)"
    )
    train.add_argument("--no-progress", action="store_true", help="hide the progress display")
    train.add_argument(
        "--threads",
        type=int,
        help=(
            "torch intra-op threads per process (default: 1 on the CPU, where small "
            "networks gain nothing from more and slow down badly when a core is busy; "
            "torch's own default on a GPU)"
        ),
    )
    add_debug_flag(train, subcommand=True)


_RUN_FLAGS = (
    ("eval_every", "eval_every"),
    ("eval_episodes", "eval_episodes"),
    ("checkpoint_every", "checkpoint_every"),
    ("keep_checkpoints", "keep_checkpoints"),
    ("vectorization", "vectorization"),
    ("accelerator", "accelerator"),
    ("devices", "devices"),
    ("num_nodes", "num_nodes"),
    ("clip_actions", "clip_actions"),
    ("wandb_project", "wandb_project"),
)


def _command_layer(args: argparse.Namespace) -> CommandLayer:
    run: dict[str, Any] = {
        key: getattr(args, name) for key, name in _RUN_FLAGS if getattr(args, name) is not None
    }
    if args.env_kwargs:
        run["env_kwargs"] = parse_env_kwargs(args.env_kwargs)
    if args.wrapper:
        run["wrappers"] = list(args.wrapper)
    return CommandLayer(
        algo=args.algo,
        env_id=args.env_id,
        num_envs=args.num_envs,
        seed=args.seed,
        total_timesteps=args.total_timesteps,
        compile=args.compile,
        overrides=tuple(args.set),
        run=run,
        policy=args.policy,
        policy_kwargs=parse_env_kwargs(args.policy_kwargs, flag="--policy-kwargs"),
    )


def default_run_dir(algo: str, env_id: str, stamp: str) -> Path:
    """``runs/<algo>-<env>-<stamp>``, with ``"/"`` and ``":"`` of the env replaced by ``"-"``.

    Example:
        >>> default_run_dir("ppo", "typedrl/CartPole-v0", "20260101-120000").as_posix()
        'runs/ppo-typedrl-CartPole-v0-20260101-120000'
    """
    return Path("runs") / f"{algo}-{env_id.replace('/', '-').replace(':', '-')}-{stamp}"


AUTO: Final = "auto"
"""``--resume auto``: continue the run in ``--run-dir`` when it has a checkpoint, else start it."""


def _resume_option(args: argparse.Namespace) -> tuple[Path | None, bool]:
    """What ``--resume`` continues once ``auto`` is decided, and whether a new run replaces files.

    ``--resume auto`` continues ``--run-dir`` when it holds a checkpoint that
    loads; otherwise it starts the run there, replacing what an earlier start
    that saved no checkpoint left (as ``--overwrite`` does).
    """
    # Read as text: a folder named auto is ./auto, which a Path would shorten to auto.
    given: str | None = args.resume
    if given != AUTO:
        return (None if given is None else Path(given)), bool(args.overwrite)
    if args.run_dir is None:
        raise ConfigError(
            "--resume auto continues the run in --run-dir, and none was given; add "
            "--run-dir DIR (the same on every start and restart)"
        )
    if args.overwrite:
        raise ConfigError(
            "--resume auto continues the run in --run-dir when it has a checkpoint, and "
            "--overwrite would delete it; pass one of them"
        )
    from typedrl.cli._run_folder import find_resume_checkpoint  # noqa: PLC0415 - imports torch

    run_dir: Path = args.run_dir
    if run_dir.is_dir() and find_resume_checkpoint(run_dir) is not None:
        return run_dir, False
    return None, True


def _resume_target(
    args: argparse.Namespace, target: Path | None
) -> tuple[Path | None, Path | None, str | None]:
    """``(run folder being resumed, checkpoint to load, why that one)``, each or None."""
    if target is None:
        return None, None, None
    if target.is_dir():
        if not (target / CONFIG_FILE).is_file():
            raise ConfigError(
                f"--resume {target}: not a run folder (no {CONFIG_FILE}); pass a run folder "
                "that typedrl train wrote, or a checkpoint file"
            )
        if args.run_dir is not None and args.run_dir.resolve() != target.resolve():
            raise ConfigError(
                f"--resume {target} continues in that folder; --run-dir {args.run_dir} "
                "names another (leave it out)"
            )
        if args.overwrite:
            raise ConfigError(
                f"--resume {target} continues that run and --overwrite would delete it; "
                "pass one of them"
            )
        from typedrl.cli._run_folder import resume_checkpoint  # noqa: PLC0415 - imports torch

        checkpoint, note = resume_checkpoint(target)
        return target, checkpoint, note
    if not target.is_file():
        raise ConfigError(f"--resume {target}: no such run folder or checkpoint file")
    return None, target, None


def _check_env_names(resolved: ResolvedRun) -> None:
    """Import the named factory and wrappers now: a typo fails before anything is built."""
    from typedrl.envs._factory import resolve_env_factory, resolve_wrapper  # noqa: PLC0415
    from typedrl.envs._make import BUILTIN_PREFIX, check_gymnasium_id  # noqa: PLC0415

    factory = resolve_env_factory(resolved.env_id) if ":" in resolved.env_id else None
    if factory is None and not resolved.env_id.startswith((BUILTIN_PREFIX, "Isaac-")):
        check_gymnasium_id(resolved.env_id)
    for name in resolved.run.wrappers:
        resolve_wrapper(name)


def _check_differentiable(resolved: ResolvedRun) -> None:
    """APG, SHAC (any algorithm that needs a differentiable env): refuse a Gymnasium id early."""
    from typedrl.envs.builtin._registration import (  # noqa: PLC0415
        BUILTIN_ENV_IDS,
        NEWTON_ENV_IDS,
    )

    # Only a factory of your own can return a differentiable env that is not built in.
    shipped = BUILTIN_ENV_IDS + NEWTON_ENV_IDS
    if not resolved.spec.differentiable or ":" in resolved.env_id or resolved.env_id in shipped:
        return
    raise ConfigError(
        f"--algo {resolved.algo} trains through a differentiable env, and {resolved.env_id} "
        f"is not one; the built-in envs are: {', '.join(BUILTIN_ENV_IDS)}; with the newton "
        f"extra: {', '.join(NEWTON_ENV_IDS)} (or name a module:callable that returns a "
        "DifferentiableVecEnv)"
    )


def run_train(args: argparse.Namespace) -> int:
    """Train PPO (default), APG, SHAC, AHAC or a registered algorithm on an env.

    Train PPO or, with --algo apg/shac/ahac, analytic policy gradients or the short- or
    adaptive-horizon actor-critic through a differentiable env, or any algorithm a package
    registers in typedrl.algorithms; --policy trains a policy of your own. Values come from
    the config dataclass's defaults, then the tuned file shipped for (algo, env), then
    --config, then the flags and --set (any field, dotted for nested ones:
    algorithm.<field>). Everything goes to a run folder: config.yaml, metrics.csv,
    checkpoints/, summary.json.
    """
    resume, overwrite = _resume_option(args)
    resumed_dir, checkpoint, note = _resume_target(args, resume)
    argv = list(getattr(args, "command_line", ["typedrl", "train"]))
    resolved = resolve(
        _command_layer(args), config_file=args.config, argv=argv, resume_from=resumed_dir
    )
    if args.print_config:
        print(dump_run_config(resolved.to_document()), end="")
        return 0
    _check_env_names(resolved)
    _check_differentiable(resolved)
    if resolved.policy is not None:
        # Imported now: a typo fails before anything is built.
        resolved.policy.resolve()
    if resolved.run.wandb_project is not None:
        from typedrl.logging import require_wandb  # noqa: PLC0415 - keep start-up light

        # Checked by every process before any starts, so that all of them stop.
        require_wandb("--wandb-project")
    # Each rank stamps its own default folder; every rank then takes rank 0's
    # (_agree_on_start), so a DDP run has one folder whenever its ranks started.
    run_dir = (
        resumed_dir or args.run_dir or default_run_dir(resolved.algo, resolved.env_id, _run_stamp())
    )
    start = _run_start(
        args,
        resolved,
        run_dir=run_dir,
        checkpoint=checkpoint,
        note=note,
        in_folder=resumed_dir is not None,
        overwrite=overwrite,
    )
    if start is None:
        return 0
    return _train_with_threads(args, resolved, start=start, checkpoint=checkpoint)


def _run_stamp() -> str:
    """The default run folder's time stamp: this process's local time, to the second."""
    return time.strftime("%Y%m%d-%H%M%S")


def _train_with_threads(
    args: argparse.Namespace, resolved: ResolvedRun, *, start: "RunStart", checkpoint: Path | None
) -> int:
    """Train with the run's torch thread count, restoring the process's afterwards."""
    import torch  # noqa: PLC0415 - keep `typedrl --help` fast

    previous = torch.get_num_threads()
    threads = _threads(args.threads, resolved.run.accelerator)
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return _train(
            resolved,
            start=start,
            checkpoint=checkpoint,
            progress=not args.no_progress,
            threads=threads,
        )
    finally:
        # The command may run inside a longer-lived process (tests, notebooks).
        torch.set_num_threads(previous)


def _run_start(
    args: argparse.Namespace,
    resolved: ResolvedRun,
    *,
    run_dir: Path,
    checkpoint: Path | None,
    note: str | None,
    in_folder: bool,
    overwrite: bool,
) -> "RunStart | None":
    """How the run treats its folder; ``None`` when a resume has nothing left to train.

    A resume's checkpoint is read first: its config is checked (with advice
    that works for the command given) and, when it already spent the budget,
    the command says so and stops without touching the folder. ``in_folder``:
    the resume continues a run folder (``--resume RUN_DIR`` or ``auto``).
    """
    from typedrl.cli._run_folder import (  # noqa: PLC0415 - imports torch
        RunStart,
        budget_reached,
        check_saved_config,
        checkpoint_counters,
        load_resume_point,
    )
    from typedrl.training._fabric import read_launch  # noqa: PLC0415

    flag = f"--run-dir {run_dir}" if args.run_dir is not None else f"the run folder {run_dir}"
    if checkpoint is None:
        return RunStart(run_dir=run_dir, flag=flag, overwrite=overwrite)
    saved = load_resume_point(resolved, checkpoint)
    continues = in_folder or checkpoint.resolve().parent == run_dir.resolve() / "checkpoints"
    check_saved_config(resolved, saved, checkpoint, run_dir=run_dir if in_folder else None)
    if continues and overwrite:
        raise ConfigError(
            f"--resume {checkpoint} continues the run in {run_dir}, and --overwrite would "
            "delete it; pass one of them"
        )
    reached = budget_reached(resolved, saved)
    if reached is not None:
        if read_launch().global_rank == 0:
            print(reached)
        return None
    return RunStart(
        run_dir=run_dir,
        flag=flag,
        overwrite=overwrite,
        continued_at=checkpoint_counters(saved)[1] if continues else None,
        notes=(note,) if note is not None else (),
    )


def _threads(threads: int | None, accelerator: str) -> int | None:
    """Torch's intra-op threads for the run: ``threads``, else 1 when training on the CPU."""
    import torch  # noqa: PLC0415 - keep `typedrl --help` fast

    if threads is not None and threads < 1:
        raise ConfigError(f"--threads must be a positive int, got {threads}")
    on_cpu = accelerator == "cpu" or (accelerator == "auto" and not torch.cuda.is_available())
    return threads if threads is not None else (1 if on_cpu else None)


def _train(
    resolved: ResolvedRun,
    *,
    start: "RunStart",
    checkpoint: Path | None,
    progress: bool,
    threads: int | None,
) -> int:
    from typedrl.cli._local_ranks import LocalRanks  # noqa: PLC0415
    from typedrl.training._fabric import check_accelerator, read_launch  # noqa: PLC0415

    run = resolved.run
    launch = read_launch()
    # Unset, both are the launch's; config.yaml records what the run ran with.
    devices = run.devices if run.devices is not None else launch.processes_per_node
    num_nodes = run.num_nodes if run.num_nodes is not None else launch.num_nodes
    check_accelerator(run.accelerator, devices)
    # Without a launcher, rank 0 starts the other ranks itself and keeps them.
    with LocalRanks.start(devices, launcher=launch.launcher, num_nodes=num_nodes) as ranks:
        status = _train_on_ranks(
            resolved,
            ranks,
            devices=devices,
            num_nodes=num_nodes,
            start=start,
            checkpoint=checkpoint,
            progress=progress,
            threads=threads,
        )
        # Rank 0 waits for the ranks it started; a failure after the run makes the status 1.
        return max(status, ranks.wait())


def _train_on_ranks(
    resolved: ResolvedRun,
    ranks: "LocalRanks",
    *,
    devices: int,
    num_nodes: int,
    start: "RunStart",
    checkpoint: Path | None,
    progress: bool,
    threads: int | None,
) -> int:
    import torch  # noqa: PLC0415 - keep `typedrl --help` fast

    from typedrl.cli._run_folder import (  # noqa: PLC0415
        prepare_run_dir,
        remove_failed_start,
        unlock_run_dir,
    )
    from typedrl.training._fabric import fabric_from_environment  # noqa: PLC0415

    run = resolved.run
    fabric = fabric_from_environment(
        accelerator=run.accelerator,
        devices=devices,
        num_nodes=num_nodes,
        cluster_environment=ranks.environment,
    )
    if threads is not None:
        # Lightning's DDP launch sets cpu_count // processes per node threads when
        # OMP_NUM_THREADS is unset: the run's count holds on every rank and every launch.
        torch.set_num_threads(threads)
    resolved = dataclasses.replace(
        resolved, run=dataclasses.replace(run, devices=devices, num_nodes=num_nodes)
    )
    start = _agree_on_start(fabric, start, checkpoint)
    created = prepare_run_dir(start, fabric)
    try:
        return _train_launched(
            resolved, fabric, run_dir=start.run_dir, checkpoint=checkpoint, progress=progress
        )
    except BaseException:
        # A run that fails before its first iteration leaves no folder holding only config.yaml.
        if fabric.is_global_zero and start.continued_at is None:
            unlock_run_dir(start.run_dir)
            remove_failed_start(start.run_dir, created=created)
        raise
    finally:
        if fabric.is_global_zero:
            unlock_run_dir(start.run_dir)


def _agree_on_start(fabric: "Fabric", start: "RunStart", checkpoint: Path | None) -> "RunStart":
    """Every rank takes rank 0's run folder, and all must have found the same checkpoint.

    Each process decided what to resume before the ranks could talk: nodes
    that see the run folder differently (no shared filesystem, a folder being
    written) would train different runs in one job, so any disagreement stops
    every rank. The default folder's time stamp is rank 0's.

    Raises:
        ConfigError: On every rank, when the ranks found different checkpoints.
    """
    from typedrl.distributed import FabricDistributed  # noqa: PLC0415

    found = None if checkpoint is None else str(checkpoint)
    gathered = FabricDistributed(fabric).all_gather_object((str(start.run_dir), found))
    run_dir, first = gathered[0]
    if any(other != first for _, other in gathered):
        seen = ", ".join(
            f"rank {rank}: {ckpt or 'none'}" for rank, (_, ckpt) in enumerate(gathered)
        )
        raise ConfigError(
            f"the ranks found different checkpoints to resume ({seen}); every node must see "
            f"the run folder {run_dir} as rank 0 does (a filesystem all nodes share)"
        )
    return dataclasses.replace(start, run_dir=Path(run_dir))


def _train_launched(
    resolved: ResolvedRun,
    fabric: "Fabric",
    *,
    run_dir: Path,
    checkpoint: Path | None,
    progress: bool,
) -> int:
    """Train on this launched rank into ``run_dir``, which rank 0 got ready."""
    from typedrl.cli._evaluate import EVAL_ROWS, rows_for  # noqa: PLC0415
    from typedrl.cli._memory import check_rollout_memory  # noqa: PLC0415
    from typedrl.envs._isaaclab import holds_one_simulation  # noqa: PLC0415
    from typedrl.logging import build_loggers  # noqa: PLC0415
    from typedrl.seeding import derive_seed  # noqa: PLC0415
    from typedrl.training import (  # noqa: PLC0415
        SUMMARY_FILE,
        RunOptions,
        leave_process_group,
    )

    run = resolved.run
    check_rollout_memory(resolved, device=fabric.device)
    # Such an env cannot have an evaluation env beside it: the final policy is scored on a
    # fresh one after the training env is closed, and nothing is evaluated during training.
    one_simulation = holds_one_simulation(resolved.env_id)
    if fabric.is_global_zero:
        write_run_config(run_dir, resolved.to_document())
        if one_simulation:
            print(_evaluation_waits_note(resolved))
    # Rank 0 logs: the default loggers (CSV, TensorBoard when installed) plus W&B if asked.
    loggers = (
        build_loggers(run_dir, wandb_project=run.wandb_project, wandb_run_name=run_dir.name)
        if run.wandb_project is not None and fabric.is_global_zero
        else None
    )
    rank = fabric.global_rank

    def build_env(role: Literal["env", "eval_env"], num_envs: int) -> "VecEnv":
        return _build_env(resolved, role=role, num_envs=num_envs, rank=rank, device=fabric.device)

    # Every evaluation row plays as many episodes (typedrl evaluate's rule, so it can replay).
    eval_rows = rows_for(run.eval_episodes, min(resolved.num_envs, EVAL_ROWS))
    env = build_env("env", resolved.num_envs)
    eval_env: VecEnv | None = None
    if not one_simulation:
        try:
            eval_env = build_env("eval_env", eval_rows)
        except BaseException:
            env.close()
            raise
    options = RunOptions(
        run_dir=run_dir,
        env_id=resolved.env_id,
        loggers=loggers,
        eval_every_steps=None if one_simulation else run.eval_every,
        eval_episodes=run.eval_episodes,
        checkpoint_every_iterations=run.checkpoint_every,
        keep_checkpoints=run.keep_checkpoints,
        progress=progress,
    )
    try:
        agent = _build_trainer(resolved, env=env, fabric=fabric, eval_env=eval_env, options=options)
        _load_and_announce(agent, checkpoint, main=fabric.is_global_zero)
        agent.fit()
    finally:
        env.close()
        if eval_env is not None:
            eval_env.close()
    if fabric.is_global_zero:
        summary: RunSummary = json.loads((run_dir / SUMMARY_FILE).read_text())
        if one_simulation and not summary["stopped_by_signal"]:
            summary = _evaluate_after_training(
                agent,
                build_env("eval_env", eval_rows),
                summary,
                run_dir=run_dir,
                episodes=run.eval_episodes,
                seed=derive_seed(resolved.seed, "eval_env", rank=rank),
            )
        _print_summary(run_dir, summary)
        _plot_curve(run_dir)
    leave_process_group(fabric)
    return 0


_UPDATE_LINES: Final = {"eager": "eager", "compiled": "torch.compile"}
"""The start-of-run line's words for each update path (``summary.json``'s ``update``)."""


def _load_and_announce(agent: "AbstractTrainer", checkpoint: Path | None, *, main: bool) -> None:
    """Load the checkpoint a resume continues from; rank 0 then names the policy and the update.

    The config alone decides the update path (PPO's ``compile``), never what a cache holds.
    """
    if checkpoint is not None:
        agent.load(checkpoint)
    # Builds the policy (every rank: Fabric's setup is collective), as fit() would first.
    agent.setup()
    if main:
        from typedrl.policies import describe_policy  # noqa: PLC0415 - imports torch

        print(f"policy          {describe_policy(agent.policy)}", flush=True)
        print(f"update          {_UPDATE_LINES[agent.update_path]}", flush=True)


def _build_trainer(
    resolved: ResolvedRun,
    *,
    env: "VecEnv",
    fabric: "Fabric",
    eval_env: "VecEnv | None",
    options: "RunOptions",
) -> "AbstractTrainer":
    """The registered algorithm's trainer, with the run's policy factory when one is given.

    Raises:
        ConfigError: The trainer takes no ``policy_factory`` (``--policy`` given).
    """
    import inspect  # noqa: PLC0415

    trainer: Callable[..., AbstractTrainer] = resolved.spec.trainer
    extra: dict[str, Any] = {}
    if resolved.policy is not None:
        if "policy_factory" not in inspect.signature(trainer).parameters:
            raise ConfigError(
                f"--policy: the {resolved.algo} trainer ({resolved.spec.trainer.__name__}) "
                "takes no policy_factory; leave --policy out"
            )
        extra["policy_factory"] = resolved.policy
    return trainer(
        env=env,
        config=resolved.config,
        fabric=fabric,
        eval_env=eval_env,
        options=options,
        **extra,
    )


def _build_env(
    resolved: ResolvedRun,
    *,
    role: Literal["env", "eval_env"],
    num_envs: int,
    rank: int,
    device: "torch.device",
) -> "VecEnv":
    """This rank's training (``"env"``) or evaluation (``"eval_env"``) env of the run.

    The trainer resets each env with the seed derived here for its role.
    """
    from typedrl.envs import make  # noqa: PLC0415
    from typedrl.seeding import derive_seed  # noqa: PLC0415

    run = resolved.run
    # Built-in envs are torch-native: they batch themselves.
    vectorization = "sync" if resolved.env_id.startswith("typedrl/") else run.vectorization
    return make(
        resolved.env_id,
        num_envs=num_envs,
        seed=derive_seed(resolved.seed, role, rank=rank),
        device=device,
        vectorization=vectorization,
        wrappers=run.wrappers,
        clip_actions=run.clip_actions,
        env_kwargs=run.env_kwargs,
    )


def _evaluation_waits_note(resolved: ResolvedRun) -> str:
    """The line that says, before training, why the run is evaluated only at its end."""
    ignored = (
        f" (eval_every={resolved.run.eval_every} does not apply)"
        if resolved.run.eval_every is not None
        else ""
    )
    return (
        f"evaluation      at the end: {resolved.env_id} holds this process's one simulation, "
        f"so the final policy plays {resolved.run.eval_episodes} deterministic episodes on a "
        f"fresh env after the training env is closed{ignored}"
    )


def _evaluate_after_training(
    agent: "AbstractTrainer",
    eval_env: "VecEnv",
    summary: "RunSummary",
    *,
    run_dir: Path,
    episodes: int,
    seed: int,
) -> "RunSummary":
    """Score the final policy on ``eval_env`` (then closed) and record it in ``summary.json``.

    The evaluation is the one the trainer runs after its last iteration (an
    :class:`~typedrl.evaluation.EpisodeEvaluator`, seeded as the trainer seeds
    it), so the summary's ``final_eval_*`` fields mean what they mean for any
    other env.
    """
    from typedrl.evaluation import EpisodeEvaluator  # noqa: PLC0415
    from typedrl.training._summary import finite_or_none, write_summary  # noqa: PLC0415

    try:
        evaluation = EpisodeEvaluator(eval_env, num_episodes=episodes, seed=seed).evaluate(
            agent.policy
        )
    finally:
        eval_env.close()
    updated = summary.copy()
    updated["final_eval_return_mean"] = finite_or_none(evaluation.metrics["return_mean"])
    updated["final_eval_return_std"] = finite_or_none(evaluation.metrics["return_std"])
    updated["final_eval_score"] = finite_or_none(evaluation.score)
    write_summary(run_dir, updated)
    return updated


def _plot_curve(run_dir: Path) -> None:
    """Draw the run's learning curve into ``curve.png`` when matplotlib is installed."""
    if importlib.util.find_spec("matplotlib") is None:
        print(f"curve           pip install 'typedrl[plot]', then: typedrl plot {run_dir}")
        return
    from typedrl.plotting import plot_runs  # noqa: PLC0415 - matplotlib is slow to import

    try:
        path = plot_runs([run_dir], run_dir / CURVE_FILE)
    except ConfigError as error:
        # A run too short to have logged a return has no curve; the run itself is fine.
        print(f"curve           none ({error})")
        return
    print(f"curve           {path}")


def _number(value: float | None, digits: int = 2) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:,.{digits}f}"


def _print_summary(run_dir: Path, summary: "RunSummary") -> None:
    """The end-of-run lines: where the run is, what it took and reached, how to resume."""
    print(f"run directory   {run_dir}")
    print(f"env steps       {summary['global_step']:,}")
    print(f"iterations      {summary['num_updates']:,}")
    applied, skipped = summary.get("applied_updates"), summary.get("skipped_updates")
    if applied is not None and skipped is not None:
        print(f"updates         {applied:,} applied, {skipped:,} skipped")
    rate = _number(summary["env_steps_per_s"], 0)
    print(f"wall time       {summary['wall_time_s']:,.1f} s ({rate} env steps/s)")
    if summary["final_eval_score"] is not None:
        print(f"eval score      {_number(summary['final_eval_score'])}")
    mean, std = summary["final_eval_return_mean"], summary["final_eval_return_std"]
    if mean is not None:
        print(f"eval return     {_number(mean)} ± {_number(std)}")
    if summary["best_score"] is not None:
        print(f"best score      {_number(summary['best_score'])}")
    print(f"checkpoints     {run_dir / 'checkpoints'}")
    print(f"summary         {run_dir / 'summary.json'}")
    if summary["stopped_by_signal"]:
        print(f"stopped by a signal; resume with: typedrl train --resume {run_dir}")
