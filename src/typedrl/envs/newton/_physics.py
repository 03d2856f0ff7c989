"""Newton's articulated-body step as a pure, differentiable torch function.

One env step maps ``(joint_q, joint_qd, joint_f)`` of every world to the next
``(joint_q, joint_qd)``: the contact set is found once (Newton's collision
pipeline), then ``substeps`` Featherstone steps run.
:class:`_NewtonStep` bridges it into torch's autograd through ``wp.Tape``:
its backward copies torch's output gradients *into* the Warp ``.grad``
buffers (never aliasing torch memory, NVIDIA/warp#1732), runs the tapes
backward and clones the input gradients *out* before zeroing the tapes.
Newton's narrow phase is not differentiable, so a contact point is a constant
in its body's frame within an env step; its depth, so the penalty force,
follows the poses differentiably.

The solver overwrites one set of system matrices at every substep, so a tape
recorded in the forward pass would differentiate every substep with the last
substep's matrices (gradients off by about 1 %); the backward pass therefore
recomputes each substep on a tape of its own just before differentiating it.

Every step that may be differentiated holds its own buffers (states, control,
contacts) for as long as its autograd graph lives (a backward pass may run
through it several times, as ``retain_graph=True`` allows); the buffers then
return to a pool, so a window of ``T`` steps allocates ``T`` sets once and
later windows reuse them.
"""

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast, final

import torch
from jaxtyping import Float
from torch import Tensor

if TYPE_CHECKING:
    import newton

__all__ = ["NewtonPhysics", "gear_matrix"]

_Coords = Float[Tensor, " coords"]  # joint_q of every world, flat
_Dofs = Float[Tensor, " dofs"]  # joint_qd or joint_f of every world, flat


@final
@dataclass(slots=True)
class _Workspace:
    """The Warp buffers of one env step.

    ``substeps + 1`` states, the pose the contacts are found at, the control and the
    contacts.
    """

    states: "list[newton.State]"
    pose: "newton.State"
    control: "newton.Control"
    contacts: "newton.Contacts"


@final
class _Lease:
    """A workspace on loan; it goes back to the pool once, when released or collected."""

    __slots__ = ("_free", "_returned", "workspace")

    def __init__(self, workspace: _Workspace, free: list[_Workspace]) -> None:
        self.workspace = workspace
        self._free = free
        self._returned = False

    def release(self) -> None:
        if not self._returned:
            self._returned = True
            self._free.append(self.workspace)

    def __del__(self) -> None:
        self.release()


@final
class NewtonPhysics:
    """A replicated Newton model, its solver and pooled per-step buffers.

    Args:
        model: The finalized model (``requires_grad=True``), one world per row.
        substeps: Solver steps per env step.
        substep_dt: Seconds per solver step.
        device: The torch device of the env (a CUDA device runs Warp on torch's stream).
        newton_module: The imported ``newton`` module.
        warp_module: The imported ``warp`` module.
    """

    def __init__(
        self,
        *,
        model: "newton.Model",
        substeps: int,
        substep_dt: float,
        device: torch.device,
        newton_module: Any,
        warp_module: Any,
    ) -> None:
        self._newton = newton_module
        self._wp = warp_module
        self._model = model
        self._substeps = substeps
        self._dt = substep_dt
        # The joint-space mass matrix H = J^T M J is formed block by block (M is block
        # diagonal: one 6 x 6 spatial inertia per body) by Warp's tile kernel, with its
        # Cholesky factor in the same kernel. Newton's default forms it with a dense
        # (6 bodies) x (6 bodies) product that is 94 % of an Ant step on a CPU; the
        # tile kernel gives the same states and gradients to float32 rounding, about 8
        # times faster on the Ant (docs/guides/differentiable_locomotion.rst). Its
        # gradient of H is the dense path's only because Warp 1.19 has no adjoint for
        # the factorisation's diagonal shift (tile_diag_add), so the gradient reaching
        # the factor stops there, as the dense path's no-op Cholesky adjoint stops it;
        # tests_newton checks the two paths against each other.
        self._solver = newton_module.solvers.SolverFeatherstone(
            model, use_tile_gemm=True, fuse_cholesky=True
        )
        # Newton's narrow phase is not differentiable: the contact points are constants
        # in each body's frame, their depth a differentiable function of the poses.
        self._pipeline = newton_module.CollisionPipeline(model, requires_grad=False)
        self._free: list[_Workspace] = []
        self._allocated = 0
        self._device = device
        self._contact_forces = torch.zeros(model.body_count, 3, device=device)

    @property
    def contact_forces(self) -> Float[Tensor, "bodies 3"]:
        """The contact force on each body (every world's) in the last substep of the last step.

        The linear part of the wrench the penalty contacts put on the body's centre of
        mass, in the world frame (zeros before the first step); detached.
        """
        return self._contact_forces

    @property
    def allocated(self) -> int:
        """Workspaces allocated so far (the longest window of live steps)."""
        return self._allocated

    def step(self, joint_q: _Coords, joint_qd: _Dofs, joint_f: _Dofs) -> tuple[_Coords, _Dofs]:
        """The next ``(joint_q, joint_qd)``; differentiable when an input requires grad."""
        if torch.is_grad_enabled() and (
            joint_q.requires_grad or joint_qd.requires_grad or joint_f.requires_grad
        ):
            q, qd = _NewtonStep.apply(joint_q, joint_qd, joint_f, self)  # type: ignore[no-untyped-call]
            return q, qd
        lease = self.acquire()
        try:
            return self.forward(lease, joint_q, joint_qd, joint_f)
        finally:
            lease.release()

    # ----------------------------------------------------------- used by the bridge

    def forward(
        self, lease: _Lease, joint_q: _Coords, joint_qd: _Dofs, joint_f: _Dofs
    ) -> tuple[_Coords, _Dofs]:
        """Run one env step on the leased buffers."""
        with self._stream():
            return self._forward(lease, joint_q, joint_qd, joint_f)

    def backward(
        self, lease: _Lease, grad_q: _Coords, grad_qd: _Dofs
    ) -> tuple[_Coords, _Dofs, _Dofs]:
        """Gradients of the step's inputs from its outputs' gradients (any number of times)."""
        with self._stream():
            return self._backward(lease, grad_q, grad_qd)

    # ------------------------------------------------------------------ internals

    def _stream(self) -> AbstractContextManager[object]:
        # On CUDA, Warp launches on torch's current stream: no synchronisation needed.
        if self._device.type == "cuda":
            return cast(
                "AbstractContextManager[object]",
                self._wp.ScopedStream(self._wp.stream_from_torch(self._device)),
            )
        return nullcontext()

    def _forward(
        self, lease: _Lease, joint_q: _Coords, joint_qd: _Dofs, joint_f: _Dofs
    ) -> tuple[_Coords, _Dofs]:
        wp = self._wp
        workspace = lease.workspace
        first, last = workspace.states[0], workspace.states[-1]
        wp.copy(first.joint_q, wp.from_torch(joint_q.detach().contiguous()))
        wp.copy(first.joint_qd, wp.from_torch(joint_qd.detach().contiguous()))
        wp.copy(workspace.control.joint_f, wp.from_torch(joint_f.detach().contiguous()))
        self._collide(workspace)
        for k in range(self._substeps):
            self._substep(workspace, k)
        # The solver sums the contacts' wrenches on each body into the output state's
        # external-force buffer (with body_f, cleared, and free joints' forces, none
        # here); its linear part is frame-independent.
        self._contact_forces = wp.to_torch(last.body_f_ext, requires_grad=False)[:, :3].clone()
        return (
            wp.to_torch(last.joint_q, requires_grad=False).clone(),
            wp.to_torch(last.joint_qd, requires_grad=False).clone(),
        )

    def _backward(
        self, lease: _Lease, grad_q: _Coords, grad_qd: _Dofs
    ) -> tuple[_Coords, _Dofs, _Dofs]:
        wp = self._wp
        workspace = lease.workspace
        first, last = workspace.states[0], workspace.states[-1]
        # Copy in: torch owns grad_output and may reuse its memory (NVIDIA/warp#1732).
        wp.copy(last.joint_q.grad, wp.from_torch(grad_q.contiguous()))
        wp.copy(last.joint_qd.grad, wp.from_torch(grad_qd.contiguous()))
        # The solver keeps one set of system matrices (mass matrix, Jacobian, their
        # factorisation) that every substep overwrites: a tape recorded in the forward
        # pass would differentiate every substep with the last values written. Each
        # substep is therefore recomputed on a tape of its own just before its backward
        # pass, in reverse order (checkpointing: one extra forward pass), which makes
        # the gradient of the step exact. The contacts, found before the substeps,
        # stay in this step's own buffers.
        tapes = []
        for k in reversed(range(self._substeps)):
            tape = wp.Tape()
            with tape:
                self._substep(workspace, k)
            tape.backward()
            tapes.append(tape)
        # Clone out before zeroing: zero() clears these very buffers.
        grads = tuple(
            wp.to_torch(array.grad, requires_grad=False).clone()
            for array in (first.joint_q, first.joint_qd, workspace.control.joint_f)
        )
        for tape in tapes:
            tape.zero()
        return grads[0], grads[1], grads[2]

    def acquire(self) -> _Lease:
        """Lend one step's buffers (from the pool, or newly allocated)."""
        if self._free:
            return _Lease(self._free.pop(), self._free)
        model = self._model
        self._allocated += 1
        workspace = _Workspace(
            states=[model.state(requires_grad=True) for _ in range(self._substeps + 1)],
            pose=model.state(requires_grad=True),
            control=model.control(),
            contacts=self._pipeline.contacts(),
        )
        return _Lease(workspace, self._free)

    def _collide(self, workspace: _Workspace) -> None:
        # The contact set of this env step, from the bodies' poses at its start (on a
        # state of its own: the solver rewrites the first state's poses). The penalty
        # forces recompute each contact's depth from the poses at every substep.
        first = workspace.states[0]
        self._newton.eval_fk(self._model, first.joint_q, first.joint_qd, workspace.pose)
        self._pipeline.collide(workspace.pose, workspace.contacts)

    def _substep(self, workspace: _Workspace, k: int) -> None:
        states = workspace.states
        states[k].clear_forces()
        self._solver.step(states[k], states[k + 1], workspace.control, workspace.contacts, self._dt)


@final
class _NewtonStep(torch.autograd.Function):
    """``(joint_q, joint_qd, joint_f) -> (joint_q', joint_qd')`` with a ``wp.Tape`` backward."""

    @staticmethod
    def forward(
        ctx: Any, joint_q: Tensor, joint_qd: Tensor, joint_f: Tensor, physics: NewtonPhysics
    ) -> tuple[Tensor, Tensor]:
        lease = physics.acquire()
        ctx.physics = physics
        ctx.lease = lease
        return physics.forward(lease, joint_q, joint_qd, joint_f)

    @staticmethod
    def backward(ctx: Any, grad_q: Tensor, grad_qd: Tensor) -> tuple[Tensor | None, ...]:
        physics: NewtonPhysics = ctx.physics
        dq, dqd, df = physics.backward(ctx.lease, grad_q, grad_qd)
        return dq, dqd, df, None


def gear_matrix(
    dofs: Sequence[int],
    gear: Sequence[float],
    num_dofs: int,
    *,
    dtype: torch.dtype,
    device: torch.device,
) -> Float[Tensor, "act_dim nv"]:
    """The map from actions to generalised forces: ``joint_f = action @ G``."""
    matrix = torch.zeros(len(dofs), num_dofs, dtype=dtype, device=device)
    for row, (dof, scale) in enumerate(zip(dofs, gear, strict=True)):
        matrix[row, dof] = scale
    return matrix
