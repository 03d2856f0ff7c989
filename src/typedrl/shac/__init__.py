"""SHAC, the short-horizon actor-critic: analytic policy gradients over short windows.

- :class:`SHACConfig`: its hyper-parameters (the actor's optimisation is an
  :class:`~typedrl.apg.APGConfig`), the ``algorithm`` of a
  :class:`~typedrl.apg.DifferentiableTrainerConfig`.
- :class:`SHAC`: the algorithm, whose :meth:`SHAC.update` is one whole
  iteration, numbered: a window rolled out through the differentiable env, the
  actor loss ended by the target critic, backward, clipping, the optimizer
  step, the critic's TD(lambda) regression and the Polyak target update.

SHAC stands on :mod:`typedrl.apg` (its differentiable collector and rollout)
and on the trainer core (:mod:`typedrl.training`);
:class:`~typedrl.apg.DifferentiableTrainer` runs it.
"""

from typing import TYPE_CHECKING

from typedrl._lazy import lazy_exports

# The config loads without torch (the command reads it to parse a config); the algorithm
# on first use.
if TYPE_CHECKING:
    from typedrl.shac._algorithm import SHAC as SHAC
    from typedrl.shac._algorithm import WindowCollector as WindowCollector
    from typedrl.shac._config import SHACConfig as SHACConfig
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "SHAC": "typedrl.shac._algorithm",
            "WindowCollector": "typedrl.shac._algorithm",
            "SHACConfig": "typedrl.shac._config",
        },
    )

__all__ = ["SHAC", "SHACConfig", "WindowCollector"]
