"""Property tests: the squashed differentiable policy stays in bounds with finite gradients."""

import gymnasium as gym
import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st
from tensordict import TensorDict
from torch import nn

from typedrl.policies import DifferentiableMLPPolicy

_bound = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, width=32)
_pre = st.floats(-(2.0**100), 2.0**100, allow_nan=False, allow_infinity=False, width=32)


@st.composite
def bounds_and_means(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """Float32 bounds with ``low < high`` per dimension, and one pre-activation per dimension."""
    act_dim = draw(st.integers(1, 4))
    pairs = draw(
        st.lists(
            st.tuples(_bound, _bound).filter(lambda pair: pair[0] != pair[1]),
            min_size=act_dim,
            max_size=act_dim,
        )
    )
    low = np.array([min(pair) for pair in pairs], dtype=np.float32)
    high = np.array([max(pair) for pair in pairs], dtype=np.float32)
    means = draw(st.lists(_pre, min_size=act_dim, max_size=act_dim))
    return low, high, means


@given(case=bounds_and_means(), deterministic=st.booleans(), seed=st.integers(0, 2**16))
def test_squashed_action_inside_bounds_with_finite_gradient(
    case: tuple[np.ndarray, np.ndarray, list[float]], deterministic: bool, seed: int
) -> None:
    """For finite bounds and any mean the action is in [low, high]; d action / d mean is finite."""
    low, high, means = case
    policy = DifferentiableMLPPolicy(
        gym.spaces.Box(-1.0, 1.0, (2,)), gym.spaces.Box(low, high), hidden=(4,)
    )
    last = policy.mean_net[-1]
    assert isinstance(last, nn.Linear)
    with torch.no_grad():
        # A zero weight makes the output layer's bias the Gaussian mean.
        last.weight.zero_()
        last.bias.copy_(torch.tensor(means))
    torch.manual_seed(seed)
    out = policy.act(
        TensorDict({"obs": torch.randn(3, 2)}, batch_size=[3]), deterministic=deterministic
    )
    action = out["action"]
    assert (action >= torch.from_numpy(low)).all()
    assert (action <= torch.from_numpy(high)).all()
    assert torch.isfinite(out["log_prob"]).all()
    action.sum().backward()
    assert last.bias.grad is not None
    assert torch.isfinite(last.bias.grad).all()
    assert (last.bias.grad >= 0).all()
