"""PPO on MuJoCo: typedrl's tuned files against Stable-Baselines3 with rl-zoo3's settings.

Each run trains one (side, env, seed) for the same env budget (300k steps by
default) on one CPU thread, then scores the final policy with deterministic
actions over 10 episodes of a separately seeded evaluation env, and appends
one JSON line (return mean and std, training wall and CPU time, env steps
per second of each) to ``--out``; on a shared machine the CPU-time rate is the
one to compare. ``--report`` prints the table of a results file, averaged over
seeds per (side, env).

- typedrl: the shipped tuned file ``src/typedrl/configs/ppo/<env>.yaml``
  (its ``num_envs``, ``config`` and ``run.clip_actions``: Box actions clipped
  to the action space as Stable-Baselines3 clips them), as ``typedrl train
  <env>`` runs it.
- Stable-Baselines3: rl-zoo3's tuned PPO hyper-parameters for HalfCheetah-v3
  and Hopper-v3 (``hyperparams/ppo.yml``), the zoo's ``normalize: true`` as
  ``VecNormalize`` with the run's gamma, evaluated with frozen observation
  statistics and raw rewards.

The two sides need different environments: typedrl's development venv, and
a separate venv with Stable-Baselines3 and ``gymnasium[mujoco]``::

    python benchmarks/ppo_vs_sb3_mujoco.py --side typedrl --env HalfCheetah-v5 --seeds 0 1
    /path/to/sb3venv/bin/python benchmarks/ppo_vs_sb3_mujoco.py --side sb3 \\
        --env HalfCheetah-v5 --seeds 0 1
    python benchmarks/ppo_vs_sb3_mujoco.py --report results.jsonl
"""

import argparse
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

CONFIG_DIR = Path(__file__).resolve().parent.parent / "src" / "typedrl" / "configs" / "ppo"
EVAL_SEED_OFFSET = 1000

# rl-zoo3's tuned PPO hyper-parameters (hyperparams/ppo.yml; the -v3 entries, the
# newest MuJoCo versions it tunes), as Stable-Baselines3 keyword arguments.
ZOO: dict[str, dict[str, Any]] = {
    "HalfCheetah-v5": {
        "n_envs": 1,
        "batch_size": 64,
        "n_steps": 512,
        "gamma": 0.98,
        "learning_rate": 2.0633e-05,
        "ent_coef": 0.000401762,
        "clip_range": 0.1,
        "n_epochs": 20,
        "gae_lambda": 0.92,
        "max_grad_norm": 0.8,
        "vf_coef": 0.58096,
    },
    "Hopper-v5": {
        "n_envs": 1,
        "batch_size": 32,
        "n_steps": 512,
        "gamma": 0.999,
        "learning_rate": 9.80828e-05,
        "ent_coef": 0.00229519,
        "clip_range": 0.2,
        "n_epochs": 5,
        "gae_lambda": 0.99,
        "max_grad_norm": 0.7,
        "vf_coef": 0.835671,
    },
}


def _run_sb3(env_id: str, seed: int, timesteps: int, episodes: int) -> dict[str, Any]:
    # Optional benchmark dependency, installed only in the baseline's venv.
    from stable_baselines3 import PPO  # noqa: PLC0415
    from stable_baselines3.common.env_util import make_vec_env  # noqa: PLC0415
    from stable_baselines3.common.evaluation import evaluate_policy  # noqa: PLC0415
    from stable_baselines3.common.vec_env import VecNormalize  # noqa: PLC0415

    kwargs = dict(ZOO[env_id])
    n_envs = kwargs.pop("n_envs")
    env = VecNormalize(make_vec_env(env_id, n_envs=n_envs, seed=seed), gamma=kwargs["gamma"])
    policy_kwargs = {
        "log_std_init": -2.0,
        "ortho_init": False,
        "activation_fn": torch.nn.ReLU,
        "net_arch": {"pi": [256, 256], "vf": [256, 256]},
    }
    model = PPO(
        "MlpPolicy",
        env,
        seed=seed,
        device="cpu",
        verbose=0,
        policy_kwargs=policy_kwargs,
        **kwargs,
    )
    start, cpu_start = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=timesteps)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    eval_env = VecNormalize(
        make_vec_env(env_id, n_envs=1, seed=seed + EVAL_SEED_OFFSET),
        training=False,
        norm_reward=False,
    )
    eval_env.obs_rms = env.obs_rms
    returns, _ = evaluate_policy(
        model, eval_env, n_eval_episodes=episodes, deterministic=True, return_episode_rewards=True
    )
    return {
        "env_steps": int(model.num_timesteps),
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "returns": [float(r) for r in returns],
    }


def _run_typedrl(env_id: str, seed: int, timesteps: int, episodes: int) -> dict[str, Any]:
    import yaml  # noqa: PLC0415 - the typedrl side's environment has it

    from typedrl.envs import make  # noqa: PLC0415
    from typedrl.evaluation import EpisodeEvaluator  # noqa: PLC0415
    from typedrl.ppo import PPOAgent, PPOConfig  # noqa: PLC0415
    from typedrl.training import RunOptions  # noqa: PLC0415

    tuned = yaml.safe_load((CONFIG_DIR / f"{env_id}.yaml").read_text())
    config = PPOConfig.from_dict({**tuned["config"], "total_timesteps": timesteps, "seed": seed})
    clip = tuned.get("run", {}).get("clip_actions")
    env = make(env_id, num_envs=tuned["num_envs"], seed=seed, clip_actions=clip)
    agent = PPOAgent(env=env, config=config, options=RunOptions(progress=False, loggers=[]))
    cpu_start = time.process_time()
    result = agent.fit()
    cpu_seconds = time.process_time() - cpu_start
    env.close()
    eval_env = make(env_id, num_envs=1, seed=seed + EVAL_SEED_OFFSET, clip_actions=clip)
    evaluation = EpisodeEvaluator(
        eval_env, num_episodes=episodes, seed=seed + EVAL_SEED_OFFSET
    ).evaluate(agent.policy)
    eval_env.close()
    return {
        "env_steps": result.env_steps,
        "seconds": result.wall_seconds,
        "cpu_seconds": cpu_seconds,
        "return_mean_evaluator": evaluation.score,
        "return_std_evaluator": evaluation.metrics["return_std"],
    }


def _versions(side: str) -> dict[str, str]:
    import gymnasium  # noqa: PLC0415
    import mujoco  # noqa: PLC0415

    versions = {
        "torch": torch.__version__,
        "gymnasium": gymnasium.__version__,
        "mujoco": mujoco.__version__,
    }
    if side == "sb3":
        import stable_baselines3  # noqa: PLC0415

        versions["stable_baselines3"] = stable_baselines3.__version__
    return versions


def _report(path: Path) -> None:
    rows: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            rows[(record["env"], record["side"])].append(record)
    print(
        f"{'env':<16}{'side':<9}{'seeds':<8}{'return':>18}"
        f"{'env-steps/s':>13}{'per CPU s':>11}{'steps':>9}"
    )
    for (env_id, side), records in sorted(rows.items()):
        means = [r["return_mean"] for r in records]
        spread = statistics.stdev(means) if len(means) > 1 else 0.0
        rate = statistics.mean(r["env_steps_per_s"] for r in records)
        cpu_rates = [r["env_steps_per_cpu_s"] for r in records if "env_steps_per_cpu_s" in r]
        cpu_rate = f"{statistics.mean(cpu_rates):,.0f}" if cpu_rates else "-"
        seeds = ",".join(str(r["seed"]) for r in records)
        print(
            f"{env_id:<16}{side:<9}{seeds:<8}"
            f"{statistics.mean(means):>10,.0f} ± {spread:>5,.0f}{rate:>13,.0f}{cpu_rate:>11}"
            f"{records[0]['env_steps']:>9,}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", choices=("typedrl", "sb3"))
    parser.add_argument("--env", choices=sorted(ZOO), default="HalfCheetah-v5")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--timesteps", type=int, default=300_000)
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("ppo_vs_sb3_mujoco.jsonl"))
    parser.add_argument("--report", type=Path, help="print the table of a results file")
    args = parser.parse_args()
    if args.report is not None:
        _report(args.report)
        return
    if args.side is None:
        parser.error("--side is required unless --report is given")
    torch.set_num_threads(1)
    for seed in args.seeds:
        run = _run_sb3 if args.side == "sb3" else _run_typedrl
        outcome = run(args.env, seed, args.timesteps, args.eval_episodes)
        returns = outcome.pop("returns", None)
        if returns is not None:
            outcome["return_mean_evaluator"] = statistics.mean(returns)
            outcome["return_std_evaluator"] = statistics.pstdev(returns)
        record = {
            "side": args.side,
            "env": args.env,
            "seed": seed,
            "return_mean": outcome.pop("return_mean_evaluator"),
            "return_std": outcome.pop("return_std_evaluator"),
            "env_steps_per_s": outcome["env_steps"] / outcome["seconds"],
            "env_steps_per_cpu_s": outcome["env_steps"] / outcome["cpu_seconds"],
            **outcome,
            "eval_episodes": args.eval_episodes,
            "versions": _versions(args.side),
        }
        with args.out.open("a") as stream:
            stream.write(json.dumps(record) + "\n")
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
