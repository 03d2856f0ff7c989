"""Conformance checkers for user envs: run them before training.

:func:`check_vec_env` checks the :class:`~typedrl.protocols.VecEnv`
contract, :func:`check_differentiable_vec_env` adds the
:class:`~typedrl.protocols.DifferentiableVecEnv` rules. Both return a
:class:`CheckReport` listing every :class:`Violation` found; the rule ids are
the keys of :data:`CHECK_RULES`.
"""

from typedrl.envs._checker._api import check_differentiable_vec_env as check_differentiable_vec_env
from typedrl.envs._checker._api import check_vec_env as check_vec_env
from typedrl.envs._checker._report import CHECK_RULES as CHECK_RULES
from typedrl.envs._checker._report import CheckReport as CheckReport
from typedrl.envs._checker._report import Violation as Violation

__all__ = [
    "CHECK_RULES",
    "CheckReport",
    "Violation",
    "check_differentiable_vec_env",
    "check_vec_env",
]
