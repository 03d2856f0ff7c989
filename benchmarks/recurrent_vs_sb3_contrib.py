"""Recurrent PPO: typedrl's GRU PPOAgent against sb3-contrib's RecurrentPPO (LSTM), same run.

Both train on Gymnasium's CartPole-v1 with the velocities hidden
(``typedrl.envs:KeepObservationIndices(indices=[0, 2])`` on every env: the
policy sees the cart position and the pole angle only, so it needs memory),
with 8 synchronous envs, 32 steps per env per rollout, 10 passes, Adam 1e-3
decayed linearly, gamma 0.98, GAE lambda 0.8, no entropy bonus, for the same
number of env steps, on one CPU thread.

- sb3-contrib runs rl-zoo3's tuned ``CartPoleNoVel-v1`` settings:
  ``MlpLstmPolicy`` (LSTM 64, a critic LSTM of its own, ReLU heads [64]),
  ``ortho_init=False``, minibatches of 256, clip range 0.2 decayed linearly,
  ``VecNormalize`` (observations and rewards).
- typedrl runs the settings of its recurrent end-to-end test:
  ``RecurrentActorCritic`` (GRU 64, shared by actor and critic, tanh heads
  [64]), minibatches of 128, clip range 0.2 constant, observations normalised
  by the policy, rewards raw.

Each training run is a fresh process (imports and env creation are not timed;
the time is the ``fit`` / ``learn`` call). For every seed, SB3 runs first, then
typedrl. Afterwards, in the same process, the trained policy is scored
deterministically on ``--eval-episodes`` episodes of a separately seeded eval
env (same wrapper), by typedrl's :class:`~typedrl.evaluation.EpisodeEvaluator`
for both: the LSTM state of the SB3 policy is carried between steps and
restarted for rows that end, its observations normalised with the frozen
``VecNormalize`` statistics. The ratio is typedrl's env steps per second over
SB3's, per seed, and its median over the seeds.

Needs sb3-contrib in the benchmark's environment:
    pip install sb3-contrib
    python benchmarks/recurrent_vs_sb3_contrib.py --timesteps 10000
    python benchmarks/recurrent_vs_sb3_contrib.py --timesteps 100000 --seeds 0 1 2
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from typedrl.envs import KeepObservationIndices, make
from typedrl.evaluation import EpisodeEvaluator
from typedrl.policies import PolicyFactory
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.training import RunOptions

ENV_ID = "CartPole-v1"
NUM_ENVS = 8
NUM_STEPS = 32
VISIBLE = [0, 2]  # cart position, pole angle
HIDE_VELOCITIES = f"typedrl.envs:KeepObservationIndices(indices={VISIBLE})"
_EVAL_SEED = 12_345


def _evaluator(episodes: int) -> EpisodeEvaluator:
    env = make(ENV_ID, num_envs=episodes, seed=_EVAL_SEED, wrappers=[HIDE_VELOCITIES])
    return EpisodeEvaluator(env, num_episodes=episodes, seed=_EVAL_SEED)


def _run_typedrl(timesteps: int, seed: int, episodes: int) -> dict[str, float]:
    env = make(ENV_ID, num_envs=NUM_ENVS, seed=seed, wrappers=[HIDE_VELOCITIES])
    config = PPOConfig(
        total_timesteps=timesteps,
        num_steps=NUM_STEPS,
        batch_size=128,
        num_mini_epochs=10,
        learning_rate=1e-3,
        learning_rate_schedule="linear",
        gamma=0.98,
        gae_lambda=0.8,
        entropy_coef=0.0,
        normalize_observations=True,
        seed=seed,
    )
    factory = PolicyFactory(
        "typedrl.policies:RecurrentActorCritic",
        kwargs={"hidden_size": 64, "normalize_observations": True},
    )
    agent = PPOAgent(
        env=env,
        config=config,
        policy_factory=factory,
        options=RunOptions(progress=False, loggers=[]),
    )
    start = time.perf_counter()
    agent.fit()
    seconds = time.perf_counter() - start
    score = _evaluator(episodes).evaluate(agent.policy).score
    env.close()
    return {"return": score, "seconds": seconds, "env_steps": float(agent.env_steps)}


class Sb3RecurrentPolicy(torch.nn.Module):
    """A trained RecurrentPPO behind typedrl's ``StatefulActorCritic`` protocol, for evaluation.

    The rollout state is the actor LSTM's ``(h, c)``, one row per env; the
    evaluator restarts ended rows to the zero state, as RecurrentPPO does at an
    episode start. Observations are normalised with the frozen ``VecNormalize``
    statistics. The SB3 policy is not registered as a submodule, so the
    evaluator's train/eval switch leaves SB3's own mode handling alone.
    """

    def __init__(self, model: Any, normalizer: Any) -> None:
        super().__init__()
        self._model = model
        self._normalizer = normalizer
        layers, _, hidden = model.policy.lstm_hidden_state_shape
        self._shape = (layers, hidden)

    def state_specs(self) -> Mapping[str, Any]:
        """Not needed for evaluation."""
        raise NotImplementedError

    def initial_state(self, num_rows: int, *, device: torch.device) -> TensorDict:
        """Zero ``(h, c)`` for ``num_rows`` envs."""
        zeros = torch.zeros(num_rows, *self._shape, device=device)
        return TensorDict({"h": zeros, "c": zeros.clone()}, batch_size=[num_rows], device=device)

    def act_step(
        self, obs: TensorDict, state: TensorDict, *, deterministic: bool = False
    ) -> TensorDict:
        """One step of the actor LSTM: the action and the next state."""
        observation = self._normalizer.normalize_obs(obs["obs"].cpu().numpy())
        h = state["h"].transpose(0, 1).cpu().numpy()
        c = state["c"].transpose(0, 1).cpu().numpy()
        rows = observation.shape[0]
        action, (h_next, c_next) = self._model.predict(
            observation,
            state=(h, c),
            episode_start=np.zeros(rows, dtype=bool),
            deterministic=deterministic,
        )
        next_state = TensorDict(
            {
                "h": torch.as_tensor(h_next).transpose(0, 1),
                "c": torch.as_tensor(c_next).transpose(0, 1),
            },
            batch_size=[rows],
        )
        return TensorDict(
            {"action": torch.as_tensor(action), "state": next_state}, batch_size=[rows]
        )

    def act(self, obs: TensorDict, *, deterministic: bool = False) -> TensorDict:
        """Not needed for evaluation: the evaluator steps with ``act_step``."""
        raise NotImplementedError

    def value_step(self, obs: TensorDict, state: TensorDict) -> torch.Tensor:
        """Not needed for evaluation."""
        raise NotImplementedError

    def evaluate_sequence(self, *args: Any, **kwargs: Any) -> Any:
        """Not needed for evaluation."""
        raise NotImplementedError

    def evaluate(self, *args: Any, **kwargs: Any) -> Any:
        """Not needed for evaluation."""
        raise NotImplementedError

    def value(self, *args: Any, **kwargs: Any) -> Any:
        """Not needed for evaluation."""
        raise NotImplementedError


def _run_sb3(timesteps: int, seed: int, episodes: int) -> dict[str, float]:
    from sb3_contrib import RecurrentPPO  # noqa: PLC0415 - optional benchmark dependency
    from stable_baselines3.common.env_util import make_vec_env  # noqa: PLC0415
    from stable_baselines3.common.vec_env import VecNormalize  # noqa: PLC0415

    def linear(initial: float) -> Any:
        return lambda remaining: remaining * initial

    def hide_velocities(env: gym.Env[Any, Any]) -> gym.Env[Any, Any]:
        return KeepObservationIndices(env, indices=VISIBLE)

    env = VecNormalize(
        make_vec_env(
            ENV_ID,
            n_envs=NUM_ENVS,
            seed=seed,
            wrapper_class=hide_velocities,
        )
    )
    model = RecurrentPPO(
        "MlpLstmPolicy",
        env,
        n_steps=NUM_STEPS,
        batch_size=256,
        n_epochs=10,
        gamma=0.98,
        gae_lambda=0.8,
        ent_coef=0.0,
        learning_rate=linear(1e-3),
        clip_range=linear(0.2),
        policy_kwargs={
            "ortho_init": False,
            "activation_fn": torch.nn.ReLU,
            "lstm_hidden_size": 64,
            "enable_critic_lstm": True,
            "net_arch": {"pi": [64], "vf": [64]},
        },
        seed=seed,
        device="cpu",
        verbose=0,
    )
    start = time.perf_counter()
    model.learn(total_timesteps=timesteps)
    seconds = time.perf_counter() - start
    env.training = False
    score = _evaluator(episodes).evaluate(Sb3RecurrentPolicy(model, env)).score
    env.close()
    return {"return": score, "seconds": seconds, "env_steps": float(model.num_timesteps)}


def _child(side: str, timesteps: int, seed: int, episodes: int) -> dict[str, float]:
    command = [
        sys.executable,
        __file__,
        "--side",
        side,
        "--timesteps",
        str(timesteps),
        "--seeds",
        str(seed),
        "--eval-episodes",
        str(episodes),
    ]
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=environment, check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=100_000, help="env steps per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--eval-episodes", type=int, default=16)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--side", choices=["typedrl", "sb3"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side is not None:  # one training run, in this (child) process
        torch.set_num_threads(1)
        run = _run_typedrl if args.side == "typedrl" else _run_sb3
        print(json.dumps(run(args.timesteps, args.seeds[0], args.eval_episodes)))
        return
    rows: list[dict[str, Any]] = []
    if not args.json:
        print(
            f"{'seed':>4}  {'side':<8} {'env steps':>9} {'return':>7} {'wall s':>7} "
            f"{'steps/s':>8}  ratio"
        )
    for seed in args.seeds:
        sb3 = _child("sb3", args.timesteps, seed, args.eval_episodes)
        ours = _child("typedrl", args.timesteps, seed, args.eval_episodes)
        for result in (sb3, ours):
            result["steps_per_s"] = result["env_steps"] / result["seconds"]
        ratio = ours["steps_per_s"] / sb3["steps_per_s"]
        rows.append({"seed": seed, "typedrl": ours, "sb3": sb3, "ratio": ratio})
        if not args.json:
            for side, result in (("typedrl", ours), ("sb3", sb3)):
                print(
                    f"{seed:>4}  {side:<8} {result['env_steps']:>9,.0f} "
                    f"{result['return']:>7.1f} {result['seconds']:>7.1f} "
                    f"{result['steps_per_s']:>8,.0f}" + (f"  {ratio:.2f}x" if side == "sb3" else "")
                )

    def median(side: str, key: str) -> float:
        return float(statistics.median(row[side][key] for row in rows))

    summary = {
        "timesteps": args.timesteps,
        "seeds": args.seeds,
        "runs": rows,
        "typedrl_return": median("typedrl", "return"),
        "sb3_return": median("sb3", "return"),
        "typedrl_env_steps_per_s": median("typedrl", "steps_per_s"),
        "sb3_env_steps_per_s": median("sb3", "steps_per_s"),
        "ratio": statistics.median(row["ratio"] for row in rows),
    }
    if args.json:
        print(json.dumps(summary))
        return
    print(
        f"median over {len(rows)} seed(s): return typedrl {summary['typedrl_return']:.1f}, "
        f"SB3 {summary['sb3_return']:.1f}; env steps/s typedrl "
        f"{summary['typedrl_env_steps_per_s']:,.0f}, SB3 {summary['sb3_env_steps_per_s']:,.0f}; "
        f"ratio {summary['ratio']:.2f}x (typedrl / SB3)"
    )


if __name__ == "__main__":
    main()
