"""The activation names the MLP builder accepts (torch-free, so configs can name them)."""

from typing import Literal

__all__ = ["Activation"]

Activation = Literal["tanh", "relu", "elu", "silu"]
"""The hidden-layer activations of :func:`~typedrl.policies.build_mlp`."""
