"""Break-even of ``compile_update``: compile seconds against seconds saved per minibatch update.

For each case (an env and the network and minibatch size PPO trains on it),
two agents are built from the same seed, one eager and one with
``PPOConfig(compile_update=True)``; each collects one epoch, then runs
minibatch updates on it. The compiled agent's first update includes the
compilation (``compile seconds``: that update's time less an eager update's);
the steady-state cost per update of both is the median of ``--updates``
timed updates after a warm-up. The break-even is the number of updates after
which compiling has paid for itself: ``compile seconds / (eager - compiled)``.
One CPU thread, as the other benchmarks.

    python benchmarks/ppo_compile_break_even.py
    python benchmarks/ppo_compile_break_even.py --json
"""

import argparse
import json
import statistics
import time
from dataclasses import dataclass

import torch

from typedrl.agents import PPOAgent, PPOConfig
from typedrl.envs import make
from typedrl.training import RunOptions


@dataclass(frozen=True, kw_only=True)
class Case:
    """One measured configuration."""

    name: str
    env_id: str
    hidden: tuple[int, ...]
    activation: str
    batch_size: int


CASES = (
    Case(
        name="CartPole-v1", env_id="CartPole-v1", hidden=(64, 64), activation="tanh", batch_size=64
    ),
    Case(
        name="HalfCheetah-v5",
        env_id="HalfCheetah-v5",
        hidden=(256, 256),
        activation="relu",
        batch_size=64,
    ),
    Case(
        name="HalfCheetah-v5 batch 512",
        env_id="HalfCheetah-v5",
        hidden=(256, 256),
        activation="relu",
        batch_size=512,
    ),
)


def _agent(case: Case, *, compile_update: bool) -> PPOAgent:
    torch.manual_seed(0)
    num_steps = 1024
    config = PPOConfig(
        total_timesteps=num_steps,
        num_steps=num_steps,
        batch_size=case.batch_size,
        num_mini_epochs=1,
        actor_hidden=case.hidden,
        critic_hidden=case.hidden,
        activation=case.activation,  # type: ignore[arg-type]
        compile_update=compile_update,
    )
    env = make(case.env_id, num_envs=1, seed=0)
    agent = PPOAgent(env=env, config=config, options=RunOptions(progress=False, loggers=[]))
    agent.setup()
    agent._prepare()  # the first reset, as fit() does
    return agent


def _update_seconds(agent: PPOAgent, batch_size: int, updates: int) -> tuple[float, float]:
    """Seconds of the first update and median seconds of ``updates`` later ones."""
    rollout = agent.collector.collect(agent.model_unwrapped, num_steps=agent.config.num_steps)
    advantages, returns = agent.algorithm._advantages(rollout)
    from typedrl.agents._loss import EpochData  # noqa: PLC0415 - the update's own input

    flat = rollout.data.reshape(-1)
    epoch = EpochData(
        obs=flat["obs"],
        action=flat["action"],
        log_prob=flat["log_prob"],
        value=flat["value"],
        valid=None,
        advantage=advantages.reshape(-1),
        returns=returns.reshape(-1),
    )
    row = torch.zeros(8)
    generator = torch.Generator().manual_seed(0)
    num_samples = flat.batch_size[0]

    def step() -> float:
        indices = torch.randperm(num_samples, generator=generator)[:batch_size]
        start = time.perf_counter()
        agent.algorithm._minibatch_step(epoch.select(indices), row, iteration=0)
        return time.perf_counter() - start

    first = step()
    for _ in range(20):
        step()
    return first, statistics.median(step() for _ in range(updates))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=300, help="timed updates per agent")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = []
    for case in CASES:
        _, eager = _update_seconds(
            _agent(case, compile_update=False), case.batch_size, args.updates
        )
        first, compiled = _update_seconds(
            _agent(case, compile_update=True), case.batch_size, args.updates
        )
        compile_seconds = first - eager
        saved = eager - compiled
        results.append(
            {
                "case": case.name,
                "eager_ms": eager * 1e3,
                "compiled_ms": compiled * 1e3,
                "compile_s": compile_seconds,
                "break_even_updates": compile_seconds / saved if saved > 0 else None,
            }
        )
    if args.json:
        print(json.dumps(results))
        return
    print(f"{'case':<26}{'eager ms':>10}{'compiled ms':>13}{'compile s':>11}{'break-even':>12}")
    for r in results:
        even = r["break_even_updates"]
        print(
            f"{r['case']:<26}{r['eager_ms']:>10.3f}{r['compiled_ms']:>13.3f}"
            f"{r['compile_s']:>11.1f}{'never' if even is None else f'{even:,.0f}':>12}"
        )


if __name__ == "__main__":
    main()
