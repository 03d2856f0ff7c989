"""Run folders made by short real `typedrl train` runs, shared by the command's tests."""

from pathlib import Path

import pytest

from typedrl.cli import main

_RUNS = {
    "ppo_discrete": [
        "CartPole-v1",
        "--total-timesteps",
        "256",
        "--num-envs",
        "4",
        "--set",
        "num_steps=16",
        "--set",
        "batch_size=32",
    ],
    "ppo_continuous": [
        "Pendulum-v1",
        "--total-timesteps",
        "256",
        "--num-envs",
        "4",
        "--eval-episodes",
        "2",
        "--set",
        "num_steps=32",
        "--set",
        "batch_size=64",
        "--set",
        "normalize_observations=true",
    ],
    "apg": [
        "typedrl/PointMass-v0",
        "--algo",
        "apg",
        "--total-timesteps",
        "256",
        "--num-envs",
        "4",
        "--set",
        "segment_length=16",
        "--set",
        "normalize_observations=true",
    ],
    "shac": [
        "typedrl/Pendulum-v0",
        "--algo",
        "shac",
        "--total-timesteps",
        "256",
        "--num-envs",
        "4",
        "--eval-episodes",
        "2",
        "--set",
        "segment_length=16",
        "--set",
        "algorithm.critic_iterations=2",
    ],
}


@pytest.fixture(scope="session")
def trained_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Run folders of PPO (discrete and continuous actions), APG and SHAC, tiny budgets."""
    root = tmp_path_factory.mktemp("runs")
    runs: dict[str, Path] = {}
    for name, argv in _RUNS.items():
        run_dir = root / name
        assert main(["train", *argv, "--run-dir", str(run_dir), "--no-progress"]) == 0
        runs[name] = run_dir
    return runs
