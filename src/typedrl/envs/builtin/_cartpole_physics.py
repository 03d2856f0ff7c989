"""Cart-pole equations of motion shared by :class:`CartPole` and :class:`CartPoleSwingUp`.

Constants and equations are those of Gymnasium's ``CartPole-v1`` (Florian,
"Correct equations for the dynamics of the cart-pole system", 2007, with
frictionless cart and pole). ``theta = 0`` is upright; the equations hold for
any angle, so the swing-up task reuses them.
"""

import functools
import math

import torch
from jaxtyping import Float
from torch import Tensor

__all__ = [
    "FORCE_MAG",
    "TAU",
    "THETA_THRESHOLD",
    "X_THRESHOLD",
    "accelerations",
    "specific_accelerations",
]

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_POLE + MASS_CART
HALF_LENGTH = 0.5
POLE_MASS_LENGTH = MASS_POLE * HALF_LENGTH
FORCE_MAG = 10.0
"""Force of a discrete push, and the force of a continuous action of 1."""
TAU = 0.02
"""Seconds per step."""
THETA_THRESHOLD = 12 * 2 * math.pi / 360
"""Pole angle beyond which CartPole terminates (12 degrees)."""
X_THRESHOLD = 2.4
"""Cart position beyond which CartPole terminates."""

_Row = Float[Tensor, " num_envs"]


@functools.cache
def _length_factor(dtype: torch.dtype, device: torch.device) -> Float[Tensor, ""]:
    """``l * 4/3 / g``, the constant term of ``theta_acc``'s denominator over ``g``."""
    return torch.tensor(HALF_LENGTH * 4.0 / 3.0 / GRAVITY, dtype=dtype, device=device)


def accelerations(
    force: _Row, cos_theta: _Row, sin_theta: _Row, theta_dot: _Row
) -> tuple[_Row, _Row]:
    """Cart and pole accelerations ``(x_acc, theta_acc)`` for a horizontal force on the cart."""
    return specific_accelerations(force / TOTAL_MASS, cos_theta, sin_theta, theta_dot)


def specific_accelerations(
    specific_force: _Row, cos_theta: _Row, sin_theta: _Row, theta_dot: _Row
) -> tuple[_Row, _Row]:
    """:func:`accelerations` for the force divided by the total mass ``m_c + m_p``.

    The same equations, with constants folded and fused multiply-adds
    (:func:`torch.addcmul`): six tensor ops instead of eighteen.
    """
    # temp = (F + m_p l theta_dot^2 sin(theta)) / (m_c + m_p)
    temp = torch.addcmul(
        specific_force, theta_dot * theta_dot, sin_theta, value=POLE_MASS_LENGTH / TOTAL_MASS
    )
    # theta_acc = (g sin(theta) - cos(theta) temp) / (l (4/3 - m_p cos^2(theta) / (m_c + m_p))),
    # numerator and denominator both divided by g.
    numerator = torch.addcmul(sin_theta, cos_theta, temp, value=-1.0 / GRAVITY)
    denominator = torch.addcmul(
        _length_factor(cos_theta.dtype, cos_theta.device),
        cos_theta,
        cos_theta,
        value=-HALF_LENGTH * MASS_POLE / (TOTAL_MASS * GRAVITY),
    )
    theta_acc = numerator / denominator
    # x_acc = temp - m_p l theta_acc cos(theta) / (m_c + m_p)
    x_acc = torch.addcmul(temp, theta_acc, cos_theta, value=-POLE_MASS_LENGTH / TOTAL_MASS)
    return x_acc, theta_acc
