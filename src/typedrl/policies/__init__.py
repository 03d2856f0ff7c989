"""Policies: PPO's MLP and recurrent actor-critics, APG and SHAC's differentiable MLP policy.

Also their distributions, the MLP builder, the one-hot encoding of index
observations, the convolutional encoders of image observations, their flat
export module and :class:`PolicyFactory`, how a run records the policy it
trains.
"""

from typing import TYPE_CHECKING

from typedrl._lazy import lazy_exports

# Submodules load on first use (they import torch).
if TYPE_CHECKING:
    from typedrl.policies._activation import Activation as Activation
    from typedrl.policies._actor_critic import MLPActorCritic as MLPActorCritic
    from typedrl.policies._describe import describe_policy as describe_policy
    from typedrl.policies._differentiable import DifferentiableMLPPolicy as DifferentiableMLPPolicy
    from typedrl.policies._distributions import Categorical as Categorical
    from typedrl.policies._distributions import DiagonalGaussian as DiagonalGaussian
    from typedrl.policies._encoders import DiscreteOneHot as DiscreteOneHot
    from typedrl.policies._encoders import ImageEncoder as ImageEncoder
    from typedrl.policies._encoders import ImageEncoderKind as ImageEncoderKind
    from typedrl.policies._encoders import ImageLayout as ImageLayout
    from typedrl.policies._encoders import ObservationEncoder as ObservationEncoder
    from typedrl.policies._encoders import build_image_encoders as build_image_encoders
    from typedrl.policies._encoders import image_layout as image_layout
    from typedrl.policies._factory import PolicyFactory as PolicyFactory
    from typedrl.policies._flat_actor import FlatActor as FlatActor
    from typedrl.policies._mlp import build_mlp as build_mlp
    from typedrl.policies._recurrent import RecurrentActorCritic as RecurrentActorCritic
    from typedrl.policies._recurrent import RecurrentCore as RecurrentCore
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "MLPActorCritic": "typedrl.policies._actor_critic",
            "DifferentiableMLPPolicy": "typedrl.policies._differentiable",
            "Categorical": "typedrl.policies._distributions",
            "DiagonalGaussian": "typedrl.policies._distributions",
            "DiscreteOneHot": "typedrl.policies._encoders",
            "ImageEncoder": "typedrl.policies._encoders",
            "ImageEncoderKind": "typedrl.policies._encoders",
            "ImageLayout": "typedrl.policies._encoders",
            "ObservationEncoder": "typedrl.policies._encoders",
            "build_image_encoders": "typedrl.policies._encoders",
            "image_layout": "typedrl.policies._encoders",
            "FlatActor": "typedrl.policies._flat_actor",
            "PolicyFactory": "typedrl.policies._factory",
            "Activation": "typedrl.policies._activation",
            "build_mlp": "typedrl.policies._mlp",
            "describe_policy": "typedrl.policies._describe",
            "RecurrentActorCritic": "typedrl.policies._recurrent",
            "RecurrentCore": "typedrl.policies._recurrent",
        },
    )

__all__ = [
    "Activation",
    "Categorical",
    "DiagonalGaussian",
    "DifferentiableMLPPolicy",
    "DiscreteOneHot",
    "FlatActor",
    "ImageEncoder",
    "ImageEncoderKind",
    "ImageLayout",
    "MLPActorCritic",
    "ObservationEncoder",
    "PolicyFactory",
    "RecurrentActorCritic",
    "RecurrentCore",
    "build_image_encoders",
    "build_mlp",
    "describe_policy",
    "image_layout",
]
