"""Cost of the jaxtyping + beartype runtime checks: training iterations with the checks on vs off.

The test suite runs every annotated function of typedrl through jaxtyping's
import hook with beartype (``--jaxtyping-packages=typedrl,beartype.beartype``).
This benchmark measures what that costs a training loop. A process either
installs the same hook (``jaxtyping.install_import_hook(["typedrl"],
"beartype.beartype")``) before it imports typedrl, or does not; the hook acts
at import time, so the two sides run in separate processes. Each process
builds, from the same seed:

- ``ppo``: a :class:`~typedrl.ppo.PPOAgent` on the built-in
  ``typedrl/CartPole-v0`` with the ``typedrl train`` preset (32 envs, 32 steps,
  batch 256, 10 mini-epochs);
- ``apg``: a :class:`~typedrl.apg.DifferentiableTrainer` with its default APG
  settings on the built-in ``typedrl/Pendulum-v0`` (64 envs, segments of 32
  steps);

and times ``--iterations`` training iterations of each after ``--warmup``
untimed ones. Rounds alternate the two sides (and flip their order every
round) so that drift in machine load affects both alike. Reported per
workload: the median iteration time of each side over all rounds and their
ratio (checks on / checks off; 1.0 means free), with the per-round ratios.
Each process also confirms that the checks are (or are not) active, by calling
one typedrl function with an argument of the wrong type.

Usage:
    python benchmarks/shape_checks_overhead.py --rounds 3 --iterations 30 --json
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, Literal

Side = Literal["on", "off"]
WORKLOADS = ("ppo", "apg")
_CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}


def _checks_active() -> bool:
    """Whether typedrl's functions are type-checked in this process."""
    from typedrl._validation import positive_int  # noqa: PLC0415 - after the hook

    try:
        positive_int(0, "probe", 1)  # type: ignore[arg-type]  # owner must be a str
    except Exception:  # beartype's and jaxtyping's errors share no common base
        return True
    return False


def _ppo_iteration(seed: int) -> Callable[[], None]:
    from typedrl.envs import make  # noqa: PLC0415
    from typedrl.ppo import PPOAgent, PPOConfig  # noqa: PLC0415 - after the hook
    from typedrl.training import RunOptions  # noqa: PLC0415

    config = PPOConfig(
        total_timesteps=10**9,
        num_steps=32,
        batch_size=256,
        num_mini_epochs=10,
        learning_rate=1e-3,
        gamma=0.98,
        gae_lambda=0.8,
        seed=seed,
    )
    env = make("typedrl/CartPole-v0", num_envs=32, seed=seed)
    agent = PPOAgent(env=env, config=config, options=RunOptions(progress=False, loggers=[]))
    agent.setup()
    agent._prepare()  # the first reset, as fit() does

    def iteration() -> None:
        # One iteration of fit's loop.
        agent.env_steps += agent._train_iteration().env_steps
        agent.iteration += 1

    return iteration


def _apg_iteration(seed: int) -> Callable[[], None]:
    from typedrl.apg import (  # noqa: PLC0415 - after the hook
        DifferentiableTrainer,
        DifferentiableTrainerConfig,
    )
    from typedrl.envs import make  # noqa: PLC0415
    from typedrl.training import RunOptions  # noqa: PLC0415

    env = make("typedrl/Pendulum-v0", num_envs=64, seed=seed)
    config = DifferentiableTrainerConfig(total_updates=10**9, segment_length=32, seed=seed)
    trainer = DifferentiableTrainer(
        env=env, config=config, options=RunOptions(progress=False, loggers=[])
    )
    trainer.setup()
    trainer._prepare()  # the first reset, as fit() does

    def iteration() -> None:
        # One iteration of fit's loop.
        trainer.env_steps += trainer._train_iteration().env_steps
        trainer.iteration += 1

    return iteration


def measure_side(
    side: Side, *, iterations: int, warmup: int, seed: int, threads: int, clock: str
) -> dict[str, Any]:
    """Time every workload in this process; install the hook first when ``side`` is on."""
    if side == "on":
        import jaxtyping  # noqa: PLC0415 - only the checked side installs the hook

        jaxtyping.install_import_hook(["typedrl"], "beartype.beartype")
    import torch  # noqa: PLC0415

    torch.set_num_threads(threads)
    active = _checks_active()
    if active != (side == "on"):
        raise RuntimeError(f"checks {side} expected, but the probe found them active={active}")
    timer = _CLOCKS[clock]
    seconds: dict[str, list[float]] = {}
    builders = {"ppo": _ppo_iteration, "apg": _apg_iteration}
    for name in WORKLOADS:
        torch.manual_seed(seed)
        iteration = builders[name](seed)
        for _ in range(warmup):
            iteration()
        times = []
        for _ in range(iterations):
            start = timer()
            iteration()
            times.append(timer() - start)
        seconds[name] = times
    return {"side": side, "checks_active": active, "seconds": seconds}


def _run_side(side: Side, args: argparse.Namespace) -> dict[str, Any]:
    command = [
        sys.executable,
        __file__,
        "--side",
        side,
        "--iterations",
        str(args.iterations),
        "--warmup",
        str(args.warmup),
        "--seed",
        str(args.seed),
        "--threads",
        str(args.threads),
        "--clock",
        args.clock,
    ]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        lines = completed.stderr.strip().splitlines() or ["(no output)"]
        raise SystemExit(f"the checks-{side} process failed: {lines[-1]}")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def compare(args: argparse.Namespace) -> dict[str, Any]:
    """Alternate the two sides for ``args.rounds`` rounds; return the ratios of medians."""
    samples: dict[Side, dict[str, list[float]]] = {
        "on": {name: [] for name in WORKLOADS},
        "off": {name: [] for name in WORKLOADS},
    }
    round_ratios: dict[str, list[float]] = {name: [] for name in WORKLOADS}
    for index in range(args.rounds):
        order: tuple[Side, Side] = ("on", "off") if index % 2 == 0 else ("off", "on")
        medians: dict[Side, dict[str, float]] = {}
        for side in order:
            seconds = _run_side(side, args)["seconds"]
            medians[side] = {name: statistics.median(seconds[name]) for name in WORKLOADS}
            for name in WORKLOADS:
                samples[side][name].extend(seconds[name])
        for name in WORKLOADS:
            round_ratios[name].append(medians["on"][name] / medians["off"][name])
    result: dict[str, Any] = {
        "rounds": args.rounds,
        "iterations": args.iterations,
        "clock": args.clock,
        "threads": args.threads,
    }
    for name in WORKLOADS:
        on = statistics.median(samples["on"][name])
        off = statistics.median(samples["off"][name])
        result[name] = {
            "on_ms": 1000.0 * on,
            "off_ms": 1000.0 * off,
            "ratio": on / off,
            "round_ratios": round_ratios[name],
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="pairs of processes (on, off)")
    parser.add_argument("--iterations", type=int, default=30, help="timed iterations per process")
    parser.add_argument("--warmup", type=int, default=3, help="untimed iterations first")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument(
        "--clock",
        choices=sorted(_CLOCKS),
        default="wall",
        help="wall clock (default) or the thread's CPU time (steadier on a shared machine)",
    )
    parser.add_argument(
        "--side", choices=("on", "off"), help="measure one side in this process (internal)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.side is not None:
        side: Side = args.side
        result = measure_side(
            side,
            iterations=args.iterations,
            warmup=args.warmup,
            seed=args.seed,
            threads=args.threads,
            clock=args.clock,
        )
        print(json.dumps(result))
        return
    result = compare(args)
    if args.json:
        print(json.dumps(result))
        return
    print(f"{'workload':<10} {'checks on':>12} {'checks off':>12} {'ratio':>8}")
    for name in WORKLOADS:
        row = result[name]
        print(f"{name:<10} {row['on_ms']:>9.1f} ms {row['off_ms']:>9.1f} ms {row['ratio']:>7.2f}x")
        print(f"{'':<10} per round: " + ", ".join(f"{r:.2f}" for r in row["round_ratios"]))


if __name__ == "__main__":
    main()
