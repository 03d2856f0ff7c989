"""Tests for typedrl.configs: the tuned files shipped with the package."""

from pathlib import Path

import pytest
import yaml

from typedrl import configs
from typedrl.ahac import AHACConfig
from typedrl.apg import APGConfig, DifferentiableTrainerConfig, SHACConfig
from typedrl.cli import main
from typedrl.errors import ConfigError
from typedrl.ppo import PPOConfig

_CONVERTED = {
    ("ppo", "typedrl/CartPole-v0"),
    ("ppo", "CartPole-v1"),
    ("ppo", "Pendulum-v1"),
    ("apg", "typedrl/PointMass-v0"),
    ("apg", "typedrl/Reacher-v0"),
    ("apg", "typedrl/Pendulum-v0"),
    ("shac", "typedrl/CartPoleSwingUp-v0"),
    ("shac", "typedrl/Pendulum-v0"),
}


def test_every_shipped_file_builds_its_algorithms_config() -> None:
    """Each shipped file has the agreed keys and builds through the real dataclasses."""
    shipped = configs.available()
    assert set(shipped) >= _CONVERTED
    assert {("ahac", "typedrl/NewtonAnt-v0"), ("ahac", "typedrl/NewtonHalfCheetah-v0")} <= set(
        shipped
    )
    for algo, env_id in shipped:
        tuned = configs.load(algo, env_id)
        assert (tuned.algo, tuned.env_id) == (algo, env_id)
        assert tuned.path is not None
        assert tuned.path.name == configs.file_name(env_id)
        assert tuned.path.parent.name == algo
        keys = set(yaml.safe_load(tuned.path.read_text()))
        assert set(configs.TUNED_KEYS) <= keys <= {*configs.TUNED_KEYS, "policy", "run"}
        assert set(tuned.run) <= set(configs.TUNED_RUN_KEYS)
        assert tuned.source.strip()
        config = configs.build_config(algo, tuned.config)
        expected = PPOConfig if algo == "ppo" else DifferentiableTrainerConfig
        assert isinstance(config, expected)
        if isinstance(config, DifferentiableTrainerConfig):
            algorithm = {"shac": SHACConfig, "ahac": AHACConfig}.get(algo, APGConfig)
            assert isinstance(config.algorithm, algorithm)


def test_converted_values_are_kept() -> None:
    """The files carry the values the command used before (spot checks on every kind)."""
    cartpole = configs.load("ppo", "CartPole-v1")
    assert cartpole.num_envs == 8
    assert dict(cartpole.config) == {
        "total_timesteps": 100_000,
        "num_steps": 32,
        "batch_size": 256,
        "num_mini_epochs": 20,
        "learning_rate": 1e-3,
        "learning_rate_schedule": "linear",
        "gamma": 0.98,
        "gae_lambda": 0.8,
    }
    reacher = configs.load("apg", "typedrl/Reacher-v0")
    assert (reacher.num_envs, reacher.config["total_timesteps"]) == (64, 1_300_000)
    pendulum = configs.build_config("shac", configs.load("shac", "typedrl/Pendulum-v0").config)
    assert isinstance(pendulum, DifferentiableTrainerConfig)
    assert isinstance(pendulum.algorithm, SHACConfig)
    # A partial actor keeps the paper's betas and schedule for the fields it leaves out.
    assert pendulum.algorithm.actor.learning_rate == 2e-3
    assert pendulum.algorithm.actor.betas == (0.7, 0.95)
    assert pendulum.algorithm.actor.learning_rate_schedule == "linear"
    assert (pendulum.layer_norm, pendulum.total_timesteps) == (True, 2_048_000)


def test_find_and_load_without_a_file() -> None:
    """find returns None; load names the envs that have a file."""
    assert configs.find("ppo", "NoSuchEnv-v0") is None
    with pytest.raises(ConfigError, match=r"no tuned ppo config for 'NoSuchEnv-v0'.*CartPole-v1"):
        configs.load("ppo", "NoSuchEnv-v0")
    with pytest.raises(ConfigError, match="algo must be one of"):
        configs.find("sac", "CartPole-v1")
    assert {env for _, env in configs.available("apg")} >= {"typedrl/Reacher-v0"}


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


_GOOD = """source: measured here
algo: ppo
env_id: CartPole-v1
num_envs: 4
config:
  learning_rate: 0.001
"""


def test_load_file_validates_keys_and_config(tmp_path: Path) -> None:
    """A tuned file anywhere loads; each kind of mistake names the file and key.

    Every field's own check is tested with every config class in ``test_config_classes.py``.
    """
    good = configs.load_file(_write(tmp_path / "good.yaml", _GOOD))
    assert (good.algo, good.num_envs, dict(good.config)) == ("ppo", 4, {"learning_rate": 1e-3})
    assert dict(good.run) == {}
    clipped = configs.load_file(
        _write(tmp_path / "run.yaml", _GOOD + "run:\n  clip_actions: true\n")
    )
    assert dict(clipped.run) == {"clip_actions": True}
    with_policy = configs.load_file(
        _write(
            tmp_path / "policy.yaml",
            _GOOD.replace("  learning_rate", "  num_steps: 32\n  batch_size: 64\n  learning_rate")
            + "policy:\n  core: lstm\n  actor_hidden: [8]\n",
        )
    )
    assert with_policy.config["core"] == "lstm"
    assert with_policy.config["actor_hidden"] == [8]
    cases = {
        r"policy sets the built-in policy's settings .*unknown \['cores'\]": (
            _GOOD + "policy:\n  cores: gru\n"
        ),
        r"also in config \['learning_rate'\]": _GOOD + "policy:\n  learning_rate: 0.1\n",
        r"missing \['source'\]": _GOOD.replace("source: measured here\n", ""),
        r"unknown \['extra'\]": _GOOD + "extra: 1\n",
        "TunedConfig.num_envs must be a positive int": _GOOD.replace("num_envs: 4", "num_envs: 0"),
        "never sets the seed": _GOOD + "  seed: 3\n",
        r"PPOConfig has no fields \['lr'\]": _GOOD.replace("learning_rate", "lr"),
        "not valid YAML": "source: [\n",
        "expected a mapping": "- 1\n",
        r"sets only the env options .*got \['devices'\]": _GOOD + "run:\n  devices: 2\n",
    }
    for index, (message, text) in enumerate(cases.items()):
        path = _write(tmp_path / f"bad{index}.yaml", text)
        with pytest.raises(ConfigError, match=message) as raised:
            configs.load_file(path)
        assert str(path) in str(raised.value)
    with pytest.raises(ConfigError, match="cannot read"):
        configs.load_file(tmp_path / "absent.yaml")


def test_mujoco_files_clip_actions_under_typedrl_train(capsys: pytest.CaptureFixture[str]) -> None:
    """The MuJoCo files were measured with clipped actions; typedrl train applies that."""
    for env_id in ("HalfCheetah-v5", "Hopper-v5"):
        assert configs.load("ppo", env_id).run == {"clip_actions": True}
        assert main(["train", env_id, "--print-config"]) == 0
        assert yaml.safe_load(capsys.readouterr().out)["run"]["clip_actions"] is True
        # The user's own flag wins.
        assert main(["train", env_id, "--no-clip-actions", "--print-config"]) == 0
        assert yaml.safe_load(capsys.readouterr().out)["run"]["clip_actions"] is False


def test_build_config_rules() -> None:
    """Budgets, SHAC's marker, sequences and cross-algorithm fields are checked."""
    apg = configs.build_config("apg", {})
    assert isinstance(apg, DifferentiableTrainerConfig)
    assert apg.total_timesteps == configs.DEFAULT_DIFFERENTIABLE_TIMESTEPS
    updates = configs.build_config("apg", {"total_updates": 5})
    assert isinstance(updates, DifferentiableTrainerConfig)
    assert (updates.total_timesteps, updates.total_updates) == (None, 5)
    shac = configs.build_config("shac", {})
    assert isinstance(shac, DifferentiableTrainerConfig)
    assert isinstance(shac.algorithm, SHACConfig)
    with pytest.raises(ConfigError, match=r"actor_hidden must be a list such as \[64, 64\]"):
        configs.build_config("ppo", {"actor_hidden": 64})
    with pytest.raises(ConfigError, match=r"algorithm has SHAC fields \['critic_iterations'\]"):
        configs.build_config("apg", {"algorithm": {"critic_iterations": 2}})
    with pytest.raises(ConfigError, match=r"SHACConfig has no fields \['algorithm.lr'\]"):
        configs.build_config("shac", {"algorithm": {"lr": 1}})
    with pytest.raises(ConfigError, match=r"APGConfig has no fields \['algorithm.actor.lr'\]"):
        configs.build_config("shac", {"algorithm": {"actor": {"lr": 1}}})
    with pytest.raises(ConfigError, match="algorithm must be a mapping"):
        configs.build_config("apg", {"algorithm": 3})
    with pytest.raises(ConfigError, match=r"^here: "):
        configs.build_config("ppo", {"gamma": 2.0}, where="here")
