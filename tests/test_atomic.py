"""Tests for typedrl._atomic."""

from pathlib import Path

import pytest

from typedrl._atomic import write_text_atomically


def test_writes_the_text_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    """The file holds the text, its folder is created, and no temporary file remains."""
    path = tmp_path / "run" / "config.yaml"
    write_text_atomically(path, "a: 1\n")
    assert path.read_text() == "a: 1\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.yaml"]


def test_replaces_the_previous_file(tmp_path: Path) -> None:
    """A second write replaces the first one's content."""
    path = tmp_path / "summary.json"
    write_text_atomically(path, "old")
    write_text_atomically(path, "new")
    assert path.read_text() == "new"


def test_a_failed_write_keeps_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error before the rename leaves the file as it was."""
    path = tmp_path / "metrics.csv"
    write_text_atomically(path, "step\n1\n", newline="")

    def fail(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.fsync", fail)
    with pytest.raises(OSError, match="No space"):
        write_text_atomically(path, "step\n1\n2\n", newline="")
    assert path.read_text() == "step\n1\n"
