"""Overhead of GymnasiumVecEnv over stepping the same raw Gymnasium vector env.

Both loops step one and the same kind of vector env (same id, same number of
envs, same vectorization and autoreset mode) with pre-generated random
actions; the adapter additionally converts actions and results to torch and
keeps the same-step contract. Both envs are built with Gymnasium's defaults
(``copy=True``, so the raw loop gets a ``copy.deepcopy`` of each observation);
the adapter steps its env with ``copy`` switched off and copies or casts the
observation itself. The reported ratio is raw rate / adapter rate
(1.0 means no overhead). Rounds alternate between the two loops so drift in
machine load affects both alike; the median ratio over rounds is reported.

``--clock cpu`` times the loops with the thread's CPU time instead of the wall
clock, which leaves out the time other processes on a shared machine take
from this one (their effect on the caches remains).

Usage:
    python benchmarks/gymnasium_adapter_overhead.py --env-id CartPole-v1 --num-envs 8
    python benchmarks/gymnasium_adapter_overhead.py --env-id HalfCheetah-v5  # gymnasium[mujoco]
"""

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from typedrl.envs import GymnasiumVecEnv


def _raw_env(env_id: str, num_envs: int, vectorization: str) -> gym.vector.VectorEnv[Any, Any, Any]:
    return gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode=vectorization,
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )


_CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}


def _rate_raw(
    env: gym.vector.VectorEnv[Any, Any, Any], actions: list[np.ndarray], clock: Callable[[], float]
) -> float:
    env.reset(seed=0)
    start = clock()
    for action in actions:
        env.step(action)
    return len(actions) * env.num_envs / (clock() - start)


def _rate_adapter(
    env: GymnasiumVecEnv, actions: list[torch.Tensor], clock: Callable[[], float]
) -> float:
    env.reset(seed=0)
    start = clock()
    for action in actions:
        env.step(action)
    return len(actions) * env.num_envs / (clock() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5000, help="vector steps per round")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--vectorization", default="sync", choices=["sync", "async"])
    parser.add_argument(
        "--clock", default="wall", choices=sorted(_CLOCKS), help="wall clock or thread CPU time"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    torch.set_num_threads(1)
    raw = _raw_env(args.env_id, args.num_envs, args.vectorization)
    adapter = GymnasiumVecEnv(_raw_env(args.env_id, args.num_envs, args.vectorization))
    raw.single_action_space.seed(0)
    single = raw.single_action_space
    np_batch = np.stack(
        [np.stack([single.sample() for _ in range(args.num_envs)]) for _ in range(args.steps)]
    )
    torch_batch = torch.from_numpy(np_batch)
    if torch_batch.is_floating_point():
        torch_batch = torch_batch.float()
    # Both loops time env.step alone: the per-step action objects are built
    # before the clock starts (iterating a tensor creates a view per row, about
    # 0.5 us each, which iterating a NumPy array mostly avoids).
    np_actions = list(np_batch)
    torch_actions = list(torch_batch.unbind(0))
    clock = _CLOCKS[args.clock]
    _rate_raw(raw, np_actions[:200], clock)
    _rate_adapter(adapter, torch_actions[:200], clock)

    raw_rates, adapter_rates, ratios = [], [], []
    for _ in range(args.rounds):
        raw_rate = _rate_raw(raw, np_actions, clock)
        adapter_rate = _rate_adapter(adapter, torch_actions, clock)
        raw_rates.append(raw_rate)
        adapter_rates.append(adapter_rate)
        ratios.append(raw_rate / adapter_rate)
    raw.close()
    adapter.close()
    result = {
        "env_id": args.env_id,
        "num_envs": args.num_envs,
        "vectorization": args.vectorization,
        "clock": args.clock,
        "raw_env_steps_per_s": statistics.median(raw_rates),
        "adapter_env_steps_per_s": statistics.median(adapter_rates),
        "overhead_ratio": statistics.median(ratios),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"raw Gymnasium     {result['raw_env_steps_per_s']:>12,.0f} env-steps/s")
        print(f"GymnasiumVecEnv   {result['adapter_env_steps_per_s']:>12,.0f} env-steps/s")
        print(f"overhead ratio    {result['overhead_ratio']:>12.3f}x (raw / adapter, median)")


if __name__ == "__main__":
    main()
