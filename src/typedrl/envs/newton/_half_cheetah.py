"""HalfCheetah: the SHAC paper's planar running task on Newton."""

import math
from importlib import resources
from pathlib import Path
from typing import final

import torch
from jaxtyping import Float
from torch import Tensor

from typedrl.envs.builtin._math import uniform_between
from typedrl.envs.mujoco._sampling import normals
from typedrl.envs.newton._planar import BasePlanarTask
from typedrl.envs.newton._task import Draws, Joints, NewtonState, NewtonTaskSpec, ReferenceQ
from typedrl.types import Done, Reward

__all__ = ["HalfCheetahTask", "half_cheetah_xml"]

_NQ = 9  # root x, z, pitch and six hinges
_NV = 9
_GEAR = (120.0, 90.0, 60.0, 120.0, 60.0, 30.0)
_STIFFNESS = (240.0, 180.0, 120.0, 180.0, 120.0, 60.0)
_DAMPING = (6.0, 4.5, 3.0, 4.5, 3.0, 1.5)


def half_cheetah_xml() -> Path:
    """The half-cheetah MJCF model shipped with typedrl (see the file's header)."""
    return Path(str(resources.files("typedrl.envs.newton") / "assets" / "half_cheetah.xml"))


@final
class HalfCheetahTask(BasePlanarTask):
    """Run forward along ``+x``: the HalfCheetah of SHAC (Xu et al., ICLR 2022).

    The model is the classic MuJoCo half-cheetah (``half_cheetah_xml()``,
    14 kg, the passive joint springs and dampers of Gymnasium's
    ``HalfCheetah-v5``). The physics follows DiffRL: 16 Featherstone substeps
    of 1/960 s per env step (``dt = 1/60`` s), penalty contacts with the
    ground (``ke = 2e4``, ``kd = 1e3``, ``kf = 1e3``, Gymnasium's friction
    0.4); the motors have Gymnasium's gears (120, 90, 60, 120, 60, 30 N m).

    - action: ``Box(-1, 1, (6,))``;
    - initial state: ``joint_q = U(-c, c)`` and ``joint_qd = c * N(0, 1)``
      about the model's pose, ``c = reset_noise_scale`` (Gymnasium's reset);
    - observation (17, as in SHAC and Gymnasium): ``joint_q`` without the
      root's ``x``, then ``joint_qd``;
    - reward: ``v_x - ctrl_cost_weight * |a|^2`` (SHAC's progress reward and
      action penalty, 0.1), with ``v_x`` the root's forward velocity;
    - no termination; time limit 1000 steps.

    Args:
        ctrl_cost_weight: Weight of the squared action.
        reset_noise_scale: Scale ``c`` of the initial-state noise.
    """

    def __init__(self, *, ctrl_cost_weight: float = 0.1, reset_noise_scale: float = 0.1) -> None:
        spec = NewtonTaskSpec(
            model_path=half_cheetah_xml(),
            actuated_dofs=tuple(range(3, _NV)),
            gear=_GEAR,
            joint_damping=_DAMPING,
            joint_stiffness=_STIFFNESS,
            # Softer than the Ant's contacts: a damping of 1e4 N s/m on a foot of about
            # 1 kg is unstable at 1/960 s (the explicit damper's limit is 2 m / dt).
            contact_ke=2.0e4,
            contact_kd=1.0e3,
            contact_kf=1.0e3,
            contact_mu=0.4,
            max_episode_steps=1000,
            observation_high=(math.inf,) * (_NQ - 1 + _NV),
            observation_normalize_mask=(True,) * (_NQ - 1 + _NV),
            # joint_q noise, then the uniforms of the Box-Muller pairs of the joint_qd noise.
            num_initial_draws=_NQ + 2 * ((_NV + 1) // 2),
        )
        super().__init__(
            spec=spec, ctrl_cost_weight=ctrl_cost_weight, reset_noise_scale=reset_noise_scale
        )

    def initial_state(self, uniform: Draws, *, joint_q0: ReferenceQ) -> Joints:
        """The model's pose plus uniform noise, and normal velocity noise."""
        joint_q = joint_q0 + uniform_between(uniform[:, :_NQ], -self._noise, self._noise)
        joint_qd = self._noise * normals(uniform[:, _NQ:], _NV)
        return joint_q, joint_qd

    def reward(
        self,
        state: NewtonState,
        action: Float[Tensor, "num_envs 6"],
        next_state: NewtonState,
        *,
        dt: float,
    ) -> Reward:
        """Forward velocity minus the control cost."""
        # SHAC's HalfCheetah: r = v_x - w_c |a|^2
        return next_state.joint_qd[:, 0] - self._ctrl_weight * (action * action).sum(-1)

    def terminated(self, next_state: NewtonState) -> Done:
        """Never: the cheetah cannot fall into a terminal state."""
        return torch.zeros(
            next_state.joint_q.shape[0], dtype=torch.bool, device=next_state.joint_q.device
        )
