"""The picture of a cart-pole frame, shared by :class:`CartPole` and :class:`CartPoleSwingUp`."""

from typedrl.envs.builtin import _cartpole_physics as physics
from typedrl.envs.builtin._render import Canvas, RenderView

__all__ = ["VIEW", "draw_cart_pole"]

VIEW = RenderView(width=600, height=400, x_range=(-3.0, 3.0), control_dt=physics.TAU)
"""600 x 400 pixels, the rail centred, room for the pole above and below it."""

_CART_HALF_WIDTH = 0.25
_CART_HALF_HEIGHT = 0.15
_POLE_LENGTH = 2 * physics.HALF_LENGTH
_POLE_WIDTH = 0.1
_RAIL_HALF_THICKNESS = 0.01
_LIMIT_HALF_WIDTH = 0.02
_LIMIT_HALF_HEIGHT = 0.3
_AXLE_RADIUS = 0.05

_RAIL = (0, 0, 0)
_LIMIT = (200, 40, 40)
_CART = (0, 0, 0)
_POLE = (202, 152, 101)
_AXLE = (129, 132, 203)


def draw_cart_pole(canvas: Canvas, x: float, cos_theta: float, sin_theta: float) -> None:
    """Draw the rail (its ends marked at ``|x| = 2.4``), the cart at ``x`` and the pole.

    ``theta = 0`` is upright and a positive angle leans the pole towards ``+x``.
    """
    limit = physics.X_THRESHOLD
    canvas.rectangle((-limit, -_RAIL_HALF_THICKNESS), (limit, _RAIL_HALF_THICKNESS), color=_RAIL)
    for end in (-limit, limit):
        canvas.rectangle(
            (end - _LIMIT_HALF_WIDTH, -_LIMIT_HALF_HEIGHT),
            (end + _LIMIT_HALF_WIDTH, _LIMIT_HALF_HEIGHT),
            color=_LIMIT,
        )
    canvas.rectangle(
        (x - _CART_HALF_WIDTH, -_CART_HALF_HEIGHT),
        (x + _CART_HALF_WIDTH, _CART_HALF_HEIGHT),
        color=_CART,
    )
    tip = (x + _POLE_LENGTH * sin_theta, _POLE_LENGTH * cos_theta)
    canvas.segment((x, 0.0), tip, width=_POLE_WIDTH, color=_POLE)
    canvas.circle((x, 0.0), _AXLE_RADIUS, color=_AXLE)
