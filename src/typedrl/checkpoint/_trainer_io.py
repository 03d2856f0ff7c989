"""A trainer's state written to and restored from a checkpoint, on every rank of a run.

:func:`save_trainer_state` gathers every rank's RNG and rank-local state and
writes one :class:`~typedrl.checkpoint.Checkpoint` on rank 0;
:func:`read_trainer_checkpoint` reads one on every rank (rank 0 compares its
config and policy); :func:`restore_trainer_state` puts it back into the
trainer's objects. Every rank calls each of them, in the same order: a failure
on one rank raises on every rank instead of leaving the others in a collective.
"""

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import torch

from typedrl.distributed import Distributed, raise_together
from typedrl.errors import CheckpointError, TypedRLError
from typedrl.policies._factory import PolicyFactory
from typedrl.protocols import SupportsStateDict
from typedrl.seeding import derive_seed

from ._io import load_checkpoint, load_into, save_checkpoint
from ._paths import StrPath
from ._rng import capture_rng_state, reseed_rng, restore_rng_state
from ._schema import Checkpoint, CheckpointKind, CheckpointMetadata
from ._state import GeneratorState, Progress, SupportsSharedState, TrainerState

__all__ = ["read_trainer_checkpoint", "restore_trainer_state", "save_trainer_state"]

_ITERATION = "iteration"
_ENV_STEPS = "env_steps"
_LEGACY_ITERATION = "epoch"
"""The iteration counter's name in checkpoints written before it was ``"iteration"``."""


def save_trainer_state(
    path: StrPath | None,
    state: Callable[[], TrainerState],
    *,
    dist: Distributed,
    kind: CheckpointKind,
    progress: Progress,
    config: Callable[[], dict[str, Any]],
    policy_factory: PolicyFactory | None,
    env_id: str | None,
) -> Path | None:
    """Write a trainer's full checkpoint to ``path`` on rank 0 (every rank must call it).

    ``None`` writes nothing (a rank without a run folder still takes part in
    the collectives, so that the ranks never wait on each other); in a
    single-process run it returns at once.

    Shared state (:attr:`TrainerState.modules`, optimizers, schedulers, the
    progress) comes from rank 0; :attr:`TrainerState.rank_local` state and RNG
    states are gathered from every rank (``"<name>.rank<r>"``).

    Args:
        path: The file rank 0 writes.
        state: The trainer's state (asked for once, unless nothing is written).
        dist: The run's collectives.
        kind: The trainer's checkpoint kind.
        progress: The trainer core's counters and best score.
        config: The run's config as JSON-like values (asked for on rank 0 only).
        policy_factory: How to rebuild the policy, recorded in the file.
        env_id: The env the run trains on.

    Returns:
        The file written on rank 0, ``None`` on the other ranks.

    Raises:
        CheckpointError: The checkpoint could not be built or written (on every rank).
    """
    if path is None and dist.world_size == 1:
        return None
    trainer_state = state()
    rng = tuple(dist.all_gather_object(capture_rng_state()))
    per_rank = dist.all_gather_object(
        {name: _to_cpu(item.state_dict()) for name, item in trainer_state.rank_local.items()}
    )
    written: Path | None = None
    error: TypedRLError | None = None
    if path is not None and dist.is_main:
        modules = {name: item.state_dict() for name, item in trainer_state.modules.items()}
        for rank, states in enumerate(per_rank):
            for name, rank_state in states.items():
                modules[f"{name}.rank{rank}"] = rank_state
        try:
            checkpoint = Checkpoint(
                kind=kind,
                policy_factory=policy_factory,
                modules=modules,
                optimizers={
                    name: item.state_dict() for name, item in trainer_state.optimizers.items()
                },
                schedulers={
                    name: item.state_dict() for name, item in trainer_state.schedulers.items()
                },
                counters={_ITERATION: progress.iteration, _ENV_STEPS: progress.env_steps},
                best_score=progress.best_score,
                config=config(),
                env_id=env_id,
                rng=rng,
                metadata=CheckpointMetadata.now(world_size=dist.world_size),
            )
            written = save_checkpoint(path, checkpoint)
        except TypedRLError as failure:
            error = failure
    # A failed write on rank 0 stops every rank instead of leaving them in a barrier.
    raise_together(error, f"writing the checkpoint {path}", dist)
    return written


def read_trainer_checkpoint(
    path: StrPath,
    *,
    dist: Distributed,
    kind: CheckpointKind,
    mismatch: Callable[[Checkpoint], CheckpointError | None] | None,
) -> Checkpoint:
    """Read the checkpoint a trainer resumes from, on every rank.

    The checkpoint holds rank 0's config (ranks may differ, in ``batch_size``
    for one): rank 0 alone asks ``mismatch`` (``None``: nothing compared)
    whether the checkpoint fits the trainer.

    Raises:
        CheckpointError: The file is missing, corrupt or of another kind on some
            rank, or ``mismatch`` gave a reason on rank 0; raised on every rank.
    """
    failure: TypedRLError | None = None
    checkpoint: Checkpoint | None = None
    try:
        checkpoint = load_checkpoint(path, expected_kind=kind)
    except TypedRLError as error:  # a file one rank cannot read stops every rank
        failure = error
    if checkpoint is not None and mismatch is not None and dist.is_main:
        failure = mismatch(checkpoint)
    raise_together(failure, f"reading the checkpoint {path}", dist)
    # Read: raise_together raised every rank's error when this rank read nothing.
    return cast("Checkpoint", checkpoint)


def restore_trainer_state(
    checkpoint: Checkpoint,
    state: TrainerState,
    *,
    file: Path,
    dist: Distributed,
    owner: str,
    seed: int,
) -> Progress:
    """Load ``checkpoint`` into ``state`` and the global RNGs; return the saved progress.

    On the number of ranks that saved it, every object and this rank's RNG
    streams are restored exactly. On another number, the shared state is
    restored exactly; of :attr:`TrainerState.rank_local` only the
    rank-independent part of rank 0's objects (:class:`SupportsSharedState`) is
    kept, generators and the global RNGs are re-seeded with
    :func:`~typedrl.seeding.derive_seed` from ``seed`` (index: the iteration
    resumed at), and the rest starts afresh; rank 0 prints one line saying so.

    Args:
        checkpoint: The checkpoint read by :func:`read_trainer_checkpoint`.
        state: The trainer's live objects.
        file: The checkpoint's file, named in errors.
        dist: The run's collectives (this rank and the world size).
        owner: The trainer's class name, named in errors.
        seed: The run's seed, from which re-derived streams come.

    Raises:
        CheckpointError: A piece of ``state`` has no saved state, or holds
            state of another architecture.
    """
    saved_world = len(checkpoint.rng)
    same_world = saved_world == dist.world_size
    # Another world size: rank 0's rank-local state is the one whose shared part is kept.
    suffix = f".rank{dist.rank if same_world else 0}"
    rank_local = {
        name.removesuffix(suffix): value
        for name, value in checkpoint.modules.items()
        if name.endswith(suffix)
    }
    groups: list[tuple[str, dict[str, SupportsStateDict], dict[str, dict[str, Any]]]] = [
        ("modules", dict(state.modules), checkpoint.modules),
        ("optimizers", dict(state.optimizers), checkpoint.optimizers),
        ("schedulers", dict(state.schedulers), checkpoint.schedulers),
    ]
    if same_world:
        groups.append(("rank_local", dict(state.rank_local), rank_local))
    for group, targets, saved in groups:
        missing = sorted(set(targets) - set(saved))
        if missing:
            raise CheckpointError(
                f"{file}: no {group} state for {missing} (it holds {sorted(saved)}); "
                f"not a checkpoint of this {owner}'s setup"
            )
        for name, target in targets.items():
            load_into(target, saved[name], name=f"{group}[{name!r}]", path=file)
    counters = checkpoint.counters
    progress = Progress(
        iteration=int(counters.get(_ITERATION, counters.get(_LEGACY_ITERATION, 0))),
        env_steps=int(counters.get(_ENV_STEPS, 0)),
        best_score=checkpoint.best_score,
    )
    if same_world:
        restore_rng_state(checkpoint.rng_state(dist.rank))
    else:
        _restart_rank_streams(
            state,
            rank_local,
            file,
            dist=dist,
            owner=owner,
            seed=seed,
            iteration=progress.iteration,
            saved_world=saved_world,
        )
    return progress


def _restart_rank_streams(
    state: TrainerState,
    saved: dict[str, dict[str, Any]],
    file: Path,
    *,
    dist: Distributed,
    owner: str,
    seed: int,
    iteration: int,
    saved_world: int,
) -> None:
    """The rank-local state of a resume on another number of ranks (re-derived streams)."""
    rank = dist.rank
    for name, target in state.rank_local.items():
        if isinstance(target, SupportsSharedState):
            if name not in saved:
                raise CheckpointError(
                    f"{file}: no rank_local state for {name!r} of rank 0 (it holds "
                    f"{sorted(saved)}); not a checkpoint of this {owner}'s setup"
                )
            target.load_shared_state_dict(saved[name])
        elif isinstance(target, GeneratorState):
            target.generator.manual_seed(derive_seed(seed, "sampler", rank=rank, index=iteration))
    reseed_rng(derive_seed(seed, "init", rank=rank, index=iteration))
    if dist.is_main:
        print(
            f"world size changed {saved_world} -> {dist.world_size} on resume from "
            f"{file}: weights, optimizers, schedules, normaliser statistics, counters and best "
            "score restored; envs reset and per-rank random streams re-derived (a valid "
            "resume, not bit-exact)",
            file=sys.stderr,
            flush=True,
        )


def _to_cpu(value: Any) -> Any:
    """``value`` with every tensor moved to the CPU (for gathering and saving)."""
    if isinstance(value, dict):
        return {key: _to_cpu(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_to_cpu(item) for item in value)
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    return value
