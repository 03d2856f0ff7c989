"""A trainer outside typedrl: random search over a linear policy, registered as ``random_search``.

The shape of a user's own algorithm package: a config dataclass, a policy and
its factory, a trainer on :class:`~typedrl.training.AbstractTrainer` with its
own checkpoint kind, and the :class:`~typedrl.algorithms.AlgorithmSpec` that an
entry point of the group ``typedrl.algorithms`` names (``ALGORITHM``).

Each iteration perturbs the best weights so far with Gaussian noise, plays
``num_steps`` steps of every env row with the candidate and keeps it when its
rows ended fewer episodes (CartPole: fell less often).
"""

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

import gymnasium as gym
import torch
from lightning_fabric import Fabric
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl.algorithms import AlgorithmSpec
from typedrl.errors import ConfigError
from typedrl.policies import PolicyFactory
from typedrl.protocols import Policy, VecEnv
from typedrl.seeding import SeedStream, derive_seed
from typedrl.training import (
    AbstractTrainer,
    Budget,
    GeneratorState,
    IterationResult,
    RunOptions,
    TrainerState,
)
from typedrl.types import Obs

CANDIDATE_SCORE = "train/candidate_score"
BEST_SCORE = "train/best_score"


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class RandomSearchConfig:
    """Random search's hyper-parameters."""

    total_timesteps: int = 2048
    """Env steps over all rows."""
    num_steps: int = 32
    """Steps of every row that score one candidate."""
    noise: float = 0.5
    """Standard deviation of a candidate's perturbation."""
    seed: int = 0
    """The run's seed."""

    def to_dict(self) -> dict[str, Any]:
        """The config as JSON-like values."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "RandomSearchConfig":
        """Build the config from plain values; an unknown field is a ConfigError."""
        fields = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(values) - fields)
        if unknown:
            raise ConfigError(
                f"RandomSearchConfig has no fields {unknown}; valid: {sorted(fields)}"
            )
        return cls(**values)


@final
class LinearPolicy(nn.Module):
    """The action whose linear score of ``obs["obs"]`` is largest (a Discrete space)."""

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> None:
        super().__init__()
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ConfigError(f"LinearPolicy acts in a Discrete space, got {action_space}")
        width = int(torch.tensor(observation_space.shape).prod())
        self.linear = nn.Linear(width, int(action_space.n))

    def act(self, obs: Obs, *, deterministic: bool = False) -> Obs:
        """The best-scoring action of every row (always deterministic)."""
        del deterministic
        features = obs["obs"].reshape(obs.batch_size[0], -1).float()
        action = self.linear(features).argmax(-1)
        return TensorDict({"action": action}, batch_size=obs.batch_size, device=obs.device)


def linear_policy(observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> nn.Module:
    """The policy factory the trainer records in its checkpoints."""
    return LinearPolicy(observation_space, action_space)


@final
class _Best(nn.Module):
    """The best score so far, checkpointed with the weights."""

    def __init__(self) -> None:
        super().__init__()
        self.score: Tensor
        self.register_buffer("score", torch.tensor(float("-inf")))


@final
class RandomSearch(AbstractTrainer):
    """Random search over a linear policy's weights, on one process."""

    kind = "random_search"
    resumable_changes = frozenset({"total_timesteps"})

    def __init__(
        self,
        *,
        env: VecEnv,
        config: RandomSearchConfig,
        fabric: Fabric | None = None,
        eval_env: VecEnv | None = None,
        options: RunOptions | None = None,
    ) -> None:
        super().__init__(
            env=env, fabric=fabric, eval_env=eval_env, options=options, seed=config.seed
        )
        self.config = config
        self.best = _Best()
        self.generator = torch.Generator().manual_seed(derive_seed(config.seed, "sampler"))
        self.obs: Obs | None = None

    @property
    def policy(self) -> Policy:
        return self.model

    @property
    def policy_factory(self) -> PolicyFactory:
        return PolicyFactory(f"{__name__}:linear_policy")

    @property
    def budget(self) -> Budget:
        return Budget(timesteps=self.config.total_timesteps)

    def _build(self) -> None:
        env = self.env
        self.model = LinearPolicy(env.single_observation_space, env.single_action_space)

    def _prepare(self) -> None:
        stream: SeedStream = "env_restart" if self.iteration else "env"
        self.obs, _ = self.env.reset(seed=derive_seed(self.seed, stream, index=self.iteration))

    def _train_iteration(self) -> IterationResult:
        best = [p.detach().clone() for p in self.model.parameters()]
        with torch.no_grad():
            for parameter in self.model.parameters():
                noise = torch.randn(parameter.shape, generator=self.generator)
                parameter.add_(self.config.noise * noise)
            ended = torch.zeros(())
            obs = self.obs
            if obs is None:  # not reached: _prepare resets the env before the first iteration
                raise ConfigError("RandomSearch: the env was not reset")
            for _ in range(self.config.num_steps):
                result = self.env.step(self.model.act(obs)["action"])
                ended += (result.terminated | result.truncated).sum()
                obs = result.obs
            self.obs = obs
            score = -float(ended)
            if score > float(self.best.score):
                self.best.score.fill_(score)
            else:
                for parameter, kept in zip(self.model.parameters(), best, strict=True):
                    parameter.copy_(kept)
        metrics = {CANDIDATE_SCORE: score, BEST_SCORE: float(self.best.score)}
        return IterationResult(metrics=metrics, env_steps=self.config.num_steps * self.env.num_envs)

    def _state(self) -> TrainerState:
        return TrainerState(
            modules={"policy": self.model, "search": self.best},
            rank_local={"sampler": GeneratorState(self.generator)},
        )

    def _config_dict(self) -> dict[str, Any]:
        return self.config.to_dict()


ALGORITHM = AlgorithmSpec(
    name="random_search",
    config=RandomSearchConfig,
    trainer=RandomSearch,
    default_env_id="typedrl/CartPole-v0",
    description="random search over a linear policy",
)
"""What the entry point ``random_search = tests.cli.random_search:ALGORITHM`` names."""
