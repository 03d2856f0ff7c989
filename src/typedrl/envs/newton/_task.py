"""What a task adds to a model on Newton: physics settings, reset, observation, reward."""

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from jaxtyping import Float
from torch import Tensor

from typedrl._config_fields import check, sequence_of
from typedrl._validation import (
    describe,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)
from typedrl.envs._mjcf_task import BaseMjcfTaskSpec, MjcfTask
from typedrl.errors import ConfigError

__all__ = ["MODEL_FORMATS", "ModelFormat", "NewtonState", "NewtonTask", "NewtonTaskSpec"]

ModelFormat = Literal["mjcf", "urdf", "usd"]
"""The model formats Newton's builder reads (``add_mjcf``, ``add_urdf``, ``add_usd``)."""

MODEL_FORMATS: Mapping[str, ModelFormat] = MappingProxyType(
    {
        ".xml": "mjcf",
        ".mjcf": "mjcf",
        ".urdf": "urdf",
        ".usd": "usd",
        ".usda": "usd",
        ".usdc": "usd",
        ".usdz": "usd",
    }
)
"""The model file's suffix (lower case) to its format."""

Draws = Float[Tensor, "num_envs num_draws"]
"""The uniforms in ``(0, 1]`` that :meth:`NewtonTask.initial_state` maps, per row."""
ReferenceQ = Float[Tensor, " nq"]
"""The model's reference coordinates (``joint_q`` of one world as the model file places it)."""
Joints = tuple[Float[Tensor, "num_envs nq"], Float[Tensor, "num_envs nv"]]
"""``(joint_q, joint_qd)`` of every row."""


def _one_or_per_dof(owner: str, name: str, value: object) -> float | tuple[float, ...]:
    """A float >= 0, or a list or tuple of them (one per actuated dof)."""
    if isinstance(value, list | tuple):
        return tuple(
            non_negative_float(owner, f"{name}[{i}]", item) for i, item in enumerate(value)
        )
    return non_negative_float(owner, name, value)


def _keywords(owner: str, name: str, value: object) -> Mapping[str, object]:
    """A mapping of keyword names to values, as a read-only copy.

    The copy keeps the caller's dict from changing the frozen spec or the model it builds.
    """
    if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
        raise ConfigError(
            f"{owner}.{name} must be a mapping of keyword names to values, got {describe(value)}"
        )
    return MappingProxyType(dict(value))


_NON_NEGATIVE = check(non_negative_float)


@dataclass(frozen=True, slots=True)
class NewtonState:
    """The state of every row, as the task hooks see it.

    Attributes:
        joint_q: Generalised coordinates of one world, ``[num_envs, nq]`` (a
            free joint contributes its position and its quaternion ``x, y, z, w``).
        joint_qd: Generalised velocities, ``[num_envs, nv]`` (a free joint
            contributes its linear then its angular velocity, in the world frame).
        action: The action applied on the step that led here (zeros at the
            start of an episode), ``[num_envs, act_dim]``.
    """

    joint_q: Float[Tensor, "num_envs nq"]
    joint_qd: Float[Tensor, "num_envs nv"]
    action: Float[Tensor, "num_envs act_dim"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NewtonTaskSpec(BaseMjcfTaskSpec):
    """The static description of a task: its model, its physics settings, its observations.

    :attr:`model_path` is an MJCF (``.xml``, ``.mjcf``), URDF (``.urdf``) or
    USD (``.usd``, ``.usda``, ``.usdc``, ``.usdz``) file, read by Newton's
    builder (``add_mjcf``, ``add_urdf``, ``add_usd``); USD needs the
    ``newton-usd`` extra (``usd-core`` and ``newton-usd-schemas``).
    """

    actuated_dofs: tuple[int, ...] = field(
        metadata=check(sequence_of(non_negative_int, expected="a tuple of dof indices"))
    )
    """The generalised velocities (indices into ``joint_qd`` of one world) the actions drive."""

    gear: tuple[float, ...] = field(
        metadata=check(sequence_of(positive_float, expected="a tuple of floats > 0"))
    )
    """Generalised force per unit of action, one per actuated dof (``joint_f = gear * a``)."""

    substeps: int = field(default=16, metadata=check(positive_int))
    """Featherstone steps per env step."""

    substep_dt: float = field(default=1.0 / 960.0, metadata=check(positive_float))
    """Seconds per Featherstone step; the control interval is ``substeps * substep_dt``."""

    contact_ke: float = field(default=4.0e4, metadata=_NON_NEGATIVE)
    """Penalty contact stiffness (N/m) of every shape and of the ground."""

    contact_kd: float = field(default=1.0e4, metadata=_NON_NEGATIVE)
    """Penalty contact damping (N s/m)."""

    contact_kf: float = field(default=3.0e3, metadata=_NON_NEGATIVE)
    """Friction stiffness: the slope of the friction force at low sliding speed."""

    contact_mu: float = field(default=0.75, metadata=_NON_NEGATIVE)
    """Coulomb friction coefficient."""

    contact_gap: float = field(default=0.1, metadata=_NON_NEGATIVE)
    """Distance (m) within which a shape pair enters an env step's contact set.

    The set is found once per env step; a pair in it pushes only while it
    penetrates. A gap wider than a body moves in one env step keeps contacts
    that start within the step, and makes the set (so the step) change only
    where the contact force is zero.
    """

    joint_damping: float | tuple[float, ...] = field(default=1.0, metadata=check(_one_or_per_dof))
    """Viscous damping of the actuated joints (N m s/rad): one value, or one per actuated dof."""

    joint_stiffness: float | tuple[float, ...] = field(default=0.0, metadata=check(_one_or_per_dof))
    """Passive springs of the actuated joints toward angle 0 (N m/rad): one, or one per dof."""

    joint_limit_ke: float = field(default=1.0e3, metadata=_NON_NEGATIVE)
    """Stiffness of the joint-limit springs."""

    joint_limit_kd: float = field(default=10.0, metadata=_NON_NEGATIVE)
    """Damping of the joint-limit springs."""

    ground: bool = True
    """Whether every world stands on a shared ground plane (its contact material is the
    task's). A fixed-base model that hangs in space (an arm, a cart on a rail) may set
    ``False``: placed at the origin, such a model would otherwise intersect the ground."""

    importer_options: Mapping[str, object] = field(
        default_factory=lambda: MappingProxyType({}), hash=False, metadata=check(_keywords)
    )
    """Keyword arguments for Newton's importer of the model's format, e.g.
    ``{"floating": True}`` for a URDF robot with a free base (a URDF's base is
    fixed by default; an MJCF or USD model says so itself). typedrl passes
    ``enable_self_collisions=False`` unless this mapping sets it."""

    def _check_rules(self, owner: str) -> None:
        BaseMjcfTaskSpec._check_rules(self, owner)
        if self.model_path.suffix.lower() not in MODEL_FORMATS:
            raise ConfigError(
                f"{owner}.model_path must end in one of {', '.join(MODEL_FORMATS)} "
                f"(MJCF, URDF or USD), got {str(self.model_path)!r}"
            )
        dofs = self.actuated_dofs
        if not dofs or len(set(dofs)) != len(dofs):
            raise ConfigError(f"{owner}.actuated_dofs must name distinct dofs, got {dofs}")
        for name in ("gear", "joint_damping", "joint_stiffness"):
            value = getattr(self, name)
            if (name == "gear" or isinstance(value, tuple)) and len(value) != len(dofs):
                raise ConfigError(
                    f"{owner}.{name} must hold one value per actuated dof ({len(dofs)}), "
                    f"got {describe(value)}"
                )

    def per_dof(self, name: str) -> tuple[float, ...]:
        """``joint_damping`` or ``joint_stiffness``, one value per actuated dof."""
        value = getattr(self, name)
        return value if isinstance(value, tuple) else (value,) * len(self.actuated_dofs)

    @property
    def model_format(self) -> ModelFormat:
        """The model file's format, from its suffix."""
        return MODEL_FORMATS[self.model_path.suffix.lower()]

    @property
    def control_dt(self) -> float:
        """Seconds of simulated time per env step."""
        return self.substeps * self.substep_dt


class NewtonTask(MjcfTask[NewtonState]):
    """The task hooks of a :class:`~typedrl.envs.newton.NewtonVecEnv`, batched over rows.

    ``StateT`` in the hooks' signatures is :class:`NewtonState`.

    A task names its MJCF model and physics settings in :attr:`spec` and maps
    the model's state to what an agent sees and is paid. Every hook runs on
    whole batches with plain torch ops; :meth:`observe`, :meth:`reward` and
    :meth:`terminated` are called with states that carry the autograd graph,
    so keep them differentiable (smooth, no in-place changes to the inputs).
    :meth:`initial_state` runs without a graph.
    """

    @property
    @abc.abstractmethod
    def spec(self) -> NewtonTaskSpec:
        """The model file, physics settings and observation layout."""

    @abc.abstractmethod
    def initial_state(self, uniform: Draws, *, joint_q0: ReferenceQ) -> Joints:
        """Map ``spec.num_initial_draws`` uniforms in ``(0, 1]`` per row to ``(joint_q, joint_qd)``.

        Args:
            uniform: ``[num_envs, num_initial_draws]``, a pure function of
                ``(seed, row, episode)``.
            joint_q0: The model's reference coordinates (as the model file places it).
        """
