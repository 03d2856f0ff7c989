"""The trainer core both trainer families stand on.

:class:`AbstractTrainer` owns the Fabric lifecycle, the fit loop, the counters,
evaluation on schedule, the checkpoint schedule (``last.ckpt`` rolling,
``best.ckpt``, periodic, optionally only the newest N), the run's
``summary.json``, resume with the config check, rank-aggregated logging and
the progress display; it knows no algorithm. A trainer supplies its modules,
one training iteration (:class:`IterationResult`) and its checkpointable
:class:`TrainerState`. :class:`RunOptions` holds what every run shares.
:func:`fabric_from_environment` builds the Fabric of a run launched by
``torchrun`` or ``srun`` (or of one on this machine). Every algorithm's update
returns an :class:`UpdateOutcome` and steps its optimizers through the one update
kernel, :class:`GradientStep` (optimizers from :func:`build_optimizer`, schedules
from :func:`build_scheduler`).
"""

from typedrl.checkpoint._state import Counters as Counters
from typedrl.checkpoint._state import GeneratorState as GeneratorState
from typedrl.checkpoint._state import SupportsScheduleRestart as SupportsScheduleRestart
from typedrl.checkpoint._state import SupportsSharedState as SupportsSharedState
from typedrl.checkpoint._state import TrainerState as TrainerState
from typedrl.training._fabric import Launch as Launch
from typedrl.training._fabric import default_fabric as default_fabric
from typedrl.training._fabric import fabric_from_environment as fabric_from_environment
from typedrl.training._fabric import leave_process_group as leave_process_group
from typedrl.training._fabric import read_launch as read_launch
from typedrl.training._fabric import setup_module_and_optimizer as setup_module_and_optimizer
from typedrl.training._options import RunOptions as RunOptions
from typedrl.training._signals import StopRequest as StopRequest
from typedrl.training._summary import SUMMARY_FILE as SUMMARY_FILE
from typedrl.training._summary import RunSummary as RunSummary
from typedrl.training._summary import UpdatePath as UpdatePath
from typedrl.training._trainer import AbstractTrainer as AbstractTrainer
from typedrl.training._trainer import Budget as Budget
from typedrl.training._trainer import FitResult as FitResult
from typedrl.training._trainer import IterationResult as IterationResult
from typedrl.training._trainer import UpdateCounts as UpdateCounts
from typedrl.training._update import GradientStep as GradientStep
from typedrl.training._update import ReducedGradient as ReducedGradient
from typedrl.training._update import UpdateOutcome as UpdateOutcome
from typedrl.training._update import build_optimizer as build_optimizer
from typedrl.training._update import build_scheduler as build_scheduler

__all__ = [
    "SUMMARY_FILE",
    "AbstractTrainer",
    "Budget",
    "Counters",
    "FitResult",
    "GeneratorState",
    "GradientStep",
    "IterationResult",
    "Launch",
    "ReducedGradient",
    "RunOptions",
    "RunSummary",
    "StopRequest",
    "SupportsScheduleRestart",
    "SupportsSharedState",
    "TrainerState",
    "UpdateCounts",
    "UpdateOutcome",
    "UpdatePath",
    "build_optimizer",
    "build_scheduler",
    "default_fabric",
    "fabric_from_environment",
    "leave_process_group",
    "read_launch",
    "setup_module_and_optimizer",
]
