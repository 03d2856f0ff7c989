"""A differentiable vector env over any MJCF model, stepped by ``mujoco-torch``."""

from typing import TYPE_CHECKING, Final, Unpack, final

import torch
from jaxtyping import Float
from torch import Tensor

from typedrl._optional import require_extra
from typedrl._validation import positive_int
from typedrl.envs._mjcf_env import BaseMjcfVecEnv
from typedrl.envs.builtin._base import EnvOptions
from typedrl.envs.mujoco._dependency import EXTRA
from typedrl.envs.mujoco._task import MujocoState, MujocoTask
from typedrl.errors import ConfigError
from typedrl.types import ContinuousAction

if TYPE_CHECKING:
    import mujoco_torch

__all__ = ["MujocoVecEnv"]

# [qpos | qvel | act | qacc_warmstart] per row.
_State = Float[Tensor, "num_envs state_dim"]


@final
class MujocoVecEnv(BaseMjcfVecEnv[MujocoTask, MujocoState]):
    """A batched, differentiable env: an MJCF model stepped with torch ops, and a task.

    ``mujoco-torch`` (MuJoCo's MJX physics ported to PyTorch) computes each
    physics step with plain torch operations, so autograd differentiates
    through the physics: the reward and the next observation have gradients
    with respect to the action and to the earlier state. The rows are batched
    with :func:`torch.vmap`; the constraint solver runs a fixed number of
    iterations (``solver_iterations``; the early-exit loop does not batch). An env
    step runs ``frame_skip`` physics steps, so ``control_dt`` is
    ``frame_skip * timestep``.

    Everything else is :class:`~typedrl.envs.BaseTorchVecEnv`: observations
    ``{"obs": [num_envs, obs_dim]}``, Box actions (the actuators' control
    ranges, which must be symmetric) clipped to their bounds, termination by
    the task and truncation at ``max_episode_steps``, same-step autoreset with
    exact ``final_obs`` (the rows that ended restart graph-free; the others
    keep their graph untouched),
    :meth:`~typedrl.envs.BaseTorchVecEnv.detach_state`, per-row seeding and
    :meth:`~typedrl.envs.BaseTorchVecEnv.state_dict` for exact resumes.

    The state of a row is its ``qpos``, ``qvel``, actuator activations and the
    solver's warm start (so a restored env continues bit for bit). Applied
    forces, mocap bodies and the simulation clock are not part of it: models
    whose dynamics depend on them are not supported.

    Args:
        task: The model and its task hooks.
        num_envs: Number of rows.
        solver_iterations: Constraint-solver iterations per physics step;
            ``None`` takes the task's.
        **options: :class:`~typedrl.envs.EnvOptions`; the time limit is the
            task's unless ``max_episode_steps`` says otherwise, clipping keeps
            actions in the actuators' control ranges, and the physics runs in
            ``dtype`` on ``device``.

    Raises:
        MissingDependencyError: If ``mujoco`` or ``mujoco-torch`` is not installed.
        ConfigError: For an invalid option or a model the env cannot drive.

    Example:
        >>> import torch
        >>> from typedrl.envs.mujoco import CartPoleSwingUpTask, MujocoVecEnv
        >>> env = MujocoVecEnv(task=CartPoleSwingUpTask(), num_envs=2, dtype="float64")
        >>> obs, _ = env.reset(seed=0)
        >>> obs["obs"].shape
        torch.Size([2, 5])
        >>> action = torch.zeros(2, 1, dtype=torch.float64, requires_grad=True)
        >>> env.step(action).reward.sum().backward()
        >>> action.grad is not None
        True
    """

    def __init__(
        self,
        *,
        task: MujocoTask,
        num_envs: int,
        solver_iterations: int | None = None,
        **options: Unpack[EnvOptions],
    ) -> None:
        owner = type(self).__name__
        spec = task.spec
        iterations = spec.solver_iterations if solver_iterations is None else solver_iterations
        positive_int(owner, "solver_iterations", iterations)
        require_extra("mujoco", extra=EXTRA, where=owner)
        require_extra("mujoco_torch", extra=EXTRA, where=owner)
        # Imported here: typedrl.envs.mujoco imports without the extra installed.
        import mujoco  # noqa: PLC0415
        import mujoco_torch  # noqa: PLC0415

        try:
            model = mujoco.MjModel.from_xml_path(str(spec.model_path))
        except ValueError as err:
            raise ConfigError(
                f"{owner}: cannot load the MJCF file {str(spec.model_path)!r}: {err}"
            ) from err
        if model.nu == 0:
            raise ConfigError(f"{owner}: the model {str(spec.model_path)!r} has no actuators")
        low, high = model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1]
        if not (model.actuator_ctrllimited.all() and (low == -high).all() and (high > 0).all()):
            raise ConfigError(
                f"{owner}: every actuator of {str(spec.model_path)!r} needs a symmetric "
                "control range (-h, h) with h > 0, got "
                f"ctrlrange={model.actuator_ctrlrange.tolist()}"
            )
        model.opt.iterations = iterations
        model.opt.ls_iterations = iterations
        super().__init__(
            task=task,
            control_dt=float(model.opt.timestep) * spec.frame_skip,
            action_high=tuple(float(h) for h in high),
            num_envs=num_envs,
            **options,
        )
        self._frame_skip = spec.frame_skip
        self.solver_iterations: Final = iterations
        """Constraint-solver iterations per physics step."""
        self._nq, self._nv, self._na = model.nq, model.nv, model.na
        float_dtype = self.dtype
        try:
            physics = mujoco_torch.device_put(model, dtype=float_dtype).to(self.device)
        except NotImplementedError as err:
            raise ConfigError(
                f"{owner}: the model {str(spec.model_path)!r} uses a feature that mujoco-torch "
                f"does not implement: {err}"
            ) from err
        self._qpos0 = torch.as_tensor(model.qpos0, dtype=float_dtype, device=self.device)

        def cast(x: Tensor) -> Tensor:
            return x.to(float_dtype) if x.is_floating_point() else x

        # One batched Data whose fields the step replaces: each step recomputes every
        # derived quantity from qpos, qvel, act, ctrl and the warm start.
        self._template: mujoco_torch.Data = (
            mujoco_torch.make_data(physics).apply(cast).expand(num_envs).clone().to(self.device)
        )

        def physics_step(data: "mujoco_torch.Data") -> "mujoco_torch.Data":
            return mujoco_torch.step(physics, data, fixed_iterations=True)

        self._batched_step = torch.vmap(physics_step)

    # ------------------------------------------------------------------ hooks

    def _initial_state(self, uniform: Float[Tensor, "num_envs num_draws"]) -> _State:
        state = self.task.initial_state(uniform, qpos0=self._qpos0, na=self._na)
        warm_start = state.qvel.new_zeros(state.qvel.shape)
        return torch.cat((state.qpos, state.qvel, state.act, warm_start), dim=-1)

    def _dynamics(self, state: _State, action: ContinuousAction) -> _State:
        qpos, qvel, act, warm_start = self._split(state)
        data = self._template.replace(
            qpos=qpos, qvel=qvel, act=act, qacc_warmstart=warm_start, ctrl=action
        )
        for _ in range(self._frame_skip):
            data = self._batched_step(data)
        return torch.cat((data.qpos, data.qvel, data.act, data.qacc_warmstart), dim=-1)

    # --------------------------------------------------------------- helpers

    def _split(self, state: _State) -> tuple[Tensor, ...]:
        return tuple(torch.split(state, [self._nq, self._nv, self._na, self._nv], dim=-1))

    def _view(self, state: _State) -> MujocoState:
        qpos, qvel, act, _ = self._split(state)
        return MujocoState(qpos=qpos, qvel=qvel, act=act)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(task={type(self.task).__name__}, num_envs={self.num_envs}, "
            f"device={self.device}, dtype={self.dtype}, "
            f"max_episode_steps={self.max_episode_steps}, "
            f"solver_iterations={self.solver_iterations})"
        )
