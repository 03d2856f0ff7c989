"""PPO throughput: typedrl's PPOAgent against Stable-Baselines3's PPO, in the same run.

Both train on Gymnasium's CartPole-v1 with 8 synchronous envs and
Stable-Baselines3's default PPO hyper-parameters (2048 steps per env per epoch,
minibatches of 64, 10 passes, Adam 3e-4, [64, 64] tanh actor and critic), on
one CPU thread. Both trainers are built once and then alternate one epoch
(2048 x 8 env steps: rollout and update) each, so that machine load affects
both alike; the first pair is a warm-up. The reported figure is the median
ratio of env steps per second (typedrl / SB3) over the paired epochs.

With ``--curves DIR``, both policies are also scored after every epoch (outside
the timed part) by the same :class:`~typedrl.evaluation.EpisodeEvaluator`:
deterministic actions on ``--eval-episodes`` episodes of CartPole-v1 from the
same fixed, seeded starts. The learning curves (evaluated return against env
steps) are written side by side as ``DIR/ppo_vs_sb3_CartPole-v1.png`` and
included in the JSON output (``curves``).

Needs Stable-Baselines3 in the benchmark's environment:
    pip install stable-baselines3
    python benchmarks/ppo_vs_sb3.py --epochs 4
    python benchmarks/ppo_vs_sb3.py --epochs 8 --curves docs/_static/benchmarks --json
"""

import argparse
import json
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

from typedrl.envs import make
from typedrl.evaluation import EpisodeEvaluator
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.training import RunOptions

ENV_ID = "CartPole-v1"
NUM_ENVS = 8
_EVAL_SEED = 12_345


def _typedrl_agent(timesteps: int, seed: int, *, compile: bool) -> PPOAgent:
    env = make("CartPole-v1", num_envs=NUM_ENVS, seed=seed)
    config = PPOConfig(
        total_timesteps=timesteps,
        num_steps=2048,
        batch_size=64,
        num_mini_epochs=10,
        learning_rate=3e-4,
        gamma=0.99,
        gae_lambda=0.95,
        clip_range=0.2,
        value_loss_coef=0.5,
        entropy_coef=0.0,
        max_grad_norm=0.5,
        compile=compile,
        seed=seed,
    )
    agent = PPOAgent(env=env, config=config, options=RunOptions(progress=False, loggers=[]))
    agent.setup()
    agent._prepare()  # the first reset, as fit() does
    return agent


def _sb3_model(seed: int) -> Any:
    from stable_baselines3 import PPO  # noqa: PLC0415 - optional benchmark dependency
    from stable_baselines3.common.env_util import make_vec_env  # noqa: PLC0415

    env = make_vec_env("CartPole-v1", n_envs=NUM_ENVS, seed=seed)
    return PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0)


class Sb3Policy(torch.nn.Module):
    """A Stable-Baselines3 model behind typedrl's ``Policy`` protocol, for the evaluator.

    The SB3 policy is not registered as a submodule, so the evaluator's
    train/eval switch leaves SB3's own training-mode handling alone.
    """

    def __init__(self, model: Any) -> None:
        super().__init__()
        self._predict = model.policy._predict

    def act(self, obs: TensorDict, *, deterministic: bool = False) -> TensorDict:
        """The SB3 policy's action for every row of ``obs["obs"]``."""
        with torch.no_grad():
            action = self._predict(obs["obs"], deterministic=deterministic)
        return TensorDict({"action": action}, batch_size=obs.batch_size)


def plot_curves(curves: Mapping[str, Sequence[Sequence[float]]], directory: Path) -> Path:
    """Write both learning curves (return against env steps) side by side; return the PNG."""
    import matplotlib  # noqa: PLC0415 - only for --curves

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, panels = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True, constrained_layout=True)
    titles = {"typedrl": "typedrl PPO", "sb3": "Stable-Baselines3 PPO"}
    for axes, (side, title) in zip(panels, titles.items(), strict=True):
        points = curves[side]
        axes.plot([p[0] for p in points], [p[1] for p in points], marker=".")
        axes.set_title(title)
        axes.set_xlabel("env steps")
        axes.grid(alpha=0.3)
    panels[0].set_ylabel("deterministic eval return")
    figure.suptitle(f"{ENV_ID}, {NUM_ENVS} envs, SB3's default PPO settings")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"ppo_vs_sb3_{ENV_ID}.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4, help="paired epochs (first is warm-up)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--compile", action="store_true", help="PPOConfig(compile=True) for typedrl"
    )
    parser.add_argument(
        "--curves", type=Path, metavar="DIR", help="score both after every epoch; plot here"
    )
    parser.add_argument("--eval-episodes", type=int, default=10, help="episodes per score")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    epoch_steps = NUM_ENVS * 2048
    agent = _typedrl_agent(epoch_steps * args.epochs, args.seed, compile=args.compile)
    model = _sb3_model(args.seed)
    ours, theirs, ratios = [], [], []
    evaluator: EpisodeEvaluator | None = None
    sb3_policy: Sb3Policy | None = None
    curves: dict[str, list[list[float]]] = {"typedrl": [], "sb3": []}
    if args.curves is not None:
        eval_env = make(ENV_ID, num_envs=args.eval_episodes, seed=_EVAL_SEED)
        evaluator = EpisodeEvaluator(eval_env, num_episodes=args.eval_episodes, seed=_EVAL_SEED)
        sb3_policy = Sb3Policy(model)
    for epoch in range(args.epochs):
        # One epoch (rollout + update) of each, alternately: load drift hits both alike.
        start = time.perf_counter()
        # one iteration of fit's loop
        agent.env_steps += agent._train_iteration().env_steps
        agent.iteration += 1
        typedrl_rate = epoch_steps / (time.perf_counter() - start)
        start = time.perf_counter()
        model.learn(total_timesteps=epoch_steps, reset_num_timesteps=epoch == 0)
        sb3_rate = epoch_steps / (time.perf_counter() - start)
        if evaluator is not None and sb3_policy is not None:
            steps = float((epoch + 1) * epoch_steps)
            curves["typedrl"].append([steps, evaluator.evaluate(agent.policy).score])
            curves["sb3"].append([steps, evaluator.evaluate(sb3_policy).score])
        if epoch == 0:
            continue
        ours.append(typedrl_rate)
        theirs.append(sb3_rate)
        ratios.append(typedrl_rate / sb3_rate)
    result = {
        "typedrl_env_steps_per_s": statistics.median(ours),
        "sb3_env_steps_per_s": statistics.median(theirs),
        "ratio": statistics.median(ratios),
        "ratios": ratios,
        "compile": args.compile,
    }
    if args.curves is not None:
        result["curves"] = curves
        result["plot"] = str(plot_curves(curves, args.curves))
    if args.json:
        print(json.dumps(result))
    else:
        print(f"typedrl PPO   {result['typedrl_env_steps_per_s']:>9,.0f} env-steps/s")
        print(f"SB3 PPO       {result['sb3_env_steps_per_s']:>9,.0f} env-steps/s")
        print(f"ratio         {result['ratio']:>9.2f}x (typedrl / SB3, median of paired epochs)")
        print("per epoch     " + ", ".join(f"{r:.2f}" for r in ratios))


if __name__ == "__main__":
    main()
