"""Ant: the SHAC paper's four-legged locomotion task on Newton."""

import math
from importlib import resources
from pathlib import Path
from typing import final

import torch
from jaxtyping import Float
from torch import Tensor

from typedrl._validation import finite_float, non_negative_float
from typedrl.envs.builtin._math import uniform_between
from typedrl.envs.newton._task import (
    Draws,
    Joints,
    NewtonState,
    NewtonTask,
    NewtonTaskSpec,
    ReferenceQ,
)
from typedrl.types import Done, ObsVector, Reward

__all__ = ["AntTask", "ant_xml"]

_NQ = 15  # free joint (3 + 4) and eight hinges
_NV = 14  # free joint (3 + 3) and eight hinges
_HINGES = 8
_OBS_DIM = 37
# Hip and ankle angles at rest, as the SHAC paper's Ant starts: ankles bent by 1 rad
# (inside their joint ranges), hips straight.
_START_HINGES = (0.0, 1.0, 0.0, -1.0, 0.0, -1.0, 0.0, 1.0)
_DRAWS = 3 + 1 + 3 + _HINGES + _NV


def ant_xml() -> Path:
    """The ant MJCF model shipped with typedrl (see the file's header)."""
    return Path(str(resources.files("typedrl.envs.newton") / "assets" / "ant.xml"))


@final
class AntTask(NewtonTask):
    """Run forward along ``+x``: the Ant of SHAC (Xu et al., ICLR 2022) and of DiffRL.

    The model is the classic MuJoCo ant (a sphere torso, four legs of three
    capsules, eight hinges; ``ant_xml()``) with water density. The physics
    follows DiffRL's Ant: 16 Featherstone substeps of 1/960 s per env step
    (``dt = 1/60`` s), penalty contacts (``ke = 4e4``, ``kd = 1e4``,
    ``kf = 3e3``, ``mu = 0.75``), joint damping 1, joint-limit springs
    ``(1e3, 10)``, and motors of ``gear`` N m per unit action on the eight hinges.

    - action: ``Box(-1, 1, (8,))``;
    - initial state: torso at ``(0, 0, 0.75)`` plus ``U(-0.1, 0.1)`` per
      coordinate, turned by an angle ``U(-pi/24, pi/24)`` about a random axis;
      hinge angles ``(0, 1, 0, -1, 0, -1, 0, 1)`` plus ``U(-0.2, 0.2)``;
      every velocity ``U(-0.25, 0.25)``;
    - observation (37, as in SHAC's Ant): torso height, torso quaternion
      ``(x, y, z, w)``, torso linear and angular velocity (world frame),
      hinge angles, ``0.1 *`` hinge velocities, the ``z`` component of the
      torso's up axis, the ``x`` component of its heading axis, and the
      previous action;
    - reward: ``v_x + 0.1 * up_z + heading_x + (z - termination_height)
      - ctrl_cost_weight * |a|^2`` (SHAC's progress, up, heading and height
      terms; SHAC puts no weight on the action, ``ctrl_cost_weight = 0``);
    - termination: torso height below ``termination_height`` (0.27 m);
      time limit 1000 steps.

    Args:
        gear: Motor torque per unit action (N m).
        ctrl_cost_weight: Weight of the squared action in the reward.
        termination_height: Torso height under which an episode ends.
    """

    def __init__(
        self,
        *,
        gear: float = 200.0,
        ctrl_cost_weight: float = 0.0,
        termination_height: float = 0.27,
    ) -> None:
        owner = type(self).__name__
        self._ctrl_weight = non_negative_float(owner, "ctrl_cost_weight", ctrl_cost_weight)
        self._termination_height = finite_float(owner, "termination_height", termination_height)
        self._spec = NewtonTaskSpec(
            model_path=ant_xml(),
            actuated_dofs=tuple(range(6, _NV)),
            gear=(finite_float(owner, "gear", gear),) * _HINGES,
            max_episode_steps=1000,
            observation_high=(math.inf,) * _OBS_DIM,
            observation_normalize_mask=(True,) * _OBS_DIM,
            num_initial_draws=_DRAWS,
        )

    @property
    def spec(self) -> NewtonTaskSpec:
        """The shipped ant model, DiffRL's timing and contacts, 37 observation features."""
        return self._spec

    def initial_state(self, uniform: Draws, *, joint_q0: ReferenceQ) -> Joints:
        """The torso's start pose and the bent ankles, with SHAC's uniform noise."""
        position = joint_q0[:3] + uniform_between(uniform[:, 0:3], -0.1, 0.1)
        angle = uniform_between(uniform[:, 3], -math.pi / 24.0, math.pi / 24.0)
        axis = torch.nn.functional.normalize(uniform[:, 4:7] - 0.5, dim=-1)
        # The start orientation is the identity, so the turn is the whole quaternion.
        quaternion = torch.cat(
            (axis * torch.sin(angle).unsqueeze(-1), torch.cos(angle).unsqueeze(-1)), dim=-1
        )
        start = torch.tensor(_START_HINGES, dtype=uniform.dtype, device=uniform.device)
        hinges = start + uniform_between(uniform[:, 7 : 7 + _HINGES], -0.2, 0.2)
        joint_qd = uniform_between(uniform[:, 7 + _HINGES : _DRAWS], -0.25, 0.25)
        return torch.cat((position, quaternion, hinges), dim=-1), joint_qd

    def observe(self, state: NewtonState) -> ObsVector:
        """SHAC's 37 features (see the class docstring)."""
        q, qd = state.joint_q, state.joint_qd
        up_z, heading_x = _up_and_heading(q[:, 3:7])
        return torch.cat(
            (
                q[:, 2:3],
                q[:, 3:7],
                qd[:, 0:3],
                qd[:, 3:6],
                q[:, 7:],
                0.1 * qd[:, 6:],
                up_z.unsqueeze(-1),
                heading_x.unsqueeze(-1),
                state.action,
            ),
            dim=-1,
        )

    def reward(
        self,
        state: NewtonState,
        action: Float[Tensor, "num_envs 8"],
        next_state: NewtonState,
        *,
        dt: float,
    ) -> Reward:
        """Forward velocity, uprightness, heading and height, minus the control cost."""
        q, qd = next_state.joint_q, next_state.joint_qd
        up_z, heading_x = _up_and_heading(q[:, 3:7])
        # SHAC's Ant: r = v_x + 0.1 up_z + heading_x + (z - h_term) - w_c |a|^2
        return (
            qd[:, 0]
            + 0.1 * up_z
            + heading_x
            + (q[:, 2] - self._termination_height)
            - self._ctrl_weight * (action * action).sum(-1)
        )

    def terminated(self, next_state: NewtonState) -> Done:
        """The torso fell below ``termination_height``."""
        return next_state.joint_q[:, 2] < self._termination_height


def _up_and_heading(
    quaternion: Float[Tensor, "num_envs 4"],
) -> tuple[Float[Tensor, " num_envs"], Float[Tensor, " num_envs"]]:
    """The ``z`` of the rotated ``z`` axis and the ``x`` of the rotated ``x`` axis."""
    x, y, z = quaternion[:, 0], quaternion[:, 1], quaternion[:, 2]
    return 1.0 - 2.0 * (x * x + y * y), 1.0 - 2.0 * (y * y + z * z)
