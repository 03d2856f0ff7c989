"""Tests for benchmarks/ahac_contact_gradients.py on hand-written run folders."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests._benchmarks import load_benchmark

contact_gradients = load_benchmark("ahac_contact_gradients")


def _run(folder: Path, header: str, rows: list[str]) -> Path:
    folder.mkdir()
    (folder / "metrics.csv").write_text("\n".join([header, *rows]) + "\n")
    return folder


def test_bins_split_at_the_edges_and_leave_out_missing_values() -> None:
    nan = math.nan
    bins = contact_gradients.contact_bins(
        np.array([0.0, 99.0, 100.0, 250.0, nan, 600.0]),
        np.array([1.0, 3.0, 10.0, 20.0, 5.0, nan]),
        np.array([0.1, nan, 0.5, 0.7, 0.2, 0.9]),
        [0.0, 100.0, 200.0],
    )
    assert [(b.low, b.high, b.updates) for b in bins] == [
        (0.0, 100.0, 2),
        (100.0, 200.0, 1),
        (200.0, math.inf, 1),
    ]
    assert bins[0].gradient_median == 2.0
    assert bins[0].gradient_p90 == pytest.approx(2.8)
    assert bins[0].adjoint_median == 0.1  # the row without an adjoint is left out of it
    assert bins[2].gradient_median == 20.0


def test_the_table_pools_every_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    header = "step,train/grad_norm,ahac/contact_norm,adjoint/norm_max,eval/score"
    first = _run(tmp_path / "a", header, ["512,2.0,40.0,0.3,", "1024,4.0,60.0,0.5,12.5"])
    second = _run(tmp_path / "b", header, ["512,30.0,320.0,1.5,"])
    argv = ["ahac_contact_gradients.py", str(first), str(second), "--bins", "0", "300"]
    monkeypatch.setattr(sys, "argv", argv)
    contact_gradients.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "2 run(s), 3 updates"
    assert lines[2].split() == ["0-300", "2", "3", "3.8", "0.4"]
    assert lines[3].split() == [">=", "300", "1", "30", "30", "1.5"]


def test_a_run_without_contact_norms_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shac = _run(tmp_path / "shac", "step,train/grad_norm", ["512,2.0"])
    monkeypatch.setattr(sys, "argv", ["ahac_contact_gradients.py", str(shac)])
    with pytest.raises(SystemExit) as exited:
        contact_gradients.main()
    assert exited.value.code == 2
    assert "logs no ahac/contact_norm: not an AHAC run" in capsys.readouterr().err


SETTINGS = {
    "horizon_min": 8,
    "horizon_max": 64,
    "horizon_learning_rate": 0.01,
    "horizon_learning_rate_schedule": "constant",
    "horizon_min_learning_rate": 0.0,
}


def test_the_replay_follows_the_horizon_rule_window_by_window() -> None:
    """lambda_t = lambda - alpha (C - c): 10 then 20 per step; H = 8 + 0.08 * 10, + 0.09 * 20."""
    replay = contact_gradients.replay_horizon(np.array([1500.0, math.nan, 1500.0]), SETTINGS, 500.0)
    assert (replay.final, replay.largest, replay.longer) == (10.6, 10.6, 2)
    below = contact_gradients.replay_horizon(np.array([100.0] * 50), SETTINGS, 500.0)
    assert (below.final, below.largest, below.longer) == (8.0, 8.0, 0)


def test_the_replay_reads_each_runs_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path / "a", "step,train/grad_norm,ahac/contact_norm", ["512,2.0,1500.0"])
    document = {"algo": "ahac", "config": {"algorithm": SETTINGS}}
    (run / "config.yaml").write_text(yaml.safe_dump(document))
    monkeypatch.setattr(sys, "argv", ["ahac_contact_gradients.py", str(run), "--replay", "500"])
    contact_gradients.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].split()[:2] == ["C", "final"]
    assert lines[-1].split() == ["500", "8.8", "8.8", "1"]
    (run / "config.yaml").write_text(yaml.safe_dump({"algo": "shac", "config": {}}))
    with pytest.raises(SystemExit):
        contact_gradients.main()
    assert "holds no AHAC settings to replay" in capsys.readouterr().err
