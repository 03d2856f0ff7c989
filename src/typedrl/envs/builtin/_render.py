"""A small NumPy rasteriser: the frames of the built-in envs.

A :class:`Canvas` is an RGB ``uint8`` image with a world-to-pixel transform
given by a :class:`RenderView` (square pixels, ``y`` pointing up). It fills
circles, thick line segments with round ends (capsules) and axis-aligned
rectangles, each by testing the centres of the pixels of the primitive's
bounding box at once (no anti-aliasing, no per-pixel Python loop). Primitives
may lie partly or wholly outside the canvas; one with a non-finite coordinate
(a diverged state) is not drawn.

Example:
    >>> view = RenderView(width=4, height=2, x_range=(-2.0, 2.0), control_dt=0.1)
    >>> canvas = Canvas(view, background=(0, 0, 0))
    >>> canvas.rectangle((0.0, -1.0), (2.0, 1.0), color=(255, 0, 0))
    >>> canvas.frame()[..., 0].tolist()
    [[0, 0, 255, 255], [0, 0, 255, 255]]
"""

import math
from dataclasses import dataclass
from typing import Any, final

import numpy as np
from jaxtyping import Float64

__all__ = ["Canvas", "Color", "Frame", "RenderView"]

Color = tuple[int, int, int]
"""An RGB colour, each channel in ``[0, 255]``."""

Frame = np.ndarray[Any, np.dtype[np.uint8]]
"""One rendered RGB frame, ``[height, width, 3]`` (a plain NumPy annotation, for the docs)."""

_Point = tuple[float, float]
_Column = Float64[np.ndarray, "rows 1"]
_Row = Float64[np.ndarray, "1 cols"]


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class RenderView:
    """The frame of an env: its size in pixels, the world it shows and its frame rate."""

    width: int = 400
    """Frame width in pixels (even, as H.264 video needs)."""

    height: int = 400
    """Frame height in pixels (even)."""

    x_range: tuple[float, float]
    """World ``x`` at the left and right edges of the frame."""

    y_center: float = 0.0
    """World ``y`` at the middle of the frame; the ``y`` span follows from square pixels."""

    control_dt: float
    """Seconds of simulated time per env step (one frame per step plays in real time)."""

    @property
    def scale(self) -> float:
        """Pixels per world unit (the same along ``x`` and ``y``)."""
        return self.width / (self.x_range[1] - self.x_range[0])

    @property
    def fps(self) -> float:
        """Frames per second of real-time playback: ``1 / control_dt``."""
        return 1.0 / self.control_dt


@final
class Canvas:
    """An RGB image to draw filled shapes on, in world coordinates.

    Args:
        view: Size of the image and the world window it shows.
        background: Colour of every pixel before anything is drawn.
    """

    def __init__(self, view: RenderView, *, background: Color = (255, 255, 255)) -> None:
        self._view = view
        self._pixels = np.empty((view.height, view.width, 3), dtype=np.uint8)
        self._pixels[...] = background
        self._scale = view.scale
        self._left = view.x_range[0]
        self._top = view.y_center + view.height / (2 * self._scale)

    @property
    def view(self) -> RenderView:
        """The size and world window of the image."""
        return self._view

    def frame(self) -> Frame:
        """A copy of the image, ``[height, width, 3]`` ``uint8``."""
        return self._pixels.copy()

    def circle(self, center: _Point, radius: float, *, color: Color) -> None:
        """Fill the disc of ``radius`` (world units) around ``center``."""
        cx, cy = center
        if not _finite(cx, cy, radius):
            return
        window = self._window(cx - radius, cx + radius, cy - radius, cy + radius)
        if window is None:
            return
        rows, cols, ys, xs = window
        inside = (xs - cx) ** 2 + (ys - cy) ** 2 <= radius * radius
        self._pixels[rows, cols][inside] = color

    def segment(self, start: _Point, end: _Point, *, width: float, color: Color) -> None:
        """Fill the points within ``width / 2`` of the segment ``start``-``end`` (a capsule)."""
        (ax, ay), (bx, by) = start, end
        if not _finite(ax, ay, bx, by, width):
            return
        half = width / 2
        window = self._window(
            min(ax, bx) - half, max(ax, bx) + half, min(ay, by) - half, max(ay, by) + half
        )
        if window is None:
            return
        rows, cols, ys, xs = window
        dx, dy = bx - ax, by - ay
        length_sq = dx * dx + dy * dy
        # The nearest point of the segment: a + t (b - a), t clipped to [0, 1].
        if length_sq > 0:
            t = np.clip(((xs - ax) * dx + (ys - ay) * dy) / length_sq, 0.0, 1.0)
        else:
            t = np.zeros((ys.shape[0], xs.shape[1]))
        inside = (xs - ax - t * dx) ** 2 + (ys - ay - t * dy) ** 2 <= half * half
        self._pixels[rows, cols][inside] = color

    def rectangle(self, lower: _Point, upper: _Point, *, color: Color) -> None:
        """Fill the axis-aligned rectangle with corners ``lower`` (left, bottom) and ``upper``."""
        (x0, y0), (x1, y1) = lower, upper
        if not _finite(x0, y0, x1, y1):
            return
        window = self._window(x0, x1, y0, y1)
        if window is None:
            return
        rows, cols, ys, xs = window
        inside = ((xs >= x0) & (xs <= x1)) & ((ys >= y0) & (ys <= y1))
        self._pixels[rows, cols][inside] = color

    def _window(
        self, x_low: float, x_high: float, y_low: float, y_high: float
    ) -> tuple[slice, slice, _Column, _Row] | None:
        """The pixels of a world box, clipped to the image, with their centres' coordinates."""
        view = self._view
        col_start = max(0, math.floor((x_low - self._left) * self._scale))
        col_stop = min(view.width, math.ceil((x_high - self._left) * self._scale) + 1)
        row_start = max(0, math.floor((self._top - y_high) * self._scale))
        row_stop = min(view.height, math.ceil((self._top - y_low) * self._scale) + 1)
        if col_start >= col_stop or row_start >= row_stop:
            return None
        # World coordinates of the pixel centres: x to the right, y up.
        xs = self._left + (np.arange(col_start, col_stop, dtype=np.float64) + 0.5) / self._scale
        ys = self._top - (np.arange(row_start, row_stop, dtype=np.float64) + 0.5) / self._scale
        return slice(row_start, row_stop), slice(col_start, col_stop), ys[:, None], xs[None, :]


def _finite(*values: float) -> bool:
    return all(math.isfinite(value) for value in values)
