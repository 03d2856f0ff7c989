"""Tests for typedrl.restore: finding a run's env settings in its config.yaml."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from typedrl.checkpoint import POLICY_KEY, Checkpoint, capture_rng_state
from typedrl.errors import ConfigError
from typedrl.restore import CheckpointLocation, trained_env
from typedrl.runs import CONFIG_FILE, write_run_config


def _location(run_dir: Path) -> CheckpointLocation:
    return CheckpointLocation(
        path=run_dir / "checkpoints" / "last.ckpt", run_dir=run_dir, choice="last"
    )


def _checkpoint(env_id: str | None) -> Checkpoint:
    return Checkpoint(
        kind="ppo", env_id=env_id, modules={POLICY_KEY: {}}, rng=(capture_rng_state(),)
    )


def test_the_run_folder_gives_the_env_settings(tmp_path: Path) -> None:
    """The run's config.yaml names the same env: its env_kwargs, wrappers and clipping apply."""
    run = {"env_kwargs": {"g": 9.8}, "wrappers": ["TimeLimit"], "clip_actions": True}
    write_run_config(tmp_path, {"env_id": "Pendulum-v1", "run": run})
    env = trained_env(_checkpoint("Pendulum-v1"), _location(tmp_path))
    assert (env.env_id, dict(env.env_kwargs), env.wrappers) == (
        "Pendulum-v1",
        {"g": 9.8},
        ("TimeLimit",),
    )
    assert env.clip_actions is True
    assert env.config_file == tmp_path / CONFIG_FILE


def test_another_env_or_no_file_is_built_from_its_id(tmp_path: Path) -> None:
    """A named env other than the run's, or a run folder without config.yaml, uses the id alone."""
    write_run_config(tmp_path, {"env_id": "Pendulum-v1", "run": {"clip_actions": True}})
    other = trained_env(_checkpoint("Pendulum-v1"), _location(tmp_path), env_id="CartPole-v1")
    assert (other.env_id, other.clip_actions, other.config_file) == ("CartPole-v1", None, None)
    bare = trained_env(_checkpoint("Pendulum-v1"), _location(tmp_path / "elsewhere"))
    assert (bare.env_id, bare.config_file) == ("Pendulum-v1", None)


def test_errors_name_the_file_or_the_missing_env(tmp_path: Path) -> None:
    """A bad run section names config.yaml; a checkpoint without an env id asks for one."""
    write_run_config(tmp_path, {"env_id": "Pendulum-v1", "run": {"wrappers": "TimeLimit"}})
    with pytest.raises(ConfigError, match=rf"^{tmp_path / CONFIG_FILE}: run\.wrappers must be"):
        trained_env(_checkpoint("Pendulum-v1"), _location(tmp_path))
    with pytest.raises(ConfigError, match="does not record the env it was trained on"):
        trained_env(_checkpoint(None), _location(tmp_path))


def test_restore_does_not_import_the_command() -> None:
    """typedrl.restore reads run folders through typedrl.runs, never through typedrl.cli."""
    code = (
        "import json, sys, typedrl.restore\n"
        "print(json.dumps([m for m in sys.modules if m.startswith('typedrl.cli')]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
