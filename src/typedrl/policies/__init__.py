"""Policies: the MLP actor-critic used by PPO, its distributions and MLP builder."""

from typedrl.policies._actor_critic import MLPActorCritic as MLPActorCritic
from typedrl.policies._distributions import Categorical as Categorical
from typedrl.policies._distributions import DiagonalGaussian as DiagonalGaussian
from typedrl.policies._mlp import Activation as Activation
from typedrl.policies._mlp import build_mlp as build_mlp

__all__ = ["Activation", "Categorical", "DiagonalGaussian", "MLPActorCritic", "build_mlp"]
