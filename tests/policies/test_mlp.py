"""Tests for typedrl.policies._mlp."""

import copy
import math

import pytest
import torch
from torch import nn

from typedrl.errors import ConfigError
from typedrl.policies import Activation, build_mlp


def test_layers_and_initialisation() -> None:
    """Hidden layers are orthogonal with gain sqrt(2); biases are zero; output gain applies."""
    mlp = build_mlp(8, [16, 16], 4, activation="relu", output_gain=0.01)
    first, last = mlp[0], mlp[-1]
    assert isinstance(first, torch.nn.Linear)
    assert isinstance(last, torch.nn.Linear)
    with torch.no_grad():
        gram = first.weight.T @ first.weight
        assert torch.allclose(gram, 2.0 * torch.eye(8), atol=1e-5)
        assert float(first.bias.abs().sum()) == 0.0
        spectral = float(torch.linalg.matrix_norm(last.weight, ord=2))
    assert math.isclose(spectral, 0.01, rel_tol=1e-4)
    assert mlp(torch.zeros(5, 8)).shape == (5, 4)


def test_default_initialisation_without_orthogonal_init() -> None:
    """orthogonal_init=False keeps PyTorch's default Linear initialisation, biases included."""
    torch.manual_seed(3)
    mlp = build_mlp(8, [16], 4, output_gain=0.01, orthogonal_init=False)
    torch.manual_seed(3)
    expected = [torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)]
    layers = [layer for layer in mlp if isinstance(layer, torch.nn.Linear)]
    for layer, reference in zip(layers, expected, strict=True):
        torch.testing.assert_close(layer.weight, reference.weight, rtol=0.0, atol=0.0)
        torch.testing.assert_close(layer.bias, reference.bias, rtol=0.0, atol=0.0)
    # Default init: uniform in +-1/sqrt(fan_in), biases not zero, no 0.01 output gain.
    with torch.no_grad():
        assert float(layers[0].bias.abs().sum()) > 0.0
        assert float(layers[1].weight.abs().max()) <= 1.0 / math.sqrt(16)
        assert float(torch.linalg.matrix_norm(layers[1].weight, ord=2)) > 0.1


def test_orthogonal_init_draws_the_same_weights_as_before() -> None:
    """The default draws the same numbers as an explicit orthogonal_init=True."""
    torch.manual_seed(4)
    first = build_mlp(3, [5], 2)
    torch.manual_seed(4)
    second = build_mlp(3, [5], 2, orthogonal_init=True)
    for a, b in zip(first.parameters(), second.parameters(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize(("in_features", "hidden", "out_features"), [(2, [0], 1), (0, [4], 1)])
def test_rejects_non_positive_sizes(in_features: int, hidden: list[int], out_features: int) -> None:
    """Non-positive layer sizes raise ConfigError."""
    with pytest.raises(ConfigError, match="positive ints"):
        build_mlp(in_features, hidden, out_features)


@pytest.mark.parametrize("layer_norm", [False, True])
@pytest.mark.parametrize("activation", ["relu", "elu"])
def test_in_place_activations_give_the_out_of_place_gradients(
    activation: Activation, layer_norm: bool
) -> None:
    """ReLU and ELU run in place; outputs and gradients match the out-of-place modules.

    ReLU's are bit-identical; ELU's backward reads its output (``y + 1`` on the
    negative side), so its gradients agree to rounding.
    """
    torch.manual_seed(0)
    mlp = build_mlp(3, [16, 16], 2, activation=activation, layer_norm=layer_norm)
    activations = [layer for layer in mlp if isinstance(layer, nn.ReLU | nn.ELU)]
    assert len(activations) == 2
    assert all(layer.inplace for layer in activations)
    reference = copy.deepcopy(mlp)
    for index, layer in enumerate(reference):
        if isinstance(layer, nn.ReLU | nn.ELU):
            reference[index] = type(layer)()
    x = torch.randn(64, 3) * 3.0
    outputs = [net(x) for net in (mlp, reference)]
    torch.testing.assert_close(outputs[0], outputs[1], rtol=0.0, atol=0.0)
    for output in outputs:
        output.square().sum().backward()
    exact = activation == "relu"
    for mine, theirs in zip(mlp.parameters(), reference.parameters(), strict=True):
        assert mine.grad is not None
        assert theirs.grad is not None
        if exact:
            assert torch.equal(mine.grad, theirs.grad)
        else:
            torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-5, atol=1e-6)
