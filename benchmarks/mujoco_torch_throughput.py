"""Differentiable MuJoCo: env steps/s forward and forward + backward, and PPO vs APG vs SHAC.

Throughput (``--part throughput``): the MuJoCo envs of ``typedrl.envs.mujoco``
(``mujoco-torch``, physics in torch ops, batched with ``torch.vmap``) step
``--steps`` times at each ``--batch`` size with random actions in the bounds:

- forward: under ``torch.no_grad()``;
- forward + backward: the actions require gradients, the summed reward of the
  ``--steps`` steps is backpropagated to them through the physics, and the time
  of both passes is counted;

against Gymnasium's ``HalfCheetah-v5`` (MuJoCo's C engine, one model per env) in
a ``SyncVectorEnv`` of ``--gym-envs`` envs, measured in the same run. Reported:
env steps per second and each rate over Gymnasium's (a HalfCheetah env step is
five physics steps on both sides). Rounds alternate between the setups, and the
median of ``--rounds`` rounds is reported, so that drift in machine load affects
every setup alike.

Learning (``--part learning``): PPO, APG and SHAC race to a deterministic return on
``typedrl/MujocoCartPoleSwingUp-v0`` with the race of ``sample_efficiency.py``
(same evaluation every ``eval_every`` env steps from fixed, seeded starts; the
env steps and training seconds each needed to reach the target). PPO and SHAC
use the settings that learn the built-in ``typedrl/CartPoleSwingUp-v0`` (the
same cart-pole, reward and time limit); budgets are those of the built-in task
scaled by ``--budget-scale``.

Usage:
    python benchmarks/mujoco_torch_throughput.py --part throughput --json
    python benchmarks/mujoco_torch_throughput.py --part throughput --batch 64 --batch 1024
    python benchmarks/mujoco_torch_throughput.py --part learning --clock cpu --plot out/
"""

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from sample_efficiency import ALGORITHMS, CLOCKS, TASKS, Setup, Task, compare, plot

from typedrl.envs import make_builtin

MUJOCO_ENVS = ("typedrl/MujocoHalfCheetah-v0", "typedrl/MujocoCartPoleSwingUp-v0")
SWING_UP = "typedrl/MujocoCartPoleSwingUp-v0"


def _rate_typedrl(env_id: str, batch: int, steps: int, *, backward: bool, dtype: str) -> float:
    env = make_builtin(env_id, num_envs=batch, seed=0, dtype=dtype)  # type: ignore[arg-type]
    generator = torch.Generator().manual_seed(0)
    shape = (steps, batch, *env.single_action_space.shape)  # type: ignore[misc]
    actions = torch.rand(shape, generator=generator, dtype=env.dtype) * 2 - 1
    env.reset(seed=0)
    start = time.perf_counter()
    if backward:
        leaf = actions.requires_grad_()
        total = sum((env.step(leaf[t]).reward.sum() for t in range(steps)), torch.zeros(()))
        total.backward()
    else:
        with torch.no_grad():
            for t in range(steps):
                env.step(actions[t])
    return steps * batch / (time.perf_counter() - start)


def _rate_gymnasium(num_envs: int, steps: int) -> float:
    envs = gym.make_vec(
        "HalfCheetah-v5",
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, size=(steps, num_envs, 6))
    envs.reset(seed=0)
    start = time.perf_counter()
    for action in actions:
        envs.step(action)
    rate = steps * num_envs / (time.perf_counter() - start)
    envs.close()
    return rate


def throughput(
    *, batches: list[int], steps: int, gym_envs: int, rounds: int, dtype: str
) -> dict[str, Any]:
    """Median env steps/s of every setup over ``rounds`` alternating rounds."""
    setups: dict[str, Callable[[], float]] = {
        f"gymnasium/HalfCheetah-v5 x{gym_envs}": lambda: _rate_gymnasium(gym_envs, 10 * steps)
    }
    for env_id in MUJOCO_ENVS:
        for batch in batches:
            for backward in (False, True):
                name = f"{env_id} x{batch} {'fwd+bwd' if backward else 'fwd'}"
                setups[name] = lambda env_id=env_id, batch=batch, backward=backward: _rate_typedrl(
                    env_id, batch, steps, backward=backward, dtype=dtype
                )
    # One untimed pass: first calls build caches (vmap, model transfer).
    for env_id in MUJOCO_ENVS:
        _rate_typedrl(env_id, 2, 2, backward=True, dtype=dtype)
    samples: dict[str, list[float]] = {name: [] for name in setups}
    for _ in range(rounds):
        for name, measure in setups.items():
            samples[name].append(measure())
    rates = {name: statistics.median(values) for name, values in samples.items()}
    reference = rates[next(iter(setups))]
    return {
        "dtype": dtype,
        "steps": steps,
        "rounds": rounds,
        "threads": torch.get_num_threads(),
        "steps_per_second": rates,
        "over_gymnasium": {name: rate / reference for name, rate in rates.items()},
    }


def _swing_up_task(budget_scale: float) -> Task:
    """The built-in swing-up's PPO and SHAC settings, plus APG, with scaled budgets."""
    builtin = TASKS["typedrl/CartPoleSwingUp-v0"]
    setups = dict(builtin.setups)
    setups["apg"] = Setup(
        num_envs=64, budget=2_048_000, eval_every=16_384, config={"segment_length": 32}
    )
    scaled = {
        name: replace(setup, budget=max(setup.eval_every, int(setup.budget * budget_scale)))
        for name, setup in setups.items()
    }
    return Task(target=builtin.target, setups=scaled)


def learning(
    *, target: float, seed: int, episodes: int, budget_scale: float, clock: str = "wall"
) -> dict[str, Any]:
    """Race PPO, APG and SHAC to ``target`` on the MuJoCo swing-up."""
    TASKS[SWING_UP] = _swing_up_task(budget_scale)
    return compare(
        SWING_UP,
        seed=seed,
        episodes=episodes,
        target=target,
        clock=CLOCKS[clock],
        algorithms=ALGORITHMS,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("throughput", "learning"), default="throughput")
    parser.add_argument("--batch", type=int, action="append", help="default: 16, 64, 256, 1024")
    parser.add_argument("--steps", type=int, default=20, help="env steps per measurement")
    parser.add_argument("--gym-envs", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--target", type=float, default=400.0, help="swing-up return to reach")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=16)
    parser.add_argument("--budget-scale", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="training time as wall clock (default) or the thread's CPU time (--part learning)",
    )
    parser.add_argument("--plot", type=Path, metavar="DIR", help="write the race's curves here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.part == "learning":
        result = learning(
            target=args.target,
            seed=args.seed,
            episodes=args.eval_episodes,
            budget_scale=args.budget_scale,
            clock=args.clock,
        )
        if args.plot is not None:
            plot(result, args.plot)
        if args.json:
            print(json.dumps(result))
            return
        for algorithm in ALGORITHMS:
            outcome = result.get(algorithm)
            if outcome is not None:
                print(
                    f"{algorithm:>5} reached={outcome['reached']!s:<5} "
                    f"env_steps={outcome['env_steps']:>9} "
                    f"train_s={outcome['train_seconds']:>8.1f} best={outcome['best_return']:.1f}"
                )
        return
    result = throughput(
        batches=args.batch or [16, 64, 256, 1024],
        steps=args.steps,
        gym_envs=args.gym_envs,
        rounds=args.rounds,
        dtype=args.dtype,
    )
    if args.json:
        print(json.dumps(result))
        return
    print(f"{'setup':<52} {'steps/s':>10} {'/ gymnasium':>12}")
    for name, rate in result["steps_per_second"].items():
        print(f"{name:<52} {rate:>10.0f} {result['over_gymnasium'][name]:>12.3f}")


if __name__ == "__main__":
    main()
