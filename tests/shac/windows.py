"""Shared builders of the SHAC tests: tiny policies, prepared windows, small trainers."""

import copy
from collections.abc import Sequence
from typing import Any, final

import pytest
import torch
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl.apg import (
    APGConfig,
    DifferentiableCollector,
    DifferentiableRollout,
    DifferentiableTrainer,
    DifferentiableTrainerConfig,
)
from typedrl.apg._collector import first_done_mask
from typedrl.distributed import SingleProcess
from typedrl.envs import make
from typedrl.episodes import EpochEpisodes
from typedrl.protocols import DifferentiablePolicy
from typedrl.shac import SHAC, SHACConfig
from typedrl.training import RunOptions
from typedrl.types import Obs

__all__ = [
    "ENV_ID",
    "F64",
    "FeaturePolicy",
    "FitCall",
    "FixedWindow",
    "GradientsAtWindowEnd",
    "assert_bit_identical",
    "assert_same_weights",
    "cartpole_trainer",
    "critic_steps",
    "make_shac",
    "one_update",
    "record_fit_calls",
    "set_linear_critic",
    "shac_of",
    "snapshot",
    "weights",
    "window_rollout",
    "window_shac",
]

F64 = torch.float64
ENV_ID = "typedrl/CartPoleSwingUp-v0"

# ---------------------------------------------------------------- shared helpers


class FeaturePolicy(nn.Module):
    """A deterministic linear policy ``a = w x + b`` on the first feature, with a reward scale.

    ``features(obs)`` is the observation itself, or ``[x, x^2]`` with ``squared``, so
    that a linear critic over the features is a known function of the observation.
    """

    def __init__(self, *, squared: bool = False, weight: float = -0.5, bias: float = 0.1) -> None:
        super().__init__()
        self.linear = nn.Linear(1, 1).to(F64)
        self.scale = nn.Parameter(torch.ones((), dtype=F64))
        self.squared = squared
        with torch.no_grad():
            self.linear.weight.fill_(weight)
            self.linear.bias.fill_(bias)

    @property
    def reparameterized(self) -> bool:
        """Deterministic actions keep the graph to the parameters."""
        return True

    def features(self, obs: TensorDict) -> Tensor:
        """The observation, or ``[x, x^2]`` of its single feature."""
        x: Tensor = obs["obs"]
        return torch.cat((x, x.square()), dim=-1) if self.squared else x

    def act(self, obs: TensorDict, *, deterministic: bool = False) -> TensorDict:
        """``a = w x + b`` on the first feature (``deterministic`` changes nothing)."""
        del deterministic
        action: Tensor = self.linear(obs["obs"][:, :1])
        return TensorDict({"action": action}, batch_size=obs.batch_size, device=obs.device)


def make_shac(
    policy: nn.Module,
    *,
    feature_width: int,
    actor: APGConfig | None = None,
    planned_updates: int | None = 100,
    **fields: Any,
) -> SHAC:
    """SHAC with a linear critic (no hidden layer, no LayerNorm) fitted in 2 passes, unless
    ``fields`` say otherwise."""
    values: dict[str, Any] = {
        "critic_hidden": (),
        "critic_layer_norm": False,
        "critic_iterations": 2,
        **fields,
    }
    if actor is not None:
        values["actor"] = actor
    return SHAC(
        policy,
        SHACConfig(**values),
        dist=SingleProcess(),
        planned_updates=planned_updates,
        seed=0,
        feature_width=feature_width,
    )


def set_linear_critic(
    shac: SHAC, weight: list[float], bias: float, *, target_only: bool = False
) -> None:
    """Make the (target) critic ``V(f) = weight . f + bias`` (a critic without hidden layers)."""
    networks = [shac.target_critic] if target_only else [shac.critic, shac.target_critic]
    for network in networks:
        (layer,) = network
        assert isinstance(layer, nn.Linear)
        with torch.no_grad():
            layer.weight.copy_(torch.tensor([weight], dtype=layer.weight.dtype))
            layer.bias.fill_(bias)


def window_rollout(
    *,
    rewards: Tensor,
    values: Tensor,
    next_values: Tensor,
    terminated: Tensor,
    truncated: Tensor,
    scale: Tensor,
) -> DifferentiableRollout:
    """A window of observations ``[0, values[t]]`` and terminal ones ``[0, next_values[t]]``.

    With the linear critic ``V(f) = f[1]`` (:func:`set_linear_critic` with weight ``[0, 1]``),
    ``V(s_t) = values[t]`` and ``V(final_obs_t) = next_values[t]``. The rewards are multiplied
    by ``scale`` (a policy parameter), so the loss has a gradient.
    """
    steps, rows = rewards.shape

    def observe(column: Tensor) -> TensorDict:
        obs = torch.stack((torch.zeros_like(column), column), dim=-1)
        return TensorDict({"obs": obs}, batch_size=list(column.shape))

    flags = torch.zeros(steps, rows, dtype=torch.bool)
    return DifferentiableRollout(
        initial_observation=observe(values[0]),
        observations=observe(values),
        actions=torch.zeros(steps, rows, 1, dtype=F64),
        rewards=rewards * scale,
        entropies=torch.zeros(steps, rows, dtype=F64),
        terminated=terminated,
        truncated=truncated,
        valid=~flags,
        alive_mask=first_done_mask(terminated | truncated),
        terminal_observations=observe(next_values),
        final_observation=observe(next_values[-1]),
        episodes=EpochEpisodes(
            returns=torch.zeros(steps, rows, dtype=F64),
            lengths=torch.zeros(steps, rows, dtype=torch.int64),
            ended=flags.clone(),
            return_so_far=torch.zeros(rows, dtype=F64),
            length_so_far=torch.zeros(rows, dtype=torch.int64),
        ),
        adjoint=None,
    )


def window_shac(**fields: Any) -> tuple[FeaturePolicy, SHAC]:
    """SHAC on :func:`window_rollout` data: the target critic reads ``V = obs[1]``."""
    policy = FeaturePolicy()
    shac = make_shac(policy, feature_width=2, **fields)
    set_linear_critic(shac, [0.0, 1.0], 0.0)
    return policy, shac


FitCall = tuple[Tensor, Tensor, Tensor]


def record_fit_calls(shac: SHAC, monkeypatch: pytest.MonkeyPatch) -> list[FitCall]:
    """Record the (features, targets, mask) of every critic fit of ``shac``, then fit as usual."""
    calls: list[FitCall] = []
    original = shac._fit_critic

    def fit(
        features: Tensor, targets: Tensor, mask: Tensor, window_sums: Tensor | None = None
    ) -> tuple[float, float, list[float]]:
        calls.append((features.clone(), targets.clone(), mask.clone()))
        return original(features, targets, mask, window_sums)

    monkeypatch.setattr(shac, "_fit_critic", fit)
    return calls


class FixedWindow:
    """A window collector that hands :meth:`SHAC.update` one prepared rollout.

    ``detach_state`` is called right after the actor's backward: the gradients of
    ``watched`` are copied there (``None`` where a tensor has none).
    """

    def __init__(self, rollout: DifferentiableRollout, watched: Sequence[Tensor] = ()) -> None:
        self.rollout = rollout
        self.watched = list(watched)
        self.grads: list[Tensor | None] = []

    def collect(
        self, policy: DifferentiablePolicy, *, num_steps: int, iteration: int
    ) -> DifferentiableRollout:
        """The prepared rollout, whatever the policy."""
        del policy, iteration
        assert num_steps == self.rollout.num_steps
        return self.rollout

    def detach_state(self) -> Obs:
        """Copy the watched gradients; the rollout's last observation."""
        self.grads = [None if t.grad is None else t.grad.clone() for t in self.watched]
        return self.rollout.final_observation


@final
class GradientsAtWindowEnd:
    """Wraps a collector: copies the gradients of ``watched`` right after the actor's backward."""

    def __init__(self, collector: DifferentiableCollector, watched: Sequence[Tensor]) -> None:
        self.collector = collector
        self.watched = list(watched)
        self.grads: list[Tensor | None] = []

    def collect(
        self, policy: DifferentiablePolicy, *, num_steps: int, iteration: int
    ) -> DifferentiableRollout:
        """The wrapped collector's window."""
        return self.collector.collect(policy, num_steps=num_steps, iteration=iteration)

    def detach_state(self) -> Obs:
        """Copy the watched gradients, then cut the graph."""
        self.grads = [None if t.grad is None else t.grad.clone() for t in self.watched]
        return self.collector.detach_state()


def one_update(shac: SHAC, rollout: DifferentiableRollout) -> dict[str, float]:
    """SHAC's update on one prepared window; its metrics."""
    outcome, _episodes = shac.update(FixedWindow(rollout), num_steps=rollout.num_steps)
    return outcome.metrics


def snapshot(shac: SHAC) -> dict[str, Any]:
    """Deep copies of every piece of SHAC's state (weights, optimizers, schedulers, sampler)."""
    return {
        "policy": copy.deepcopy(shac.policy.state_dict()),
        "critic": copy.deepcopy(shac.critic.state_dict()),
        "target_critic": copy.deepcopy(shac.target_critic.state_dict()),
        "optimizer": copy.deepcopy(shac.optimizer.state_dict()),
        "critic_optimizer": copy.deepcopy(shac.critic_optimizer.state_dict()),
        "scheduler": copy.deepcopy(shac.scheduler.state_dict()),
        "critic_scheduler": copy.deepcopy(shac.critic_scheduler.state_dict()),
        "sampler": shac.sampler.get_state().clone(),
        "return_normalizer": (
            None
            if shac.return_normalizer is None
            else copy.deepcopy(shac.return_normalizer.state_dict())
        ),
    }


def _bytes(tensor: Tensor) -> bytes:
    return bytes(tensor.detach().cpu().contiguous().numpy().tobytes())


def assert_bit_identical(a: Any, b: Any, where: str = "state") -> None:
    """Nested dicts, lists and tensors equal bit for bit (dtype and shape included)."""
    if isinstance(a, Tensor):
        assert isinstance(b, Tensor), where
        assert a.dtype == b.dtype, where
        assert a.shape == b.shape, where
        assert _bytes(a) == _bytes(b), f"{where} differs"
    elif isinstance(a, dict):
        assert isinstance(b, dict), where
        assert a.keys() == b.keys(), f"{where}: keys differ"
        for key in a:
            assert_bit_identical(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple), where
        assert len(a) == len(b), f"{where}: lengths differ"
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_bit_identical(x, y, f"{where}[{index}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def cartpole_trainer(
    *,
    num_envs: int = 4,
    segment_length: int = 8,
    total_updates: int = 2,
    shac: dict[str, Any] | None = None,
    options: RunOptions | None = None,
    seed: int = 0,
    **fields: Any,
) -> DifferentiableTrainer:
    """A small SHAC trainer on the built-in swing-up."""
    config = DifferentiableTrainerConfig(
        total_updates=total_updates,
        segment_length=segment_length,
        hidden=(16,),
        algorithm=SHACConfig(**{"critic_hidden": (16,), **(shac or {})}),
        seed=seed,
        **fields,
    )
    return DifferentiableTrainer(
        env=make(ENV_ID, num_envs=num_envs, seed=seed),
        config=config,
        options=options or RunOptions(progress=False, loggers=[]),
    )


def shac_of(trainer: DifferentiableTrainer) -> SHAC:
    """The trainer's algorithm, which is SHAC."""
    trainer.setup()
    algorithm = trainer.algorithm
    assert isinstance(algorithm, SHAC)
    return algorithm


def weights(trainer: DifferentiableTrainer) -> dict[str, Tensor]:
    """Policy, critic, target critic and return-normaliser tensors, by prefixed name."""
    shac = shac_of(trainer)
    named: dict[str, Tensor] = {}
    modules: dict[str, nn.Module] = {
        "policy": trainer.model,
        "critic": shac.critic,
        "target_critic": shac.target_critic,
    }
    if shac.return_normalizer is not None:
        modules["return_normalizer"] = shac.return_normalizer
    for prefix, module in modules.items():
        for key, value in module.state_dict().items():
            named[f"{prefix}.{key}"] = value.detach().clone()
    return named


def assert_same_weights(a: dict[str, Tensor], b: dict[str, Tensor]) -> None:
    """Same names, bit-identical tensors."""
    assert a.keys() == b.keys()
    different = [key for key in a if not torch.equal(a[key], b[key])]
    assert not different, f"tensors differ: {different}"


def critic_steps(shac: SHAC) -> int:
    """Optimizer steps the critic took (Adam's step count)."""
    state = shac.critic_optimizer.state_dict()["state"]
    return int(state[0]["step"]) if state else 0
