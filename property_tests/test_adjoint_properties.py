"""Property tests: the action adjoint clipper against a NumPy reference.

For any batch of row gradients (some rows non-finite) and any threshold, the
gradient that reaches the action is: rows above the threshold rescaled to it in
the same direction, non-finite rows zeroed, every other row untouched; and the
statistics equal a float64 NumPy computation of the same counts and norms.
"""

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from numpy.typing import NDArray

from typedrl.apg._adjoint import ActionAdjointClipper

_MAGNITUDE = 1e6
_FLOAT32_NEAR_MAX = float(np.float32(3e38))
_TINY = float(np.finfo(np.float64).tiny)


@dataclass(frozen=True)
class _Case:
    grad: NDArray[np.float64]
    """Row gradients ``[rows, width]``; rows flagged in ``nonfinite`` hold a NaN or inf."""
    nonfinite: NDArray[np.bool_]
    max_norm: float


@st.composite
def _cases(draw: st.DrawFn, *, magnitude: float = _MAGNITUDE, width: Literal[32, 64] = 64) -> _Case:
    rows = draw(st.integers(1, 8))
    cols = draw(st.integers(1, 4))
    grad = draw(
        arrays(
            np.float64,
            (rows, cols),
            elements=st.floats(-magnitude, magnitude, allow_nan=False, width=width),
        )
    )
    nonfinite = draw(arrays(np.bool_, (rows,)))
    poison = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    column = draw(st.integers(0, cols - 1))
    grad[nonfinite, column] = poison
    max_norm = draw(st.floats(1e-3, 1e3))
    return _Case(grad=grad, nonfinite=nonfinite, max_norm=max_norm)


def _through_clipper(
    clipper: ActionAdjointClipper, grad: NDArray[np.float64], dtype: torch.dtype
) -> NDArray[np.float64]:
    """The gradient a leaf action receives when ``grad`` comes back through the clipper."""
    incoming = torch.from_numpy(grad).to(dtype)
    action = torch.zeros_like(incoming, requires_grad=True)
    torch.autograd.backward((clipper.attach(action) * incoming).sum())
    assert action.grad is not None
    result: NDArray[np.float64] = action.grad.double().numpy()
    return result


def _reference_norms(
    grad: NDArray[np.float64], nonfinite: NDArray[np.bool_]
) -> NDArray[np.float64]:
    """Row norms by :func:`math.hypot`, which neither overflows nor underflows (0 if non-finite)."""
    return np.array(
        [0.0 if bad else math.hypot(*row) for row, bad in zip(grad, nonfinite, strict=True)]
    )


def _split(
    norms: NDArray[np.float64], nonfinite: NDArray[np.bool_], max_norm: float
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Finite rows clearly above and clearly below ``max_norm``.

    A row within rounding of the threshold may fall either way (the clipper
    and NumPy round the norm differently), so it is in neither set.
    """
    near = np.isclose(norms, max_norm, rtol=1e-12, atol=0.0)
    above = ~nonfinite & ~near & (norms > max_norm)
    below = ~nonfinite & ~near & (norms < max_norm)
    return above, below


@given(_cases())
def test_clipped_rows_keep_their_direction_at_most_max_norm(case: _Case) -> None:
    """Rows above max_norm: norm max_norm, same direction; others untouched; non-finite zeroed."""
    clipper = ActionAdjointClipper(max_norm=case.max_norm, device="cpu")
    out = _through_clipper(clipper, case.grad, torch.float64)
    norms = _reference_norms(case.grad, case.nonfinite)
    above, below = _split(norms, case.nonfinite, case.max_norm)
    assert np.all(out[case.nonfinite] == 0.0)
    assert np.array_equal(out[below], case.grad[below])
    out_norms = _reference_norms(out, np.zeros_like(case.nonfinite))
    assert np.all(out_norms <= case.max_norm * (1 + 1e-12))
    np.testing.assert_allclose(out_norms[above], case.max_norm, rtol=1e-12)
    expected = case.grad[above] * (case.max_norm / norms[above])[:, None]
    # Subnormal entries carry fewer significant bits: compare them absolutely.
    np.testing.assert_allclose(out[above], expected, rtol=1e-12, atol=_TINY)


@given(_cases())
def test_statistics_equal_the_numpy_reference(case: _Case) -> None:
    """Rows, clipped fraction, non-finite rows, mean and max norm match float64 NumPy."""
    clipper = ActionAdjointClipper(max_norm=case.max_norm, device="cpu")
    _through_clipper(clipper, case.grad, torch.float64)
    stats = clipper.statistics()
    norms = _reference_norms(case.grad, case.nonfinite)
    finite = ~case.nonfinite
    rows = case.grad.shape[0]
    assert stats["adjoint/rows"] == rows
    assert stats["adjoint/nonfinite_rows"] == int(case.nonfinite.sum())
    above, below = _split(norms, case.nonfinite, case.max_norm)
    clipped = round(stats["adjoint/clipped_fraction"] * rows)
    assert stats["adjoint/clipped_fraction"] == clipped / rows
    assert int(above.sum()) <= clipped <= int(finite.sum() - below.sum())
    if finite.any():
        np.testing.assert_allclose(stats["adjoint/norm_mean"], norms[finite].mean(), rtol=1e-12)
        np.testing.assert_allclose(stats["adjoint/norm_max"], norms[finite].max(), rtol=1e-12)
    else:
        assert stats["adjoint/norm_mean"] == stats["adjoint/norm_max"] == 0.0


@given(_cases())
def test_measuring_leaves_every_gradient_as_it_is(case: _Case) -> None:
    """max_norm=None changes nothing (non-finite rows included) and still measures."""
    clipper = ActionAdjointClipper(max_norm=None, device="cpu")
    out = _through_clipper(clipper, case.grad, torch.float64)
    np.testing.assert_array_equal(out, case.grad)
    stats = clipper.statistics()
    assert stats["adjoint/clipped_fraction"] == 0.0
    assert stats["adjoint/nonfinite_rows"] == int(case.nonfinite.sum())


@given(_cases(magnitude=_FLOAT32_NEAR_MAX, width=32))
def test_float32_gradients_near_the_largest_float_do_not_overflow(case: _Case) -> None:
    """float32 rows whose squared norm overflows are still measured and clipped exactly."""
    clipper = ActionAdjointClipper(max_norm=case.max_norm, device="cpu")
    out = _through_clipper(clipper, case.grad, torch.float32)
    norms = _reference_norms(case.grad.astype(np.float32).astype(np.float64), case.nonfinite)
    finite = ~case.nonfinite
    assert np.all(np.isfinite(out))
    out_norms = _reference_norms(out, np.zeros_like(case.nonfinite))
    assert np.all(out_norms <= case.max_norm * (1 + 1e-6))
    if finite.any():
        stats = clipper.statistics()
        np.testing.assert_allclose(stats["adjoint/norm_max"], norms[finite].max(), rtol=1e-12)
