"""Tests for benchmarks/report.py, shape_checks_overhead.py and ppo_vs_sb3.py's curves.

The heavy benchmarks never run here: the report is rendered from canned JSON
results, failures come from tiny stand-in scripts, and the plans are checked
against the scripts' sources.
"""

import itertools
import json
import os
import re
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import TensorDict

from tests._benchmarks import BENCHMARKS, load_benchmark

TIMES = "\N{MULTIPLICATION SIGN}"


report = load_benchmark("report")
shape_checks = load_benchmark("shape_checks_overhead")

CANNED: dict[str, list[Any]] = {
    "builtin_cartpole_throughput": [
        {
            "num_envs": 4096,
            "ratio_vs_gymnasium": {"typedrl_cpu": 1.08, "typedrl_cpu_no_grad": 1.12},
        }
    ],
    "gymnasium_adapter_overhead": [
        {"env_id": "CartPole-v1", "num_envs": 8, "overhead_ratio": 1.25},
        {"env_id": "HalfCheetah-v5", "num_envs": 8, "overhead_ratio": 1.04},
    ],
    "checkpoint_overhead": [{"rolling_save_fraction": 0.0008, "overhead_ratio": 1.01}],
    "shape_checks_overhead": [
        {
            "ppo": {"ratio": 2.9, "round_ratios": [2.8, 3.0]},
            "apg": {"ratio": 2.5, "round_ratios": [2.5]},
        }
    ],
    "apg_backward_cost": [
        {"env_id": "typedrl/Pendulum-v0", "num_envs": 64, "update_over_forward": 2.4},
        {"env_id": "typedrl/Reacher-v0", "num_envs": 64, "update_over_forward": 3.5},
    ],
    "ppo_vs_sb3": [
        {
            "ratio": 1.39,
            "compile": False,
            "curves": {"typedrl": [[16384, 40.0], [32768, 210.0]], "sb3": [[32768, 150.0]]},
        },
        {"ratio": 2.59, "compile": True},
    ],
    "ppo_vs_rsl_rl": [
        {
            "ratio": 1.25,
            "compile": False,
            "fresh_processes": True,
            "rsl_rl_version": "5.5.1",
            "num_envs": 4096,
            "env_steps_per_run": 1310720,
            "rounds": [{"rsl_rl": 200.0, "typedrl": 250.0}],
        },
        {
            "ratio": 1.5,
            "compile": True,
            "fresh_processes": True,
            "rsl_rl_version": "5.5.1",
            "num_envs": 4096,
            "env_steps_per_run": 1310720,
            "rounds": [{"rsl_rl": 200.0, "typedrl": 300.0}],
        },
        {"ratio": 1.07, "compile": False, "rsl_rl_version": "5.5.1", "num_envs": 4096},
    ],
    "ppo_vs_sb3_process": [
        {
            "timesteps": 49152,
            "compile": False,
            "rounds": [{"sb3_s": 27.0, "typedrl_s": 18.0}],
            "ratio": 1.5,
        },
        {
            "timesteps": 49152,
            "compile": True,
            "rounds": [{"sb3_s": 27.0, "typedrl_s": 15.0}],
            "ratio": 1.8,
        },
    ],
    "ppo_compile_speed": [
        {
            "eager_ms": 5.0,
            "compiled_ms": 3.5,
            "ratio": 1.4,
            "first_update_s": {"eager": 2.5, "compiled": 30.0},
            "rounds": 6,
        }
    ],
    "sample_efficiency": [
        {
            "env_id": "typedrl/PointMass-v0",
            "target_return": -20.0,
            "ppo": {"reached": True},
            "apg": {"reached": True},
            "ppo_over_apg_steps": 42.7,
            "ppo_over_apg_time": 12.3,
        },
        {
            "env_id": "typedrl/Reacher-v0",
            "target_return": -25.0,
            "ppo": {"reached": False},
            "shac": {"reached": True},
            "ppo_over_shac_steps": None,
            "ppo_over_shac_time": None,
        },
    ],
    "shac_learning": [
        {
            "env_id": "typedrl/Pendulum-v0",
            "seed": 0,
            "return_mean": -180.5,
            "success_rate": None,
            "goal": "return_mean >= -200.0",
            "met": True,
        }
    ],
    "ppo_vs_sb3_mujoco": [
        {
            "env": "HalfCheetah-v5",
            "side": "typedrl",
            "return_mean": 3000.0,
            "env_steps_per_s": 900.0,
            "env_steps": 300000,
        },
        {
            "env": "HalfCheetah-v5",
            "side": "sb3",
            "return_mean": 2000.0,
            "env_steps_per_s": 600.0,
            "env_steps": 300000,
        },
    ],
    "mujoco_torch_throughput": [
        {"over_gymnasium": {"gymnasium/HalfCheetah-v5 x8": 1.0, "mujoco x16 fwd": 0.002}},
    ],
}
"""One canned output per benchmark, shaped like each script's ``--json`` output."""

EXPECTED_RATIOS: dict[str, list[float | None]] = {
    "builtin_cartpole_throughput": [1.08, 1.12],
    "gymnasium_adapter_overhead": [1.25, 1.04],
    "checkpoint_overhead": [1.0 / (1.0 - 0.0008), 1.01],
    "shape_checks_overhead": [2.9, 2.5],
    "apg_backward_cost": [2.4, 3.5],
    "ppo_vs_sb3": [1.39, 2.59],
    "ppo_vs_rsl_rl": [1.25, 1.5, 1.07],
    "ppo_vs_sb3_process": [1.5, 1.8],
    "ppo_compile_speed": [1.4],
    "sample_efficiency": [42.7, None],
    "shac_learning": [None],
    "ppo_vs_sb3_mujoco": [1.5, 1.5],
    "mujoco_torch_throughput": [0.002],
}
EXPECTED_MET: dict[str, list[bool | None]] = {
    "builtin_cartpole_throughput": [True, None],
    "gymnasium_adapter_overhead": [False, True],
    "checkpoint_overhead": [True, None],
    "apg_backward_cost": [True, False],
    "ppo_vs_sb3": [None, True],
    "ppo_vs_rsl_rl": [False, True, None],
    "ppo_vs_sb3_process": [True, False],
    "shac_learning": [True],
}


def _by_name() -> dict[str, Any]:
    return {benchmark.name: benchmark for benchmark in report.plan()}


def _environment() -> Any:
    return report.Environment(
        date="2026-12-01 12:00 UTC",
        cpu="Example CPU @ 2.0GHz",
        cores=2,
        system="Linux x86_64",
        python="3.11.9",
        versions={"torch": "2.13.0", "gymnasium": "1.4.0", "typedrl": "0.1.0"},
    )


def _stand_in(
    folder: Path, name: str, body: str, *, extract: Any = None, quick: bool = True
) -> Any:
    """A benchmark whose script is ``body``, written to ``folder/<name>.py``."""
    (folder / f"{name}.py").write_text(textwrap.dedent(body))
    return report.Benchmark(
        name=name,
        script=f"{name}.py",
        full=(("--json",),),
        quick=(("--json",),) if quick else None,
        quick_excluded_because="" if quick else "too slow",
        extract=extract or report.extract_checkpoint_overhead,
    )


# ----------------------------------------------------------------- the plan


def test_plan_has_every_benchmark_script() -> None:
    """Every benchmark script in benchmarks/ (not the report, the refactoring checks or an
    optional backend's) is in the plan, once."""
    every = {path.name for path in BENCHMARKS.glob("*.py")}
    exempt = (
        report.REFACTORING_CHECKS
        | report.NEEDS_OWN_ENV
        | report.NEEDS_REFERENCE_CHECKOUT
        | report.NEEDS_TRAINED_RUNS
    )
    assert exempt <= every, "an exempted script is gone: drop it from the exemptions"
    scripts = every - {"report.py"} - exempt
    planned = [benchmark.script for benchmark in report.plan()]
    assert sorted(planned) == sorted(set(planned))
    assert scripts <= set(planned)
    names = [benchmark.name for benchmark in report.plan()]
    assert len(names) == len(set(names))


def test_quick_plan_composition() -> None:
    """--quick runs the cheap benchmarks at small sizes and names why the others are left out."""
    chosen = {
        benchmark.name: commands for benchmark, commands in report.select(report.plan(), quick=True)
    }
    running = {name for name, commands in chosen.items() if commands is not None}
    assert running == {
        "builtin_cartpole_throughput",
        "gymnasium_adapter_overhead",
        "checkpoint_overhead",
        "shape_checks_overhead",
        "apg_backward_cost",
        "ppo_vs_sb3",
        "ppo_vs_rsl_rl",
        "sample_efficiency",
        "mujoco_torch_throughput",
    }
    for benchmark in report.plan():
        if benchmark.quick is None:
            assert benchmark.quick_excluded_because
    quick_sb3 = chosen["ppo_vs_sb3"]
    assert quick_sb3 is not None
    assert "--curves" in quick_sb3[0]
    assert "--compile" not in quick_sb3[0]
    quick_race = chosen["sample_efficiency"]
    assert quick_race is not None
    assert quick_race[0][quick_race[0].index("--env") + 1] == "typedrl/PointMass-v0"
    assert report.QUICK_TIMEOUT_S * len(running) > 0


def test_quick_sizes_are_smaller_than_full_sizes() -> None:
    """Every size flag of a quick command is at most the full plan's (or the script default's)."""
    for benchmark in report.plan():
        if benchmark.quick is None:
            continue
        full = {
            flag: value
            for command in benchmark.full
            for flag, value in itertools.pairwise(command)
            if flag in {"--steps", "--repeats", "--rounds", "--iterations", "--epochs"}
        }
        for command in benchmark.quick:
            for flag, value in itertools.pairwise(command):
                if flag in full:
                    assert int(value) <= int(full[flag]), (benchmark.name, flag)


def test_every_planned_flag_exists_in_its_script() -> None:
    """Each flag of the quick and full commands is defined by the script it is passed to."""
    for benchmark in report.plan():
        path = BENCHMARKS / benchmark.script
        if not path.is_file():
            continue
        source = path.read_text()
        commands = [*benchmark.full, *(benchmark.quick or ())]
        for command in commands:
            for argument in command:
                if argument.startswith("--"):
                    assert f'"{argument}"' in source, (benchmark.name, argument)


def test_full_plan_runs_everything() -> None:
    """Without --quick every benchmark runs; --only narrows the plan."""
    chosen = report.select(report.plan(), quick=False)
    assert all(commands for _, commands in chosen)
    only = report.select(report.plan(), quick=False, only=["ppo_vs_sb3"])
    assert [benchmark.name for benchmark, _ in only] == ["ppo_vs_sb3"]


def test_unknown_only_name_is_an_error() -> None:
    """--only with a name not in the plan stops with the known names."""
    with pytest.raises(SystemExit, match="unknown benchmark"):
        report.select(report.plan(), quick=True, only=["nope"])


def test_benchmark_needs_quick_arguments_or_a_reason() -> None:
    """A plan entry gives quick arguments or a reason to leave it out, exactly one."""
    with pytest.raises(ValueError, match="quick arguments or a reason"):
        report.Benchmark(name="x", script="x.py", full=(), extract=report.extract_shac_learning)
    with pytest.raises(ValueError, match="quick arguments or a reason"):
        report.Benchmark(
            name="x",
            script="x.py",
            full=(),
            quick=((),),
            quick_excluded_because="both",
            extract=report.extract_shac_learning,
        )


# ----------------------------------------------------------------- reading results


@pytest.mark.parametrize("name", sorted(CANNED))
def test_extractors_read_canned_results(name: str) -> None:
    """Each benchmark's JSON output becomes rows with its ratios and goals."""
    benchmark = _by_name()[name]
    rows = benchmark.extract(name, CANNED[name])
    ratios = [row.ratio for row in rows]
    assert ratios == pytest.approx(EXPECTED_RATIOS[name])
    assert all(row.benchmark == name for row in rows)
    if name in EXPECTED_MET:
        assert [row.met for row in rows] == EXPECTED_MET[name]


def test_extractor_reports_a_missing_key() -> None:
    """Output without the expected fields raises, which the runner reports as failed."""
    with pytest.raises(KeyError):
        report.extract_ppo_vs_sb3("ppo_vs_sb3", [{"compile": False}])
    with pytest.raises(ValueError, match="expected 1 JSON objects, got 2"):
        report.extract_checkpoint_overhead("checkpoint_overhead", [{}, {}])
    with pytest.raises(ValueError, match="both sides"):
        report.extract_ppo_vs_sb3_mujoco("m", CANNED["ppo_vs_sb3_mujoco"][:1])


def test_row_rejects_a_non_finite_ratio() -> None:
    """A NaN ratio is an error, not a row."""
    with pytest.raises(ValueError, match="not a finite number"):
        report.extract_ppo_vs_rsl_rl(
            "r",
            [
                {
                    "ratio": float("nan"),
                    "compile": False,
                    "rsl_rl_version": "5",
                    "num_envs": 1,
                }
            ],
        )


def test_parse_json_lines_keeps_objects_and_lists() -> None:
    """Progress lines are skipped; objects and lists are kept in order."""
    text = 'header\n{"a": 1}\n[1, 2]\n{broken\n  {"b": 2}  \n'
    assert report.parse_json_lines(text) == [{"a": 1}, [1, 2], {"b": 2}]
    indented = 'x\n{\n  "a": {\n    "b": 1\n  }\n}\n{"c": 2}\n'
    assert report.parse_json_lines(indented) == [{"a": {"b": 1}}, {"c": 2}]


def test_last_error_line() -> None:
    """The last non-empty stderr line, else stdout's, else a placeholder."""
    assert report.last_error_line("Traceback\n  x\nRuntimeError: boom\n\n") == "RuntimeError: boom"
    assert report.last_error_line("", "only stdout\n") == "only stdout"
    assert report.last_error_line("", "") == "(no output)"


# ----------------------------------------------------------------- rendering


def _outcomes(images: Sequence[Path] = ()) -> tuple[Any, ...]:
    plan = _by_name()
    sb3_rows = plan["ppo_vs_sb3"].extract("ppo_vs_sb3", CANNED["ppo_vs_sb3"])
    return (
        report.Outcome(
            benchmark="ppo_vs_sb3",
            script="ppo_vs_sb3.py",
            status="ok",
            rows=tuple(sb3_rows),
            seconds=42.0,
            images=tuple(images),
        ),
        report.Outcome(
            benchmark="ppo_vs_rsl_rl",
            script="ppo_vs_rsl_rl.py",
            status="failed",
            error="SystemExit: this benchmark needs rsl_rl",
            seconds=3.0,
        ),
        report.Outcome(
            benchmark="shac_learning",
            script="shac_learning.py",
            status="not_in_plan",
            error="each run trains SHAC to completion",
        ),
        report.Outcome(
            benchmark="new_bench",
            script="new_bench.py",
            status="missing",
            error="new_bench.py is not in benchmarks",
        ),
    )


def test_render_page_from_canned_results(tmp_path: Path) -> None:
    """The page has the table, machine, versions, date, statuses and figures."""
    output = tmp_path / "docs" / "benchmark_report.rst"
    image = tmp_path / "docs" / "_static" / "benchmarks" / "ppo_vs_sb3_CartPole-v1.png"
    page = report.render_page(
        report.Report(
            environment=_environment(),
            outcomes=_outcomes([image]),
            command="python benchmarks/report.py --quick",
            quick=True,
            seconds=300.0,
        ),
        output=output,
    )
    lines = page.splitlines()
    assert lines[2:4] == ["Benchmark report", "================"]
    assert "Generated 2026-12-01 12:00 UTC by ``python benchmarks/report.py --quick``" in page
    assert "(quick plan, 5.0 minutes)" in page
    assert "- **Machine**: Example CPU @ 2.0GHz, 2 cores, Linux x86\\_64" in page
    assert "- **Python** 3.11.9; torch 2.13.0, gymnasium 1.4.0, typedrl 0.1.0" in page
    table = lines.index(".. list-table::")
    header = [line.strip() for line in lines[table + 4 : table + 9]]
    assert header == ["* - Benchmark", "- Compared", "- Ratio", "- Goal", "- Met"]
    first = [line.strip() for line in lines[table + 9 : table + 14]]
    assert first[0] == "* - ``ppo_vs_sb3``"
    assert first[1].startswith("- typedrl PPO (eager) / Stable-Baselines3 PPO")
    assert "eval return after 32,768 steps: 210 vs 150" in first[1]
    assert first[2:] == [f"- 1.39{TIMES}", "- —", "- —"]
    second = [line.strip() for line in lines[table + 14 : table + 19]]
    assert second[2:] == [f"- 2.59{TIMES}", f"- ≥ 2{TIMES}", "- **met**"]
    assert "- ``ppo_vs_rsl_rl``: **failed**: SystemExit: this benchmark needs rsl\\_rl" in page
    assert "- ``shac_learning``: not in the quick plan: each run trains SHAC" in page
    assert "- ``new_bench``: script missing: new\\_bench.py is not in benchmarks" in page
    assert "- ``ppo_vs_sb3``: 42 s (ok)" in page
    assert "- ``ppo_vs_rsl_rl``: 3 s (failed)" in page
    assert "``shac_learning``: 0 s" not in page
    assert ".. figure:: _static/benchmarks/ppo_vs_sb3_CartPole-v1.png" in page
    assert "typedrl (left) and Stable-Baselines3 (right)" in page
    assert page.endswith("\n")
    assert not page.endswith("\n\n")


def test_render_page_without_results() -> None:
    """With nothing measured the page says so and has no table or figures."""
    outcome = report.Outcome(
        benchmark="b", script="b.py", status="failed", error="ImportError: x", seconds=1.0
    )
    page = report.render_page(
        report.Report(
            environment=_environment(),
            outcomes=(outcome,),
            command="python benchmarks/report.py",
            quick=False,
            seconds=1.0,
        ),
        output=Path("docs/benchmark_report.rst"),
    )
    assert "No benchmark produced a result." in page
    assert "list-table" not in page
    assert "figure::" not in page
    assert "(full plan," in page


def test_escape_and_formatting() -> None:
    """Inline specials are escaped and text is kept on one line; ratios and verdicts format."""
    assert report.escape("a*b `c` |d| e_ [f]\n  g") == "a\\*b \\`c\\` \\|d\\| e\\_ \\[f\\] g"
    assert report.format_ratio(None) == "n/a"
    assert report.format_ratio(1.234) == f"1.23{TIMES}"
    assert report.format_ratio(0.0021) == f"0.0021{TIMES}"
    row = report.Row(benchmark="b", compared="c", ratio=1.0)
    assert report.format_met(row) == "—"
    assert report.format_met(report.Row(benchmark="b", compared="c", ratio=1.0, met=False)) == (
        "**not met**"
    )


# ----------------------------------------------------------------- running


def _run(benchmark: Any, folder: Path, *, timeout: float = 60.0, quick: bool = True) -> Any:
    return report.run_benchmark(
        benchmark,
        benchmark.quick if quick else benchmark.full,
        python=sys.executable,
        images=folder,
        scratch=folder,
        timeout=timeout,
        directory=folder,
    )


def test_failing_benchmark_is_reported_with_its_last_error_line(tmp_path: Path) -> None:
    """A script that raises is failed, with the exception's line."""
    benchmark = _stand_in(tmp_path, "broken", "raise RuntimeError('the env exploded')\n")
    outcome = _run(benchmark, tmp_path)
    assert outcome.status == "failed"
    assert outcome.error == "RuntimeError: the env exploded"
    assert outcome.rows == ()


def test_unreadable_output_is_a_failure(tmp_path: Path) -> None:
    """A script that prints JSON without the expected fields is failed, naming the field."""
    benchmark = _stand_in(tmp_path, "odd", "print('{\"something\": 1}')\n")
    outcome = _run(benchmark, tmp_path)
    assert outcome.status == "failed"
    assert outcome.error == "unreadable output (KeyError: 'rolling_save_fraction')"


def test_timeout_is_a_failure(tmp_path: Path) -> None:
    """A script over the time limit is stopped and failed."""
    benchmark = _stand_in(tmp_path, "slow", "import time\ntime.sleep(30)\n")
    outcome = _run(benchmark, tmp_path, timeout=1.0)
    assert outcome.status == "failed"
    assert outcome.error == "timed out after 1 s"


def test_missing_and_unplanned_benchmarks(tmp_path: Path) -> None:
    """A missing script is missing; one without quick arguments is not in the quick plan."""
    benchmark = _stand_in(tmp_path, "gone", "")
    (tmp_path / "gone.py").unlink()
    assert _run(benchmark, tmp_path).status == "missing"
    unplanned = _stand_in(tmp_path, "later", "", quick=False)
    outcome = _run(unplanned, tmp_path)
    assert outcome.status == "not_in_plan"
    assert outcome.error == "too slow"


def test_successful_benchmark_with_its_images(tmp_path: Path) -> None:
    """Rows come from the JSON lines; images written in the run are collected, others not."""
    images = tmp_path / "images"
    images.mkdir()
    old = images / "curve_old.png"
    old.write_bytes(b"png")
    result = {"rolling_save_fraction": 0.01, "overhead_ratio": 1.0}
    body = f"""
        import sys
        from pathlib import Path
        print("progress line")
        print({json.dumps(json.dumps(result))})
        Path({str(images)!r}, "curve_new.png").write_bytes(b"png")
        print("done", file=sys.stderr)
    """
    benchmark = report.Benchmark(
        name="ok",
        script="ok.py",
        full=(("--json",),),
        quick=(("--out", "{images}/x", "--json"),),
        extract=report.extract_checkpoint_overhead,
        images=("curve_*.png",),
    )
    (tmp_path / "ok.py").write_text(textwrap.dedent(body))
    os.utime(old, (0, 0))
    outcome = report.run_benchmark(
        benchmark,
        benchmark.quick,
        python=sys.executable,
        images=images,
        scratch=tmp_path,
        timeout=60.0,
        directory=tmp_path,
    )
    assert outcome.status == "ok"
    assert [row.ratio for row in outcome.rows] == pytest.approx([1.0 / 0.99, 1.0])
    assert outcome.images == (images / "curve_new.png",)


def test_main_writes_the_page_even_when_a_benchmark_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The entry point runs the plan, reports the failure and still writes the page."""
    good = _stand_in(
        tmp_path,
        "good",
        'print(\'{"rolling_save_fraction": 0.001, "overhead_ratio": 1.002}\')\n',
    )
    bad = _stand_in(tmp_path, "bad", "import sys\nsys.exit('bad: no peer installed')\n")
    monkeypatch.setattr(report, "plan", lambda: (good, bad))
    monkeypatch.setattr(report, "BENCHMARKS_DIR", tmp_path)
    output = tmp_path / "docs" / "benchmark_report.rst"
    status = report.main(
        ["--quick", "--output", str(output), "--images", str(tmp_path / "docs" / "img")]
    )
    assert status == 0
    page = output.read_text()
    assert "* - ``good``" in page
    assert "- ``bad``: **failed**: bad: no peer installed" in page
    assert "by ``python benchmarks/report.py --quick``" in page
    assert re.search(r"- \*\*Python\*\* 3\.\d+\.\d+; .*torch ", page)
    printed = capsys.readouterr().out
    assert "[report] bad: failed" in printed
    assert f"[report] wrote {output}" in printed


def test_environment_names_the_machine_and_versions() -> None:
    """The machine, core count and the installed versions of torch, Gymnasium and typedrl."""
    env = report.environment(sys.executable)
    assert env.cores >= 1
    assert env.cpu
    assert {"torch", "gymnasium", "typedrl"} <= set(env.versions)
    assert env.versions["torch"].split("+")[0] == torch.__version__.split("+")[0]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", env.date)


# ----------------------------------------------------------------- the benchmarks' own parts


def test_shape_check_probe_sees_the_suites_checks() -> None:
    """The suite imports typedrl through jaxtyping's hook, which the probe detects."""
    assert shape_checks._checks_active() is True


def test_shape_checks_compare_reports_the_ratio_of_medians(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rounds alternate the sides; the ratio is median(on) / median(off) over all rounds."""
    calls: list[str] = []
    seconds = {
        "on": {"ppo": [3.0, 3.0, 9.0], "apg": [2.0, 2.0, 2.0]},
        "off": {"ppo": [1.0, 1.0, 1.0], "apg": [1.0, 4.0, 1.0]},
    }

    def fake_run(side: str, args: object) -> Mapping[str, Any]:
        calls.append(side)
        return {"side": side, "seconds": seconds[side]}

    monkeypatch.setattr(shape_checks, "_run_side", fake_run)
    args = type("Args", (), {"rounds": 2, "iterations": 3, "clock": "wall", "threads": 1})()
    result = shape_checks.compare(args)
    assert calls == ["on", "off", "off", "on"]
    assert result["ppo"]["ratio"] == pytest.approx(3.0)
    assert result["ppo"]["round_ratios"] == pytest.approx([3.0, 3.0])
    assert result["apg"]["ratio"] == pytest.approx(2.0)
    assert result["apg"]["on_ms"] == pytest.approx(2000.0)


def test_ppo_vs_sb3_curves_and_policy_adapter(tmp_path: Path) -> None:
    """The SB3 adapter acts like a typedrl policy; both curves go into one small PNG."""
    sb3 = load_benchmark("ppo_vs_sb3")

    class FakeSb3Policy:
        def _predict(self, obs: torch.Tensor, *, deterministic: bool) -> torch.Tensor:
            assert deterministic
            return (obs[:, 0] > 0).long()

    class FakeModel:
        policy = FakeSb3Policy()

    policy = sb3.Sb3Policy(FakeModel())
    obs = TensorDict({"obs": torch.tensor([[1.0, 0.0], [-1.0, 0.0]])}, batch_size=[2])
    action = policy.act(obs, deterministic=True)["action"]
    assert action.tolist() == [1, 0]
    assert list(policy.parameters()) == []
    curves = {"typedrl": [[16384.0, 40.0], [32768.0, 300.0]], "sb3": [[16384.0, 30.0]]}
    path = sb3.plot_curves(curves, tmp_path / "images")
    assert path == tmp_path / "images" / "ppo_vs_sb3_CartPole-v1.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size < 150_000
