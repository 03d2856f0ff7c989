"""Hopper: the SHAC paper's one-legged hopping task on Newton."""

import math
from importlib import resources
from pathlib import Path
from typing import final

import torch
from jaxtyping import Float
from torch import Tensor

from typedrl.envs.builtin._math import uniform_between
from typedrl.envs.newton._planar import BasePlanarTask
from typedrl.envs.newton._task import Draws, Joints, NewtonState, NewtonTaskSpec, ReferenceQ
from typedrl.types import Done, Reward

__all__ = ["HopperTask", "hopper_xml"]

_NQ = 6  # root x, z, pitch and three hinges
_NV = 6
_TERMINATION_HEIGHT = -0.45
_HEIGHT_TOLERANCE = 0.15
_TERMINATION_ANGLE = math.pi / 6.0


def hopper_xml() -> Path:
    """The hopper MJCF model shipped with typedrl (see the file's header)."""
    return Path(str(resources.files("typedrl.envs.newton") / "assets" / "hopper.xml"))


@final
class HopperTask(BasePlanarTask):
    """Hop forward along ``+x`` without falling: the Hopper of SHAC (Xu et al., ICLR 2022).

    The model is the classic MuJoCo hopper (``hopper_xml()``); the root's
    height ``z`` is measured from its start (1.25 m). The physics follows
    DiffRL: 16 Featherstone substeps of 1/960 s per env step (``dt = 1/60``
    s), penalty contacts (``ke = 2e4``, ``kd = 1e3``, ``kf = 1e3``,
    ``mu = 0.9``), joint damping 1, motors of 200 N m per unit action
    (Gymnasium's gear).

    - action: ``Box(-1, 1, (3,))``;
    - initial state: ``joint_q`` and ``joint_qd`` plus ``U(-c, c)`` noise,
      ``c = reset_noise_scale`` (Gymnasium's reset);
    - observation (11, as in SHAC): ``joint_q`` without the root's ``x``
      (height, pitch, three hinge angles), then ``joint_qd``;
    - reward (SHAC's): ``v_x + r_height + r_angle - ctrl_cost_weight * |a|^2``
      with ``h = clip(z - (-0.45 + 0.15), -1, 0.3)``, ``r_height = h`` where
      ``h > 0`` and ``-200 h^2`` otherwise, and ``r_angle = 1 - (pitch / (pi/6))^2``;
    - termination: ``z < -0.45`` or ``|pitch| > pi/6``; time limit 1000 steps.

    Args:
        ctrl_cost_weight: Weight of the squared action (SHAC: 0.1).
        reset_noise_scale: Scale ``c`` of the initial-state noise.
    """

    def __init__(self, *, ctrl_cost_weight: float = 0.1, reset_noise_scale: float = 5e-3) -> None:
        spec = NewtonTaskSpec(
            model_path=hopper_xml(),
            actuated_dofs=(3, 4, 5),
            gear=(200.0, 200.0, 200.0),
            contact_ke=2.0e4,
            contact_kd=1.0e3,
            contact_kf=1.0e3,
            contact_mu=0.9,
            max_episode_steps=1000,
            observation_high=(math.inf,) * (_NQ - 1 + _NV),
            observation_normalize_mask=(True,) * (_NQ - 1 + _NV),
            num_initial_draws=_NQ + _NV,
        )
        super().__init__(
            spec=spec, ctrl_cost_weight=ctrl_cost_weight, reset_noise_scale=reset_noise_scale
        )

    def initial_state(self, uniform: Draws, *, joint_q0: ReferenceQ) -> Joints:
        """The standing pose and rest, with uniform noise."""
        joint_q = joint_q0 + uniform_between(uniform[:, :_NQ], -self._noise, self._noise)
        joint_qd = uniform_between(uniform[:, _NQ:], -self._noise, self._noise)
        return joint_q, joint_qd

    def reward(
        self,
        state: NewtonState,
        action: Float[Tensor, "num_envs 3"],
        next_state: NewtonState,
        *,
        dt: float,
    ) -> Reward:
        """Forward velocity, height and uprightness terms, minus the control cost."""
        q = next_state.joint_q
        # SHAC's Hopper: h = clip(z - (z_term + tol), -1, 0.3); -200 h^2 below, h above.
        height = torch.clamp(q[:, 1] - (_TERMINATION_HEIGHT + _HEIGHT_TOLERANCE), -1.0, 0.3)
        height_reward = torch.where(height < 0.0, -200.0 * height * height, height)
        # r_angle = 1 - (pitch / pitch_term)^2
        angle_reward = 1.0 - (q[:, 2] / _TERMINATION_ANGLE) ** 2
        return (
            next_state.joint_qd[:, 0]
            + height_reward
            + angle_reward
            - self._ctrl_weight * (action * action).sum(-1)
        )

    def terminated(self, next_state: NewtonState) -> Done:
        """The root fell 0.45 m or the torso tilted past 30 degrees."""
        q = next_state.joint_q
        return (q[:, 1] < _TERMINATION_HEIGHT) | (q[:, 2].abs() > _TERMINATION_ANGLE)
