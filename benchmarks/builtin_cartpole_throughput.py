"""Steps per second of the built-in discrete CartPole vs Gymnasium's NumPy CartPoleVectorEnv.

Both envs run ``--num-envs`` rows with uniformly random actions (drawn before the
timed loop), in the same process, alternating repeats; the best repeat of each
is reported. The torch env runs with autograd enabled (as a caller would
collect); the no-grad rate is reported separately. ``--clock cpu`` times with the
thread's CPU time instead of the wall clock, which other jobs on a shared
machine disturb less (it ignores time spent waiting for a core).

Usage:
    python benchmarks/builtin_cartpole_throughput.py --num-envs 4096 --steps 500 --json
"""

import argparse
import json
import platform
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

from typedrl.envs.builtin import CartPole

_CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}


def _best_rate(
    run: Callable[[], None],
    *,
    num_envs: int,
    steps: int,
    repeats: int,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        run()
        best = min(best, clock() - start)
    return num_envs * steps / best


def _torch_runner(
    env: CartPole, actions: torch.Tensor, *, no_grad: bool, sync: Callable[[], None]
) -> Callable[[], None]:
    def run() -> None:
        with torch.set_grad_enabled(not no_grad):
            for action in actions:
                env.step(action)
        sync()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--device", action="append", help="torch device(s); default: cpu, plus cuda if available"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: Gymnasium's NumPy env is single-threaded)",
    )
    parser.add_argument(
        "--clock",
        choices=sorted(_CLOCKS),
        default="wall",
        help="wall clock (default) or the thread's CPU time (steadier on a shared machine)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = _CLOCKS[args.clock]
    devices = args.device or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])

    gym_env = gym.make_vec(
        "CartPole-v1", num_envs=args.num_envs, vectorization_mode="vector_entry_point"
    )
    gym_env.reset(seed=0)
    rng = np.random.default_rng(0)
    gym_actions = rng.integers(0, 2, size=(args.steps, args.num_envs))

    def run_gym() -> None:
        for action in gym_actions:
            gym_env.step(action)

    results: dict[str, object] = {
        "num_envs": args.num_envs,
        "steps": args.steps,
        "threads": args.threads,
        "clock": args.clock,
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
        "torch": torch.__version__,
        "gymnasium": gym.__version__,
    }
    rates: dict[str, float] = {}
    envs = {}
    for device in devices:
        env = CartPole(num_envs=args.num_envs, device=device, seed=0)
        env.reset()
        envs[device] = (env, torch.as_tensor(gym_actions, device=device))
    sync = {
        device: (torch.cuda.synchronize if device.startswith("cuda") else (lambda: None))
        for device in devices
    }
    # Interleave the contenders so that machine noise hits all of them alike.
    for _ in range(args.repeats):
        rates_now = {
            "gymnasium_numpy": _best_rate(
                run_gym, num_envs=args.num_envs, steps=args.steps, repeats=1, clock=clock
            )
        }
        for device, (env, actions) in envs.items():
            for no_grad in (False, True):
                key = f"typedrl_{device}" + ("_no_grad" if no_grad else "")
                run = _torch_runner(env, actions, no_grad=no_grad, sync=sync[device])
                rates_now[key] = _best_rate(
                    run, num_envs=args.num_envs, steps=args.steps, repeats=1, clock=clock
                )
        for key, rate in rates_now.items():
            rates[key] = max(rates.get(key, 0.0), rate)
    gym_rate = rates["gymnasium_numpy"]
    results["steps_per_second"] = rates
    results["ratio_vs_gymnasium"] = {
        key: rate / gym_rate for key, rate in rates.items() if key != "gymnasium_numpy"
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for key, rate in rates.items():
        ratio = "" if key == "gymnasium_numpy" else f"  ratio {rate / gym_rate:.2f}"
        print(f"{key:>28}: {rate / 1e6:8.2f} M steps/s{ratio}")


if __name__ == "__main__":
    main()
