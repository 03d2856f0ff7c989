"""A trainer outside typedrl, installed through an entry point: trained, resumed, evaluated."""

import json
import os
import subprocess
import sys
from pathlib import Path

from typedrl.algorithms import ENTRY_POINT_GROUP
from typedrl.checkpoint import load_checkpoint
from typedrl.policies import PolicyFactory

ROOT = Path(__file__).resolve().parents[2]


def _installed(site: Path) -> Path:
    """A package's metadata as pip installs it: the entry point naming tests.cli.random_search."""
    dist = site / "typedrl_random_search-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: typedrl-random-search\nVersion: 0.1\n"
    )
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nrandom_search = tests.cli.random_search:ALGORITHM\n"
    )
    return site


def _typedrl(*args: str, site: Path, cwd: Path) -> str:
    """Run the typedrl command in a fresh process that sees the installed entry point."""
    path = os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "typedrl", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_registered_trainer_trains_resumes_and_evaluates(tmp_path: Path) -> None:
    """--algo random_search comes from the entry point; its runs resume and evaluate."""
    site = _installed(tmp_path / "site")
    run_dir = tmp_path / "run"
    small = ["--num-envs", "4", "--eval-episodes", "2", "--no-progress"]
    argv = ["train", "--algo", "random_search", "--total-timesteps", "256", *small]
    out = _typedrl(
        *argv, "--set", "num_steps=16", "--run-dir", str(run_dir), site=site, cwd=tmp_path
    )
    assert (
        "RandomSearchConfig defaults < command-line flags" in (run_dir / "config.yaml").read_text()
    )
    assert "iterations      4" in out
    last = run_dir / "checkpoints" / "last.ckpt"
    checkpoint = load_checkpoint(last, expected_kind="random_search")
    assert checkpoint.policy_factory == PolicyFactory("tests.cli.random_search:linear_policy")
    assert checkpoint.env_id == "typedrl/CartPole-v0"

    _typedrl("train", "--resume", str(run_dir), "--total-timesteps", "512", site=site, cwd=tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["algorithm"], summary["global_step"]) == ("random_search", 512)

    out = _typedrl(
        "evaluate", str(run_dir), "--episodes", "2", "--num-envs", "2", site=site, cwd=tmp_path
    )
    assert "(random_search, 2 rows, seed 0)" in out
    report = json.loads((run_dir / "eval.json").read_text())
    _typedrl("export", str(run_dir), "--format", "torchscript", site=site, cwd=tmp_path)
    assert (run_dir / "policy.pt").is_file()
    assert (report["kind"], report["algorithm"], report["episodes"]) == (
        "random_search",
        "random_search",
        2,
    )
