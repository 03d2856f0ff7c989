"""`typedrl train --policy`: a user's actor-critic trained, evaluated, exported and resumed."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from tests.cli.test_export import _run_onnx, _run_torchscript
from typedrl.checkpoint import load_checkpoint
from typedrl.cli import main
from typedrl.errors import ConfigError
from typedrl.policies import PolicyFactory

ENV_ID = "typedrl/Pendulum-v0"
SMALL = ["--num-envs", "4", "--eval-episodes", "2", "--no-progress"]
SMALL_PPO = ["--set", "num_steps=16", "--set", "batch_size=32", "--set", "num_mini_epochs=1"]
TINY = "typedrl.testing:TinyActorCritic"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A PPO run of TinyActorCritic (hidden=8) on the built-in Pendulum."""
    run = tmp_path_factory.mktemp("user-policy") / "run"
    argv = ["train", ENV_ID, "--total-timesteps", "128", *SMALL, *SMALL_PPO]
    policy = ["--policy", TINY, "--policy-kwargs", '{"hidden": 8}']
    assert main([*argv, *policy, "--run-dir", str(run)]) == 0
    return run


def test_the_run_records_its_policy(run_dir: Path) -> None:
    """config.yaml has a policy: section; every checkpoint holds the same factory."""
    document = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert document["policy"] == {"target": TINY, "kwargs": {"hidden": 8}}
    assert list(document)[6:8] == ["policy", "run"]
    checkpoint = load_checkpoint(run_dir / "checkpoints" / "last.ckpt")
    assert checkpoint.policy_factory == PolicyFactory(TINY, kwargs={"hidden": 8})


def test_evaluate_and_video(run_dir: Path, tmp_path: Path) -> None:
    """typedrl evaluate rebuilds the user's policy from the run; --video records it."""
    video = tmp_path / "episode.mp4"
    argv = ["evaluate", str(run_dir), "--episodes", "2", "--num-envs", "2"]
    assert main([*argv, "--json", str(tmp_path / "eval.json"), "--video", str(video)]) == 0
    report = json.loads((tmp_path / "eval.json").read_text())
    assert (report["algorithm"], report["episodes"]) == ("ppo", 2)
    assert video.stat().st_size > 0


@pytest.mark.parametrize("export_format", ["torchscript", "onnx"])
def test_export(run_dir: Path, tmp_path: Path, export_format: str) -> None:
    """typedrl export writes the user's policy through its act; the file plays its mean."""
    target = tmp_path / f"policy.{export_format}"
    argv = ["export", str(run_dir), "--format", export_format, "--output", str(target)]
    assert main(argv) == 0
    obs = torch.randn(5, 3)
    actions = (
        _run_torchscript(target, obs)
        if export_format == "torchscript"
        else torch.from_numpy(_run_onnx(target, obs))
    )
    assert actions.shape == (5, 1)
    assert np.isfinite(actions.numpy()).all()


def test_resume_keeps_the_policy(run_dir: Path) -> None:
    """--resume rebuilds the policy from config.yaml; changing it is refused."""
    with pytest.raises(ConfigError, match=r"policy was \{'target': 'typedrl\.testing:TinyA"):
        main(["--debug", "train", "--resume", str(run_dir), "--policy-kwargs", "hidden=4"])
    argv = ["train", "--resume", str(run_dir), "--total-timesteps", "192", "--no-progress"]
    assert main(argv) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["global_step"] == 192


def test_policy_flags_are_checked_before_training(tmp_path: Path) -> None:
    """--policy-kwargs without --policy, or a factory that does not import, stop at once."""
    with pytest.raises(ConfigError, match=r"--policy-kwargs .*needs a policy factory"):
        main(["--debug", "train", "--policy-kwargs", "hidden=4", "--print-config"])
    argv = ["--debug", "train", "--policy", "no_such_pkg:make", "--run-dir", str(tmp_path / "run")]
    with pytest.raises(ConfigError, match=r"cannot import no_such_pkg"):
        main([*argv, *SMALL])
    assert not (tmp_path / "run").exists()


def test_policy_kwargs_that_are_not_a_mapping_are_one_line(tmp_path: Path) -> None:
    """A layer's policy.kwargs merged over a file's factory must be a mapping."""
    config = tmp_path / "config.yaml"
    config.write_text("policy:\n  target: typedrl.testing:TinyActorCritic\n")
    argv = ["--debug", "train", "--config", str(config), "--set", "policy.kwargs=5"]
    with pytest.raises(ConfigError, match=r"policy\.kwargs must be a mapping .*got 5 \(type int\)"):
        main([*argv, "--run-dir", str(tmp_path / "run"), *SMALL])
    assert not (tmp_path / "run").exists()


def test_a_differentiable_policy_of_ones_own(tmp_path: Path) -> None:
    """--algo apg --policy trains the factory's policy; evaluate rebuilds it."""
    run = tmp_path / "apg"
    argv = ["train", "typedrl/PointMass-v0", "--algo", "apg", "--total-timesteps", "128", *SMALL]
    policy = ["--policy", "typedrl.policies:DifferentiableMLPPolicy", "--policy-kwargs"]
    assert (
        main(
            [*argv, *policy, '{"hidden": [8]}', "--set", "segment_length=16", "--run-dir", str(run)]
        )
        == 0
    )
    checkpoint = load_checkpoint(run / "checkpoints" / "last.ckpt")
    assert checkpoint.policy_factory == PolicyFactory(
        "typedrl.policies:DifferentiableMLPPolicy", kwargs={"hidden": [8]}
    )
    assert main(["evaluate", str(run), "--episodes", "2", "--num-envs", "2"]) == 0
