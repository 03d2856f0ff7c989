"""Tests for `typedrl plot` and typedrl.plotting."""

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from typedrl.cli import main
from typedrl.errors import ConfigError, MissingDependencyError
from typedrl.plotting import (
    EVAL_RETURN_METRIC,
    TRAIN_RETURN_METRIC,
    Curve,
    _default_metric,
    _labels,
    _on_common_grid,
    _title,
    plot_runs,
    read_run,
    seed_groups,
)

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run(
    root: Path,
    name: str,
    rows: list[dict[str, float]],
    *,
    config: dict[str, Any] | None = None,
    csv_path: str = "metrics.csv",
) -> Path:
    """A run folder with ``rows`` (each with its ``step``) in metrics.csv and a config.yaml."""
    run_dir = root / name
    path = run_dir / csv_path
    path.parent.mkdir(parents=True, exist_ok=True)
    columns = ["step", *dict.fromkeys(key for row in rows for key in row if key != "step")]
    lines = [",".join(columns)]
    lines += [",".join(repr(row[c]) if c in row else "" for c in columns) for row in rows]
    path.write_text("\n".join(lines) + "\n")
    if config is not None:
        (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    return run_dir


def _config(seed: int, **config: Any) -> dict[str, Any]:
    return {
        "source": "a test",
        "algo": "ppo",
        "env_id": "CartPole-v1",
        "num_envs": 8,
        "config": {"learning_rate": 1e-3, "seed": seed, **config},
        "seed": seed,
        "run": {"eval_every": 100, "devices": 1, "run_dir": f"runs/seed{seed}"},
        "command": ["typedrl", "train", "--seed", str(seed)],
    }


def _curve_rows(scale: float, steps: tuple[int, ...] = (100, 200, 300)) -> list[dict[str, float]]:
    rows: list[dict[str, float]] = []
    for step in steps:
        rows.append(
            {"step": step, TRAIN_RETURN_METRIC: scale * step, "time/iteration_seconds": 0.5}
        )
        rows.append({"step": step, EVAL_RETURN_METRIC: 2 * scale * step})
    return rows


def _is_png(path: Path) -> bool:
    return path.read_bytes()[:8] == _PNG_MAGIC


def test_plot_a_real_run_folder(
    trained_runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`typedrl plot RUN_DIR` draws the run's evaluation return into RUN_DIR/curve.png."""
    run_dir = trained_runs["ppo_discrete"]
    assert main(["plot", str(run_dir)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {run_dir / 'curve.png'}"
    assert _is_png(run_dir / "curve.png")
    curve = read_run(run_dir).series(EVAL_RETURN_METRIC)
    assert len(curve.x) >= 1
    assert np.isfinite(curve.y).all()


def test_plot_several_real_runs_overlaid(
    trained_runs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Several runs go to ./curve.png by default; -o and --metric choose the file and column."""
    monkeypatch.chdir(tmp_path)
    runs = [str(trained_runs["ppo_discrete"]), str(trained_runs["apg"])]
    assert main(["plot", *runs]) == 0
    assert _is_png(tmp_path / "curve.png")
    output = tmp_path / "plots" / "train.png"
    assert main(["plot", *runs, "-o", str(output), "--metric", "time/sps"]) == 0
    assert _is_png(output)
    assert main(["plot", *runs, "-o", str(output), "--x", "wall_time"]) == 0
    capsys.readouterr()
    # No APG episode ended in its 256 steps: it has no training return to draw.
    assert main(["plot", *runs, "--metric", TRAIN_RETURN_METRIC]) == 1
    assert "has no metric 'episode/return_mean'" in capsys.readouterr().err


def test_read_run_columns_and_series(tmp_path: Path) -> None:
    """Blank cells read as NaN; a series keeps the rows that logged its metric, by x."""
    run_dir = _run(tmp_path, "a", _curve_rows(1.0))
    run = read_run(run_dir)
    assert run.columns["step"].tolist() == [100, 100, 200, 200, 300, 300]
    assert np.isnan(run.columns[EVAL_RETURN_METRIC][0])
    curve = run.series(EVAL_RETURN_METRIC)
    assert curve.x.tolist() == [100, 200, 300]
    assert curve.y.tolist() == [200.0, 400.0, 600.0]
    wall = run.series(TRAIN_RETURN_METRIC, x="wall_time")
    assert wall.x.tolist() == [0.5, 1.0, 1.5]
    assert run.algorithm is None
    assert run.env_id is None


def test_read_run_finds_the_metrics_of_earlier_releases(tmp_path: Path) -> None:
    """A run folder with logs/typedrl/metrics.csv (the earlier layout) still plots."""
    run_dir = _run(tmp_path, "old", _curve_rows(1.0), csv_path="logs/typedrl/metrics.csv")
    assert read_run(run_dir).series(TRAIN_RETURN_METRIC).y.tolist() == [100.0, 200.0, 300.0]


def test_runs_differing_only_by_seed_are_grouped(tmp_path: Path) -> None:
    """seed, config.seed, command and run folders do not split an experiment; other keys do."""
    seeds = [read_run(_run(tmp_path, f"s{i}", _curve_rows(1.0), config=_config(i))) for i in (0, 1)]
    other = read_run(_run(tmp_path, "lr", _curve_rows(1.0), config=_config(0, learning_rate=3e-4)))
    bare = read_run(_run(tmp_path, "bare", _curve_rows(1.0)))
    groups = seed_groups([seeds[0], other, seeds[1], bare])
    assert [[run.run_dir.name for run in group] for group in groups] == [
        ["s0", "s1"],
        ["lr"],
        ["bare"],
    ]
    assert seeds[0].experiment() == seeds[1].experiment()
    assert "seed" not in seeds[0].experiment()["config"]
    assert "run_dir" not in str(seeds[0].experiment())
    assert (seeds[0].algorithm, seeds[0].env_id) == ("ppo", "CartPole-v1")
    other_env = _config(0)
    other_env["env_id"] = "Acrobot-v1"
    other_env["source"] = "a tuned file for Acrobot-v1, which the label leaves out"
    other_env["num_envs"] = [16] * 20
    acrobot = read_run(_run(tmp_path, "acrobot", _curve_rows(1.0), config=other_env))
    assert _labels([[seeds[0]], [acrobot], [other]])[:2] == [
        "env_id=CartPole-v1, num_envs=8, config.learning_rate=0.001",
        "env_id=Acrobot-v1, num_envs=[16, 16, 16, 16, 16, 16, 16, ..., config.learning_rate=0.001",
    ]
    labels = _labels(groups)
    assert labels[0] == "config.learning_rate=0.001 (mean ± std, 2 seeds)"
    assert labels[1] == "config.learning_rate=0.0003"
    assert labels[2] == "bare"
    assert _title([*seeds, bare], "time/sps") == "PPO on CartPole-v1: time/sps"
    assert _title([bare], "time/sps") == "time/sps"
    devices = _config(2)
    devices["run"]["devices"] = 2
    two_ranks = read_run(_run(tmp_path, "ddp", _curve_rows(1.0), config=devices))
    assert len(seed_groups([seeds[0], two_ranks])) == 2


def test_seeds_are_averaged_on_a_common_grid() -> None:
    """Mean ± std is taken over the x range every seed covers, interpolated."""
    first = Curve(x=np.array([0.0, 100.0, 200.0]), y=np.array([0.0, 10.0, 20.0]))
    second = Curve(x=np.array([50.0, 150.0]), y=np.array([10.0, 30.0]))
    combined = _on_common_grid([first, second])
    assert combined is not None
    assert combined.x.tolist() == [50.0, 100.0, 150.0]
    assert combined.y[0].tolist() == [5.0, 10.0, 15.0]
    assert combined.y[1].tolist() == [10.0, 20.0, 30.0]
    apart = Curve(x=np.array([300.0, 400.0]), y=np.array([1.0, 2.0]))
    assert _on_common_grid([first, apart]) is None


def test_plot_runs_writes_the_figure(tmp_path: Path) -> None:
    """Grouped seeds, other runs and runs without the metric's early rows all plot."""
    runs = [
        _run(tmp_path, "s0", _curve_rows(1.0), config=_config(0)),
        _run(tmp_path, "s1", _curve_rows(1.5), config=_config(1)),
        _run(tmp_path, "far", _curve_rows(1.0, steps=(1000, 2000)), config=_config(0, gamma=0.9)),
    ]
    written = plot_runs(runs, tmp_path / "out" / "curves.png")
    assert written == tmp_path / "out" / "curves.png"
    assert _is_png(written)
    assert _is_png(plot_runs(runs, tmp_path / "wall.png", x="wall_time"))
    # One evaluation per seed, at the same step: a mean with an error bar.
    ends = [
        _run(
            tmp_path, f"end{seed}", [{"step": 100, EVAL_RETURN_METRIC: seed}], config=_config(seed)
        )
        for seed in (0, 1)
    ]
    assert _is_png(plot_runs(ends, tmp_path / "end.png"))


def test_default_metric_falls_back_to_the_training_return(tmp_path: Path) -> None:
    """Without evaluations the training episode return is drawn; with neither, an error."""
    rows = [{"step": 10, TRAIN_RETURN_METRIC: 1.0}, {"step": 20, TRAIN_RETURN_METRIC: 2.0}]
    assert _is_png(plot_runs([_run(tmp_path, "train", rows)], tmp_path / "t.png"))
    only_loss = _run(tmp_path, "loss", [{"step": 10, "loss/total": 1.0}])
    with pytest.raises(ConfigError, match="name a metric they logged"):
        plot_runs([only_loss], tmp_path / "l.png")
    assert _is_png(plot_runs([only_loss], tmp_path / "l.png", metric="loss/total"))


def test_one_evaluation_is_no_curve(tmp_path: Path) -> None:
    """A run evaluated only at its end plots its training return; two evaluations make a curve."""
    train = [{"step": 10, TRAIN_RETURN_METRIC: 1.0}, {"step": 20, TRAIN_RETURN_METRIC: 2.0}]
    once = read_run(_run(tmp_path, "once", [*train, {"step": 20, EVAL_RETURN_METRIC: 5.0}]))
    assert _default_metric([once]) == TRAIN_RETURN_METRIC
    twice = read_run(
        _run(tmp_path, "twice", [*train, *({"step": s, EVAL_RETURN_METRIC: 5.0} for s in (10, 20))])
    )
    assert _default_metric([once, twice]) == EVAL_RETURN_METRIC
    only_eval = read_run(_run(tmp_path, "only", [{"step": 20, EVAL_RETURN_METRIC: 5.0}]))
    assert _default_metric([only_eval]) == EVAL_RETURN_METRIC


def test_plot_errors(tmp_path: Path) -> None:
    """Each mistake names what was expected and what came."""
    run_dir = _run(tmp_path, "a", _curve_rows(1.0))
    with pytest.raises(ConfigError, match="at least one run folder"):
        plot_runs([], tmp_path / "x.png")
    with pytest.raises(ConfigError, match=r"ending in \.png"):
        plot_runs([run_dir], tmp_path / "x.svg")
    with pytest.raises(ConfigError, match=r"no metric 'loss/total'; it logged \["):
        plot_runs([run_dir], tmp_path / "x.png", metric="loss/total")
    with pytest.raises(ConfigError, match="is not a folder"):
        plot_runs([tmp_path / "missing"], tmp_path / "x.png")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"holds no metrics\.csv"):
        plot_runs([tmp_path / "empty"], tmp_path / "x.png")
    no_step = tmp_path / "nostep"
    no_step.mkdir()
    (no_step / "metrics.csv").write_text("loss\n1.0\n")
    with pytest.raises(ConfigError, match="has no 'step' column"):
        read_run(no_step)
    (run_dir / "config.yaml").write_text("- a list\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        read_run(run_dir)
    (run_dir / "config.yaml").write_text("key: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        read_run(run_dir)
    no_time = _run(tmp_path, "notime", [{"step": 1, TRAIN_RETURN_METRIC: 1.0}])
    with pytest.raises(ConfigError, match="--x env_steps"):
        plot_runs([no_time], tmp_path / "x.png", x="wall_time")
    blank = _run(tmp_path, "blank", [{"step": 1, TRAIN_RETURN_METRIC: 1.0}, {"step": 2}])
    (blank / "metrics.csv").write_text(f"step,{TRAIN_RETURN_METRIC}\n1,\n")
    with pytest.raises(ConfigError, match="no run logged a value"):
        plot_runs([blank], tmp_path / "x.png", metric=TRAIN_RETURN_METRIC)


def test_plot_without_matplotlib_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without matplotlib, `typedrl plot` fails with one line naming the plot extra."""
    find_spec = importlib.util.find_spec

    def without_matplotlib(name: str, package: str | None = None) -> Any:
        return None if name == "matplotlib" else find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", without_matplotlib)
    run_dir = _run(tmp_path, "a", _curve_rows(1.0))
    with pytest.raises(MissingDependencyError, match=r"typedrl\[plot\]"):
        main(["--debug", "plot", str(run_dir)])
    assert main(["plot", str(run_dir)]) == 1
    assert "MissingDependencyError" in capsys.readouterr().err


def test_plot_of_several_folders_skips_one_without_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`typedrl plot runs/*` names a folder that never logged and draws the others."""
    run_dir = _run(tmp_path, "a", _curve_rows(1.0))
    husk = tmp_path / "husk"
    husk.mkdir()
    (husk / "config.yaml").write_text("algo: ppo\n")
    output = tmp_path / "both.png"
    assert main(["plot", str(run_dir), str(husk), "-o", str(output)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"skipped {husk}: no metrics.csv (not a run, or one that never trained)",
        f"wrote {output}",
    ]
    assert _is_png(output)
    assert main(["plot", str(husk)]) == 1  # alone, it is the error it always was
    assert "holds no metrics.csv" in capsys.readouterr().err
