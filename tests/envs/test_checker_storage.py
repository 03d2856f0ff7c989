"""Tests for the checker's cleanup of hypothesis's cache folder (envs/_checker/_rollouts.py)."""

from pathlib import Path

import pytest

from typedrl.envs._checker._rollouts import leaves_no_cache_folder


def _cache_like_hypothesis(home: Path) -> None:
    """Write what hypothesis writes when it caches the constants of local modules."""
    (home / "constants").mkdir(parents=True)
    (home / "constants" / "0123456789abcdef").write_text("# file: my_envs.py\n[1, 2]")
    (home / ".gitignore").write_text("*\n")


def test_a_folder_the_check_created_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """check-env in a clean folder leaves it clean."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HYPOTHESIS_STORAGE_DIRECTORY", raising=False)
    with leaves_no_cache_folder():
        _cache_like_hypothesis(tmp_path / ".hypothesis")
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_existed_or_holds_more_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An existing .hypothesis/ and another process's database in a new one stay."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HYPOTHESIS_STORAGE_DIRECTORY", raising=False)
    home = tmp_path / ".hypothesis"
    home.mkdir()
    with leaves_no_cache_folder():
        _cache_like_hypothesis(home)
    assert (home / "constants").is_dir()
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.chdir(other)
    with leaves_no_cache_folder():
        _cache_like_hypothesis(other / ".hypothesis")
        (other / ".hypothesis" / "examples").mkdir()
    assert sorted(path.name for path in (other / ".hypothesis").iterdir()) == ["examples"]
