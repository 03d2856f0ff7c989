"""The base of the SHAC paper's planar tasks on Newton (HalfCheetah, Hopper)."""

import torch

from typedrl._validation import non_negative_float
from typedrl.envs.newton._task import NewtonState, NewtonTask, NewtonTaskSpec
from typedrl.types import ObsVector

__all__ = ["BasePlanarTask"]


class BasePlanarTask(NewtonTask):
    """A planar model (root ``x``, ``z``, pitch, then hinges) scored on forward speed.

    The observation is ``joint_q`` without the root's ``x``, then ``joint_qd``
    (as in SHAC and Gymnasium); the reward pays a squared-action cost weighted
    by ``ctrl_cost_weight``, and the reset draws noise of scale
    ``reset_noise_scale``. A task implements its reset, reward and termination.

    Args:
        spec: The model, its physics settings and its observation layout.
        ctrl_cost_weight: Weight of the squared action.
        reset_noise_scale: Scale of the initial-state noise.
    """

    def __init__(
        self, *, spec: NewtonTaskSpec, ctrl_cost_weight: float, reset_noise_scale: float
    ) -> None:
        owner = type(self).__name__
        self._ctrl_weight = non_negative_float(owner, "ctrl_cost_weight", ctrl_cost_weight)
        self._noise = non_negative_float(owner, "reset_noise_scale", reset_noise_scale)
        self._spec = spec

    @property
    def spec(self) -> NewtonTaskSpec:
        """The shipped model, DiffRL's timing, ``nq - 1 + nv`` observation features."""
        return self._spec

    def observe(self, state: NewtonState) -> ObsVector:
        """``joint_q[1:]`` then ``joint_qd``."""
        return torch.cat((state.joint_q[:, 1:], state.joint_qd), dim=-1)
