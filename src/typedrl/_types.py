"""Internal name of :mod:`typedrl.types`, kept for the package's own imports.

The aliases are defined once, in the public module :mod:`typedrl.types`; this
module only re-exports them. Import them from :mod:`typedrl.types`.
"""

from typedrl.types import (
    Action,
    BatchAction,
    BatchIndices,
    BatchScalar,
    ContinuousAction,
    DiscreteAction,
    Done,
    EnvScalar,
    ObjectiveScale,
    Obs,
    ObsMask,
    ObsVector,
    Reward,
    RolloutFlag,
    RolloutScalar,
    Valid,
)

__all__ = [
    "Action",
    "BatchAction",
    "BatchIndices",
    "BatchScalar",
    "ContinuousAction",
    "DiscreteAction",
    "Done",
    "EnvScalar",
    "ObjectiveScale",
    "Obs",
    "ObsMask",
    "ObsVector",
    "Reward",
    "RolloutFlag",
    "RolloutScalar",
    "Valid",
]
