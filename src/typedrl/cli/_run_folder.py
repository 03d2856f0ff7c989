"""The run folder of ``typedrl train``: what makes one a run, starting afresh, resuming one.

A folder is a *run* when it holds any of :data:`RUN_MARKERS`. A new run refuses
such a folder (``--resume`` continues it, ``--overwrite`` clears it first), so
that no command mixes two runs' files or replaces another run's checkpoints.
While a command trains in a folder it holds a lock on it (:data:`LOCK_FILE`),
and another command starting, resuming or overwriting a run there is refused.
"""

import contextlib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, final

from lightning_fabric import Fabric

from typedrl._config_fields import plain
from typedrl.checkpoint import Checkpoint, CheckpointPaths, load_checkpoint
from typedrl.cli._config import ResolvedRun
from typedrl.distributed import FabricDistributed
from typedrl.errors import CheckpointError, ConfigError, TypedRLError
from typedrl.logging import drop_rows_after
from typedrl.runs import CONFIG_FILE

__all__ = [
    "LOCK_FILE",
    "OVERWRITTEN",
    "RUN_MARKERS",
    "RunStart",
    "budget_reached",
    "check_saved_config",
    "checkpoint_counters",
    "continue_run",
    "find_resume_checkpoint",
    "load_resume_point",
    "lock_run_dir",
    "prepare_run_dir",
    "remove_failed_start",
    "resume_checkpoint",
    "run_markers",
    "saved_flags",
    "start_run",
    "unlock_run_dir",
]

CHECKPOINTS: Final = "checkpoints"
"""The checkpoint folder's name in a run folder."""

RUN_MARKERS: Final = ("config.yaml", "metrics.csv", "summary.json", CHECKPOINTS)
"""What a run writes first: a folder holding any of them holds a run."""

OVERWRITTEN: Final = (
    "config.yaml",
    "metrics.csv",
    "summary.json",
    "curve.png",
    "eval.json",
    ".config.yaml.tmp",
    ".metrics.csv.tmp",
    ".summary.json.tmp",
    CHECKPOINTS,
    "tensorboard",
    "wandb",
)
"""What ``--overwrite`` removes from a run folder: the files and folders a run writes
(``typedrl evaluate`` writes ``eval.json``), nothing else."""

_TEMPORARIES: Final = (".config.yaml.tmp", ".metrics.csv.tmp", ".summary.json.tmp")

LOCK_FILE: Final = ".typedrl.lock"
"""The file in a run folder whose lock the training command holds (it holds the
process id). Neither a run's file nor removed by ``--overwrite``: a lock left by
a killed process is free again, and the next command takes it."""

_held: dict[Path, IO[str]] = {}
"""The run folders this process holds, by resolved path."""


def lock_run_dir(run_dir: Path, *, flag: str) -> None:
    """Hold ``run_dir`` for this process; refuse it when another process holds it.

    Takes an exclusive ``flock`` on :data:`LOCK_FILE` (creating the folder and
    the file), held until :func:`unlock_run_dir` or the process's end, a kill
    included. Holding it already is fine. Where ``fcntl`` does not exist
    (Windows), nothing is locked.

    Raises:
        ConfigError: ``run_dir`` is a file, or another process holds it.
    """
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"{flag}: {run_dir} is a file, not a folder; choose another --run-dir")
    if sys.platform == "win32":
        return
    import fcntl  # noqa: PLC0415 - POSIX only

    key = run_dir.resolve()
    if key in _held:
        return
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        handle = (run_dir / LOCK_FILE).open("a+", encoding="utf-8")
    except OSError as error:
        raise ConfigError(
            f"{flag}: cannot create {run_dir / LOCK_FILE} ({error.strerror}); nothing was trained"
        ) from None
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        who = f"process {holder}" if holder.isdigit() else "another process"
        raise ConfigError(
            f"{flag} is in use: a typedrl train in {who} is writing to it; wait for it to "
            "end or stop it, or choose another --run-dir (nothing was changed)"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    _held[key] = handle


def unlock_run_dir(run_dir: Path) -> None:
    """Let go of ``run_dir`` (:func:`lock_run_dir`), removing its lock file; no-op if not held."""
    handle = _held.pop(run_dir.resolve(), None)
    if handle is None:
        return
    with contextlib.suppress(OSError):
        (run_dir / LOCK_FILE).unlink()
    handle.close()


def run_markers(run_dir: Path) -> list[str]:
    """The :data:`RUN_MARKERS` that ``run_dir`` holds (``checkpoints/`` with its slash)."""
    return [
        f"{name}/" if (run_dir / name).is_dir() else name
        for name in RUN_MARKERS
        if (run_dir / name).exists()
    ]


def start_run(run_dir: Path, *, overwrite: bool, flag: str) -> tuple[bool, list[str]]:
    """Get ``run_dir`` ready for a new run, before anything is written.

    A missing or empty folder, or one without a run's files, is used as it
    is. A folder holding a run is refused unless ``overwrite``, which removes
    exactly :data:`OVERWRITTEN` (files a run writes) and keeps everything else.
    Called once :func:`lock_run_dir` holds ``run_dir``, which refuses a file there.

    Args:
        run_dir: The run folder.
        overwrite: Whether ``--overwrite`` was given.
        flag: How the command line named the folder (``--run-dir runs/a``), for the message.

    Returns:
        Whether the folder is new (this command creates it), and what was removed.

    Raises:
        ConfigError: ``run_dir`` holds a run and ``overwrite`` is false.
    """
    created = not run_dir.exists()
    found = run_markers(run_dir)
    if not found:
        return created, []
    if not overwrite:
        raise ConfigError(
            f"{flag} holds a run ({', '.join(found)}); continue it with --resume {run_dir}, "
            "choose another --run-dir, or pass --overwrite to replace it"
        )
    removed: list[str] = []
    for name in OVERWRITTEN:
        path = run_dir / name
        if path.exists() or path.is_symlink():
            removed.append(f"{name}/" if path.is_dir() else name)
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
        except OSError as error:
            raise ConfigError(
                f"--overwrite: cannot remove {path} ({error.strerror}); nothing was trained"
            ) from None
    return created, removed


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class RunStart:
    """How ``typedrl train`` treats its run folder."""

    run_dir: Path
    """The run folder."""
    flag: str
    """How the command line named it (``--run-dir runs/a``), for messages."""
    overwrite: bool = False
    """``--overwrite``: clear a run found there."""
    continued_at: int | None = None
    """The checkpoint's env steps when a resume continues the run in its own folder."""
    notes: tuple[str, ...] = ()
    """Lines rank 0 prints once the folder is ready."""


def prepare_run_dir(start: RunStart, fabric: Fabric) -> tuple[Path, ...]:
    """Rank 0 readies the run folder before anything is written; the folders it made.

    Returns the folders that did not exist and now do (the run folder and
    the parents made for it, deepest first; empty on the other ranks and when
    a run continues), for :func:`remove_failed_start`.

    A new run refuses a folder holding another (or clears it, with
    ``--overwrite``); a continued run is tidied (:func:`continue_run`). Called
    by every rank once Fabric launched them all: rank 0 alone looks at the
    folder and decides, and every rank obeys, so that a refusal stops every
    rank with rank 0's message instead of leaving them waiting (or, on nodes
    that see the folder differently, deciding otherwise).
    """
    created: tuple[Path, ...] = ()
    lines = list(start.notes)
    error: TypedRLError | None = None
    if fabric.is_global_zero:
        try:
            # The lock makes the folder when missing: what this command made is known first.
            missing = tuple(
                folder
                for folder in (start.run_dir, *start.run_dir.absolute().parents)
                if not folder.exists()
            )
            lock_run_dir(start.run_dir, flag=start.flag)
            if start.continued_at is not None:
                lines += continue_run(start.run_dir, env_steps=start.continued_at)
            else:
                removed = start_run(start.run_dir, overwrite=start.overwrite, flag=start.flag)[1]
                created = missing
                if removed:
                    lines.append(
                        f"overwrite       removed {', '.join(removed)} of the run in "
                        f"{start.run_dir}"
                    )
        except TypedRLError as failure:
            error = failure
    decided = FabricDistributed(fabric).all_gather_object(error)[0]
    if isinstance(decided, TypedRLError):
        if fabric.is_global_zero:
            unlock_run_dir(start.run_dir)
        raise decided
    if fabric.is_global_zero:
        for line in lines:
            print(line)
    return created


def continue_run(run_dir: Path, *, env_steps: int) -> list[str]:
    """Tidy a run folder that a resume continues in; the lines saying what was done.

    Removes the temporary files of saves a kill interrupted (they are never a
    checkpoint) and drops the ``metrics.csv`` rows logged past ``env_steps``,
    the checkpoint's counter: the resumed run logs those iterations again.
    """
    lines: list[str] = []
    stale = CheckpointPaths(run_dir / CHECKPOINTS).temporary_files()
    stale += [run_dir / name for name in _TEMPORARIES if (run_dir / name).is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    if stale:
        names = ", ".join(str(path.relative_to(run_dir)) for path in stale)
        lines.append(f"removed         {names} (left by a write that a kill interrupted)")
    dropped = drop_rows_after(run_dir / "metrics.csv", env_steps)
    if dropped:
        lines.append(
            f"metrics.csv     dropped {dropped} row(s) logged after the checkpoint "
            f"(env step {env_steps:,}); the resumed run logs them again"
        )
    return lines


def remove_failed_start(run_dir: Path, *, created: Sequence[Path]) -> None:
    """Remove what a run that failed before its first iteration wrote, so no husk remains.

    Nothing is removed once training logged a row or saved a checkpoint (that
    run is worth keeping). Otherwise ``config.yaml`` goes, an empty
    ``tensorboard/`` too, and each folder this command ``created`` (the run
    folder and the parents made for it, deepest first) that is empty now.
    """
    if (run_dir / "metrics.csv").exists() or (run_dir / CHECKPOINTS).exists():
        return
    for name in ("config.yaml", ".config.yaml.tmp"):
        (run_dir / name).unlink(missing_ok=True)
    for folder in (run_dir / "tensorboard", *created):
        # Left alone when missing, or holding files this command did not write.
        with contextlib.suppress(OSError):
            folder.rmdir()


def find_resume_checkpoint(run_dir: Path) -> tuple[Path, str | None] | None:
    """The checkpoint a resume of ``run_dir`` loads and why when not ``last.ckpt``; or ``None``.

    ``last.ckpt`` when the run has one; otherwise the newest periodic
    ``epoch_<n>.ckpt`` that loads (newer ones that do not are named in the
    line); ``None`` when the run has neither.
    """
    paths = CheckpointPaths(run_dir / CHECKPOINTS)
    if paths.last.is_file():
        return paths.last, None
    unreadable: list[str] = []
    for _, path in paths.periodic_files():
        try:
            load_checkpoint(path)
        except CheckpointError:
            unreadable.append(path.name)
            continue
        skipped = f"; {_do_not_load(unreadable)}" if unreadable else ""
        return path, (
            f"resuming from   {path} (the run has no last.ckpt: its newest periodic "
            f"checkpoint that loads{skipped})"
        )
    return None


def resume_checkpoint(run_dir: Path) -> tuple[Path, str | None]:
    """The checkpoint ``--resume RUN_DIR`` loads (:func:`find_resume_checkpoint`).

    Raises:
        ConfigError: The run has neither ``last.ckpt`` nor a periodic checkpoint that loads.
    """
    found = find_resume_checkpoint(run_dir)
    if found is not None:
        return found
    unreadable = [path.name for _, path in CheckpointPaths(run_dir / CHECKPOINTS).periodic_files()]
    which = f" ({_do_not_load(unreadable)})" if unreadable else ""
    raise ConfigError(
        f"--resume {run_dir}: the run has no {CHECKPOINTS}/last.ckpt or epoch_<n>.ckpt to "
        f"resume{which}; start a new run there with --run-dir {run_dir} --overwrite"
    )


def _do_not_load(names: Sequence[str]) -> str:
    return f"{', '.join(names)} {'does' if len(names) == 1 else 'do'} not load"


def saved_flags(changes: Sequence[tuple[str, object]]) -> str:
    """The command-line options that set each ``(dotted key, value)`` (``seed``: ``--seed``).

    Example:
        >>> saved_flags([("seed", 3), ("actor_hidden", [64, 64]), ("algorithm.gamma", 0.9)])
        "--seed 3 --set 'actor_hidden=[64, 64]' --set algorithm.gamma=0.9"
    """
    return " ".join(
        f"--seed {value}" if key == "seed" else f"--set {shlex.quote(f'{key}={json.dumps(value)}')}"
        for key, value in changes
    )


def _changes(
    saved: Mapping[str, Any], now: Mapping[str, Any], *, skip: frozenset[str], prefix: str = ""
) -> list[tuple[str, Any, Any]]:
    """``(dotted key, saved, now)`` for each field that differs, nested configs key by key.

    At the top, only the fields the checkpoint holds count (a field added to a
    config after it was saved is not compared), as the trainer compares them.
    """
    missing = object()
    keys = sorted(saved) if not prefix else sorted(set(saved) | set(now))
    changes: list[tuple[str, Any, Any]] = []
    for key in keys:
        if key in skip:
            continue
        before, after = saved.get(key, missing), now.get(key, missing)
        if isinstance(before, Mapping) and isinstance(after, Mapping):
            changes += _changes(before, after, skip=frozenset(), prefix=f"{prefix}{key}.")
        elif plain(before) != plain(after):
            changes.append((f"{prefix}{key}", before, after))
    return [
        (key, None if before is missing else before, None if after is missing else after)
        for key, before, after in changes
    ]


def load_resume_point(resolved: ResolvedRun, path: Path) -> Checkpoint:
    """The checkpoint a resume loads, read once to check it before anything is built.

    Raises:
        CheckpointError: The file does not load or is another trainer's.
    """
    return load_checkpoint(path, expected_kind=resolved.spec.kind)


def check_saved_config(
    resolved: ResolvedRun, checkpoint: Checkpoint, path: Path, *, run_dir: Path | None
) -> None:
    """Refuse a checkpoint saved with another config than the run's, with advice that works.

    The trainer refuses it too, after building everything; checked here first,
    the message can say which command resumes it: for ``--resume RUN_DIR``,
    ``config.yaml`` disagrees with the run's own checkpoint (put its values
    back); for ``--resume CKPT``, the flags that restore the saved values, and
    the run folder to resume instead when the checkpoint sits in one.

    Raises:
        ConfigError: A field the trainer may not change on a resume differs.
    """
    trainer = resolved.spec.trainer
    changes = _changes(checkpoint.config, resolved.config.to_dict(), skip=trainer.resumable_changes)
    if not changes:
        return
    key, before, after = changes[0]
    more = f" (and {len(changes) - 1} more)" if len(changes) > 1 else ""
    if run_dir is not None:
        raise ConfigError(
            f"--resume {run_dir}: {run_dir / CONFIG_FILE} disagrees with {path}, saved with "
            f"{key}={before!r} ({CONFIG_FILE}: {after!r}){more}; set the checkpoint's values "
            f"back in {CONFIG_FILE} to resume the run"
        )
    flags = saved_flags([(name, saved) for name, saved, _ in changes])
    folder = path.parent.parent if path.parent.name == CHECKPOINTS else None
    instead = (
        f", or resume its run folder, which keeps them: typedrl train --resume {folder}"
        if folder is not None and (folder / CONFIG_FILE).is_file()
        else ""
    )
    raise ConfigError(
        f"--resume {path}: saved with {key}={before!r}, now {after!r}{more}; add the options "
        f"it was saved with: {flags}{instead}"
    )


def budget_reached(resolved: ResolvedRun, checkpoint: Checkpoint) -> str | None:
    """The line saying that the checkpoint already spent the run's budget, else ``None``.

    The budget is the config's ``total_updates`` when it sets one, else its
    ``total_timesteps``; a config with neither field has no budget to check here.
    """
    iterations, env_steps = checkpoint_counters(checkpoint)
    values = resolved.config.to_dict()
    updates = values.get("total_updates")
    if isinstance(updates, int):
        if iterations < updates:
            return None
        return (
            f"the run already reached its budget of {updates:,} updates (its "
            f"checkpoint is at update {iterations:,}); raise --set total_updates=N to continue"
        )
    total = values.get("total_timesteps")
    if not isinstance(total, int) or env_steps < total:
        return None
    return (
        f"the run already reached its budget of {total:,} env steps (its checkpoint is at "
        f"{env_steps:,}); raise --total-timesteps to continue"
    )


def checkpoint_counters(checkpoint: Checkpoint) -> tuple[int, int]:
    """``(iterations, env steps)`` a checkpoint was saved at."""
    counters = checkpoint.counters
    return (
        int(counters.get("iteration", counters.get("epoch", 0))),
        int(counters.get("env_steps", 0)),
    )
