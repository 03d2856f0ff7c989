"""`typedrl train --policy typedrl.policies:RecurrentActorCritic` on masked CartPole."""

import importlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from typedrl.cli import main

RECURRENT = "typedrl.policies:RecurrentActorCritic"
HIDE_VELOCITIES = "typedrl.envs:KeepObservationIndices(indices=[0, 2])"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny PPO run of a GRU policy on CartPole without velocities."""
    run = tmp_path_factory.mktemp("recurrent") / "run"
    policy = ["--policy", RECURRENT, "--policy-kwargs", '{"hidden_size": 8}']
    assert main(_tiny_run(run, *policy, "--total-timesteps", "128")) == 0
    return run


def _tiny_run(run: Path, *flags: str) -> list[str]:
    """``typedrl train`` on CartPole without velocities: 2 envs, one pass of 16-step rollouts."""
    return [
        "train",
        "CartPole-v1",
        "--wrapper",
        HIDE_VELOCITIES,
        *flags,
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


def test_export_writes_the_state_as_inputs_and_outputs(run_dir: Path, tmp_path: Path) -> None:
    """typedrl export writes an ONNX file stepping (obs, h) to (action, next_h)."""
    # onnxruntime ships no type information.
    onnxruntime: Any = importlib.import_module("onnxruntime")
    target = tmp_path / "policy.onnx"
    assert main(["export", str(run_dir), "--output", str(target)]) == 0
    session = onnxruntime.InferenceSession(str(target))
    assert [i.name for i in session.get_inputs()] == ["obs", "h"]
    assert [o.name for o in session.get_outputs()] == ["action", "next_h"]
    h = np.zeros((3, 1, 8), dtype=np.float32)
    action = np.zeros(0)
    for _ in range(4):
        action, h = session.run(None, {"obs": np.zeros((3, 2), dtype=np.float32), "h": h})
    assert action.shape == (3,)
    assert np.isfinite(h).all()


def test_policy_core_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--set policy.core=lstm trains the built-in recurrent policy; the first line names it."""
    run = tmp_path / "lstm"
    core = ["--set", "policy.core=lstm", "--set", "policy.core_hidden_size=8"]
    argv = _tiny_run(run, *core, "--total-timesteps", "64")
    assert main(argv) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("policy          RecurrentActorCritic, ")
    assert first.endswith("LSTM core (8 wide, 1 layer)")
    document = yaml.safe_load((run / "config.yaml").read_text())
    assert (document["policy"]["core"], document["policy"]["core_hidden_size"]) == ("lstm", 8)
    assert main(["evaluate", str(run), "--episodes", "2", "--num-envs", "2"]) == 0
