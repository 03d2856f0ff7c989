"""Small, exact implementations of every typedrl protocol, for tests and examples.

Use them to test your own collectors, trainers and checkers without a real
simulator:

- :class:`CountingVecEnv`: a :class:`~typedrl.protocols.VecEnv` whose rows
  count steps, with configurable terminations and truncations;
- :class:`QuadraticEnv` and :class:`ScheduledQuadraticEnv`: one-dimensional
  :class:`~typedrl.protocols.DifferentiableVecEnv` and
  :class:`~typedrl.protocols.ScheduledDifferentiableVecEnv`;
- :class:`ConstantPolicy`, :class:`LinearActorCritic`,
  :class:`LinearDifferentiablePolicy`: the policy protocols;
- :class:`TransitionCollector`, :class:`EpisodeReturnEvaluator`: the loop protocols;
- :class:`CounterState`: :class:`~typedrl.protocols.SupportsStateDict`.
"""

from typedrl.testing._counting import CountingVecEnv as CountingVecEnv
from typedrl.testing._loops import EpisodeReturnEvaluator as EpisodeReturnEvaluator
from typedrl.testing._loops import Transition as Transition
from typedrl.testing._loops import TransitionCollector as TransitionCollector
from typedrl.testing._policies import ConstantPolicy as ConstantPolicy
from typedrl.testing._policies import LinearActorCritic as LinearActorCritic
from typedrl.testing._policies import LinearDifferentiablePolicy as LinearDifferentiablePolicy
from typedrl.testing._quadratic import QuadraticEnv as QuadraticEnv
from typedrl.testing._quadratic import ScheduledQuadraticEnv as ScheduledQuadraticEnv
from typedrl.testing._state import CounterState as CounterState

__all__ = [
    "ConstantPolicy",
    "CounterState",
    "CountingVecEnv",
    "EpisodeReturnEvaluator",
    "LinearActorCritic",
    "LinearDifferentiablePolicy",
    "QuadraticEnv",
    "ScheduledQuadraticEnv",
    "Transition",
    "TransitionCollector",
]
