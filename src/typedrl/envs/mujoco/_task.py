"""What a task adds to an MJCF model: reset distribution, observation, reward, termination."""

import abc
from dataclasses import dataclass, field

from jaxtyping import Float
from torch import Tensor

from typedrl._config_fields import check
from typedrl._validation import positive_int
from typedrl.envs._mjcf_task import BaseMjcfTaskSpec, MjcfTask

__all__ = ["MujocoState", "MujocoTask", "MujocoTaskSpec"]

_Draws = Float[Tensor, "num_envs num_draws"]


@dataclass(frozen=True, slots=True)
class MujocoState:
    """The physical state of every row, as the task hooks see it.

    Attributes:
        qpos: Generalised positions, ``[num_envs, nq]``.
        qvel: Generalised velocities, ``[num_envs, nv]``.
        act: Actuator activations, ``[num_envs, na]`` (``na`` is often 0).
    """

    qpos: Float[Tensor, "num_envs nq"]
    qvel: Float[Tensor, "num_envs nv"]
    act: Float[Tensor, "num_envs na"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MujocoTaskSpec(BaseMjcfTaskSpec):
    """The static description of a task: its model and the shape of its observations."""

    frame_skip: int = field(default=1, metadata=check(positive_int))
    """Physics steps per env step; the control interval is ``frame_skip * timestep``."""

    solver_iterations: int = field(default=4, metadata=check(positive_int))
    """Iterations of the constraint solver (and of its line search) per physics step.

    The solver always runs exactly this many (the early exit does not batch), so
    fewer iterations are faster; models with many contacts need more for a
    smooth, accurate step (an ant-like model needs about 16).
    """


class MujocoTask(MjcfTask[MujocoState]):
    """The task hooks of a :class:`~typedrl.envs.mujoco.MujocoVecEnv`, batched over rows.

    ``StateT`` in the hooks' signatures is :class:`MujocoState`.

    A task names its MJCF model in :attr:`spec` and maps the model's state to
    what an agent sees and is paid. Every hook runs on whole batches with plain
    torch ops; :meth:`observe`, :meth:`reward` and :meth:`terminated` are
    called with states that carry the autograd graph, so keep them
    differentiable (smooth, no in-place changes to the inputs).
    :meth:`initial_state` runs without a graph.
    """

    @property
    @abc.abstractmethod
    def spec(self) -> MujocoTaskSpec:
        """The model file, frame skip, solver iterations and observation layout."""

    @abc.abstractmethod
    def initial_state(
        self, uniform: _Draws, *, qpos0: Float[Tensor, " nq"], na: int
    ) -> MujocoState:
        """Map ``spec.num_initial_draws`` uniforms in ``(0, 1]`` per row to initial states.

        Args:
            uniform: ``[num_envs, num_initial_draws]``, a pure function of
                ``(seed, row, episode)``.
            qpos0: The model's reference configuration.
            na: Number of actuator activations.
        """
