"""Multi-layer perceptrons with the initialisation PPO implementations rely on."""

import functools
import itertools
import math
from collections.abc import Callable, Sequence

from torch import nn

from typedrl.errors import ConfigError
from typedrl.policies._activation import Activation

__all__ = ["Activation", "build_mlp"]

# ELU and ReLU work in place: every activation follows a Linear or a LayerNorm, whose
# backward passes do not read their outputs, and the activations' own backward
# passes then read their outputs, not their inputs. For ReLU the gradient is
# bit-identical; ELU's negative branch becomes ``y + 1`` instead of ``exp(x)``,
# which spares an exponential per element in backward and rounds differently.
# (SiLU's backward needs its input, and Tanh has no in-place module.)
_ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "tanh": nn.Tanh,
    "relu": functools.partial(nn.ReLU, inplace=True),
    "elu": functools.partial(nn.ELU, inplace=True),
    "silu": nn.SiLU,
}


def build_mlp(
    in_features: int,
    hidden: Sequence[int],
    out_features: int,
    *,
    activation: Activation = "tanh",
    output_gain: float = 1.0,
    layer_norm: bool = False,
    orthogonal_init: bool = True,
) -> nn.Sequential:
    """Build ``Linear -> activation`` blocks followed by a linear output layer.

    Hidden layers use orthogonal weights with gain ``sqrt(2)`` and zero biases;
    the output layer uses orthogonal weights with ``output_gain`` (0.01 for a
    policy head keeps the initial policy close to uniform; 1.0 for a value head).
    With ``orthogonal_init=False`` every linear layer keeps PyTorch's default
    initialisation instead (uniform weights and biases scaled by the fan-in; what
    Stable-Baselines3 calls ``ortho_init=False``) and ``output_gain`` is unused.
    With ``layer_norm`` each hidden block is ``Linear -> LayerNorm -> activation``
    (SHAC's reference code, DiffRL, orders its blocks ``Linear -> ELU ->
    LayerNorm``), the LayerNorm starting as the identity (unit weight, zero
    bias); the output layer is never normalised. ELU and ReLU run in place on
    the output of the layer before them (a reference to that output kept by a
    forward hook holds the activated values afterwards); ELU's gradient is
    then computed from its output.

    Example:
        >>> mlp = build_mlp(4, [64, 64], 2, output_gain=0.01)
        >>> [type(layer).__name__ for layer in mlp]
        ['Linear', 'Tanh', 'Linear', 'Tanh', 'Linear']
        >>> [type(layer).__name__ for layer in build_mlp(4, [8], 2, layer_norm=True)]
        ['Linear', 'LayerNorm', 'Tanh', 'Linear']
    """
    sizes = [in_features, *hidden]
    if any(size <= 0 for size in [*sizes, out_features]):
        raise ConfigError(
            f"layer sizes must be positive ints, got in={in_features}, hidden={list(hidden)}, "
            f"out={out_features}"
        )
    layers: list[nn.Module] = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        layers.append(_init(nn.Linear(fan_in, fan_out), math.sqrt(2.0), orthogonal_init))
        if layer_norm:
            layers.append(nn.LayerNorm(fan_out))
        layers.append(_ACTIVATIONS[activation]())
    layers.append(_init(nn.Linear(sizes[-1], out_features), output_gain, orthogonal_init))
    return nn.Sequential(*layers)


def _init(layer: nn.Linear, gain: float, orthogonal: bool) -> nn.Linear:
    if not orthogonal:
        return layer
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)
    return layer
