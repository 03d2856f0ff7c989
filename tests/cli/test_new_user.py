"""A new user's walk through the README, on small budgets: every number true, nothing lost.

The commands are the README's (quick start, "from there", the algorithms),
run in a fresh folder as a user types them, with ``--total-timesteps`` cut
down. The walk asserts what a user would check by eye: the run folder's
files, that printed scores equal recorded ones, that a second ``train`` on
the same folder leaves the first run whole, and that an exported ONNX file
works on its own.
"""

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from typedrl.cli import main

_SMALL = ["--total-timesteps", "2048", "--no-progress"]
"""The README's commands, cut to a small budget (one or two iterations)."""

_RUN_FILES = ("config.yaml", "metrics.csv", "summary.json", "checkpoints/last.ckpt")


def _json(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def _only_run(runs: Path, before: set[Path]) -> Path:
    """The one run folder that appeared in ``runs`` since ``before``."""
    new = set(runs.iterdir()) - before
    assert len(new) == 1, f"expected one new run folder, got {sorted(new)}"
    return new.pop()


def _printed(out: str, label: str) -> str:
    """The value printed after ``label`` on the command's summary."""
    match = re.search(rf"^{label}\s+(.+)$", out, flags=re.MULTILINE)
    assert match is not None, f"no {label!r} line in:\n{out}"
    return match.group(1)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh folder to work in, as after a clone."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_quick_start_run_folder_evaluate_plot_export(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`typedrl train`, then evaluate, plot and export the run it left, as the README says."""
    onnxruntime = pytest.importorskip("onnxruntime")
    runs = home / "runs"
    assert main(["train", *_SMALL]) == 0
    out = capsys.readouterr().out
    run = _only_run(runs, set())
    assert run.name.startswith("ppo-typedrl-CartPole-v0-")
    for name in (*_RUN_FILES, "checkpoints/best.ckpt", "curve.png"):
        assert (run / name).is_file(), name
    summary = _json(run / "summary.json")
    # The printed scores are the recorded ones.
    assert float(_printed(out, "eval score")) == pytest.approx(
        summary["final_eval_score"], abs=5e-3
    )
    assert float(_printed(out, "best score")) == pytest.approx(summary["best_score"], abs=5e-3)
    assert int(_printed(out, "env steps").replace(",", "")) == summary["global_step"]

    # typedrl evaluate runs/<run>: the table is eval.json's, and the replay line replays training.
    assert main(["evaluate", str(run)]) == 0
    out = capsys.readouterr().out
    report = _json(run / "eval.json")
    assert out.count(f"{report['return_mean']:.2f}") >= 1
    replay = re.search(r"--episodes (\d+) --num-envs (\d+) --seed (\d+) replays", out)
    assert replay is not None, out
    flags = ["--episodes", replay[1], "--num-envs", replay[2], "--seed", replay[3]]
    assert main(["evaluate", str(run), *flags, "--json", str(home / "replay.json")]) == 0
    capsys.readouterr()
    replayed = _json(home / "replay.json")
    assert replayed["return_mean"] == pytest.approx(summary["best_eval_return_mean"], abs=1e-4)

    # typedrl plot runs/<run> runs/<other-run> -o cmp.png
    assert main(["train", *_SMALL, "--seed", "1"]) == 0
    other = _only_run(runs, {run})
    capsys.readouterr()
    assert main(["plot", str(run), str(other), "-o", "cmp.png"]) == 0
    assert (home / "cmp.png").stat().st_size > 0

    # typedrl export runs/<run> --format onnx -o policy.onnx: one file that works alone.
    assert main(["export", str(run), "--format", "onnx", "-o", "policy.onnx"]) == 0
    capsys.readouterr()
    assert sorted(path.name for path in home.glob("policy.onnx*")) == ["policy.onnx"]
    alone = home / "elsewhere"
    alone.mkdir()
    shutil.copy(home / "policy.onnx", alone / "policy.onnx")
    session = onnxruntime.InferenceSession(str(alone / "policy.onnx"))
    (first,) = session.get_inputs()
    outputs = session.run(None, {first.name: np.zeros((1, 4), dtype=np.float32)})
    assert np.isfinite(outputs[0]).all()


def test_a_second_train_on_the_same_folder_leaves_the_run_whole(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--run-dir` naming an existing run is refused with one line; its files are untouched."""
    run = home / "mine"
    assert main(["train", *_SMALL, "--run-dir", str(run)]) == 0
    capsys.readouterr()
    before = {path.relative_to(run): path.read_bytes() for path in run.rglob("*") if path.is_file()}
    assert main(["train", *_SMALL, "--run-dir", str(run)]) != 0
    err = capsys.readouterr().err
    assert err.startswith("typedrl: ")
    assert "--resume" in err
    assert "--overwrite" in err
    after = {path.relative_to(run): path.read_bytes() for path in run.rglob("*") if path.is_file()}
    assert after == before


@pytest.mark.parametrize("algo", ["apg", "shac"])
def test_differentiable_defaults_train_and_evaluate_to_the_recorded_score(
    algo: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`typedrl train --algo apg|shac`, then evaluate: the replayed score is the recorded one."""
    runs = home / "runs"
    assert main(["train", "--algo", algo, *_SMALL, "--eval-episodes", "4"]) == 0
    capsys.readouterr()
    run = _only_run(runs, set())
    summary = _json(run / "summary.json")
    assert summary["algorithm"] == algo
    assert main(["evaluate", str(run), "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert f"({algo}, " in out
    replay = re.search(r"--episodes (\d+) --num-envs (\d+) --seed (\d+) replays", out)
    assert replay is not None, out
    flags = ["--episodes", replay[1], "--num-envs", replay[2], "--seed", replay[3]]
    assert main(["evaluate", str(run), *flags]) == 0
    capsys.readouterr()
    assert _json(run / "eval.json")["return_mean"] == pytest.approx(
        summary["best_eval_return_mean"], abs=1e-4
    )


def test_print_config_round_trips_and_resume_continues(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--print-config > run.yaml`, `--config run.yaml`, then `--resume runs/<run>` further."""
    assert main(["train", "CartPole-v1", "--print-config"]) == 0
    (home / "run.yaml").write_text(capsys.readouterr().out)
    run = home / "from-file"
    assert main(["train", "--config", "run.yaml", *_SMALL, "--run-dir", str(run)]) == 0
    capsys.readouterr()
    first = _json(run / "summary.json")
    assert first["env_id"] == "CartPole-v1"
    rows = (run / "metrics.csv").read_text().splitlines()
    assert main(["train", "--resume", str(run), "--total-timesteps", "4096", "--no-progress"]) == 0
    capsys.readouterr()
    resumed = _json(run / "summary.json")
    assert resumed["global_step"] > first["global_step"]
    # metrics.csv continues as one series: the first run's rows, then the new ones.
    assert (run / "metrics.csv").read_text().splitlines()[: len(rows)] == rows


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of the quick start's env, made once for the mistyped commands."""
    run = tmp_path_factory.mktemp("walk") / "run"
    assert main(["train", *_SMALL, "--run-dir", str(run)]) == 0
    return run


_MISTAKES: list[tuple[list[str], str]] = [
    (["train", "NoSuchEnv-v9"], "unknown env id 'NoSuchEnv-v9'"),
    (["train", "CartPole-v2"], "closest registered ids: ['CartPole-v1'"),
    (["train", "CartPole-V1"], "closest registered ids: ['CartPole-v1'"),
    (["check-env", "CartPole-V1"], "closest registered ids: ['CartPole-v1'"),
    (["evaluate", "{run}", "CartPole-V1"], "closest registered ids: ['CartPole-v1'"),
    (["evaluate", "{run}", "Pendulum-v1"], "was trained on typedrl/CartPole-v0 with observation"),
    (["evaluate", "nowhere"], "nowhere does not exist"),
    (["train", "--accelerator", "cuda"], "--accelerator cuda: expected 1 CUDA device"),
    (["train", "--num-envs", "100000000"], "--num-envs 100,000,000: the rollout needs"),
    (["train", "CartPole-v1", "--algo", "apg"], "the built-in envs are: typedrl/Pendulum-v0"),
    (["train", "--seed", "5", "--set", "seed=3"], "contradict each other"),
    (["train", "--total-timesteps", "0"], "total_timesteps must be a positive int, got 0"),
    (["train", "--set", "no_such_field=1"], "valid fields: ['activation'"),
    (["train", "--resume", "nowhere"], "--resume nowhere: no such run folder"),
    (["train", "--run-dir", "{run}"], "pass --overwrite to replace it"),
]
"""Commands a new user mistypes, and a piece of the one line each must print."""


@pytest.mark.parametrize(
    ("argv", "expected"), _MISTAKES, ids=[" ".join(argv) for argv, _ in _MISTAKES]
)
def test_a_mistyped_command_prints_one_line_and_fails(
    argv: list[str],
    expected: str,
    small_run: Path,
    home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One `typedrl: <Error>: ...` line (and the --debug hint), exit 1, no run folder left."""
    before = {path.relative_to(small_run): path.stat().st_mtime_ns for path in small_run.rglob("*")}
    assert main([part.format(run=small_run) for part in argv]) == 1
    captured = capsys.readouterr()
    first, hint = captured.err.splitlines()
    assert first.startswith("typedrl: ")
    assert expected in first
    assert hint == "(run with --debug for the traceback)"
    # Nothing was written: no new run folder here, the existing run untouched.
    assert not (home / "runs").exists()
    after = {path.relative_to(small_run): path.stat().st_mtime_ns for path in small_run.rglob("*")}
    assert after == before
