"""List the package's files that one PPO and one SHAC training iteration pass through.

A measure of how spread out one iteration's code is: the fewer files, the
easier the walk is to follow. The second iteration of each run is traced (the
first also builds and registers things). The count is given with and without
the env's files (the Gymnasium adapter, a built-in env), which a comparison
with a library that ships no env code leaves out. ``--functions`` also lists,
under each file, the functions of it that ran.

    python benchmarks/iteration_walk.py [--functions]
"""

import argparse
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import typedrl
from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.envs import make
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.shac import SHACConfig
from typedrl.training import AbstractTrainer, RunOptions

PACKAGE = Path(typedrl.__file__).resolve().parent


def files_of_one_iteration(trainer: AbstractTrainer) -> dict[str, list[str]]:
    """The package files whose functions run during the trainer's second iteration.

    Each file (relative to the package) maps to the qualified names of its functions
    that ran, sorted.
    """
    seen: dict[str, set[str]] = {}

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        del arg
        if event == "call":
            path = Path(frame.f_code.co_filename)
            if path.is_relative_to(PACKAGE):
                file = str(path.relative_to(PACKAGE))
                seen.setdefault(file, set()).add(frame.f_code.co_qualname)

    trainer.setup()
    original = trainer._train_iteration
    calls = 0

    def traced() -> Any:
        nonlocal calls
        calls += 1
        if calls != 2:
            return original()
        sys.setprofile(profile)
        try:
            return original()
        finally:
            sys.setprofile(None)

    trainer._train_iteration = traced  # type: ignore[method-assign]
    trainer.fit()
    return {file: sorted(seen[file]) for file in sorted(seen)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--functions", action="store_true", help="list each file's functions that ran"
    )
    args = parser.parse_args()
    ppo = PPOAgent(
        env=make("CartPole-v1", num_envs=4, seed=0),
        config=PPOConfig(total_timesteps=4 * 64 * 2, num_steps=64, batch_size=64),
        options=RunOptions(progress=False),
    )
    shac = DifferentiableTrainer(
        env=make("typedrl/CartPoleSwingUp-v0", num_envs=8, seed=0),
        config=DifferentiableTrainerConfig(
            total_updates=2, segment_length=4, algorithm=SHACConfig()
        ),
        options=RunOptions(progress=False),
    )
    for name, trainer in (("PPO", ppo), ("SHAC", shac)):
        files = files_of_one_iteration(trainer)
        # The env's own files (an adapter or a built-in env) beside the trainer's.
        env_files = sum(file.startswith("envs/") for file in files)
        library = len(files) - env_files
        print(f"{name}: {len(files)} files ({library} without the env's {env_files})")
        for file, functions in files.items():
            print(f"  {file}")
            if args.functions:
                for function in functions:
                    print(f"      {function}")


if __name__ == "__main__":
    main()
