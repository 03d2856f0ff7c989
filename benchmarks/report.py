"""Run every benchmark in ``benchmarks/`` and write the generated benchmark report page.

Each benchmark runs in its own subprocess (with the interpreter running this
script, so in the benchmark environment that ``nox -s benchmarks`` builds),
with ``--json`` output where the script has it. The ratios each one measures
against its in-run baseline are collected into one table (benchmark, what is
compared, ratio, goal, met or not) and written as a reStructuredText page with
the machine (CPU model, cores), the Python, torch, Gymnasium and typedrl
versions (and the peers' where installed), the date, and the PNG learning
curves the benchmarks wrote in this run. A benchmark that fails, times out or
prints what the report cannot read is listed as failed with its last error
line; one whose script is missing is listed as missing; the page is written
either way.

``--quick`` runs every benchmark that has a quick size, at that size, with a
per-benchmark time limit, and finishes in under 10 minutes on 2 CPU cores;
the others are listed as not part of the quick plan. The full plan runs every
benchmark at its documented size and takes a few hours on such a machine.

Usage:
    python benchmarks/report.py --quick
    python benchmarks/report.py --output docs/benchmark_report.rst --images docs/_static/benchmarks
    python benchmarks/report.py --only ppo_vs_sb3 --only shape_checks_overhead
"""

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

BENCHMARKS_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCHMARKS_DIR.parent
DEFAULT_OUTPUT = REPO_ROOT / "docs" / "benchmark_report.rst"
DEFAULT_IMAGES = REPO_ROOT / "docs" / "_static" / "benchmarks"
REFACTORING_CHECKS = frozenset(
    {"pinned_weights.py", "checkout_speed.py", "iteration_walk.py", "public_api_overhead.py"}
)
"""Scripts here that check a refactor (two checkouts compared, the files an iteration walks,
public APIs against the private ones they replaced),
not benchmarks of the package: the report does not run them."""
NEEDS_OWN_ENV = frozenset({"newton_throughput.py", "newton_gait.py", "recurrent_vs_sb3_contrib.py"})
"""Benchmarks of an optional package that the benchmark environment does not install (Newton:
run them in the environment ``nox -s newton`` builds; ``newton_gait.py`` also needs trained
runs; ``recurrent_vs_sb3_contrib.py`` needs ``pip install sb3-contrib``); the report does not
run them."""
NEEDS_TRAINED_RUNS = frozenset({"ahac_contact_gradients.py"})
"""Scripts that read run folders trained beforehand (AHAC runs on the Newton envs, hours
each) rather than train anything; the report does not run them."""
NEEDS_REFERENCE_CHECKOUT = frozenset(
    {"shac_vs_diffrl.py", "ppo_atari_vs_cleanrl.py", "ahac_vs_reference.py"}
)
"""Benchmarks against reference code that is not a package (DiffRL's ``shac.py``: pass a
checkout with ``--diffrl``; CleanRL's ``ppo_atari.py``: pass a checkout with ``--cleanrl``;
the AHAC authors' ``ahac.py``: pass a checkout with ``--reference``); the report does not
run them."""
QUICK_TIMEOUT_S = 150.0
FULL_TIMEOUT_S = 6 * 3600.0
VERSIONED = (
    "torch",
    "gymnasium",
    "typedrl",
    "numpy",
    "tensordict",
    "lightning-fabric",
    "jaxtyping",
    "beartype",
    "stable-baselines3",
    "rsl-rl-lib",
    "mujoco",
    "mujoco-torch",
)

TIMES = "\N{MULTIPLICATION SIGN}"
Status = Literal["ok", "failed", "missing", "not_in_plan"]
Json = Any
"""One JSON value a benchmark printed (an object, or a list for some scripts)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One line of the report's table: a ratio against a baseline measured in the same run."""

    benchmark: str
    compared: str
    """What is compared, typedrl's side first (``"typedrl / SB3, env steps/s"``)."""
    ratio: float | None
    """The measured ratio; ``None`` where the run gave none (``note`` says why)."""
    goal: str = ""
    """The goal as text (a bound and the multiplication sign), or empty without one."""
    met: bool | None = None
    """Whether the goal was met; ``None`` without a goal or a ratio."""
    note: str = ""


Extractor = Callable[[str, Sequence[Json]], list[Row]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Benchmark:
    """One entry of the plan: a script, its command lines, and how to read its output.

    In ``quick`` and ``full`` the arguments ``{images}`` and ``{tmp}`` stand for
    the images folder and a scratch folder of the run.
    """

    name: str
    """The row label; unique within the plan."""
    script: str
    """File name in ``benchmarks/``."""
    full: tuple[tuple[str, ...], ...]
    """Argument lists of the full plan; each is one subprocess."""
    extract: Extractor
    quick: tuple[tuple[str, ...], ...] | None = None
    """Argument lists of ``--quick``; ``None``: not part of the quick plan."""
    quick_excluded_because: str = ""
    images: tuple[str, ...] = ()
    """Glob patterns of the PNGs the script writes into ``{images}``."""

    def __post_init__(self) -> None:
        if (self.quick is None) != bool(self.quick_excluded_because):
            raise ValueError(
                f"benchmark {self.name!r}: give quick arguments or a reason for leaving it "
                "out of the quick plan, not both or neither"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What running one benchmark gave."""

    benchmark: str
    script: str
    status: Status
    rows: tuple[Row, ...] = ()
    error: str = ""
    """The last error line (failed), or why it did not run."""
    seconds: float = 0.0
    images: tuple[Path, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Environment:
    """Where and when the report was measured."""

    date: str
    cpu: str
    cores: int
    system: str
    python: str
    versions: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """Everything the generated page shows."""

    environment: Environment
    outcomes: tuple[Outcome, ...]
    command: str
    quick: bool
    seconds: float


# ----------------------------------------------------------------- reading results


def _at_most(value: float, goal: float) -> bool:
    return value <= goal


def _at_least(value: float, goal: float) -> bool:
    return value >= goal


def _row(
    benchmark: str,
    compared: str,
    ratio: float | None,
    *,
    goal: tuple[str, float] | None = None,
    note: str = "",
) -> Row:
    """A row; ``goal`` is ``("<=", bound)`` or ``(">=", bound)``."""
    if ratio is not None and not math.isfinite(ratio):
        raise ValueError(f"{compared}: ratio {ratio!r} is not a finite number")
    if goal is None:
        return Row(benchmark=benchmark, compared=compared, ratio=ratio, note=note)
    op, bound = goal
    test = _at_most if op == "<=" else _at_least
    text = f"{'≤' if op == '<=' else '≥'} {bound:g}{TIMES}"
    met = None if ratio is None else test(ratio, bound)
    return Row(benchmark=benchmark, compared=compared, ratio=ratio, goal=text, met=met, note=note)


def _objects(outputs: Sequence[Json], count: int | None = None) -> list[Mapping[str, Any]]:
    objects = [item for item in outputs if isinstance(item, Mapping)]
    if not objects or (count is not None and len(objects) != count):
        wanted = "one or more" if count is None else str(count)
        raise ValueError(f"expected {wanted} JSON objects, got {len(objects)}")
    return objects


def extract_builtin_cartpole(name: str, outputs: Sequence[Json]) -> list[Row]:
    """Built-in CartPole steps/s over Gymnasium's NumPy CartPoleVectorEnv, per device."""
    (result,) = _objects(outputs, 1)
    rows = []
    for key, ratio in result["ratio_vs_gymnasium"].items():
        device = key.removeprefix("typedrl_")
        mode = "no grad" if device.endswith("_no_grad") else "autograd on"
        device = device.removesuffix("_no_grad")
        compared = (
            f"built-in CartPole ({device}, {mode}) / Gymnasium NumPy CartPole, "
            f"{result['num_envs']} envs, env steps/s"
        )
        goal = (">=", 1.0) if mode == "autograd on" else None
        rows.append(_row(name, compared, float(ratio), goal=goal))
    return rows


def extract_adapter_overhead(name: str, outputs: Sequence[Json]) -> list[Row]:
    """Raw Gymnasium env steps/s over the same env through GymnasiumVecEnv."""
    goals = {"CartPole-v1": 1.15, "HalfCheetah-v5": 1.05}
    rows = []
    for result in _objects(outputs):
        env_id = result["env_id"]
        compared = f"raw {env_id} / through GymnasiumVecEnv, {result['num_envs']} envs, steps/s"
        goal = ("<=", goals[env_id]) if env_id in goals else None
        rows.append(_row(name, compared, float(result["overhead_ratio"]), goal=goal))
    return rows


def extract_checkpoint_overhead(name: str, outputs: Sequence[Json]) -> list[Row]:
    """Training time with the rolling last.ckpt schedule over training without it."""
    (result,) = _objects(outputs, 1)
    fraction = float(result["rolling_save_fraction"])
    return [
        _row(
            name,
            "PPO training time with rolling last.ckpt saves / without (timed around the saves)",
            1.0 / (1.0 - fraction),
            goal=("<=", 1.02),
        ),
        _row(
            name,
            "PPO fit time, default checkpoint schedule / no rolling saves (end to end)",
            float(result["overhead_ratio"]),
            note="run-to-run noise dominates at this size",
        ),
    ]


def extract_ppo_vs_sb3(name: str, outputs: Sequence[Json]) -> list[Row]:
    """typedrl PPO env steps/s over Stable-Baselines3's, paired epochs on CartPole-v1."""
    rows = []
    for result in _objects(outputs):
        mode = "compile" if result["compile"] else "eager"
        compared = f"typedrl PPO ({mode}) / Stable-Baselines3 PPO, CartPole-v1, env steps/s"
        goal = (">=", 2.0) if result["compile"] else None
        note = ""
        curves = result.get("curves")
        if curves:
            ours, theirs = curves["typedrl"][-1], curves["sb3"][-1]
            note = f"eval return after {ours[0]:,.0f} steps: {ours[1]:.0f} vs {theirs[1]:.0f}"
        rows.append(_row(name, compared, float(result["ratio"]), goal=goal, note=note))
    return rows


def extract_ppo_vs_sb3_process(name: str, outputs: Sequence[Json]) -> list[Row]:
    """Stable-Baselines3's seconds over ``typedrl train``'s, whole processes."""
    rows = []
    for result in _objects(outputs):
        mode = "--compile" if result["compile"] else "as shipped, eager"
        compared = f"Stable-Baselines3 PPO / typedrl train ({mode}), CartPole-v1, process seconds"
        steps = f"{int(result['timesteps']):,} env steps, {len(result['rounds'])} round(s)"
        goal = (">=", 2.0) if result["compile"] else (">=", 1.5)
        rows.append(_row(name, compared, float(result["ratio"]), goal=goal, note=steps))
    return rows


def extract_ppo_vs_rsl_rl(name: str, outputs: Sequence[Json]) -> list[Row]:
    """typedrl PPO env steps/s over rsl_rl's on the built-in continuous CartPole."""
    rows = []
    for result in _objects(outputs):
        version, envs = result["rsl_rl_version"], result["num_envs"]
        if result.get("fresh_processes"):
            # Fresh processes per run are the shipped path (fit tunes the allocator of
            # its own process).
            mode = "compile" if result["compile"] else "as shipped, eager"
            compared = (
                f"typedrl PPO ({mode}) / rsl_rl PPO {version}, {envs} envs, fresh processes, "
                "env steps/s"
            )
            note = f"{len(result['rounds'])} round(s) of {int(result['env_steps_per_run']):,} steps"
            rows.append(_row(name, compared, float(result["ratio"]), goal=(">=", 1.3), note=note))
            continue
        # Interleaved iterations share one process.
        mode = "compile" if result["compile"] else "eager"
        compared = (
            f"typedrl PPO ({mode}) / rsl_rl PPO {version}, {envs} envs, "
            "interleaved in one process, env steps/s"
        )
        goal = (">=", 1.3) if result["compile"] else None
        rows.append(_row(name, compared, float(result["ratio"]), goal=goal))
    return rows


def extract_ppo_compile_speed(name: str, outputs: Sequence[Json]) -> list[Row]:
    """Eager PPO minibatch update time over compiled, in one process."""
    (result,) = _objects(outputs, 1)
    seconds = float(result["first_update_s"]["compiled"])
    return [
        _row(
            name,
            "PPO minibatch update, eager / compile=True, CartPole-v1 (SB3's settings), ms",
            float(result["ratio"]),
            note=f"the first compiled update took {seconds:.0f} s (compiling)",
        )
    ]


def extract_apg_backward_cost(name: str, outputs: Sequence[Json]) -> list[Row]:
    """One APG update over the no-grad rollout of the same length, per env."""
    return [
        _row(
            name,
            f"APG update / no-grad rollout, {result['env_id']}, {result['num_envs']} envs",
            float(result["update_over_forward"]),
            goal=("<=", 3.0),
        )
        for result in _objects(outputs)
    ]


def extract_shape_checks(name: str, outputs: Sequence[Json]) -> list[Row]:
    """Training iteration time with the runtime shape checks on over off."""
    (result,) = _objects(outputs, 1)
    labels = {
        "ppo": "PPO iteration, built-in CartPole",
        "apg": "APG iteration, built-in Pendulum",
    }
    rows = []
    for key, label in labels.items():
        part = result[key]
        rounds = ", ".join(f"{r:.2f}" for r in part["round_ratios"])
        compared = f"{label}: jaxtyping + beartype checks on / off"
        rows.append(_row(name, compared, float(part["ratio"]), note=f"per round: {rounds}"))
    return rows


def _race_rows(name: str, result: Mapping[str, Any]) -> list[Row]:
    """PPO's env steps (and time) over each differentiable algorithm's, to one target."""
    rows = []
    for algorithm in ("apg", "shac"):
        if algorithm not in result or "ppo" not in result:
            continue
        reached = f"PPO {'reached' if result['ppo']['reached'] else 'missed'}"
        reached += (
            f", {algorithm.upper()} {'reached' if result[algorithm]['reached'] else 'missed'}"
        )
        steps = result.get(f"ppo_over_{algorithm}_steps")
        seconds = result.get(f"ppo_over_{algorithm}_time")
        target = f"{result['env_id']} to return {result['target_return']:g}"
        rows.append(
            _row(
                name,
                f"PPO / {algorithm.upper()} env steps, {target}",
                None if steps is None else float(steps),
                note=reached if steps is None else f"training time ratio {seconds:.2f}",
            )
        )
    return rows


def extract_sample_efficiency(name: str, outputs: Sequence[Json]) -> list[Row]:
    """PPO vs APG vs SHAC: env steps to the same target return, per env."""
    rows = []
    for result in _objects(outputs):
        rows.extend(_race_rows(name, result))
    return rows


def extract_shac_learning(name: str, outputs: Sequence[Json]) -> list[Row]:
    """SHAC's final evaluation against its goal, per env and seed (no in-run baseline)."""
    rows = []
    for result in _objects(outputs):
        value = result["return_mean"]
        success = result.get("success_rate")
        measured = f"return {value:.1f}" + ("" if success is None else f", success {success:.2f}")
        rows.append(
            Row(
                benchmark=name,
                compared=f"SHAC final policy, {result['env_id']}, seed {result['seed']}",
                ratio=None,
                goal=str(result["goal"]),
                met=bool(result["met"]),
                note=measured,
            )
        )
    return rows


def extract_ppo_vs_sb3_mujoco(name: str, outputs: Sequence[Json]) -> list[Row]:
    """typedrl PPO over Stable-Baselines3 on MuJoCo: final return and env steps/s."""
    sides: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for record in _objects(outputs):
        sides.setdefault((record["env"], record["side"]), []).append(record)
    rows = []
    for env_id in sorted({env for env, _ in sides}):
        ours, theirs = sides.get((env_id, "typedrl")), sides.get((env_id, "sb3"))
        if not ours or not theirs:
            raise ValueError(f"{env_id}: results of both sides expected, got {sorted(sides)}")
        seeds = len(ours)
        ours_return = sum(r["return_mean"] for r in ours) / seeds
        theirs_return = sum(r["return_mean"] for r in theirs) / len(theirs)
        ours_rate = sum(r["env_steps_per_s"] for r in ours) / seeds
        theirs_rate = sum(r["env_steps_per_s"] for r in theirs) / len(theirs)
        steps = f"{ours[0]['env_steps']:,} env steps"
        rows.append(
            _row(
                name,
                f"typedrl / SB3 PPO final eval return, {env_id}, {steps}",
                ours_return / theirs_return if theirs_return > 0 else None,
                note=f"returns {ours_return:,.0f} vs {theirs_return:,.0f}",
            )
        )
        rows.append(_row(name, f"typedrl / SB3 PPO env steps/s, {env_id}", ours_rate / theirs_rate))
    return rows


def extract_mujoco_torch(name: str, outputs: Sequence[Json]) -> list[Row]:
    """mujoco-torch env steps/s over Gymnasium's HalfCheetah-v5; the learning race."""
    rows = []
    for result in _objects(outputs):
        if "over_gymnasium" in result:
            reference = next(iter(result["over_gymnasium"]))
            for setup, ratio in result["over_gymnasium"].items():
                if setup != reference:
                    rows.append(_row(name, f"{setup} / {reference}, env steps/s", float(ratio)))
        else:
            rows.extend(_race_rows(name, result))
    return rows


# ----------------------------------------------------------------- the plan


def plan() -> tuple[Benchmark, ...]:
    """Every benchmark, with its full and quick command lines."""
    return (
        Benchmark(
            name="builtin_cartpole_throughput",
            script="builtin_cartpole_throughput.py",
            full=(("--num-envs", "4096", "--steps", "500", "--repeats", "5", "--json"),),
            quick=(("--num-envs", "4096", "--steps", "100", "--repeats", "3", "--json"),),
            extract=extract_builtin_cartpole,
        ),
        Benchmark(
            name="gymnasium_adapter_overhead",
            script="gymnasium_adapter_overhead.py",
            full=(
                ("--env-id", "CartPole-v1", "--json"),
                ("--env-id", "HalfCheetah-v5", "--json"),
            ),
            quick=(
                ("--env-id", "CartPole-v1", "--steps", "1000", "--rounds", "3", "--json"),
                ("--env-id", "HalfCheetah-v5", "--steps", "300", "--rounds", "3", "--json"),
            ),
            extract=extract_adapter_overhead,
        ),
        Benchmark(
            name="checkpoint_overhead",
            script="checkpoint_overhead.py",
            full=(("--iterations", "250", "--repeats", "5", "--json"),),
            quick=(("--iterations", "30", "--repeats", "2", "--saves", "5", "--json"),),
            extract=extract_checkpoint_overhead,
        ),
        Benchmark(
            name="shape_checks_overhead",
            script="shape_checks_overhead.py",
            full=(("--rounds", "5", "--iterations", "30", "--json"),),
            quick=(("--rounds", "1", "--iterations", "8", "--warmup", "1", "--json"),),
            extract=extract_shape_checks,
        ),
        Benchmark(
            name="apg_backward_cost",
            script="apg_backward_cost.py",
            full=(("--repeats", "30", "--json"),),
            quick=(("--repeats", "5", "--warmup", "2", "--json"),),
            extract=extract_apg_backward_cost,
        ),
        Benchmark(
            name="ppo_vs_sb3",
            script="ppo_vs_sb3.py",
            full=(
                ("--epochs", "8", "--curves", "{images}", "--json"),
                ("--epochs", "4", "--compile", "--json"),
            ),
            quick=(("--epochs", "3", "--curves", "{images}", "--eval-episodes", "5", "--json"),),
            extract=extract_ppo_vs_sb3,
            images=("ppo_vs_sb3_*.png",),
        ),
        Benchmark(
            name="ppo_vs_sb3_process",
            script="ppo_vs_sb3_process.py",
            full=(("--rounds", "3", "--json"), ("--rounds", "3", "--compile", "--json")),
            quick_excluded_because=(
                "each round trains two whole processes on 49k env steps (about 40 s a round)"
            ),
            extract=extract_ppo_vs_sb3_process,
        ),
        Benchmark(
            name="ppo_vs_rsl_rl",
            script="ppo_vs_rsl_rl.py",
            full=(
                ("--rounds", "4", "--iterations", "20", "--json"),
                ("--rounds", "4", "--iterations", "20", "--compile", "--json"),
                ("--interleave", "--iterations", "30", "--json"),
                ("--interleave", "--iterations", "30", "--compile", "--json"),
            ),
            quick=(
                ("--rounds", "2", "--iterations", "14", "--json"),
                ("--interleave", "--iterations", "6", "--json"),
            ),
            extract=extract_ppo_vs_rsl_rl,
        ),
        Benchmark(
            name="ppo_compile_speed",
            script="ppo_compile_speed.py",
            full=(("--rounds", "6", "--json"),),
            quick_excluded_because=(
                "its compiled agent compiles the update first (tens of seconds on a cold cache)"
            ),
            extract=extract_ppo_compile_speed,
        ),
        Benchmark(
            name="sample_efficiency",
            script="sample_efficiency.py",
            full=(("--json", "--plot", "{images}"),),
            quick=(
                (
                    "--env",
                    "typedrl/PointMass-v0",
                    "--eval-episodes",
                    "16",
                    "--json",
                    "--plot",
                    "{images}",
                ),
            ),
            extract=extract_sample_efficiency,
            images=("sample_efficiency_*.png",),
        ),
        Benchmark(
            name="shac_learning",
            script="shac_learning.py",
            full=(("--json",),),
            quick_excluded_because=(
                "each run trains SHAC to completion (minutes per seed); the script has "
                "no smaller budget"
            ),
            extract=extract_shac_learning,
        ),
        Benchmark(
            name="ppo_vs_sb3_mujoco",
            script="ppo_vs_sb3_mujoco.py",
            full=(
                ("--side", "typedrl", "--env", "HalfCheetah-v5", "--out", "{tmp}/mujoco.jsonl"),
                ("--side", "sb3", "--env", "HalfCheetah-v5", "--out", "{tmp}/mujoco.jsonl"),
            ),
            quick_excluded_because=(
                "a comparison of final returns needs the full 300k-step trainings"
            ),
            extract=extract_ppo_vs_sb3_mujoco,
        ),
        Benchmark(
            name="mujoco_torch_throughput",
            script="mujoco_torch_throughput.py",
            full=(
                ("--part", "throughput", "--json"),
                ("--part", "learning", "--json"),
            ),
            quick=(
                (
                    "--part",
                    "throughput",
                    "--batch",
                    "16",
                    "--steps",
                    "5",
                    "--rounds",
                    "1",
                    "--json",
                ),
            ),
            extract=extract_mujoco_torch,
        ),
    )


def select(
    benchmarks: Sequence[Benchmark], *, quick: bool, only: Sequence[str] = ()
) -> list[tuple[Benchmark, tuple[tuple[str, ...], ...] | None]]:
    """Each benchmark with the argument lists to run (``None``: not part of this plan)."""
    known = {benchmark.name for benchmark in benchmarks}
    unknown = sorted(set(only) - known)
    if unknown:
        raise SystemExit(f"--only: unknown benchmark(s) {unknown}; known: {sorted(known)}")
    chosen = []
    for benchmark in benchmarks:
        if only and benchmark.name not in only:
            continue
        chosen.append((benchmark, benchmark.quick if quick else benchmark.full))
    return chosen


# ----------------------------------------------------------------- running


def parse_json_lines(text: str) -> list[Json]:
    """Every JSON object or list in ``text`` that starts a line (it may span several lines).

    Other lines (progress output) are ignored.
    """
    decoder = json.JSONDecoder()
    values: list[Json] = []
    lines = text.splitlines(keepends=True)
    index = 0
    while index < len(lines):
        stripped = lines[index].lstrip()
        index += 1
        if not stripped.startswith(("{", "[")):
            continue
        rest = stripped + "".join(lines[index:])
        try:
            value, end = decoder.raw_decode(rest)
        except json.JSONDecodeError:
            continue
        values.append(value)
        index += rest[:end].count("\n")
    return values


def last_error_line(stderr: str, stdout: str = "") -> str:
    """The last non-empty line of ``stderr`` (else of ``stdout``), or a placeholder."""
    for text in (stderr, stdout):
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            return lines[-1]
    return "(no output)"


def _substitute(arguments: Iterable[str], values: Mapping[str, str]) -> list[str]:
    return [argument.format_map(values) for argument in arguments]


def _new_images(folder: Path, patterns: Sequence[str], since: float) -> tuple[Path, ...]:
    found = {
        path
        for pattern in patterns
        for path in folder.glob(pattern)
        if path.is_file() and path.stat().st_mtime >= since
    }
    return tuple(sorted(found))


def run_benchmark(
    benchmark: Benchmark,
    commands: tuple[tuple[str, ...], ...] | None,
    *,
    python: str,
    images: Path,
    scratch: Path,
    timeout: float,
    directory: Path = BENCHMARKS_DIR,
) -> Outcome:
    """Run one benchmark's command lines in turn; read its rows or report how it failed."""
    script = directory / benchmark.script

    def outcome(status: Status, **values: Any) -> Outcome:
        return Outcome(benchmark=benchmark.name, script=benchmark.script, status=status, **values)

    if not script.is_file():
        return outcome("missing", error=f"{benchmark.script} is not in {directory}")
    if commands is None:
        return outcome("not_in_plan", error=benchmark.quick_excluded_because)
    values = {"images": str(images), "tmp": str(scratch)}
    start = time.perf_counter()
    wall_start = time.time() - 1.0  # file times may be rounded down
    outputs: list[Json] = []
    for arguments in commands:
        command = [python, str(script), *_substitute(arguments, values)]
        remaining = timeout - (time.perf_counter() - start)
        try:
            completed = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=max(remaining, 1.0),
                check=False,
                cwd=directory.parent,
            )
        except subprocess.TimeoutExpired:
            return outcome(
                "failed",
                error=f"timed out after {timeout:.0f} s",
                seconds=time.perf_counter() - start,
            )
        if completed.returncode != 0:
            return outcome(
                "failed",
                error=last_error_line(completed.stderr, completed.stdout),
                seconds=time.perf_counter() - start,
            )
        outputs.extend(parse_json_lines(completed.stdout))
    seconds = time.perf_counter() - start
    try:
        rows = benchmark.extract(benchmark.name, outputs)
    except (KeyError, TypeError, ValueError, IndexError) as error:
        detail = f"{type(error).__name__}: {error}"
        return outcome("failed", error=f"unreadable output ({detail})", seconds=seconds)
    return outcome(
        "ok",
        rows=tuple(rows),
        seconds=seconds,
        images=_new_images(images, benchmark.images, wall_start),
    )


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in {"model name", "Model", "Hardware"} and value.strip():
                return value.strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def python_version(python: str) -> tuple[str, dict[str, str]]:
    """The Python version and package versions of the interpreter ``python``."""
    if Path(python).resolve() == Path(sys.executable).resolve():
        found = {name: _version(name) for name in VERSIONED}
        versions = {name: value for name, value in found.items() if value is not None}
        return platform.python_version(), versions
    probe = (
        "import importlib.metadata as m, json, platform\n"
        "def v(n):\n"
        "    try: return m.version(n)\n"
        "    except m.PackageNotFoundError: return None\n"
        f"names = {list(VERSIONED)!r}\n"
        "print(json.dumps([platform.python_version(), {n: v(n) for n in names}]))\n"
    )
    completed = subprocess.run(
        [python, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    version, found = json.loads(completed.stdout)
    return str(version), {str(k): str(v) for k, v in found.items() if v is not None}


def environment(python: str) -> Environment:
    """The machine, the versions of ``python``'s packages, and the date."""
    version, versions = python_version(python)
    now = datetime.datetime.now(tz=datetime.UTC)
    return Environment(
        date=now.strftime("%Y-%m-%d %H:%M UTC"),
        cpu=_cpu_model(),
        cores=os.cpu_count() or 1,
        system=f"{platform.system()} {platform.machine()}",
        python=version,
        versions=versions,
    )


# ----------------------------------------------------------------- rendering

_RST_SPECIAL = "\\*`|_[]"


def escape(text: str) -> str:
    """``text`` as plain reStructuredText inline text: specials escaped, one line."""
    flat = " ".join(text.split())
    return "".join(f"\\{char}" if char in _RST_SPECIAL else char for char in flat)


def format_ratio(ratio: float | None) -> str:
    """The ratio to two decimals with a multiplication sign, or ``n/a`` without one."""
    if ratio is None:
        return "n/a"
    return f"{ratio:.2f}{TIMES}" if abs(ratio) >= 0.1 else f"{ratio:.2g}{TIMES}"


def format_met(row: Row) -> str:
    """``met``, ``not met``, or a dash without a goal or a result."""
    if row.met is None:
        return "—"
    return "**met**" if row.met else "**not met**"


def _cell(text: str) -> str:
    return text if text else "—"


def render_table(rows: Sequence[Row]) -> list[str]:
    """The results as an RST list-table."""
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 18 42 10 10 20",
        "",
        "   * - Benchmark",
        "     - Compared",
        "     - Ratio",
        "     - Goal",
        "     - Met",
    ]
    for row in rows:
        compared = escape(row.compared) + (f" ({escape(row.note)})" if row.note else "")
        lines += [
            f"   * - ``{row.benchmark}``",
            f"     - {compared}",
            f"     - {format_ratio(row.ratio)}",
            f"     - {_cell(escape(row.goal))}",
            f"     - {format_met(row)}",
        ]
    return lines


def _figure_caption(path: Path) -> str:
    stem = path.stem
    if stem.startswith("ppo_vs_sb3_"):
        env = stem.removeprefix("ppo_vs_sb3_")
        return f"PPO learning curves on {env}: typedrl (left) and Stable-Baselines3 (right)."
    if stem.startswith("sample_efficiency_"):
        env = stem.removeprefix("sample_efficiency_").replace("-", "/", 1)
        return f"PPO, APG and SHAC on {env}: return against env steps and training time."
    return stem.replace("_", " ")


def render_page(report: Report, *, output: Path) -> str:
    """The whole generated page; image paths are relative to ``output``'s folder."""
    env = report.environment
    rows = [row for outcome in report.outcomes for row in outcome.rows]
    mode = "quick" if report.quick else "full"
    lines = [
        ".. This page is written by benchmarks/report.py; edit that script, not this page.",
        "",
        "Benchmark report",
        "================",
        "",
        f"Generated {env.date} by ``{report.command}`` ({mode} plan, "
        f"{report.seconds / 60:.1f} minutes). Every ratio compares typedrl with a baseline "
        "measured in the same run; see :doc:`benchmarks` for how they are measured and "
        "what they mean, and for how to regenerate this page.",
        "",
        f"- **Machine**: {escape(env.cpu)}, {env.cores} cores, {escape(env.system)}",
        f"- **Python** {env.python}"
        + "".join(
            f"{'; ' if index == 0 else ', '}{escape(name)} {escape(version)}"
            for index, (name, version) in enumerate(env.versions.items())
        ),
        "",
        "Results",
        "-------",
        "",
    ]
    if rows:
        lines += render_table(rows)
    else:
        lines.append("No benchmark produced a result.")
    lines.append("")
    others = [outcome for outcome in report.outcomes if outcome.status != "ok"]
    if others:
        lines += ["Benchmarks without results", "--------------------------", ""]
        labels = {
            "failed": "**failed**",
            "missing": "script missing",
            "not_in_plan": "not in the quick plan" if report.quick else "not in the plan",
        }
        for outcome in others:
            lines.append(
                f"- ``{outcome.benchmark}``: {labels[outcome.status]}: {escape(outcome.error)}"
            )
        lines.append("")
    ran = [outcome for outcome in report.outcomes if outcome.status in {"ok", "failed"}]
    if ran:
        lines += ["Run times", "---------", ""]
        lines += [
            f"- ``{outcome.benchmark}``: {outcome.seconds:.0f} s ({outcome.status})"
            for outcome in ran
        ]
        lines.append("")
    images = [path for outcome in report.outcomes for path in outcome.images]
    if images:
        lines += ["Learning curves", "---------------", ""]
        for path in images:
            relative = Path(os.path.relpath(path, output.parent)).as_posix()
            lines += [
                f".. figure:: {relative}",
                "   :width: 100%",
                f"   :alt: {escape(_figure_caption(path))}",
                "",
                f"   {escape(_figure_caption(path))}",
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"


# ----------------------------------------------------------------- entry point


def main(argv: Sequence[str] | None = None) -> int:
    """Run the plan, write the page; return 0 (failed benchmarks are on the page)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the under-10-minute plan")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="the page to write")
    parser.add_argument("--images", type=Path, default=DEFAULT_IMAGES, help="PNG folder")
    parser.add_argument(
        "--only", action="append", default=[], metavar="NAME", help="run only these benchmarks"
    )
    parser.add_argument(
        "--python", default=sys.executable, help="interpreter for the benchmarks (default: this)"
    )
    parser.add_argument(
        "--timeout", type=float, help="seconds per benchmark (default: 150 quick, 6 h full)"
    )
    args = parser.parse_args(argv)
    timeout = args.timeout or (QUICK_TIMEOUT_S if args.quick else FULL_TIMEOUT_S)
    images = args.images.resolve()
    output = args.output.resolve()
    images.mkdir(parents=True, exist_ok=True)
    output.parent.mkdir(parents=True, exist_ok=True)
    chosen = select(plan(), quick=args.quick, only=args.only)
    start = time.perf_counter()
    outcomes = []
    with tempfile.TemporaryDirectory() as scratch:
        for benchmark, commands in chosen:
            print(f"[report] {benchmark.name} ...", flush=True)
            outcome = run_benchmark(
                benchmark,
                commands,
                python=args.python,
                images=images,
                scratch=Path(scratch),
                timeout=timeout,
                directory=BENCHMARKS_DIR,
            )
            detail = f": {outcome.error}" if outcome.error else ""
            print(f"[report] {benchmark.name}: {outcome.status} ({outcome.seconds:.0f} s){detail}")
            outcomes.append(outcome)
    flags = " --quick" if args.quick else ""
    flags += "".join(f" --only {name}" for name in args.only)
    report = Report(
        environment=environment(args.python),
        outcomes=tuple(outcomes),
        command=f"python benchmarks/report.py{flags}",
        quick=args.quick,
        seconds=time.perf_counter() - start,
    )
    output.write_text(render_page(report, output=output), encoding="utf-8")
    print(f"[report] wrote {output} in {report.seconds / 60:.1f} minutes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
