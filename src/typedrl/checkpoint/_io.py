"""Checkpoint files: atomic save, weights-only load, and restoring one component."""

import errno
import os
import pickle
import secrets
from pathlib import Path
from typing import IO, Any

import torch

from typedrl.errors import CheckpointError, TypedRLError
from typedrl.protocols import SupportsStateDict

from ._paths import StrPath
from ._schema import Checkpoint, CheckpointKind, from_payload, to_payload

__all__ = ["load_checkpoint", "load_into", "save_checkpoint"]


def save_checkpoint(path: StrPath, checkpoint: Checkpoint) -> Path:
    """Write ``checkpoint`` to ``path`` atomically.

    The file is written under a temporary name in the same folder, flushed and
    fsynced, then moved onto ``path`` with :func:`os.replace`, and the folder
    is fsynced (POSIX). A crash or an error at any point leaves the previous
    file at ``path`` (if any) untouched and removes the temporary file. Missing
    parent folders are created.

    Call it from one process only (global rank 0 in a distributed run).

    Args:
        path: Destination file, conventionally from
            :class:`~typedrl.checkpoint.CheckpointPaths`.
        checkpoint: The validated checkpoint.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        CheckpointError: The file could not be written; the message names it.
    """
    target = Path(path)
    _atomic_save(to_payload(checkpoint), target)
    return target


def load_checkpoint(
    path: StrPath,
    *,
    expected_kind: CheckpointKind | None = None,
    map_location: str | torch.device = "cpu",
) -> Checkpoint:
    """Read and validate a checkpoint written by :func:`save_checkpoint`.

    The file is opened with ``torch.load(weights_only=True)``, which can only
    create tensors and plain containers: loading runs no code from the file.
    A file of an earlier schema version is upgraded to
    :data:`~typedrl.checkpoint.SCHEMA_VERSION` (a file of version 1 has no env
    id: :attr:`~typedrl.checkpoint.Checkpoint.env_id` is ``None``; a file of
    version 1 or 2 records no policy factory:
    :attr:`~typedrl.checkpoint.Checkpoint.policy_factory` is
    :data:`~typedrl.checkpoint.DEFAULT_POLICY`).

    Args:
        path: The checkpoint file.
        expected_kind: Refuse checkpoints of another kind (a PPO trainer passes
            ``"ppo"``). ``None`` accepts every kind.
        map_location: Device the tensors are loaded onto (RNG states always
            stay on the CPU).

    Returns:
        The validated checkpoint.

    Raises:
        CheckpointError: The message names the file and the problem: it is
            missing, empty, truncated or corrupt; foreign (not written by
            typedrl, or holding Python objects other than plain data); of a
            schema version this release cannot read (found and readable
            versions shown); of another kind than ``expected_kind``; or a field
            is malformed (the field is named).
    """
    file = Path(path)
    return from_payload(_read_payload(file, map_location), file, expected_kind)


def load_into(
    target: SupportsStateDict, state: dict[str, Any], *, name: str, path: StrPath
) -> None:
    """Load ``state`` into ``target``, turning a mismatch into a clear error.

    Missing or unexpected keys, shape mismatches and parameter-group
    mismatches raised by ``target.load_state_dict`` become a
    :class:`~typedrl.errors.CheckpointError` that names the component and the
    file. A module may be partly updated when the error is raised: discard it.

    Args:
        target: The module, optimizer, scheduler or normaliser to restore.
        state: Its state dict from the checkpoint (passed as is, so a module's
            ``_metadata`` is kept).
        name: Component name for the message (``"policy"``, ``"optimizers['critic']"``).
        path: The checkpoint file, for the message.

    Raises:
        CheckpointError: ``target`` refused the state.
    """
    try:
        target.load_state_dict(state)
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError, TypedRLError) as err:
        raise CheckpointError(
            f"cannot restore {name} from checkpoint {Path(path)}: {type(err).__name__}: "
            f"{err}\nThe checkpoint was probably written for another architecture or "
            "config: compare the config stored in it with the current one."
        ) from err


# ---------------------------------------------------------------------------- safe read


def _read_payload(file: Path, map_location: str | torch.device) -> object:
    if not file.exists():
        raise CheckpointError(f"checkpoint file {file} does not exist")
    if not file.is_file():
        raise CheckpointError(f"checkpoint {file} is not a regular file")
    try:
        if file.stat().st_size == 0:
            raise CheckpointError(
                f"checkpoint file {file} is empty (0 bytes): an interrupted copy, or a "
                "file written by something other than save_checkpoint"
            )
        return torch.load(file, weights_only=True, map_location=map_location)
    except CheckpointError:
        raise
    except PermissionError as err:
        raise CheckpointError(f"cannot read checkpoint {file}: {err}") from err
    except pickle.UnpicklingError as err:
        detail = _weights_only_detail(str(err))
        if detail.startswith("Unsupported global"):
            raise CheckpointError(
                f"checkpoint {file} is not a typedrl checkpoint: it holds Python objects "
                f"other than tensors and plain containers ({detail}); typedrl loads data "
                "only, never code"
            ) from err
        raise CheckpointError(_unreadable(file, err, detail)) from err
    except Exception as err:  # zip, EOF, OS and key errors of truncated or foreign files
        raise CheckpointError(_unreadable(file, err, str(err))) from err


def _weights_only_detail(text: str) -> str:
    # torch's message around the reason suggests unsafe loading; keep the reason only.
    marker = "WeightsUnpickler error:"
    start = text.find(marker)
    detail = " ".join(text[start + len(marker) :].split()) if start >= 0 else text
    for stop in (" was not an allowed global", " Check the documentation", ". Please use"):
        detail = detail.split(stop, maxsplit=1)[0]
    return detail


def _unreadable(file: Path, err: BaseException, detail: str) -> str:
    first_line = (detail.strip().splitlines() or [""])[0]
    return (
        f"checkpoint {file} is truncated, corrupt or not a torch.save file "
        f"({type(err).__name__}: {first_line})"
    )


# ---------------------------------------------------------------------------- atomic write


def _atomic_save(payload: dict[str, Any], target: Path) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        temp, handle = _open_temp(target)
    except OSError as err:
        raise CheckpointError(f"cannot write checkpoint {target}: {err}") from err
    try:
        with handle:
            torch.save(payload, handle)
            handle.flush()
            os.fsync(handle.fileno())
        temp.replace(target)
    except Exception as err:
        temp.unlink(missing_ok=True)
        raise CheckpointError(
            f"cannot write checkpoint {target} ({type(err).__name__}: {err}); "
            "the previous file, if any, is unchanged"
        ) from err
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_directory(target)


def _open_temp(target: Path) -> tuple[Path, IO[bytes]]:
    # Created by hand rather than with tempfile.mkstemp: mkstemp's mode is 0o600,
    # while a checkpoint should get the permissions the umask gives any new file.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        temp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
        try:
            descriptor = os.open(temp, flags, 0o666)
        except FileExistsError:
            continue
        try:
            return temp, os.fdopen(descriptor, "wb")
        except BaseException:
            os.close(descriptor)
            temp.unlink(missing_ok=True)
            raise


def _fsync_directory(target: Path) -> None:
    # Makes the rename itself durable. Only POSIX can open a directory for fsync.
    if os.name != "posix":
        return
    descriptor = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    except OSError as err:
        # Some file systems (network mounts) cannot fsync a directory; the rename stands.
        if err.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise CheckpointError(
                f"checkpoint {target} was written, but its folder could not be synced: {err}"
            ) from err
    finally:
        os.close(descriptor)
