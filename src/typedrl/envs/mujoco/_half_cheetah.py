"""HalfCheetah: Gymnasium's ``HalfCheetah-v5`` task on its own MJCF model."""

import math
from importlib import resources
from pathlib import Path
from typing import final

import torch
from jaxtyping import Float
from torch import Tensor

from typedrl._validation import non_negative_float
from typedrl.envs.builtin._math import uniform_between
from typedrl.envs.mujoco._sampling import normals
from typedrl.envs.mujoco._task import MujocoState, MujocoTask, MujocoTaskSpec
from typedrl.types import Done, ObsVector, Reward

__all__ = ["HalfCheetahTask", "half_cheetah_xml"]

_NQ = 9
_NV = 9


def half_cheetah_xml() -> Path:
    """The ``half_cheetah.xml`` that Gymnasium ships with its MuJoCo envs."""
    return Path(
        str(resources.files("gymnasium") / "envs" / "mujoco" / "assets" / "half_cheetah.xml")
    )


@final
class HalfCheetahTask(MujocoTask):
    """Run forward: the task of Gymnasium's ``HalfCheetah-v5``, on the same model.

    The model is Gymnasium's ``half_cheetah.xml`` (timestep 0.01 s), five
    physics steps per env step (``dt = 0.05`` s), as in Gymnasium. The feet
    touch the floor through contacts, solved with ``solver_iterations`` fixed
    iterations (4 by default).

    - action: ``Box(-1, 1, (6,))``, the six joint motors' controls;
    - initial state: ``qpos = qpos0 + U(-c, c)``, ``qvel = c * N(0, 1)`` with
      ``c = reset_noise_scale``;
    - reward: ``forward_reward_weight * (x' - x) / dt - ctrl_cost_weight * |a|^2``,
      where ``x`` is the torso's position (``qpos[0]``);
    - no termination; time limit 1000 steps;
    - observation: ``qpos[1:]`` and ``qvel`` (17 features; the torso's ``x`` is
      left out, as in Gymnasium's default).

    Args:
        forward_reward_weight: Weight of the forward velocity.
        ctrl_cost_weight: Weight of the squared action.
        reset_noise_scale: Scale ``c`` of the initial-state noise.
    """

    def __init__(
        self,
        *,
        forward_reward_weight: float = 1.0,
        ctrl_cost_weight: float = 0.1,
        reset_noise_scale: float = 0.1,
    ) -> None:
        owner = type(self).__name__
        self._forward_weight = non_negative_float(
            owner, "forward_reward_weight", forward_reward_weight
        )
        self._ctrl_weight = non_negative_float(owner, "ctrl_cost_weight", ctrl_cost_weight)
        self._noise = non_negative_float(owner, "reset_noise_scale", reset_noise_scale)
        self._spec = MujocoTaskSpec(
            model_path=half_cheetah_xml(),
            frame_skip=5,
            max_episode_steps=1000,
            observation_high=(math.inf,) * (_NQ - 1 + _NV),
            observation_normalize_mask=(True,) * (_NQ - 1 + _NV),
            # qpos noise, then the uniforms of the Box-Muller pairs of the qvel noise.
            num_initial_draws=_NQ + 2 * ((_NV + 1) // 2),
        )

    @property
    def spec(self) -> MujocoTaskSpec:
        """Gymnasium's model, frame skip 5, 17 observation features."""
        return self._spec

    def initial_state(
        self, uniform: Float[Tensor, "num_envs num_draws"], *, qpos0: Float[Tensor, " nq"], na: int
    ) -> MujocoState:
        """``qpos0`` plus uniform noise, and normal velocity noise."""
        qpos = qpos0 + uniform_between(uniform[:, :_NQ], -self._noise, self._noise)
        qvel = self._noise * normals(uniform[:, _NQ:], _NV)
        return MujocoState(qpos=qpos, qvel=qvel, act=qpos[:, :0])

    def observe(self, state: MujocoState) -> ObsVector:
        """``qpos[1:]`` then ``qvel``."""
        return torch.cat((state.qpos[:, 1:], state.qvel), dim=-1)

    def reward(
        self,
        state: MujocoState,
        action: Float[Tensor, "num_envs 6"],
        next_state: MujocoState,
        *,
        dt: float,
    ) -> Reward:
        """Forward velocity minus the control cost."""
        # r = w_f (x' - x) / dt - w_c |a|^2
        velocity = (next_state.qpos[:, 0] - state.qpos[:, 0]) / dt
        return self._forward_weight * velocity - self._ctrl_weight * (action * action).sum(-1)

    def terminated(self, next_state: MujocoState) -> Done:
        """Never: the cheetah cannot fall over into a terminal state."""
        return torch.zeros(
            next_state.qpos.shape[0], dtype=torch.bool, device=next_state.qpos.device
        )
