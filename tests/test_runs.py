"""Tests for typedrl.runs: the run folder's config.yaml and its run: section."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from typedrl.errors import ConfigError
from typedrl.runs import (
    CONFIG_FILE,
    RUN_KEYS,
    RunSettings,
    dump_run_config,
    read_run_config,
    write_run_config,
)


def test_the_run_section_layout_is_unchanged() -> None:
    """to_dict gives the keys config.yaml has always held, in order, as YAML values."""
    settings = RunSettings.from_dict({"wrappers": ["TimeLimit"], "env_kwargs": {"g": [1, 2]}})
    assert settings.wrappers == ("TimeLimit",)
    assert settings.to_dict() == {
        "eval_every": None,
        "eval_episodes": 16,
        "checkpoint_every": None,
        "keep_checkpoints": None,
        "vectorization": "sync",
        "accelerator": "cpu",
        "devices": None,
        "num_nodes": None,
        "env_kwargs": {"g": [1, 2]},
        "wrappers": ["TimeLimit"],
        "clip_actions": None,
        "wandb_project": None,
    }
    assert list(settings.to_dict()) == list(RunSettings().to_dict())
    assert RunSettings.from_dict(settings.to_dict()) == settings


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"colour": "red"}, r"^run has no fields \['colour'\]; valid fields: \['accelerator', "),
        ({"env_kwargs": [1]}, r"^run\.env_kwargs must be a mapping of names to values"),
        ({"env_kwargs": {1: 2}}, r"^run\.env_kwargs must be a mapping of names to values"),
    ],
)
def test_a_bad_run_section_is_one_config_error(section: dict[str, Any], message: str) -> None:
    """An unknown key, or env_kwargs (a check of its own), is a one-line ConfigError."""
    with pytest.raises(ConfigError, match=message) as raised:
        RunSettings.from_dict(section)
    assert "\n" not in str(raised.value)


def test_write_then_read_round_trips(tmp_path: Path) -> None:
    """The document is written atomically (no temp file left) and read back equal, in order."""
    document: dict[str, Any] = {**dict.fromkeys(RUN_KEYS), "config": {"gamma": 0.9}, "run": {}}
    path = write_run_config(tmp_path / "run", document)
    assert path == tmp_path / "run" / CONFIG_FILE
    assert sorted(p.name for p in path.parent.iterdir()) == [CONFIG_FILE]
    assert read_run_config(path) == document
    assert list(read_run_config(path)) == list(RUN_KEYS)
    assert dump_run_config(document).splitlines()[0] == "source: null"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("foo: 1\n", r"unknown keys \['foo'\]; a config file has keys among \['source'"),
        ("config: [\n", "not valid YAML"),
        ("- 1\n", "expected a mapping with keys among"),
        ("config: 3\n", "config must be a mapping, got 3"),
        ("run: [1]\n", r"run must be a mapping, got \[1\]"),
    ],
)
def test_reading_a_bad_file_names_it(tmp_path: Path, content: str, message: str) -> None:
    """A file that is not a run document raises a ConfigError naming the file."""
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message) as raised:
        read_run_config(path)
    assert str(raised.value).startswith(f"{path}: ")


def test_missing_and_unwritable_files(tmp_path: Path) -> None:
    """An absent file cannot be read; a run folder that is a file cannot be written."""
    assert read_run_config(_written(tmp_path / "empty.yaml", "")) == {}
    with pytest.raises(ConfigError, match="cannot read the config file"):
        read_run_config(tmp_path / "absent.yaml")
    blocker = _written(tmp_path / "blocker", "")
    with pytest.raises(ConfigError, match="cannot write the run's config"):
        write_run_config(blocker, {"seed": 0})


def _written(path: Path, content: str) -> Path:
    path.write_text(content)
    return path


def test_the_format_imports_neither_the_command_nor_torch() -> None:
    """typedrl.runs sits below typedrl.cli and typedrl.restore: it imports neither."""
    code = (
        "import json, sys, typedrl.runs\n"
        "print(json.dumps([m for m in sys.modules if m.startswith(('typedrl.cli', 'torch'))]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
