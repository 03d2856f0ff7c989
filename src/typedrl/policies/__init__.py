"""Policies: the MLP actor-critic of PPO, the differentiable MLP policy of APG and SHAC.

Also their distributions and the MLP builder.
"""

from typedrl.policies._actor_critic import MLPActorCritic as MLPActorCritic
from typedrl.policies._differentiable import DifferentiableMLPPolicy as DifferentiableMLPPolicy
from typedrl.policies._distributions import Categorical as Categorical
from typedrl.policies._distributions import DiagonalGaussian as DiagonalGaussian
from typedrl.policies._mlp import Activation as Activation
from typedrl.policies._mlp import build_mlp as build_mlp

__all__ = [
    "Activation",
    "Categorical",
    "DiagonalGaussian",
    "DifferentiableMLPPolicy",
    "MLPActorCritic",
    "build_mlp",
]
