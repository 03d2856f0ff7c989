"""`typedrl evaluate` scores a run's checkpoint exactly as its training-time evaluation did."""

import json
from pathlib import Path

import pytest

from typedrl import configs
from typedrl.cli import main
from typedrl.seeding import derive_seed

_SEED = 3
_ROWS = 4
_EPISODES = 4

_BUILTIN_TUNED = [
    pytest.param(algo, env_id, id=f"{algo}-{env_id}")
    for algo, env_id in configs.available()
    # The MuJoCo swing-up takes ~0.6 s per physics step on a CPU; it has its own slow tests.
    # The Newton envs need the newton extra; tests_newton covers them.
    if env_id.startswith("typedrl/") and "Mujoco" not in env_id and "Newton" not in env_id
]
"""Every (algorithm, built-in env) pair that ships a tuned file."""

_TINY = {
    "ppo": ["--set", "num_steps=16", "--set", "batch_size=32", "--total-timesteps", "64"],
    "apg": ["--set", "segment_length=8", "--total-timesteps", "64"],
    "shac": ["--set", "segment_length=8", "--total-timesteps", "64"],
}
"""One or two updates of each algorithm over the tuned file's other settings."""


def _json(path: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(path.read_text())
    return loaded


@pytest.mark.parametrize(("algo", "env_id"), _BUILTIN_TUNED)
def test_evaluate_equals_the_training_evaluation(
    algo: str, env_id: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On the training evaluation's rows, episodes and seed, evaluate prints the recorded return."""
    run_dir = tmp_path / "run"
    train = ["train", env_id, "--algo", algo, "--seed", str(_SEED), "--num-envs", str(_ROWS)]
    train += ["--eval-episodes", str(_EPISODES), "--no-progress", "--run-dir", str(run_dir)]
    assert main([*train, *_TINY[algo]]) == 0
    capsys.readouterr()
    summary = _json(run_dir / "summary.json")
    assert summary["algorithm"] == algo
    # The trainer seeds its evaluation env with the run seed's "eval_env" stream of rank 0.
    seed = derive_seed(_SEED, "eval_env", rank=0)
    report_path = tmp_path / "eval.json"
    evaluate = ["evaluate", str(run_dir), "--episodes", str(_EPISODES), "--num-envs", str(_ROWS)]
    assert main([*evaluate, "--seed", str(seed), "--json", str(report_path)]) == 0
    report = _json(report_path)
    # evaluate names the flags that replay the training evaluation, and they are these.
    replay = f"--episodes {_EPISODES} --num-envs {_ROWS} --seed {seed} replays that evaluation"
    assert replay in capsys.readouterr().out
    assert report["algorithm"] == algo
    assert report["checkpoint"] == str(run_dir / "checkpoints" / "best.ckpt")
    assert report["return_mean"] == pytest.approx(summary["best_eval_return_mean"], abs=1e-4)
    assert report["score"] == pytest.approx(summary["best_score"], abs=1e-4)
