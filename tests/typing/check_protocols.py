"""Static type tests of the protocols, checked by mypy and never executed.

A user's class with the right members type-checks where a protocol is
expected; one with a wrong signature is rejected. Each expected error carries
a coded ``type: ignore[...]``: mypy runs with ``warn_unused_ignores``, so the
check fails if an expected error ever disappears.
"""

from typing import Any, assert_type

import gymnasium as gym
import torch
from tensordict import TensorDict
from torch import Tensor

from typedrl.protocols import (
    ActorCritic,
    Collector,
    DifferentiablePolicy,
    DifferentiableRolloutSpec,
    DifferentiableVecEnv,
    EvaluationResult,
    Evaluator,
    Policy,
    ScheduledDifferentiableVecEnv,
    StepResult,
    SupportsStateDict,
    VecEnv,
)
from typedrl.testing import (
    ConstantPolicy,
    CounterState,
    CountingVecEnv,
    EpisodeReturnEvaluator,
    LinearActorCritic,
    LinearDifferentiablePolicy,
    QuadraticEnv,
    ScheduledQuadraticEnv,
    Transition,
    TransitionCollector,
)


class UserEnv:
    """A user's env written from scratch: conforms to VecEnv."""

    num_envs: int = 4
    device: torch.device = torch.device("cpu")
    single_observation_space: gym.Space[Any] = gym.spaces.Box(-1.0, 1.0, (2,))
    single_action_space: gym.Space[Any] = gym.spaces.Discrete(2)
    provides_final_obs: bool = True

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[TensorDict, dict[str, Any]]:
        return TensorDict({"obs": torch.zeros(4, 2)}, batch_size=[4]), {}

    def step(self, action: Tensor) -> StepResult:
        obs, _ = self.reset()
        done = torch.zeros(4, dtype=torch.bool)
        return StepResult(obs, torch.zeros(4), done, done, {}, final_obs=obs)

    def close(self) -> None:
        return None


class EnvWithNumpyStep(UserEnv):
    """Returns numpy-style tuples from step: not a typedrl VecEnv."""

    def step(self, action: Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        return ()


class EnvWithPositionalSeed(UserEnv):
    """reset takes its seed positionally only: incompatible with the keyword-only contract."""

    def reset(  # type: ignore[override]
        self, seed: int | None, /
    ) -> tuple[TensorDict, dict[str, Any]]:
        return super().reset()


class UserPolicy(torch.nn.Module):
    """A user's policy module: conforms to Policy."""

    def act(self, obs: TensorDict, *, deterministic: bool = False) -> TensorDict:
        return TensorDict({"action": torch.zeros(obs.batch_size[0], 1)}, batch_size=obs.batch_size)


class PolicyWithPositionalFlag(torch.nn.Module):
    """Takes `deterministic` positionally without a default: not a Policy."""

    def act(self, obs: TensorDict, deterministic: bool) -> TensorDict:
        return obs


def use_env(env: VecEnv) -> None: ...
def use_diff_env(env: DifferentiableVecEnv) -> None: ...
def use_scheduled(env: ScheduledDifferentiableVecEnv) -> None: ...
def use_policy(policy: Policy) -> None: ...
def use_actor_critic(policy: ActorCritic) -> None: ...
def use_diff_policy(policy: DifferentiablePolicy) -> None: ...
def use_evaluator(evaluator: Evaluator) -> None: ...
def use_state(obj: SupportsStateDict) -> None: ...
def use_collector(collector: Collector[Policy, list[Transition]]) -> None: ...


def check_conforming() -> None:
    """Conforming classes are accepted where the protocols are expected."""
    counting = CountingVecEnv(num_envs=2)
    use_env(UserEnv())
    use_env(counting)
    use_diff_env(QuadraticEnv(num_envs=2))
    use_scheduled(ScheduledQuadraticEnv(num_envs=2, horizons=[3]))
    use_policy(UserPolicy())
    use_policy(ConstantPolicy(torch.zeros(1)))
    use_actor_critic(LinearActorCritic(obs_dim=3, act_dim=1))
    use_diff_policy(LinearDifferentiablePolicy(obs_dim=1, act_dim=1))
    use_evaluator(EpisodeReturnEvaluator(counting, num_episodes=2))
    use_collector(TransitionCollector(counting))
    use_state(CounterState())
    use_state(torch.nn.Linear(1, 1))
    use_state(torch.optim.Adam(torch.nn.Linear(1, 1).parameters()))


def check_rejected() -> None:
    """Classes with wrong signatures or missing members are rejected."""
    use_env(EnvWithNumpyStep())  # type: ignore[arg-type]
    use_env(EnvWithPositionalSeed())  # type: ignore[arg-type]
    use_diff_env(CountingVecEnv(num_envs=1))  # type: ignore[arg-type]
    use_scheduled(QuadraticEnv(num_envs=1))  # type: ignore[arg-type]
    use_policy(PolicyWithPositionalFlag())  # type: ignore[arg-type]
    use_actor_critic(ConstantPolicy(torch.zeros(1)))  # type: ignore[arg-type]
    use_diff_policy(LinearActorCritic(obs_dim=1, act_dim=1))  # type: ignore[arg-type]
    use_evaluator(TransitionCollector(CountingVecEnv(num_envs=1)))  # type: ignore[arg-type]
    use_state(UserPolicy.act)  # type: ignore[arg-type]


def check_value_types(env: VecEnv) -> None:
    """Step results unpack with precise types; value types are frozen."""
    obs, reward, terminated, _truncated, info = env.step(torch.zeros(env.num_envs, 1))
    assert_type(obs, TensorDict)
    assert_type(reward, Tensor)
    assert_type(terminated, Tensor)
    assert_type(info, dict[str, Any])
    result = env.step(torch.zeros(env.num_envs, 1))
    assert_type(result.final_obs, TensorDict | None)
    assert_type(result.valid, Tensor)
    result.final_obs = None  # type: ignore[misc]
    spec = DifferentiableRolloutSpec(num_steps=3)
    assert_type(spec.objective_scale, float | Tensor)
    spec.num_steps = 4  # type: ignore[misc]
    DifferentiableRolloutSpec(num_steps="3")  # type: ignore[arg-type]
    DifferentiableRolloutSpec(3)  # type: ignore[call-arg]
    evaluation = EvaluationResult(metrics={}, score=1.0, num_items=1)
    assert_type(evaluation.score, float)
