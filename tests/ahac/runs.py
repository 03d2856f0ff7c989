"""Shared builders of the AHAC tests: small trainers on the contact quadratic env."""

from typing import Any

import torch
from torch import Tensor, nn

from typedrl.ahac import AHAC, AHACConfig
from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.testing import ContactQuadraticEnv
from typedrl.training import RunOptions

__all__ = ["ahac_of", "contact_trainer", "same_weights", "weights"]


def contact_trainer(
    *,
    num_envs: int = 4,
    contact_scale: float = 1000.0,
    total_updates: int = 3,
    ahac: dict[str, Any] | None = None,
    options: RunOptions | None = None,
    seed: int = 0,
    episode: int = 5,
    **fields: Any,
) -> DifferentiableTrainer:
    """A small AHAC trainer on :class:`~typedrl.testing.ContactQuadraticEnv`."""
    values: dict[str, Any] = {
        "critic_hidden": (8,),
        "horizon_min": 2,
        "horizon_max": 6,
        "contact_threshold": 500.0,
        "horizon_learning_rate": 2e-3,
        "critic_iterations": 8,
        **(ahac or {}),
    }
    config = DifferentiableTrainerConfig(
        total_updates=total_updates,
        algorithm=AHACConfig(**values),
        seed=seed,
        **{"hidden": (8,), **fields},
    )
    env = ContactQuadraticEnv(num_envs=num_envs, horizon=episode, contact_scale=contact_scale)
    return DifferentiableTrainer(
        env=env,
        config=config,
        options=options or RunOptions(progress=False, loggers=[]),
    )


def ahac_of(trainer: DifferentiableTrainer) -> AHAC:
    """The trainer's algorithm, which is AHAC."""
    trainer.setup()
    algorithm = trainer.algorithm
    assert isinstance(algorithm, AHAC)
    return algorithm


def weights(trainer: DifferentiableTrainer) -> dict[str, Tensor]:
    """Policy and double-critic tensors, by prefixed name."""
    ahac = ahac_of(trainer)
    named: dict[str, Tensor] = {}
    modules: dict[str, nn.Module] = {"policy": trainer.model, "critic": ahac.critic}
    for prefix, module in modules.items():
        for key, value in module.state_dict().items():
            named[f"{prefix}.{key}"] = value.detach().clone()
    return named


def same_weights(a: dict[str, Tensor], b: dict[str, Tensor]) -> list[str]:
    """The names whose tensors differ (none: bit-identical)."""
    assert a.keys() == b.keys()
    return [key for key in a if not torch.equal(a[key], b[key])]
