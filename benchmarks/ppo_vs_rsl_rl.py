"""PPO throughput: typedrl's PPOAgent against rsl_rl's PPO, driving the same batched torch env.

Both train on typedrl's built-in continuous-action CartPole
(``typedrl/CartPoleContinuous-v0``: Gaussian policies on both sides) with 4096
envs on the CPU, with rsl_rl's PPO hyper-parameters from Isaac Lab's cartpole
task ([32, 32] ELU actor and critic, 16 steps per env, 5 passes of 4
minibatches, Adam 1e-3 with the KL-adaptive schedule, desired KL 0.01, clipped
value loss, entropy 0.005, grad-norm 1.0, initial std 1.0), for the same number
of iterations (env steps), on one torch thread unless ``--threads`` says
otherwise. rsl_rl drives the env through :class:`RslRlCartPole`, a thin adapter
to rsl_rl's ``VecEnv`` interface. The runs alternate (and swap order every
round) so that machine load affects both alike; the reported figure is the
ratio of env steps per second (typedrl / rsl_rl).

By default every run is a fresh process (``--side``), so that neither side
inherits the other's heap. Both sides' processes inherit the shell's
environment: glibc's ``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_``
set there tune malloc for both alike (docs: Performance tips). typedrl runs as
shipped (eager); ``--compile`` runs it with ``PPOConfig(compile=True)``, whose
first minibatch compiles inside the timed run (on torch's compile cache as this
machine holds it). ``--interleave`` and ``--profile`` run both sides in one
process.

Needs rsl_rl in the benchmark's environment (not in the test environment: it
pulls in tensorboard):
    pip install rsl-rl-lib            # written against rsl-rl-lib 5.5
    python benchmarks/ppo_vs_rsl_rl.py --iterations 20 --rounds 3
    python benchmarks/ppo_vs_rsl_rl.py --interleave --iterations 30  # paired, per iteration
    python benchmarks/ppo_vs_rsl_rl.py --profile --iterations 5   # cProfile both
    python benchmarks/ppo_vs_rsl_rl.py --interleave --compile     # PPOConfig(compile=True)
"""

import argparse
import contextlib
import cProfile
import importlib
import importlib.metadata
import io
import json
import pstats
import statistics
import subprocess
import sys
import time
from typing import Any

import torch
from tensordict import TensorDict
from torch import Tensor

from typedrl.envs import make
from typedrl.envs.builtin import CartPole
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.training import RunOptions

ENV_ID = "typedrl/CartPoleContinuous-v0"
NUM_STEPS = 16
NUM_MINIBATCHES = 4
NUM_MINI_EPOCHS = 5
HIDDEN = (32, 32)


def _continuous_cartpole(num_envs: int, seed: int) -> CartPole:
    env = make(ENV_ID, num_envs=num_envs, seed=seed)
    if not isinstance(env, CartPole) or env.action_mode != "continuous":
        raise TypeError(f"{ENV_ID} should be the continuous built-in CartPole, got {env!r}")
    return env


class RslRlCartPole:
    """typedrl's batched CartPole behind rsl_rl's ``VecEnv`` interface (rsl-rl-lib 5.x).

    Observations stay typedrl's TensorDict (one group, ``"obs"``; rsl_rl's
    ``obs_groups`` map both the actor and the critic to it), so nothing is
    copied. ``step`` returns ``(obs, rewards, dones, extras)`` with
    ``dones = terminated | truncated`` as ``int64`` (as Isaac Lab's wrapper does)
    and ``extras["time_outs"] = truncated``, which rsl_rl bootstraps with
    ``V(obs_t)``. The env resets finished rows itself (same-step autoreset), so
    the returned observation of a finished row is already the next episode's
    first one, which is what rsl_rl expects. ``episode_length_buf`` counts the
    steps of each row's current episode; the env keeps its own time limit, so
    writing to it (``init_at_random_ep_len``) does not shorten episodes.
    """

    def __init__(self, env: CartPole, *, seed: int) -> None:
        self.env = env
        self.num_envs = env.num_envs
        self.num_actions = 1
        self.max_episode_length = env.max_episode_steps
        self.device = env.device
        self.cfg: dict[str, Any] = {"env_id": ENV_ID, "num_envs": env.num_envs}
        self.episode_length_buf = torch.zeros(env.num_envs, dtype=torch.int64, device=env.device)
        self._obs, _ = env.reset(seed=seed)

    def get_observations(self) -> TensorDict:
        """The current observations, ``{"obs": [num_envs, 4]}``."""
        return self._obs

    def step(self, actions: Tensor) -> tuple[TensorDict, Tensor, Tensor, dict[str, Any]]:
        """Step every row; return ``(obs, rewards, dones, extras)`` as rsl_rl expects."""
        result = self.env.step(actions)
        done = result.done
        self.episode_length_buf += 1
        self.episode_length_buf.masked_fill_(done, 0)
        self._obs = result.obs
        extras: dict[str, Any] = {"time_outs": result.truncated}
        return result.obs, result.reward, done.long(), extras

    def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()


def _rsl_rl_train_cfg() -> dict[str, Any]:
    """rsl-rl-lib 5.x runner config with Isaac Lab's cartpole PPO settings."""
    return {
        "num_steps_per_env": NUM_STEPS,
        "save_interval": 50,
        "obs_groups": {"actor": ["obs"], "critic": ["obs"]},
        "check_for_nan": True,
        "algorithm": {
            "class_name": "PPO",
            "value_loss_coef": 1.0,
            "use_clipped_value_loss": True,
            "clip_param": 0.2,
            "entropy_coef": 0.005,
            "num_learning_epochs": NUM_MINI_EPOCHS,
            "num_mini_batches": NUM_MINIBATCHES,
            "learning_rate": 1e-3,
            "schedule": "adaptive",
            "gamma": 0.99,
            "lam": 0.95,
            "desired_kl": 0.01,
            "max_grad_norm": 1.0,
        },
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": list(HIDDEN),
            "activation": "elu",
            "obs_normalization": False,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0},
        },
        "critic": {
            "class_name": "MLPModel",
            "hidden_dims": list(HIDDEN),
            "activation": "elu",
            "obs_normalization": False,
        },
    }


def typedrl_config(
    num_envs: int, iterations: int, seed: int, *, compile: bool = False
) -> PPOConfig:
    """The PPOConfig equivalent to :func:`_rsl_rl_train_cfg`."""
    return PPOConfig(
        total_timesteps=iterations * NUM_STEPS * num_envs,
        num_steps=NUM_STEPS,
        num_mini_epochs=NUM_MINI_EPOCHS,
        batch_size=num_envs * NUM_STEPS // NUM_MINIBATCHES,
        learning_rate=1e-3,
        learning_rate_schedule="adaptive",
        desired_kl=0.01,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.2,
        clip_value_loss=True,
        value_loss_coef=1.0,
        entropy_coef=0.005,
        max_grad_norm=1.0,
        actor_hidden=HIDDEN,
        critic_hidden=HIDDEN,
        activation="elu",
        log_std_init=0.0,
        compile=compile,
        seed=seed,
    )


def _import_rsl_rl() -> Any:
    try:
        return importlib.import_module("rsl_rl.runners")
    except ImportError as error:
        raise SystemExit(
            "this benchmark needs rsl_rl: `pip install rsl-rl-lib` in a separate venv "
            f"(not the test environment; it pulls in tensorboard). Import failed: {error}"
        ) from error


def _typedrl_agent(
    num_envs: int,
    iterations: int,
    seed: int,
    *,
    compile: bool,
) -> PPOAgent:
    env = _continuous_cartpole(num_envs, seed)
    config = typedrl_config(num_envs, iterations, seed, compile=compile)
    agent = PPOAgent(env=env, config=config, options=RunOptions(progress=False))
    agent.setup()
    agent._prepare()  # the first reset, as fit() does
    return agent


def _rsl_rl_runner(num_envs: int, seed: int) -> tuple[Any, RslRlCartPole]:
    runners = _import_rsl_rl()
    torch.manual_seed(seed)
    env = RslRlCartPole(_continuous_cartpole(num_envs, seed), seed=seed)
    with contextlib.redirect_stdout(io.StringIO()):  # the runner prints both models
        runner = runners.OnPolicyRunner(env, _rsl_rl_train_cfg(), log_dir=None, device="cpu")
    return runner, env


def typedrl_rate(
    num_envs: int,
    iterations: int,
    seed: int,
    *,
    compile: bool = False,
) -> float:
    """Env steps per second of ``PPOAgent.fit`` (set-up excluded; compiling is not)."""
    agent = _typedrl_agent(num_envs, iterations, seed, compile=compile)
    start = time.perf_counter()
    result = agent.fit()
    elapsed = time.perf_counter() - start
    agent.env.close()
    return float(result.env_steps) / elapsed


def rsl_rl_rate(num_envs: int, iterations: int, seed: int) -> float:
    """Env steps per second of rsl_rl's ``OnPolicyRunner.learn`` (set-up excluded)."""
    runner, env = _rsl_rl_runner(num_envs, seed)
    start = time.perf_counter()
    runner.learn(num_learning_iterations=iterations)
    elapsed = time.perf_counter() - start
    env.close()
    return iterations * NUM_STEPS * num_envs / elapsed


def interleaved_rates(
    num_envs: int, iterations: int, seed: int, *, compile: bool = False
) -> tuple[float, float, list[float]]:
    """Both trainers alive at once, one iteration each in turn: robust on a loaded machine.

    Returns the median env-steps/s of each (first iteration of each left out as
    warm-up) and the per-iteration ratios (typedrl / rsl_rl) of the pairs. The
    typedrl side runs the body of ``fit``'s loop (``_train_iteration``) without its
    logging and progress bookkeeping, which costs microseconds per epoch.
    """
    agent = _typedrl_agent(num_envs, iterations + 1, seed, compile=compile)
    runner, env = _rsl_rl_runner(num_envs, seed)
    steps = NUM_STEPS * num_envs
    ours: list[float] = []
    theirs: list[float] = []
    for index in range(iterations + 1):
        # Alternate which goes first, so that neither always follows the other.
        order = (0, 1) if index % 2 == 0 else (1, 0)
        seconds = [0.0, 0.0]
        for which in order:
            start = time.perf_counter()
            if which == 0:
                # one epoch of fit(), see the docstring
                agent.env_steps += agent._train_iteration().env_steps
                agent.iteration += 1
            else:
                runner.learn(num_learning_iterations=1)
            seconds[which] = time.perf_counter() - start
        if index > 0:
            ours.append(steps / seconds[0])
            theirs.append(steps / seconds[1])
    agent.env.close()
    env.close()
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    return statistics.median(ours), statistics.median(theirs), ratios


def _print_profile(
    title: str, profile: cProfile.Profile, marks: dict[str, tuple[str, str]], top: int
) -> None:
    stats = pstats.Stats(profile)
    table: dict[tuple[str, int, str], tuple[int, int, float, float, object]]
    table = stats.stats  # type: ignore[attr-defined]  # pstats keeps its table untyped
    total = max(entry[3] for entry in table.values())
    print(f"\n=== {title}: {total:.2f} s profiled ===")
    for label, (file_end, name) in marks.items():
        cumulative = sum(
            entry[3] for key, entry in table.items() if key[2] == name and key[0].endswith(file_end)
        )
        print(f"  {label:<22} {cumulative:7.2f} s  {100 * cumulative / total:5.1f} %")
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(top)
    print(out.getvalue())


def profile(num_envs: int, iterations: int, top: int) -> None:
    """cProfile both trainers for ``iterations`` iterations; print the split and hot functions."""
    agent = _typedrl_agent(num_envs, iterations, 0, compile=False)
    profiler = cProfile.Profile()
    profiler.runcall(agent.fit)
    marks = {
        "collection": ("_collector.py", "collect"),
        "update": ("_algorithm.py", "update"),
        "  minibatch steps": ("_algorithm.py", "_minibatch_step"),
    }
    _print_profile("typedrl PPOAgent.fit", profiler, marks, top)
    runner, _ = _rsl_rl_runner(num_envs, seed=0)
    profiler = cProfile.Profile()
    profiler.runcall(runner.learn, num_learning_iterations=iterations)
    marks = {
        "update": ("ppo.py", "update"),
        "compute_returns": ("ppo.py", "compute_returns"),
        "env.step": ("ppo_vs_rsl_rl.py", "step"),
    }
    _print_profile("rsl_rl OnPolicyRunner.learn", profiler, marks, top)


def _report_interleaved(args: argparse.Namespace) -> None:
    ours, theirs, ratios = interleaved_rates(
        args.num_envs, args.iterations, seed=0, compile=args.compile
    )
    quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios
    result = {
        "mode": "interleaved",
        "compile": args.compile,
        "num_envs": args.num_envs,
        "iterations": args.iterations,
        "threads": args.threads,
        "rsl_rl_version": importlib.metadata.version("rsl-rl-lib"),
        "typedrl_env_steps_per_s": ours,
        "rsl_rl_env_steps_per_s": theirs,
        "ratio": statistics.median(ratios),
        "ratio_quartiles": quartiles,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"typedrl PPO   {ours:>9,.0f} env-steps/s (median iteration)")
    print(f"rsl_rl PPO    {theirs:>9,.0f} env-steps/s (median iteration)")
    shown = ", ".join(f"{q:.2f}" for q in quartiles)
    print(f"ratio         {result['ratio']:>9.2f}x (median of paired iterations)")
    print(f"quartiles     {shown}")


def _fresh_process_rate(side: str, args: argparse.Namespace, seed: int) -> float:
    """Env steps per second of one run of ``side`` in a fresh process."""
    command = [
        sys.executable,
        __file__,
        "--side",
        side,
        "--seed",
        str(seed),
        "--num-envs",
        str(args.num_envs),
        "--iterations",
        str(args.iterations),
        "--threads",
        str(args.threads),
    ]
    if args.compile:
        command.append("--compile")
        command.append("--no-tune-allocator")
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return float(done.stdout.strip().splitlines()[-1])


def _run_side(args: argparse.Namespace) -> None:
    if args.side == "typedrl":
        rate = typedrl_rate(
            args.num_envs,
            args.iterations,
            args.seed,
            compile=args.compile,
        )
    else:
        rate = rsl_rl_rate(args.num_envs, args.iterations, args.seed)
    print(rate)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--iterations", type=int, default=20, help="PPO iterations per run")
    parser.add_argument("--rounds", type=int, default=2, help="alternating run pairs")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--interleave",
        action="store_true",
        help="alternate single iterations of both trainers (paired; for loaded machines)",
    )
    parser.add_argument(
        "--compile", action="store_true", help="PPOConfig(compile=True) for typedrl"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile both and exit")
    parser.add_argument("--side", choices=("typedrl", "rsl_rl"), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--top", type=int, default=25, help="functions listed by --profile")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    _import_rsl_rl()  # fail before any measurement
    if args.profile:
        profile(args.num_envs, args.iterations, args.top)
        return
    if args.side is not None:
        _run_side(args)
        return
    if args.interleave:
        _report_interleaved(args)
        return
    rounds = _fresh_rounds(args)
    ratio = statistics.median(row["typedrl"] / row["rsl_rl"] for row in rounds)
    result = {
        "num_envs": args.num_envs,
        "iterations": args.iterations,
        "env_steps_per_run": args.iterations * NUM_STEPS * args.num_envs,
        "threads": args.threads,
        "compile": args.compile,
        "fresh_processes": True,
        "rsl_rl_version": importlib.metadata.version("rsl-rl-lib"),
        "rounds": rounds,
        "ratio": ratio,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"median: {ratio:.2f}x rsl_rl")


def _fresh_rounds(args: argparse.Namespace) -> list[dict[str, float]]:
    """Each round: one rsl_rl run and one typedrl run, each a fresh process.

    They swap order every round, so that a drift in machine load cancels out.
    """
    rounds: list[dict[str, float]] = []
    for index in range(args.rounds):
        sides = ("typedrl", "rsl_rl") if index % 2 == 0 else ("rsl_rl", "typedrl")
        row = {side: _fresh_process_rate(side, args, index) for side in sides}
        rounds.append(row)
        if not args.json:
            ours, theirs = row["typedrl"], row["rsl_rl"]
            print(
                f"round {index}: rsl_rl {theirs:>9,.0f}  typedrl {ours:>9,.0f} "
                f"({ours / theirs:.2f}x) env-steps/s"
            )
    return rounds


if __name__ == "__main__":
    main()
