"""`typedrl train --policy typedrl.policies:RecurrentActorCritic` on masked CartPole."""

import json
from pathlib import Path

import pytest
import yaml

from typedrl.cli import main
from typedrl.errors import ConfigError

RECURRENT = "typedrl.policies:RecurrentActorCritic"
HIDE_VELOCITIES = "typedrl.envs:KeepObservationIndices(indices=[0, 2])"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny PPO run of a GRU policy on CartPole without velocities."""
    run = tmp_path_factory.mktemp("recurrent") / "run"
    argv = [
        "train",
        "CartPole-v1",
        "--wrapper",
        HIDE_VELOCITIES,
        "--policy",
        RECURRENT,
        "--policy-kwargs",
        '{"hidden_size": 8}',
        "--total-timesteps",
        "128",
        "--num-envs",
        "2",
        "--eval-episodes",
        "2",
        "--no-progress",
        "--set",
        "num_steps=16",
        "--set",
        "batch_size=16",
        "--set",
        "num_mini_epochs=1",
        "--run-dir",
        str(run),
    ]
    assert main(argv) == 0
    return run


def test_the_run_records_the_recurrent_policy(run_dir: Path) -> None:
    """config.yaml names the factory and the wrapper."""
    document = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert document["policy"] == {"target": RECURRENT, "kwargs": {"hidden_size": 8}}


def test_evaluate_carries_the_state(run_dir: Path, tmp_path: Path) -> None:
    """typedrl evaluate rebuilds the GRU and plays whole episodes with its state."""
    report_path = tmp_path / "eval.json"
    argv = ["evaluate", str(run_dir), "--episodes", "2", "--num-envs", "2"]
    assert main([*argv, "--json", str(report_path)]) == 0
    report = json.loads(report_path.read_text())
    assert report["episodes"] == 2


def test_resume_continues(run_dir: Path) -> None:
    """--resume rebuilds the recurrent policy and its rollout state and trains on."""
    argv = ["train", "--resume", str(run_dir), "--total-timesteps", "192", "--no-progress"]
    assert main(argv) == 0
    assert json.loads((run_dir / "summary.json").read_text())["global_step"] == 192


def test_export_is_refused_in_one_line(run_dir: Path, tmp_path: Path) -> None:
    """A flat export would lose the state: it is refused, naming the policy."""
    argv = ["--debug", "export", str(run_dir), "--output", str(tmp_path / "policy.onnx")]
    with pytest.raises(ConfigError, match=r"RecurrentActorCritic is recurrent") as raised:
        main(argv)
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "policy.onnx").exists()
