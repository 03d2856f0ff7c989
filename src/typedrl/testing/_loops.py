"""A minimal collector and evaluator implementing the loop protocols."""

from dataclasses import dataclass
from typing import final

import torch

from typedrl._results import EvaluationResult, StepResult
from typedrl._validation import positive_int
from typedrl.errors import ConfigError
from typedrl.protocols import Policy, VecEnv
from typedrl.types import Action, Obs

__all__ = ["EpisodeReturnEvaluator", "Transition", "TransitionCollector"]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Transition:
    """One vectorised step: the observation acted on, the action and the result."""

    obs: Obs
    """Observation the policy acted on."""
    action: Action
    """Action taken."""
    result: StepResult
    """What the env returned."""


@final
class TransitionCollector:
    """A :class:`~typedrl.protocols.Collector` returning the raw transitions.

    The env is reset (with ``seed``) on the first call; later calls continue
    the running episodes.

    Example:
        >>> import torch
        >>> from typedrl.testing import ConstantPolicy, CountingVecEnv
        >>> collector = TransitionCollector(CountingVecEnv(num_envs=2, terminate_after=3))
        >>> steps = collector.collect(ConstantPolicy(torch.zeros(1)), num_steps=4)
        >>> [s.result.terminated.tolist() for s in steps]
        [[False, False], [False, False], [True, True], [False, False]]
    """

    def __init__(self, env: VecEnv, *, seed: int | None = None) -> None:
        self.env = env
        self._seed = seed
        self._obs: Obs | None = None

    def collect(self, policy: Policy, *, num_steps: int) -> list[Transition]:
        """Step the env ``num_steps`` times without gradients."""
        positive_int("TransitionCollector.collect", "num_steps", num_steps)
        obs = self._obs
        if obs is None:
            obs, _ = self.env.reset(seed=self._seed)
        transitions: list[Transition] = []
        with torch.no_grad():
            for _ in range(num_steps):
                action = policy.act(obs)["action"]
                result = self.env.step(action)
                transitions.append(Transition(obs=obs, action=action, result=result))
                obs = result.obs
        self._obs = obs
        return transitions


@final
class EpisodeReturnEvaluator:
    """An :class:`~typedrl.protocols.Evaluator` over a dedicated env.

    Runs deterministic actions from a fixed seed until every row has completed
    ``num_episodes / num_envs`` episodes (so no row is favoured), and scores the
    mean undiscounted return.

    Args:
        env: The evaluation env (never a training env).
        num_episodes: Episodes per evaluation; a multiple of ``env.num_envs``.
        seed: Reset seed used at every evaluation, so scores compare across a run.
        max_steps: Safety limit on steps per evaluation.

    Example:
        >>> import torch
        >>> from typedrl.testing import ConstantPolicy, CountingVecEnv
        >>> env = CountingVecEnv(num_envs=2, truncate_after=3)
        >>> evaluator = EpisodeReturnEvaluator(env, num_episodes=4)
        >>> evaluator.evaluate(ConstantPolicy(torch.zeros(1))).score
        6.0
    """

    def __init__(
        self, env: VecEnv, *, num_episodes: int, seed: int = 0, max_steps: int = 100_000
    ) -> None:
        positive_int("EpisodeReturnEvaluator", "num_episodes", num_episodes)
        positive_int("EpisodeReturnEvaluator", "max_steps", max_steps)
        if num_episodes % env.num_envs != 0:
            raise ConfigError(
                f"EpisodeReturnEvaluator.num_episodes must be a multiple of num_envs "
                f"({env.num_envs}), got {num_episodes}"
            )
        self.env = env
        self._per_row = num_episodes // env.num_envs
        self._seed = seed
        self._max_steps = max_steps

    def evaluate(self, policy: Policy) -> EvaluationResult:
        """Run the evaluation episodes and return mean/std return and mean length."""
        was_training = policy.training
        policy.train(mode=False)
        try:
            returns, lengths = self._run(policy)
        finally:
            policy.train(was_training)
        return EvaluationResult(
            metrics={
                "return_mean": float(returns.mean()),
                "return_std": float(returns.std(unbiased=False)),
                "length_mean": float(lengths.mean()),
            },
            score=float(returns.mean()),
            num_items=returns.numel(),
        )

    def _run(self, policy: Policy) -> tuple[torch.Tensor, torch.Tensor]:
        env = self.env
        obs, _ = env.reset(seed=self._seed)
        rows = torch.arange(env.num_envs, device=env.device)
        running = torch.zeros(env.num_envs, dtype=torch.float64, device=env.device)
        steps = torch.zeros(env.num_envs, dtype=torch.int64, device=env.device)
        completed = torch.zeros(env.num_envs, dtype=torch.int64, device=env.device)
        returns = torch.zeros(env.num_envs, self._per_row, dtype=torch.float64, device=env.device)
        lengths = torch.zeros_like(returns)
        with torch.no_grad():
            for _ in range(self._max_steps):
                result = env.step(policy.act(obs, deterministic=True)["action"])
                running += result.reward.to(torch.float64)
                steps += 1
                record = result.done & (completed < self._per_row)
                slot = completed.clamp(max=self._per_row - 1)
                returns[rows, slot] = torch.where(record, running, returns[rows, slot])
                lengths[rows, slot] = torch.where(record, steps.double(), lengths[rows, slot])
                completed += record.to(torch.int64)
                running = torch.where(result.done, torch.zeros_like(running), running)
                steps = torch.where(result.done, torch.zeros_like(steps), steps)
                obs = result.obs
                if bool((completed >= self._per_row).all()):
                    return returns.flatten(), lengths.flatten()
        raise ConfigError(
            f"EpisodeReturnEvaluator: only {int(completed.sum())} of "
            f"{self._per_row * env.num_envs} episodes finished within max_steps={self._max_steps}"
        )
