"""Tests for typedrl.restore: a run's env settings, and the policy of a file without a factory."""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import TensorDict

from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.checkpoint import (
    DEFAULT_POLICY,
    POLICY_KEY,
    Checkpoint,
    capture_rng_state,
    load_checkpoint,
    save_checkpoint,
)
from typedrl.envs import make
from typedrl.errors import ConfigError
from typedrl.policies import DifferentiableMLPPolicy, MLPActorCritic
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.restore import CheckpointLocation, algorithm_of, restore_policy, trained_env
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


def _schema_2_file(path: Path, kind: str, config: dict[str, Any], policy: torch.nn.Module) -> Path:
    """A checkpoint as typedrl wrote it before policy factories (schema 2, no such key)."""
    checkpoint = Checkpoint(
        kind=kind,
        env_id=None,
        modules={POLICY_KEY: policy.state_dict()},
        config=config,
        rng=(capture_rng_state(),),
    )
    payload = torch.load(save_checkpoint(path, checkpoint), weights_only=True)
    del payload["policy_factory"]
    torch.save({**payload, "schema_version": 2}, path)
    return path


def test_an_old_ppo_file_loads_as_the_default_mlp(tmp_path: Path) -> None:
    """A PPO file without a factory rebuilds PPOConfig's MLP from its stored config."""
    env = make("typedrl/CartPole-v0", num_envs=1)
    config = PPOConfig(actor_hidden=(8,), critic_hidden=(8,))
    policy = PPOAgent.build_policy(config, env.single_observation_space, env.single_action_space)
    assert isinstance(policy, MLPActorCritic)
    path = _schema_2_file(tmp_path / "old.ckpt", "ppo", config.to_dict(), policy)
    checkpoint = load_checkpoint(path)
    assert checkpoint.policy_factory == DEFAULT_POLICY
    restored = restore_policy(checkpoint, env, path=path)
    assert isinstance(restored, MLPActorCritic)
    obs = TensorDict({"obs": torch.randn(4, 4)}, batch_size=[4])
    expected = policy.eval().act(obs, deterministic=True)["action"]
    assert torch.equal(restored.act(obs, deterministic=True)["action"], expected)
    assert algorithm_of(checkpoint, path=path) == "ppo"


def test_an_old_shac_file_gets_the_envs_normalise_mask(tmp_path: Path) -> None:
    """An APG-kind file without a factory rebuilds its MLP with the env's mask; SHAC is named."""
    env = make("typedrl/CartPoleSwingUp-v0", num_envs=1)
    config = DifferentiableTrainerConfig.from_dict(
        {"total_updates": 1, "normalize_observations": True, "algorithm": {"actor": {}}}
    )
    policy = DifferentiableTrainer.build_policy(
        config, env.single_observation_space, env.single_action_space
    )
    path = _schema_2_file(tmp_path / "old.ckpt", "apg", config.to_dict(), policy)
    checkpoint = load_checkpoint(path)
    restored = restore_policy(checkpoint, env, path=path)
    assert isinstance(restored, DifferentiableMLPPolicy)
    assert restored.observation_normalize_mask.tolist() == [True, True, False, False, True]
    assert algorithm_of(checkpoint, path=path) == "shac"


def test_a_kind_no_algorithm_registers_is_named(tmp_path: Path) -> None:
    """algorithm_of names the file and the registered kinds for a kind nobody registered."""
    with pytest.raises(ConfigError, match=r"old\.ckpt: no registered algorithm writes .*'dqn'"):
        algorithm_of(
            Checkpoint(kind="dqn", modules={POLICY_KEY: {}}, rng=(capture_rng_state(),)),
            path=tmp_path / "old.ckpt",
        )
