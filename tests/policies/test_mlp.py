"""Tests for typedrl.policies._mlp."""

import math

import pytest
import torch

from typedrl.errors import ConfigError
from typedrl.policies import build_mlp


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


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"activation": "gelu"}, "activation must be one of"),
        ({"hidden": [0]}, "positive ints"),
        ({"hidden": [True]}, "positive ints"),
    ],
)
def test_rejects_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    """Unknown activations and non-positive sizes raise ConfigError."""
    args: dict[str, object] = {"hidden": [4]}
    args.update(kwargs)
    hidden = args.pop("hidden")
    with pytest.raises(ConfigError, match=message):
        build_mlp(2, hidden, 1, **args)  # type: ignore[arg-type]
