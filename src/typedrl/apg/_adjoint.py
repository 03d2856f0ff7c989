"""Per-row clipping and measurement of the action adjoint (the gradient w.r.t. each action)."""

from typing import Final, final

import torch
from jaxtyping import Bool, Float, Int64, Shaped
from torch import Tensor

from typedrl import _validation
from typedrl.metrics import (
    ADJOINT_CLIPPED_FRACTION,
    ADJOINT_NONFINITE_ROWS,
    ADJOINT_NORM_MAX,
    ADJOINT_NORM_MEAN,
    ADJOINT_ROWS,
)
from typedrl.types import Action

__all__ = ["ADJOINT_METRICS", "ActionAdjointClipper"]

ADJOINT_METRICS: Final = (
    ADJOINT_ROWS,
    ADJOINT_CLIPPED_FRACTION,
    ADJOINT_NONFINITE_ROWS,
    ADJOINT_NORM_MEAN,
    ADJOINT_NORM_MAX,
)
"""The keys of :meth:`ActionAdjointClipper.statistics`, in order."""

_Rows = Float[Tensor, "rows width"]
_RowFlags = Bool[Tensor, " rows"]


@final
class ActionAdjointClipper:
    """Rescales each row's action adjoint to a norm of at most ``max_norm``; measures it.

    In a differentiable rollout, the gradient of the objective with respect to
    the action of row ``i`` at step ``t`` (the *action adjoint*) sums every
    path from that action through the env to later rewards; a chaotic or stiff
    simulator can make it explode. :meth:`attach` registers a backward hook on
    an action batch that, in the backward pass, replaces each row's gradient
    ``g`` by

    - ``g * max_norm / |g|`` where ``|g| > max_norm`` (same direction, norm
      ``max_norm``),
    - ``0`` where ``g`` holds a NaN or an infinity,
    - ``g`` itself, untouched, everywhere else.

    With ``max_norm=None`` the hook only measures and leaves every gradient as
    it is (non-finite rows included, so that the trainer's non-finite check
    sees them).

    Norms are computed in float64 and without overflow: each row is first
    divided by its largest absolute entry, then its norm is taken and
    multiplied back, so gradients near the largest float are measured and
    clipped correctly. The statistics accumulate on the device, with no host
    synchronisation in the backward pass, over every backward through every
    attached batch until :meth:`reset`; :meth:`statistics` reads them in one
    host transfer, after the backward.

    Args:
        max_norm: The largest row norm the gradient may keep (a positive,
            finite float), or ``None`` to measure only.
        device: Device of the accumulators (the actions' device).

    Example:
        >>> import torch
        >>> clipper = ActionAdjointClipper(max_norm=1.0, device="cpu")
        >>> action = torch.zeros(2, 2, requires_grad=True)
        >>> hooked = clipper.attach(action)
        >>> (hooked * torch.tensor([[3.0, 4.0], [0.3, 0.4]])).sum().backward()
        >>> action.grad.tolist()
        [[0.6000000238418579, 0.800000011920929], [0.30000001192092896, 0.4000000059604645]]
        >>> clipper.statistics()["adjoint/clipped_fraction"]
        0.5
    """

    def __init__(self, *, max_norm: float | None, device: torch.device | str) -> None:
        if max_norm is not None:
            max_norm = _validation.positive_float("ActionAdjointClipper", "max_norm", max_norm)
        self._device = torch.device(device)
        self.max_norm: Final = max_norm
        """The clipping threshold; ``None`` when the clipper only measures."""
        # Apple's MPS has no float64: accumulate in float32 there.
        self._norm_dtype = torch.float32 if self._device.type == "mps" else torch.float64
        # The accumulators are device scalars updated in place (no host read).
        self.rows: Final[Int64[Tensor, ""]] = torch.zeros(
            (), dtype=torch.int64, device=self._device
        )
        """Rows seen so far (an int64 device scalar)."""
        self.clipped: Final[Int64[Tensor, ""]] = torch.zeros_like(self.rows)
        """Rows whose finite gradient was rescaled (an int64 device scalar)."""
        self.nonfinite: Final[Int64[Tensor, ""]] = torch.zeros_like(self.rows)
        """Rows whose gradient was not finite (an int64 device scalar)."""
        self.norm_sum: Final[Float[Tensor, ""]] = torch.zeros(
            (), dtype=self._norm_dtype, device=self._device
        )
        """Sum of the finite rows' pre-clip norms (a float64 device scalar)."""
        self.norm_max: Final[Float[Tensor, ""]] = torch.zeros_like(self.norm_sum)
        """Largest finite row's pre-clip norm, 0 before any (a float64 device scalar)."""

    def attach(self, action: Action) -> Action:
        """Return an alias of ``action`` whose gradient this clipper rewrites and measures.

        The alias shares ``action``'s storage (no copy). Pass the alias to the
        env and keep ``action`` for any other term of the objective: only the
        gradient that comes back through the alias (the env's adjoint) is
        clipped and counted. Rows are the first dimension; ``action`` must
        require grad.
        """
        hooked = action.view_as(action)
        # torch leaves Tensor.register_hook unannotated.
        hooked.register_hook(self._hook)  # type: ignore[no-untyped-call]
        return hooked

    def _hook(self, grad: Shaped[Tensor, "rows ..."]) -> Tensor | None:
        rows = grad.shape[0]
        if rows == 0:
            return None
        flat = grad.reshape(rows, -1)
        unit, scale, unit_norm, finite = _row_norm_parts(flat.to(self._norm_dtype))
        norm = scale * unit_norm
        with torch.no_grad():
            self.rows.add_(rows)
            self.nonfinite.add_((~finite).sum())
            finite_norm = torch.where(finite, norm, 0.0).detach()
            self.norm_sum.add_(finite_norm.sum())
            torch.maximum(self.norm_max, finite_norm.amax(), out=self.norm_max)
        max_norm = self.max_norm
        if max_norm is None:
            return None
        exceeds = finite & (norm > max_norm)
        with torch.no_grad():
            self.clipped.add_(exceeds.sum())
        # Above the threshold: (g / scale) * max_norm / |g / scale| = g * max_norm / |g|.
        rescaled = (unit * (max_norm / unit_norm).unsqueeze(1)).to(grad.dtype)
        out = torch.where(exceeds.unsqueeze(1), rescaled, flat)
        out = torch.where(finite.unsqueeze(1), out, torch.zeros_like(out))
        return out.reshape(grad.shape)

    def statistics(self) -> dict[str, float]:
        """The statistics under :data:`ADJOINT_METRICS`'s keys, read in one host transfer.

        Read them after the backward pass (before it, every count is 0).
        ``adjoint/norm_mean`` and ``adjoint/norm_max`` are 0 when no finite row
        was seen; ``adjoint/clipped_fraction`` is 0 when no row was seen or the
        clipper only measures.
        """
        values = torch.stack(
            [
                self.rows.to(self._norm_dtype),
                self.clipped.to(self._norm_dtype),
                self.nonfinite.to(self._norm_dtype),
                self.norm_sum,
                self.norm_max,
            ]
        ).tolist()
        rows, clipped, nonfinite, norm_sum, norm_max = (float(v) for v in values)
        finite_rows = rows - nonfinite
        return {
            ADJOINT_ROWS: rows,
            ADJOINT_CLIPPED_FRACTION: clipped / rows if rows > 0 else 0.0,
            ADJOINT_NONFINITE_ROWS: nonfinite,
            ADJOINT_NORM_MEAN: norm_sum / finite_rows if finite_rows > 0 else 0.0,
            ADJOINT_NORM_MAX: norm_max,
        }

    def reset(self) -> None:
        """Zero every statistic."""
        for accumulator in (
            self.rows,
            self.clipped,
            self.nonfinite,
            self.norm_sum,
            self.norm_max,
        ):
            accumulator.zero_()

    def __repr__(self) -> str:
        return f"ActionAdjointClipper(max_norm={self.max_norm}, device={self._device})"


def _row_norm_parts(
    flat: _Rows,
) -> tuple[_Rows, Float[Tensor, " rows"], Float[Tensor, " rows"], _RowFlags]:
    """Per row: ``g / scale``, ``scale = max |g|``, ``|g / scale|`` and whether ``g`` is finite.

    Non-finite rows are replaced by zeros, and an all-zero row keeps
    ``scale = 0`` with a unit norm of 1 (so that dividing by it is safe). The
    squares summed are those of ``g / scale``, at most 1 each: they never
    overflow, whatever the magnitude of ``g``.
    """
    finite = torch.isfinite(flat).all(dim=1)
    safe = torch.where(finite.unsqueeze(1), flat, torch.zeros_like(flat))
    scale = safe.abs().amax(dim=1)
    positive = scale > 0
    unit = safe / torch.where(positive, scale, 1.0).unsqueeze(1)
    # The largest entry of a non-zero unit row is 1, so its norm lies in [1, sqrt(width)].
    unit_norm = torch.where(positive, torch.linalg.vector_norm(unit, dim=1), 1.0)
    return unit, scale, unit_norm, finite
