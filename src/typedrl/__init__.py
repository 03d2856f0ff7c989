"""typedrl: strictly typed, shape-checked reinforcement learning on PyTorch.

The public API is re-exported here explicitly. Submodules:

- :mod:`typedrl.protocols`: the contracts (vector envs, policies, collectors, evaluators);
- :mod:`typedrl.errors`: the exception hierarchy rooted at :class:`~typedrl.errors.TypedRLError`;
- :mod:`typedrl.types`: the jaxtyping shape aliases (one axis vocabulary);
- :mod:`typedrl.training`: the trainer core both trainer families stand on;
- :mod:`typedrl.ppo`: PPO and the on-policy collector;
- :mod:`typedrl.seeding`: the one derivation of every random stream's seed;
- :mod:`typedrl.testing`: small exact implementations of every protocol.

Importing typedrl registers the built-in envs with Gymnasium as
``typedrl/<Name>-v0`` (``gymnasium.make`` and ``gymnasium.make_vec`` build them);
it imports Gymnasium, not torch.
"""

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from typedrl._gymnasium_registration import register_builtin_envs
from typedrl._lazy import lazy_exports
from typedrl.errors import CheckpointError as CheckpointError
from typedrl.errors import ConfigError as ConfigError
from typedrl.errors import DistributedError as DistributedError
from typedrl.errors import EnvContractError as EnvContractError
from typedrl.errors import EnvError as EnvError
from typedrl.errors import MissingDependencyError as MissingDependencyError
from typedrl.errors import NonFiniteError as NonFiniteError
from typedrl.errors import SpecError as SpecError
from typedrl.errors import StateError as StateError
from typedrl.errors import TypedRLError as TypedRLError

# The value types and protocols import torch and tensordict: they load on first use,
# so that `import typedrl` (and `typedrl --version`) stays fast.
if TYPE_CHECKING:
    from typedrl._results import DifferentiableRolloutSpec as DifferentiableRolloutSpec
    from typedrl._results import EvaluationResult as EvaluationResult
    from typedrl._results import StepResult as StepResult
    from typedrl.protocols import ActorCritic as ActorCritic
    from typedrl.protocols import Collector as Collector
    from typedrl.protocols import DifferentiablePolicy as DifferentiablePolicy
    from typedrl.protocols import DifferentiableVecEnv as DifferentiableVecEnv
    from typedrl.protocols import Evaluator as Evaluator
    from typedrl.protocols import Policy as Policy
    from typedrl.protocols import ScheduledDifferentiableVecEnv as ScheduledDifferentiableVecEnv
    from typedrl.protocols import SupportsContactForces as SupportsContactForces
    from typedrl.protocols import SupportsDeterministicActor as SupportsDeterministicActor
    from typedrl.protocols import SupportsNormalizerUpdate as SupportsNormalizerUpdate
    from typedrl.protocols import (
        SupportsObservationNormalizeMask as SupportsObservationNormalizeMask,
    )
    from typedrl.protocols import SupportsStateDict as SupportsStateDict
    from typedrl.protocols import TensorActorCritic as TensorActorCritic
    from typedrl.protocols import VecEnv as VecEnv
else:
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "DifferentiableRolloutSpec": "typedrl._results",
            "EvaluationResult": "typedrl._results",
            "StepResult": "typedrl._results",
            "ActorCritic": "typedrl.protocols",
            "Collector": "typedrl.protocols",
            "DifferentiablePolicy": "typedrl.protocols",
            "DifferentiableVecEnv": "typedrl.protocols",
            "Evaluator": "typedrl.protocols",
            "Policy": "typedrl.protocols",
            "ScheduledDifferentiableVecEnv": "typedrl.protocols",
            "SupportsContactForces": "typedrl.protocols",
            "SupportsDeterministicActor": "typedrl.protocols",
            "SupportsNormalizerUpdate": "typedrl.protocols",
            "SupportsObservationNormalizeMask": "typedrl.protocols",
            "SupportsStateDict": "typedrl.protocols",
            "TensorActorCritic": "typedrl.protocols",
            "VecEnv": "typedrl.protocols",
        },
    )

# gymnasium.make("typedrl/<Name>-v0") works once typedrl is imported (torch loads only
# when an env is built).
register_builtin_envs()

try:
    __version__ = version("typedrl")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "ActorCritic",
    "CheckpointError",
    "Collector",
    "ConfigError",
    "DifferentiablePolicy",
    "DifferentiableRolloutSpec",
    "DifferentiableVecEnv",
    "DistributedError",
    "EnvContractError",
    "EnvError",
    "EvaluationResult",
    "Evaluator",
    "MissingDependencyError",
    "NonFiniteError",
    "Policy",
    "ScheduledDifferentiableVecEnv",
    "SpecError",
    "StateError",
    "StepResult",
    "SupportsContactForces",
    "SupportsDeterministicActor",
    "SupportsNormalizerUpdate",
    "SupportsObservationNormalizeMask",
    "SupportsStateDict",
    "TensorActorCritic",
    "TypedRLError",
    "VecEnv",
    "__version__",
]
