"""Property tests: value types reject every invalid input and keep every valid one."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from property_tests import strategies
from typedrl import DifferentiableRolloutSpec, EvaluationResult, TypedRLError
from typedrl._validation import describe


@given(bad=strategies.invalid_counts)
def test_spec_rejects_every_invalid_num_steps(bad: object) -> None:
    """Any non-positive or non-int num_steps raises a TypedRLError showing the value."""
    with pytest.raises(TypedRLError) as error:
        DifferentiableRolloutSpec(num_steps=bad)  # type: ignore[arg-type]
    assert describe(bad) in str(error.value)


@given(bad=strategies.invalid_finite_floats)
def test_spec_rejects_every_invalid_scalar_scale(bad: object) -> None:
    """Non-finite, bool or non-numeric objective scales are rejected with the value."""
    with pytest.raises(TypedRLError) as error:
        DifferentiableRolloutSpec(num_steps=1, objective_scale=bad)  # type: ignore[arg-type]
    assert describe(bad) in str(error.value)


@given(bad=st.floats(max_value=-1e-12, allow_nan=False, allow_infinity=False))
def test_spec_rejects_negative_scale(bad: float) -> None:
    """A negative scalar objective scale is rejected."""
    with pytest.raises(TypedRLError) as error:
        DifferentiableRolloutSpec(num_steps=1, objective_scale=bad)
    assert ">= 0" in str(error.value)


@given(bad=strategies.invalid_scale_tensors())
def test_spec_rejects_every_invalid_scale_tensor(bad: torch.Tensor) -> None:
    """Tensor scales that break one rule (dtype, shape, grad, sign, finiteness) are rejected."""
    with pytest.raises(TypedRLError) as error:
        DifferentiableRolloutSpec(num_steps=1, objective_scale=bad)
    assert "objective_scale" in str(error.value)


@given(bad=strategies.invalid_float_mappings)
def test_spec_rejects_every_invalid_metadata(bad: object) -> None:
    """Metadata that is not a str -> finite float mapping is rejected."""
    with pytest.raises(TypedRLError) as error:
        DifferentiableRolloutSpec(num_steps=1, metadata=bad)  # type: ignore[arg-type]
    assert "metadata" in str(error.value)


@given(
    num_steps=st.integers(1, 10**9),
    scale=st.floats(0.0, 1e6),
    metadata=strategies.valid_float_mappings,
)
def test_spec_keeps_valid_values(num_steps: int, scale: float, metadata: dict[str, float]) -> None:
    """Valid inputs are stored exactly (metadata as floats)."""
    spec = DifferentiableRolloutSpec(num_steps=num_steps, objective_scale=scale, metadata=metadata)
    assert spec.num_steps == num_steps
    assert spec.objective_scale == scale
    assert dict(spec.metadata) == {k: float(v) for k, v in metadata.items()}


@given(
    num_items=st.one_of(st.integers(max_value=0), st.booleans()),
    score=st.one_of(st.floats(-1e6, 1e6), st.sampled_from([math.nan, math.inf, -math.inf])),
)
def test_evaluation_result_rejects_invalid(num_items: int, score: float) -> None:
    """A count that is not positive (or a bool) always raises a TypedRLError."""
    with pytest.raises(TypedRLError):
        EvaluationResult(metrics={}, score=score, num_items=num_items)


@given(num_items=st.integers(1, 10**6), score=st.sampled_from([math.nan, math.inf, -math.inf]))
def test_evaluation_result_rejects_non_finite_scores(num_items: int, score: float) -> None:
    """A non-finite score always raises a TypedRLError."""
    with pytest.raises(TypedRLError):
        EvaluationResult(metrics={}, score=score, num_items=num_items)
