"""Small, exact implementations of every typedrl protocol, for tests and examples.

Use them to test your own collectors, trainers and checkers without a real
simulator:

- :class:`CountingVecEnv`: a :class:`~typedrl.protocols.VecEnv` whose rows
  count steps, with configurable terminations and truncations;
- :class:`QuadraticEnv` and :class:`ScheduledQuadraticEnv`: one-dimensional
  :class:`~typedrl.protocols.DifferentiableVecEnv` and
  :class:`~typedrl.protocols.ScheduledDifferentiableVecEnv`;
  :class:`ContactQuadraticEnv`: the same with a synthetic contact force
  (:class:`~typedrl.protocols.SupportsContactForces`);
- :class:`ConstantPolicy`, :class:`LinearActorCritic`,
  :class:`LinearDifferentiablePolicy`: the policy protocols;
  :class:`TinyActorCritic`: an actor-critic as a user writes one, built from
  the env's spaces (a policy factory);
- :class:`TransitionCollector`, :class:`EpisodeReturnEvaluator`: the loop protocols;
- :class:`CounterState`: :class:`~typedrl.protocols.SupportsStateDict`;
- :class:`~typedrl.envs.VecEnvWrapper`,
  :class:`~typedrl.envs.DifferentiableVecEnvWrapper`: the package's one
  delegating env wrapper base (re-exported), for test doubles that change one
  thing of an env;
- :class:`RandomEndsEnv` and :class:`RandomEndsVectorEnv`: Gymnasium envs with
  seeded random episode ends (the vector one resets inside the next step and
  ignores ``reset_mask``), for testing adapters against hand-stepped references;
- :class:`QuadrantImageEnv`: a one-step Gymnasium env whose answer is only in
  its image, for testing image encoders;
- :class:`FakeManagerBasedRLEnv`, :class:`FakeDirectRLEnv`, :class:`FakeRLEnvCfg`:
  a faithful CPU fake of the Isaac Lab env API.
"""

from typedrl.envs._wrapper import DifferentiableVecEnvWrapper as DifferentiableVecEnvWrapper
from typedrl.envs._wrapper import VecEnvWrapper as VecEnvWrapper
from typedrl.testing._counting import CountingVecEnv as CountingVecEnv
from typedrl.testing._gym_envs import RandomEndsEnv as RandomEndsEnv
from typedrl.testing._gym_envs import RandomEndsVectorEnv as RandomEndsVectorEnv
from typedrl.testing._image_env import QuadrantImageEnv as QuadrantImageEnv
from typedrl.testing._isaaclab_fake import FakeDirectRLEnv as FakeDirectRLEnv
from typedrl.testing._isaaclab_fake import FakeManagerBasedRLEnv as FakeManagerBasedRLEnv
from typedrl.testing._isaaclab_fake import FakeRLEnvCfg as FakeRLEnvCfg
from typedrl.testing._loops import EpisodeReturnEvaluator as EpisodeReturnEvaluator
from typedrl.testing._loops import Transition as Transition
from typedrl.testing._loops import TransitionCollector as TransitionCollector
from typedrl.testing._policies import ConstantPolicy as ConstantPolicy
from typedrl.testing._policies import LinearActorCritic as LinearActorCritic
from typedrl.testing._policies import LinearDifferentiablePolicy as LinearDifferentiablePolicy
from typedrl.testing._policies import TinyActorCritic as TinyActorCritic
from typedrl.testing._quadratic import ContactQuadraticEnv as ContactQuadraticEnv
from typedrl.testing._quadratic import QuadraticEnv as QuadraticEnv
from typedrl.testing._quadratic import ScheduledQuadraticEnv as ScheduledQuadraticEnv
from typedrl.testing._state import CounterState as CounterState

__all__ = [
    "ConstantPolicy",
    "ContactQuadraticEnv",
    "CounterState",
    "CountingVecEnv",
    "DifferentiableVecEnvWrapper",
    "EpisodeReturnEvaluator",
    "FakeDirectRLEnv",
    "FakeManagerBasedRLEnv",
    "FakeRLEnvCfg",
    "LinearActorCritic",
    "LinearDifferentiablePolicy",
    "QuadrantImageEnv",
    "QuadraticEnv",
    "RandomEndsEnv",
    "RandomEndsVectorEnv",
    "ScheduledQuadraticEnv",
    "TinyActorCritic",
    "Transition",
    "TransitionCollector",
    "VecEnvWrapper",
]
