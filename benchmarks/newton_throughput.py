"""Throughput of typedrl.envs.newton against Gymnasium's C MuJoCo, in one run.

For each task, forward (no graph) and forward + backward (the summed reward of
``--steps`` steps differentiated w.r.t. every action) env steps per second of the
Newton env at each ``--batch``, and the same Gymnasium task (``Ant-v5``,
``HalfCheetah-v5``, ``Hopper-v5``) in a SyncVectorEnv of 8 envs (MuJoCo's C engine,
forward only). One torch thread; rates are env steps (rows x steps) per wall-clock
second, the median of ``--rounds`` rounds, each after one untimed round on the same
env (Warp compiles or loads its kernels, the step buffers are allocated). With
``--device cuda`` the Newton env runs on the GPU (Warp on torch's stream, the
device synchronised before and after each timed round); Gymnasium stays on the CPU.

    python benchmarks/newton_throughput.py --batch 64 --batch 256 --batch 1024
    python benchmarks/newton_throughput.py --device cuda --batch 1024 --batch 4096
"""

import argparse
import statistics
import time

import gymnasium as gym
import numpy as np
import torch

from typedrl.envs.newton import AntTask, HalfCheetahTask, HopperTask, NewtonTask, NewtonVecEnv

TASKS: dict[str, tuple[type[NewtonTask], str]] = {
    "ant": (AntTask, "Ant-v5"),
    "half_cheetah": (HalfCheetahTask, "HalfCheetah-v5"),
    "hopper": (HopperTask, "Hopper-v5"),
}
"""Newton task and the Gymnasium env it is compared with."""


def _newton_rates(
    task: type[NewtonTask], num_envs: int, steps: int, rounds: int, device: torch.device
) -> tuple[float, float]:
    """Median forward and forward + backward env steps per second over ``rounds``."""
    env = NewtonVecEnv(task=task(), num_envs=num_envs, seed=0, device=str(device))
    env.reset(seed=0)
    generator = torch.Generator().manual_seed(0)
    act_dim = len(env.task.spec.actuated_dofs)
    plan = (torch.rand(steps, num_envs, act_dim, generator=generator) - 0.5).to(device)

    def forward() -> None:
        with torch.no_grad():
            for action in plan:
                env.step(action)

    def forward_backward() -> None:
        actions = plan.clone().requires_grad_()
        total = torch.zeros((), device=device)
        for action in actions:
            total = total + env.step(action).reward.sum()
        torch.autograd.backward(total)
        env.detach_state()

    rates = []
    for run in (forward, forward_backward):
        run()  # untimed: kernels compiled or loaded, step buffers allocated
        times = []
        for _ in range(rounds):
            _synchronize(device)
            start = time.perf_counter()
            run()
            _synchronize(device)
            times.append(time.perf_counter() - start)
        rates.append(num_envs * steps / statistics.median(times))
    return rates[0], rates[1]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _gymnasium_rate(env_id: str, steps: int) -> float:
    envs = gym.make_vec(env_id, num_envs=8, vectorization_mode="sync")
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    shape = envs.action_space.shape
    start = time.perf_counter()
    for _ in range(steps):
        envs.step(rng.uniform(-0.5, 0.5, size=shape).astype(np.float32))
    rate = 8 * steps / (time.perf_counter() - start)
    envs.close()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(TASKS), action="append", help="(repeatable)")
    parser.add_argument("--batch", type=int, action="append", help="rows (repeatable)")
    parser.add_argument("--steps", type=int, default=8, help="env steps per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the median is shown")
    parser.add_argument("--device", default="cpu", help="the Newton envs' device (default cpu)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    device = torch.device(args.device)
    batches = args.batch or [64, 256, 1024]
    where = f" on {torch.cuda.get_device_name(device)}" if device.type == "cuda" else ""
    print(f"Newton envs on {device}{where}; Gymnasium on the CPU, one thread")
    print(f"{'setup':<46} {'env steps/s':>12} {'over Gymnasium':>15}")
    for name in args.task or ["ant", "half_cheetah"]:
        task, gym_id = TASKS[name]
        base = statistics.median(_gymnasium_rate(gym_id, 200) for _ in range(args.rounds))
        print(f"{f'Gymnasium {gym_id} x 8 (C MuJoCo)':<46} {base:>12,.0f} {1.0:>15.3f}")
        for num_envs in batches:
            rates = _newton_rates(task, num_envs, args.steps, args.rounds, device)
            for mode, rate in zip(("forward", "forward + backward"), rates, strict=True):
                label = f"Newton {task.__name__[:-4]} x {num_envs}, {mode}"
                print(f"{label:<46} {rate:>12,.0f} {rate / base:>15.3f}", flush=True)


if __name__ == "__main__":
    main()
