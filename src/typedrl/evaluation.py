"""Episode evaluation on a dedicated env, for both trainer families, and pooling over ranks."""

import math
from collections.abc import Sequence
from typing import Any, cast, final

import numpy as np
import torch
from tensordict import TensorDict
from torch import Tensor

from typedrl._results import EvaluationResult, StepResult
from typedrl._validation import positive_int
from typedrl.errors import EnvContractError, NonFiniteError
from typedrl.protocols import Policy, StatefulActorCritic, VecEnv
from typedrl.types import Obs

__all__ = ["EpisodeEvaluator", "pool_evaluations"]


def _success_flags(result: StepResult, key: str) -> Tensor | None:
    """Per-row success flags of the rows that ended, from ``info`` (Gymnasium conventions).

    Looks in ``info["final_info"][key]`` (same-step autoreset envs report the
    last step's info there) and then in ``info[key]``; returns ``None`` when
    the env reports no such key.
    """
    info = result.info
    final_info = info.get("final_info")
    source: Any = None
    if isinstance(final_info, dict) and key in final_info:
        source = final_info[key]
    elif key in info:
        source = info[key]
    if source is None:
        return None
    flags = torch.as_tensor(
        np.asarray(source, dtype=np.bool_) if not isinstance(source, Tensor) else source
    )
    return flags.to(device=result.reward.device, dtype=torch.bool).reshape(-1)


@final
class EpisodeEvaluator:
    """Evaluate a policy on exactly ``num_episodes`` completed episodes of its own env.

    Implements :class:`~typedrl.protocols.Evaluator`:

    - actions are deterministic (``policy.act(obs, deterministic=True)``; a
      :class:`~typedrl.protocols.StatefulActorCritic` steps with
      ``act_step`` and carries its rollout state, restarted for rows that end);
    - every evaluation resets the env with the same ``seed``, so every
      evaluation starts from the same states and scores compare across a run;
    - episodes are counted per row: every row contributes
      ``num_episodes // num_envs`` episodes and the remainder goes to rows
      chosen by a permutation fixed at construction (seeded), so no row is
      favoured and short episodes cannot crowd out long ones;
    - ghost transitions (``valid == False``) count for nothing;
    - the policy's train/eval mode is restored, gradients are off, and no
      training env, buffer or optimizer is touched.

    Metrics: ``return_mean``, ``return_std``, ``return_min``, ``return_max``,
    ``length_mean`` and, when the env reports ``success_key`` (Gymnasium's
    ``"is_success"`` by default) for ending rows, ``success_rate``. The score is
    ``return_mean``.

    Args:
        env: The evaluation env; never a training env.
        num_episodes: Episodes per evaluation.
        seed: Reset seed of every evaluation.
        max_steps: Safety limit on env steps per evaluation.
        success_key: Info key holding per-episode success flags.

    Example:
        >>> import torch
        >>> from typedrl.testing import ConstantPolicy, CountingVecEnv
        >>> env = CountingVecEnv(num_envs=2, truncate_after=3)
        >>> evaluator = EpisodeEvaluator(env, num_episodes=3)
        >>> result = evaluator.evaluate(ConstantPolicy(torch.zeros(1)))
        >>> result.score, result.num_items
        (6.0, 3)
    """

    def __init__(
        self,
        env: VecEnv,
        *,
        num_episodes: int,
        seed: int = 0,
        max_steps: int = 1_000_000,
        success_key: str = "is_success",
    ) -> None:
        positive_int("EpisodeEvaluator", "num_episodes", num_episodes)
        positive_int("EpisodeEvaluator", "max_steps", max_steps)
        self.env = env
        self.num_episodes = num_episodes
        self.seed = seed
        self.max_steps = max_steps
        self.success_key = success_key
        base, extra = divmod(num_episodes, env.num_envs)
        generator = torch.Generator().manual_seed(seed)
        bonus_rows = torch.randperm(env.num_envs, generator=generator)[:extra]
        quota = torch.full((env.num_envs,), base, dtype=torch.int64)
        quota[bonus_rows] += 1
        self._quota = quota.to(env.device)

    def evaluate(self, policy: Policy) -> EvaluationResult:
        """Run ``num_episodes`` episodes with deterministic actions and summarise them."""
        was_training = policy.training
        policy.train(mode=False)
        try:
            with torch.no_grad():
                returns, lengths, successes = self._run(policy)
        finally:
            policy.train(mode=was_training)
        metrics = {
            "return_mean": float(returns.mean()),
            "return_std": float(returns.std(unbiased=False)),
            "return_min": float(returns.min()),
            "return_max": float(returns.max()),
            "length_mean": float(lengths.mean()),
        }
        if successes is not None:
            metrics["success_rate"] = float(successes.mean())
        bad = [name for name, value in metrics.items() if not math.isfinite(value)]
        if bad:
            raise NonFiniteError(
                f"EpisodeEvaluator: the evaluation env produced non-finite {bad} "
                f"({ {name: metrics[name] for name in bad} }); check its rewards"
            )
        return EvaluationResult(
            metrics=metrics, score=metrics["return_mean"], num_items=returns.numel()
        )

    def _run(self, policy: Policy) -> tuple[Tensor, Tensor, Tensor | None]:
        env, quota = self.env, self._quota
        device = env.device
        width = int(quota.max())
        rows = torch.arange(env.num_envs, device=device)
        running = torch.zeros(env.num_envs, dtype=torch.float64, device=device)
        steps = torch.zeros(env.num_envs, dtype=torch.int64, device=device)
        done_count = torch.zeros(env.num_envs, dtype=torch.int64, device=device)
        returns = torch.zeros(env.num_envs, width, dtype=torch.float64, device=device)
        lengths = torch.zeros_like(returns)
        successes = torch.zeros_like(returns)
        saw_success = False
        obs, _ = env.reset(seed=self.seed)
        act = _deterministic_actor(policy, env.num_envs, device)
        # Checking completion costs a host sync; doing it every `check_every` steps keeps
        # the loop mostly sync-free without overshooting by much.
        check_every = 8
        for step in range(1, self.max_steps + 1):
            result = env.step(act(obs))
            act.restart(result.done | ~result.valid)
            valid = result.valid
            running += torch.where(valid, result.reward.to(torch.float64), 0.0)
            steps += valid.to(torch.int64)
            record = result.done & valid & (done_count < quota)
            slot = done_count.clamp(max=width - 1)
            returns[rows, slot] = torch.where(record, running, returns[rows, slot])
            lengths[rows, slot] = torch.where(record, steps.double(), lengths[rows, slot])
            flags = _success_flags(result, self.success_key)
            if flags is not None and flags.shape == record.shape:
                saw_success = True
                successes[rows, slot] = torch.where(record, flags.double(), successes[rows, slot])
            done_count += record.to(torch.int64)
            running = torch.where(result.done, 0.0, running)
            steps = torch.where(result.done, 0, steps)
            obs = result.obs
            if step % check_every == 0 and bool((done_count >= quota).all()):
                break
        else:
            if not bool((done_count >= quota).all()):
                finished = int(torch.minimum(done_count, quota).sum())
                raise EnvContractError(
                    f"EpisodeEvaluator: only {finished} of {self.num_episodes} episodes ended "
                    f"within max_steps={self.max_steps}; does the env ever end its episodes?"
                )
        mask = torch.arange(width, device=device).unsqueeze(0) < quota.unsqueeze(1)
        selected_success = successes[mask] if saw_success else None
        return returns[mask], lengths[mask], selected_success


class _StatelessActor:
    """A policy's deterministic action, ``act(obs)``; nothing to restart."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def __call__(self, obs: Obs) -> Tensor:
        action: Tensor = self.policy.act(obs, deterministic=True)["action"]
        return action

    def restart(self, ended: Tensor) -> None:
        """Nothing: each action reads one observation."""


class _StatefulActor:
    """A recurrent policy's deterministic action, its rollout state carried between steps.

    Rows that end (or take a ghost step) restart from the initial state.
    """

    def __init__(self, policy: StatefulActorCritic, num_rows: int, device: torch.device) -> None:
        self.policy = policy
        self.initial = policy.initial_state(num_rows, device=device)
        self.state = self.initial.clone()

    def __call__(self, obs: Obs) -> Tensor:
        outputs = self.policy.act_step(obs, self.state, deterministic=True)
        self.state = outputs["state"]
        action: Tensor = outputs["action"]
        return action

    def restart(self, ended: Tensor) -> None:
        """Set the ``ended`` rows' state to the initial state (no host read)."""
        self.state = TensorDict(
            {
                key: torch.where(
                    ended.view(-1, *([1] * (leaf.dim() - 1))),
                    cast("Tensor", self.initial[key]),
                    cast("Tensor", leaf),
                )
                for key, leaf in self.state.items(include_nested=True, leaves_only=True)
            },
            batch_size=self.state.batch_size,
            device=self.state.device,
        )


def _deterministic_actor(
    policy: Policy, num_rows: int, device: torch.device
) -> _StatelessActor | _StatefulActor:
    if isinstance(policy, StatefulActorCritic):
        return _StatefulActor(policy, num_rows, device)
    return _StatelessActor(policy)


def pool_evaluations(results: Sequence[EvaluationResult]) -> EvaluationResult:
    """One result for the episodes of several evaluations (every rank's, in DDP).

    Each metric is pooled over all ``num_items`` episodes as if one evaluator
    had run them all, by the suffix of its name:

    - ``*_min`` and ``*_max``: the minimum and maximum over the results;
    - ``*_std``: the pooled standard deviation, from each result's own
      ``*_std`` and its ``*_mean`` sibling (the law of total variance); a
      ``*_std`` without its ``*_mean`` is averaged like any other metric;
    - everything else (means, rates): the mean weighted by ``num_items``.

    The score is the ``num_items``-weighted mean of the scores. Metrics that not
    every result reports are left out.

    Args:
        results: At least one result.

    Example:
        >>> a = EvaluationResult(
        ...     metrics={"return_mean": 1.0, "return_std": 0.0, "return_max": 1.0},
        ...     score=1.0,
        ...     num_items=1,
        ... )
        >>> b = EvaluationResult(
        ...     metrics={"return_mean": 3.0, "return_std": 0.0, "return_max": 3.0},
        ...     score=3.0,
        ...     num_items=1,
        ... )
        >>> pooled = pool_evaluations([a, b])
        >>> pooled.score, pooled.num_items, dict(pooled.metrics)
        (2.0, 2, {'return_mean': 2.0, 'return_std': 1.0, 'return_max': 3.0})
    """
    if len(results) == 1:
        return results[0]
    weights = [float(result.num_items) for result in results]
    total = sum(weights)

    def weighted(values: Sequence[float]) -> float:
        return math.fsum(w * v for w, v in zip(weights, values, strict=True)) / total

    names = [name for name in results[0].metrics if all(name in r.metrics for r in results)]
    pooled: dict[str, float] = {}
    for name in names:
        values = [result.metrics[name] for result in results]
        mean_name = name.removesuffix("_std") + "_mean"
        if name.endswith("_min"):
            pooled[name] = min(values)
        elif name.endswith("_max"):
            pooled[name] = max(values)
        elif name.endswith("_std") and mean_name in names:
            means = [result.metrics[mean_name] for result in results]
            grand = weighted(means)
            # Var = E[within-result variance] + variance of the result means
            second = weighted(
                [s * s + (m - grand) ** 2 for s, m in zip(values, means, strict=True)]
            )
            pooled[name] = math.sqrt(max(second, 0.0))
        else:
            pooled[name] = weighted(values)
    return EvaluationResult(
        metrics=pooled,
        score=weighted([result.score for result in results]),
        num_items=sum(result.num_items for result in results),
    )
