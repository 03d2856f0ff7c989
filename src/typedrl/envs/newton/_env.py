"""A differentiable vector env over a model file, stepped by Newton's Featherstone solver."""

import inspect
from typing import Any, Unpack, final

import torch
from jaxtyping import Float
from torch import Tensor

from typedrl._optional import require_extra
from typedrl._validation import describe
from typedrl.envs._factory import accepts
from typedrl.envs._mjcf_env import BaseMjcfVecEnv
from typedrl.envs.builtin._base import EnvOptions
from typedrl.envs.newton._dependency import EXTRA, USD_EXTRA
from typedrl.envs.newton._physics import NewtonPhysics, gear_matrix
from typedrl.envs.newton._task import NewtonState, NewtonTask
from typedrl.errors import ConfigError, MissingDependencyError
from typedrl.types import ContinuousAction, EnvScalar

__all__ = ["NewtonVecEnv"]

# [joint_q | joint_qd | last action] per row.
_State = Float[Tensor, "num_envs state_dim"]


@final
class NewtonVecEnv(BaseMjcfVecEnv[NewtonTask, NewtonState]):
    """A batched, differentiable env: a robot model on Newton's Featherstone solver, and a task.

    The model (the task's MJCF, URDF or USD file) is read with Newton's
    importer for its format and replicated into one world per row; worlds
    never collide with each other, and every world touches one shared ground
    plane (unless the task's ``ground`` is off). An env step applies the
    actions as generalised forces (``joint_f = gear * action`` on the task's
    actuated dofs), finds the contacts once, then runs ``substeps`` steps of
    ``SolverFeatherstone`` (reduced coordinates, semi-implicit Euler) with
    penalty contacts whose depth is recomputed at every substep (so
    ``control_dt`` is ``substeps * substep_dt``). Warp's tape differentiates the whole step,
    bridged into torch's autograd, so the reward and the next observation have
    gradients with respect to the action and to the earlier state, contacts
    included (the contact set and normals are held fixed within an env step).

    Everything else is :class:`~typedrl.envs.BaseTorchVecEnv`: observations
    ``{"obs": [num_envs, obs_dim]}``, ``Box(-1, 1)`` actions clipped to their
    bounds, termination by the task and truncation at ``max_episode_steps``,
    same-step autoreset with exact ``final_obs`` (rows that end restart
    graph-free, the others keep their graph), per-row seeding,
    :meth:`~typedrl.envs.BaseTorchVecEnv.detach_state` and ``state_dict``.
    The state of a row is its ``joint_q``, ``joint_qd`` and last action.

    It reports its contacts (:class:`~typedrl.protocols.SupportsContactForces`,
    which AHAC's horizon reads): :meth:`contact_force_norm` is the norm of every
    contact force on the row's bodies in the last substep of the last step.

    The physics runs in float32 only (Warp's Newton kernels are float32).
    Each step that may be differentiated keeps its Warp buffers for as long
    as its autograd graph lives, then returns them to a pool: memory grows
    with the number of live steps (a window), not with training time.

    Args:
        task: The model and its task hooks.
        num_envs: Number of rows (worlds).
        **options: :class:`~typedrl.envs.EnvOptions`; the time limit is the
            task's unless ``max_episode_steps`` says otherwise, ``dtype`` must
            be ``"float32"`` (the only precision Newton's kernels run in), and
            the physics runs on ``device``.

    Raises:
        MissingDependencyError: If ``newton`` (or ``warp``) is not installed,
            or ``usd-core`` for a USD model (the ``newton-usd`` extra).
        ConfigError: For an invalid option (float64 included), a model file
            Newton cannot read, an importer option its importer does not take,
            or a model the env cannot drive.
    """

    def __init__(
        self,
        *,
        task: NewtonTask,
        num_envs: int,
        **options: Unpack[EnvOptions],
    ) -> None:
        owner = type(self).__name__
        if not isinstance(task, NewtonTask):
            raise ConfigError(f"{owner}.task must be a NewtonTask, got {describe(task)}")
        dtype = options.get("dtype", "float32")
        if dtype != "float32":
            raise ConfigError(
                f"{owner}.dtype must be 'float32' (Newton's kernels run in float32 only), "
                f"got {describe(dtype)}"
            )
        spec = task.spec
        super().__init__(
            task=task,
            control_dt=spec.control_dt,
            action_high=(1.0,) * len(spec.actuated_dofs),
            num_envs=num_envs,
            **options,
        )
        newton = require_extra("newton", extra=EXTRA, where=owner)
        wp = require_extra("warp", extra=EXTRA, where=owner)
        wp.init()  # idempotent; device lookups need it
        model = _build_model(owner, task, num_envs, newton, _warp_device(wp, self.device))
        self._nq = model.joint_coord_count // num_envs
        self._nv = model.joint_dof_count // num_envs
        self._act_dim = len(spec.actuated_dofs)
        self._joint_q0 = torch.as_tensor(
            model.joint_q.numpy()[: self._nq], dtype=torch.float32, device=self.device
        )
        self._gear = gear_matrix(
            spec.actuated_dofs, spec.gear, self._nv, dtype=torch.float32, device=self.device
        )
        self._physics = NewtonPhysics(
            model=model,
            substeps=spec.substeps,
            substep_dt=spec.substep_dt,
            device=self.device,
            newton_module=newton,
            warp_module=wp,
        )

    # ------------------------------------------------------------- properties

    def contact_force_norm(self) -> EnvScalar:
        """``||F||`` per row, in newtons: the contact forces on its bodies in the last substep.

        The Frobenius norm of the ``[bodies, 3]`` linear contact forces (world frame)
        the penalty contacts put on each body's centre of mass in the last substep of
        the last step; a row reset in that step reports the step that ended its
        episode. Zeros before the first step; detached.
        """
        forces = self._physics.contact_forces.view(self.num_envs, -1)
        norms: Tensor = torch.linalg.vector_norm(forces, dim=1)
        return norms

    @property
    def allocated_step_buffers(self) -> int:
        """Sets of per-step Warp buffers allocated so far (the most steps alive at once)."""
        return self._physics.allocated

    # ------------------------------------------------------------------ hooks

    def _initial_state(self, uniform: Float[Tensor, "num_envs num_draws"]) -> _State:
        joint_q, joint_qd = self.task.initial_state(uniform, joint_q0=self._joint_q0)
        action = joint_qd.new_zeros(joint_qd.shape[0], self._act_dim)
        return torch.cat((joint_q, joint_qd, action), dim=-1)

    def _dynamics(self, state: _State, action: ContinuousAction) -> _State:
        joint_q, joint_qd, _ = self._split(state)
        joint_f = action @ self._gear
        next_q, next_qd = self._physics.step(
            joint_q.reshape(-1), joint_qd.reshape(-1), joint_f.reshape(-1)
        )
        return torch.cat(
            (next_q.view(self.num_envs, self._nq), next_qd.view(self.num_envs, self._nv), action),
            dim=-1,
        )

    # --------------------------------------------------------------- helpers

    def _split(self, state: _State) -> tuple[Tensor, ...]:
        return tuple(torch.split(state, [self._nq, self._nv, self._act_dim], dim=-1))

    def _view(self, state: _State) -> NewtonState:
        joint_q, joint_qd, action = self._split(state)
        return NewtonState(joint_q=joint_q, joint_qd=joint_qd, action=action)

    def __repr__(self) -> str:
        spec = self.task.spec
        return (
            f"{type(self).__name__}(task={type(self.task).__name__}, num_envs={self.num_envs}, "
            f"device={self.device}, max_episode_steps={self.max_episode_steps}, "
            f"substeps={spec.substeps}, substep_dt={spec.substep_dt:.6g})"
        )


def _warp_device(wp: Any, device: torch.device) -> Any:
    """Warp's device for a torch device; plain ``"cuda"`` is torch's current CUDA device.

    ``wp.device_from_torch`` looks a CUDA device up by its index, which ``"cuda"`` lacks.
    """
    index: int | None = device.index  # None for plain "cuda" (torch's stubs say int)
    if device.type == "cuda" and index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return wp.device_from_torch(device)


_IMPORT_ERRORS = (ValueError, KeyError, OSError, RuntimeError, SyntaxError)
"""What Newton's importers raise on a file they cannot read (XML's ParseError is a
SyntaxError, pxr's errors are RuntimeErrors)."""

_IMPORTER_DEPENDENCIES = "newton[importers]"
"""Newton's own extra with what its importers load on demand (meshes, package URIs)."""


def _build_model(owner: str, task: NewtonTask, num_envs: int, newton: Any, device: Any) -> Any:
    """One world per row from the task's model file, the ground, the task's materials."""
    spec = task.spec
    kind, path = spec.model_format, str(spec.model_path)
    if kind == "usd":
        for module in ("pxr", "newton_usd_schemas"):
            require_extra(module, extra=USD_EXTRA, where=f"{owner} (the USD model {path!r})")
    robot = newton.ModelBuilder()
    importer = {"mjcf": robot.add_mjcf, "urdf": robot.add_urdf, "usd": robot.add_usd}[kind]
    options = {"enable_self_collisions": False, **spec.importer_options}
    unknown = sorted(name for name in options if name == "source" or not accepts(importer, name))
    if unknown:
        takes = [name for name in inspect.signature(importer).parameters if name != "source"]
        raise ConfigError(
            f"{owner}: Newton's add_{kind} takes no {', '.join(map(repr, unknown))} "
            f"(importer_options of {type(spec).__name__}); it takes {', '.join(takes)}"
        )
    given = f" with importer_options {dict(spec.importer_options)}" if spec.importer_options else ""
    try:
        importer(path, **options)
    except ImportError as err:
        # Meshes and package:// URIs make Newton import what its own extra installs.
        raise MissingDependencyError(
            f"{owner}: Newton's add_{kind} needs a package to load {path!r} that is not "
            f"installed ({err}); install Newton's importer dependencies: "
            f"pip install '{_IMPORTER_DEPENDENCIES}'"
        ) from err
    except _IMPORT_ERRORS as err:
        raise ConfigError(
            f"{owner}: cannot load the {kind.upper()} file {path!r}{given}: "
            f"{type(err).__name__}: {err}"
        ) from err
    num_dofs = robot.joint_dof_count
    if max(spec.actuated_dofs) >= num_dofs:
        raise ConfigError(
            f"{owner}: actuated_dofs {spec.actuated_dofs} must index the model's "
            f"{num_dofs} generalised velocities ({str(spec.model_path)!r})"
        )
    damping, stiffness = spec.per_dof("joint_damping"), spec.per_dof("joint_stiffness")
    for dof, kd, ke in zip(spec.actuated_dofs, damping, stiffness, strict=True):
        # A drive toward the zero target: a passive spring (ke) and damper (kd).
        robot.joint_target_kd[dof] = kd
        robot.joint_target_ke[dof] = ke
        robot.joint_limit_ke[dof] = spec.joint_limit_ke
        robot.joint_limit_kd[dof] = spec.joint_limit_kd
    scene = newton.ModelBuilder()
    scene.replicate(robot, num_envs)
    if spec.ground:
        scene.add_ground_plane()
    for shape in range(scene.shape_count):
        scene.shape_gap[shape] = spec.contact_gap
        scene.shape_material_ke[shape] = spec.contact_ke
        scene.shape_material_kd[shape] = spec.contact_kd
        scene.shape_material_kf[shape] = spec.contact_kf
        scene.shape_material_mu[shape] = spec.contact_mu
    return scene.finalize(device=device, requires_grad=True)
