"""Analytic policy gradients: train a policy by backpropagating through a differentiable env.

- :class:`DifferentiableCollector` steps a
  :class:`~typedrl.protocols.DifferentiableVecEnv` with a
  :class:`~typedrl.protocols.DifferentiablePolicy`, keeping the graph, into a
  :class:`DifferentiableRollout`; :class:`ActionAdjointClipper` bounds the
  gradient that flows back through each row's action.
- :class:`APG` (with :class:`APGConfig`) turns rollouts into optimizer updates:
  truncated segments or complete rollouts, one gradient all-reduce per update.
- SHAC, the short-horizon actor-critic, lives in :mod:`typedrl.shac` (its
  :class:`~typedrl.shac.SHACConfig` and :class:`~typedrl.shac.SHAC` are
  re-exported here): short windows ended by a learned target critic's value,
  on the same trainer and collector as APG.
- :class:`DifferentiableTrainer` (with :class:`DifferentiableTrainerConfig`) runs
  it all on the shared trainer core (:mod:`typedrl.training`): budgets,
  evaluation, checkpoints, exact resume, DDP.
"""

from typing import TYPE_CHECKING

from typedrl._lazy import lazy_exports

# Submodules load on first use: reading the configs (the command does, to parse a
# config) imports neither torch nor Lightning.
if TYPE_CHECKING:
    from typedrl.apg._adjoint import ADJOINT_METRICS as ADJOINT_METRICS
    from typedrl.apg._adjoint import ActionAdjointClipper as ActionAdjointClipper
    from typedrl.apg._algorithm import APG as APG
    from typedrl.apg._algorithm import AlgorithmState as AlgorithmState
    from typedrl.apg._algorithm import DifferentiableAlgorithm as DifferentiableAlgorithm
    from typedrl.apg._algorithm import UpdateData as UpdateData
    from typedrl.apg._collector import DifferentiableCollector as DifferentiableCollector
    from typedrl.apg._collector import DifferentiableRollout as DifferentiableRollout
    from typedrl.apg._collector import first_done_mask as first_done_mask
    from typedrl.apg._config import APGConfig as APGConfig
    from typedrl.apg._trainer import DifferentiableTrainer as DifferentiableTrainer
    from typedrl.apg._trainer_config import (
        DifferentiableTrainerConfig as DifferentiableTrainerConfig,
    )
    from typedrl.shac._algorithm import SHAC as SHAC
    from typedrl.shac._config import SHACConfig as SHACConfig
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "ADJOINT_METRICS": "typedrl.apg._adjoint",
            "ActionAdjointClipper": "typedrl.apg._adjoint",
            "APG": "typedrl.apg._algorithm",
            "AlgorithmState": "typedrl.apg._algorithm",
            "DifferentiableAlgorithm": "typedrl.apg._algorithm",
            "UpdateData": "typedrl.apg._algorithm",
            "DifferentiableCollector": "typedrl.apg._collector",
            "APGConfig": "typedrl.apg._config",
            "DifferentiableRollout": "typedrl.apg._collector",
            "first_done_mask": "typedrl.apg._collector",
            "SHAC": "typedrl.shac._algorithm",
            "SHACConfig": "typedrl.shac._config",
            "DifferentiableTrainer": "typedrl.apg._trainer",
            "DifferentiableTrainerConfig": "typedrl.apg._trainer_config",
        },
    )

__all__ = [
    "ADJOINT_METRICS",
    "APG",
    "SHAC",
    "APGConfig",
    "ActionAdjointClipper",
    "AlgorithmState",
    "DifferentiableAlgorithm",
    "DifferentiableCollector",
    "DifferentiableRollout",
    "DifferentiableTrainer",
    "DifferentiableTrainerConfig",
    "SHACConfig",
    "UpdateData",
    "first_done_mask",
]
