"""Cost of the rolling last.ckpt schedule: PPO with RunOptions' defaults vs. no rolling save.

Both arms train PPO on the built-in CartPole with the ``typedrl train`` preset
(32 envs, 32 steps, batch 256, 10 mini-epochs) for the same number of
iterations, from the same seed, with a run folder in a temporary directory.
One arm keeps RunOptions' defaults (``last.ckpt`` every 100 iterations or 60 s,
whichever first); the baseline sets ``last_checkpoint_every_iterations`` and
``last_checkpoint_every_seconds`` to ``None``, so that ``last.ckpt`` is written
once, at the end (as in the default arm). Loggers are off in both arms (they are
the same in both and only add noise). Repetitions alternate the arms, flipping
their order each time, so that drift in machine load affects both alike.

Reported:

- ``overhead_ratio``: the median over repetitions of default fit time / baseline
  fit time (1.0 means free);
- ``rolling_save_fraction``: the share of the default arm's fit time spent in
  rolling saves, timed around each save (the final save excluded), median over
  repetitions: the same cost measured without the run-to-run noise;
- ``save_ms``: the time of one save of the trained agent (median of ``--saves``),
  and ``iterations_per_s`` of the baseline arm; the worst case of the schedule,
  a save every 100 iterations of a fast env, costs
  ``save_ms / (100 * 1000 / iterations_per_s)``, reported as
  ``worst_case_fraction``.

``--clock cpu`` times fits with the process's CPU time instead of the wall
clock, which other jobs on a shared machine disturb less; it does not count the
time a save waits for the disk (``fsync``), which ``rolling_save_fraction`` and
``save_ms`` always measure on the wall clock.

Usage:
    python benchmarks/checkpoint_overhead.py --iterations 250 --repeats 5
"""

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from typedrl.envs import make
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.training import RunOptions

ENV_ID = "typedrl/CartPole-v0"
NUM_ENVS = 32
PRESET: dict[str, Any] = {
    "num_steps": 32,
    "batch_size": 256,
    "num_mini_epochs": 10,
    "learning_rate": 1e-3,
    "learning_rate_schedule": "linear",
    "gamma": 0.98,
    "gae_lambda": 0.8,
}
DEFAULT_EVERY_ITERATIONS = RunOptions().last_checkpoint_every_iterations
_CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def _agent(run_dir: Path, iterations: int, *, rolling: bool) -> PPOAgent:
    config = PPOConfig(total_timesteps=iterations * NUM_ENVS * PRESET["num_steps"], **PRESET)
    cadence: dict[str, Any] = (
        {}
        if rolling
        else {"last_checkpoint_every_iterations": None, "last_checkpoint_every_seconds": None}
    )
    options = RunOptions(run_dir=run_dir, env_id=ENV_ID, loggers=[], progress=False, **cadence)
    env = make(ENV_ID, num_envs=NUM_ENVS, seed=0)
    return PPOAgent(env=env, config=config, options=options)


def _timed_saves(agent: PPOAgent) -> list[float]:
    """Wrap ``agent.save``; return the list the duration of every last.ckpt save goes to."""
    durations: list[float] = []
    save: Callable[[str | Path | None], Path | None] = agent.save

    def timed(path: str | Path | None) -> Path | None:
        start = time.perf_counter()
        written = save(path)
        if path is not None and Path(path).name == "last.ckpt":
            durations.append(time.perf_counter() - start)
        return written

    agent.save = timed  # type: ignore[method-assign]
    return durations


def _run(
    root: Path, iterations: int, *, rolling: bool, clock: Callable[[], float] = time.perf_counter
) -> tuple[float, float, int, PPOAgent]:
    """Fit one arm; return its fit time, its rolling-save wall time and count, and the agent."""
    run_dir = Path(tempfile.mkdtemp(dir=root))
    agent = _agent(run_dir, iterations, rolling=rolling)
    agent.setup()
    durations = _timed_saves(agent)
    start = clock()
    result = agent.fit()
    elapsed = clock() - start
    if result.iterations != iterations:
        raise RuntimeError(f"expected {iterations} iterations, ran {result.iterations}")
    rolling_saves = durations[:-1]  # the last one is the final save both arms write
    return elapsed, sum(rolling_saves), len(rolling_saves), agent


def _report(result: dict[str, Any]) -> None:
    runs = f"{result['iterations_per_run']} iterations x {result['repeats']} runs per arm"
    ratios = ", ".join(f"{ratio:.4f}" for ratio in result["overhead_ratios"])
    worst = f"worst case, a save per {DEFAULT_EVERY_ITERATIONS} it."
    print(f"PPO on {ENV_ID}, {NUM_ENVS} envs, {runs}, {result['clock']} clock")
    print(f"rolling saves per default run    {result['rolling_saves_per_run']:>10.0f}")
    print(f"overhead ratio (default / none)  {result['overhead_ratio']:>10.4f}x (median)")
    print(f"  per repetition                 {ratios}")
    print(f"time in rolling saves            {100 * result['rolling_save_fraction']:>10.3f} %")
    print(f"one save                         {result['save_ms']:>10.2f} ms")
    print(f"checkpoint size                  {result['checkpoint_kib']:>10.0f} KiB")
    print(f"iterations/s (baseline)          {result['iterations_per_s']:>10.2f}")
    print(f"{worst:<33}{100 * result['worst_case_fraction']:>10.3f} %")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=250, help="PPO iterations per run")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each arm")
    parser.add_argument("--saves", type=int, default=20, help="saves timed for save_ms")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument(
        "--clock",
        choices=sorted(_CLOCKS),
        default="wall",
        help="time fits with the wall clock (default) or the process's CPU time",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = _CLOCKS[args.clock]

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _run(root, 3, rolling=True)  # warm-up: imports, allocator, first-call costs
        ratios: list[float] = []
        fractions: list[float] = []
        rates: list[float] = []
        rolling_counts: list[int] = []
        agent: PPOAgent | None = None
        for repeat in range(args.repeats):
            order = (True, False) if repeat % 2 == 0 else (False, True)
            times: dict[bool, float] = {}
            for rolling in order:
                elapsed, saving, count, agent = _run(
                    root, args.iterations, rolling=rolling, clock=clock
                )
                times[rolling] = elapsed
                if rolling:
                    fractions.append(saving / elapsed)
                    rolling_counts.append(count)
                else:
                    rates.append(args.iterations / elapsed)
            ratios.append(times[True] / times[False])
        assert agent is not None
        probe = root / "probe" / "last.ckpt"
        save_times: list[float] = []
        for _ in range(args.saves):
            start = time.perf_counter()
            agent.save(probe)
            save_times.append(time.perf_counter() - start)
        checkpoint_bytes = probe.stat().st_size

    save_ms = 1000.0 * statistics.median(save_times)
    iterations_per_s = statistics.median(rates)
    assert DEFAULT_EVERY_ITERATIONS is not None
    worst_case = save_ms / (DEFAULT_EVERY_ITERATIONS * 1000.0 / iterations_per_s)
    result = {
        "env_id": ENV_ID,
        "num_envs": NUM_ENVS,
        "iterations_per_run": args.iterations,
        "repeats": args.repeats,
        "clock": args.clock,
        "rolling_saves_per_run": statistics.median(rolling_counts),
        "overhead_ratio": statistics.median(ratios),
        "overhead_ratios": ratios,
        "rolling_save_fraction": statistics.median(fractions),
        "save_ms": save_ms,
        "checkpoint_kib": checkpoint_bytes / 1024.0,
        "iterations_per_s": iterations_per_s,
        "env_steps_per_s": iterations_per_s * NUM_ENVS * PRESET["num_steps"],
        "worst_case_fraction": worst_case,
    }
    if args.json:
        print(json.dumps(result))
    else:
        _report(result)


if __name__ == "__main__":
    main()
