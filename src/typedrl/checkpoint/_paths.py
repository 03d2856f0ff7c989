"""File names of a run's checkpoint folder."""

import os
from pathlib import Path
from typing import Final, TypeAlias, final

from typedrl._validation import non_negative_int

__all__ = ["CHECKPOINT_SUFFIX", "CheckpointPaths", "StrPath"]

CHECKPOINT_SUFFIX: Final = ".ckpt"
"""File-name suffix of the files named by :class:`CheckpointPaths`."""

StrPath: TypeAlias = str | os.PathLike[str]
"""A file-system path given as ``str`` or :class:`os.PathLike`."""

_PERIODIC_DIGITS: Final = 8


@final
class CheckpointPaths:
    """File names of a run's checkpoint folder.

    - :attr:`last`: ``last.ckpt``, overwritten at every checkpoint (resume from it);
    - :attr:`best`: ``best.ckpt``, overwritten when the score strictly improves;
    - :meth:`periodic`: ``epoch_<n>.ckpt`` with ``n`` zero-padded to 8 digits
      (``epoch_00000042.ckpt``), so that names sort in numeric order. ``n`` is
      the trainer's progress counter (the epoch for PPO, the update for APG);
      numbers of more than 8 digits are written in full.

    Example:
        >>> paths = CheckpointPaths("runs/cartpole/checkpoints")
        >>> paths.last.name, paths.best.name, paths.periodic(42).name
        ('last.ckpt', 'best.ckpt', 'epoch_00000042.ckpt')
    """

    __slots__ = ("_directory",)

    def __init__(self, directory: StrPath) -> None:
        self._directory = Path(directory)

    @property
    def directory(self) -> Path:
        """The folder the checkpoints live in (created by the first save)."""
        return self._directory

    @property
    def last(self) -> Path:
        """``<directory>/last.ckpt``."""
        return self._directory / f"last{CHECKPOINT_SUFFIX}"

    @property
    def best(self) -> Path:
        """``<directory>/best.ckpt``."""
        return self._directory / f"best{CHECKPOINT_SUFFIX}"

    def periodic(self, index: int) -> Path:
        """``<directory>/epoch_<index>.ckpt``, ``index`` zero-padded to 8 digits.

        Raises:
            ConfigError: ``index`` is not a non-negative ``int``.
        """
        non_negative_int("CheckpointPaths.periodic", "index", index)
        return self._directory / f"epoch_{index:0{_PERIODIC_DIGITS}d}{CHECKPOINT_SUFFIX}"

    def periodic_files(self) -> list[tuple[int, Path]]:
        """Every ``epoch_<n>.ckpt`` in the folder as ``(n, path)``, newest (largest ``n``) first.

        A missing folder holds none; names whose ``n`` is not a number are not
        periodic checkpoints and are left out.
        """
        if not self._directory.is_dir():
            return []
        numbered: list[tuple[int, Path]] = []
        for path in self._directory.glob(f"epoch_*{CHECKPOINT_SUFFIX}"):
            digits = path.stem.removeprefix("epoch_")
            if digits.isdigit() and path.is_file():
                numbered.append((int(digits), path))
        return sorted(numbered, reverse=True)

    def temporary_files(self) -> list[Path]:
        """Temporary files of interrupted saves (``.<name>.ckpt.<hex>.tmp``), sorted by name.

        Every save writes one beside its target and renames it over the target
        when complete, so a file left behind is what a kill during a write
        leaves: never a checkpoint, safe to delete once no run writes here.
        """
        if not self._directory.is_dir():
            return []
        pattern = f".*{CHECKPOINT_SUFFIX}.*.tmp"
        return sorted(path for path in self._directory.glob(pattern) if path.is_file())

    def __repr__(self) -> str:
        return f"CheckpointPaths({str(self._directory)!r})"
