"""Shared hypothesis strategies for typedrl's property tests."""

import math

import torch
from hypothesis import strategies as st

__all__ = [
    "episode_limits",
    "invalid_counts",
    "invalid_finite_floats",
    "invalid_float_mappings",
    "invalid_scale_tensors",
    "valid_float_mappings",
]

_NON_INT_VALUES = st.one_of(
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.none(),
    st.lists(st.integers(), max_size=2),
)

invalid_counts = st.one_of(st.integers(max_value=0), _NON_INT_VALUES)
"""Everything that is not a positive int: zero, negatives, bools, floats, strings, None."""

invalid_finite_floats = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.integers(min_value=2**1024),  # ints past the largest float
    st.integers(max_value=-(2**1024)),
    st.booleans(),
    st.text(max_size=5),
    st.none(),
)
"""Values a finite-float field must reject."""

_finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
valid_float_mappings = st.dictionaries(st.text(max_size=8), st.one_of(_finite, st.integers()))
"""Mappings of str to finite reals."""

invalid_float_mappings = st.one_of(
    st.dictionaries(st.integers(), _finite, min_size=1),
    st.dictionaries(st.text(max_size=4), invalid_finite_floats, min_size=1),
    st.lists(_finite, max_size=3),
    st.integers(),
)
"""Non-mappings, non-str keys, or non-finite / non-numeric values."""


@st.composite
def invalid_scale_tensors(draw: st.DrawFn) -> torch.Tensor:
    """A tensor objective scale that breaks exactly one rule of the contract."""
    num_envs = draw(st.integers(1, 6))
    rule = draw(st.sampled_from(["dtype", "ndim", "grad", "negative", "nonfinite"]))
    values = draw(st.lists(st.floats(0.0, 10.0), min_size=num_envs, max_size=num_envs))
    base = torch.tensor(values, dtype=torch.float32)
    if rule == "dtype":
        return base.to(torch.int64)
    if rule == "ndim":
        return base.unsqueeze(-1)
    if rule == "grad":
        return base.clone().requires_grad_()
    row = draw(st.integers(0, num_envs - 1))
    base[row] = -1.0 if rule == "negative" else draw(st.sampled_from([math.nan, math.inf]))
    return base


@st.composite
def episode_limits(draw: st.DrawFn, num_envs: int) -> list[int] | None:
    """Per-row episode limits for CountingVecEnv, or None for never."""
    if draw(st.booleans()):
        return None
    return draw(st.lists(st.integers(1, 6), min_size=num_envs, max_size=num_envs))
