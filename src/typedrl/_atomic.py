"""Atomic text files: a run folder's files are whole or absent, never half-written."""

import os
from pathlib import Path

__all__ = ["write_text_atomically"]


def write_text_atomically(path: Path, text: str, *, newline: str | None = None) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it (fsync, then rename).

    A crash at any point leaves the previous file (or none), never a part of
    ``text``. The folder is created when missing.

    Args:
        path: The file to write.
        text: Its content.
        newline: As :func:`open`'s (``""`` for text that :mod:`csv` wrote).

    Raises:
        OSError: The file cannot be written (callers name the file in their error).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as root:
        ...     path = Path(root) / "run" / "notes.txt"
        ...     write_text_atomically(path, "done")
        ...     path.read_text()
        'done'
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    with temp.open("w", newline=newline) as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    temp.replace(path)
