"""AHAC, the adaptive-horizon actor-critic: SHAC whose window adapts to the env's contacts.

- :class:`AHACConfig`: its hyper-parameters (the actor's optimisation is an
  :class:`~typedrl.apg.APGConfig`), the ``algorithm`` of a
  :class:`~typedrl.apg.DifferentiableTrainerConfig`.
- :class:`AHAC`: the algorithm, whose :meth:`AHAC.update` is one whole
  iteration, numbered: a window of ``round(H)`` steps, the actor loss ended by
  the double critic, backward, clipping, the optimizer step, the horizon's
  dual ascent and the critics' early-stopped TD(lambda) regression.
- :class:`AdaptiveHorizon`: the horizon ``H`` and its multiplier.
- :class:`DoubleCritic`: the two critics and their minimum.

AHAC reuses SHAC's steps (:mod:`typedrl.shac`), the differentiable collector
and :class:`~typedrl.apg.DifferentiableTrainer`; it needs an env with
:class:`~typedrl.protocols.SupportsContactForces`.
"""

from typing import TYPE_CHECKING

from typedrl._lazy import lazy_exports

# The config loads without torch (the command reads it to parse a config); the algorithm
# on first use.
if TYPE_CHECKING:
    from typedrl.ahac._algorithm import AHAC as AHAC
    from typedrl.ahac._algorithm import DoubleCritic as DoubleCritic
    from typedrl.ahac._algorithm import loss_has_settled as loss_has_settled
    from typedrl.ahac._config import AHACConfig as AHACConfig
    from typedrl.ahac._horizon import AdaptiveHorizon as AdaptiveHorizon
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "AHAC": "typedrl.ahac._algorithm",
            "DoubleCritic": "typedrl.ahac._algorithm",
            "loss_has_settled": "typedrl.ahac._algorithm",
            "AHACConfig": "typedrl.ahac._config",
            "AdaptiveHorizon": "typedrl.ahac._horizon",
        },
    )

__all__ = ["AHAC", "AHACConfig", "AdaptiveHorizon", "DoubleCritic", "loss_has_settled"]
