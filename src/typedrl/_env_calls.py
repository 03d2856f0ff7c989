"""Calls into a user's env from a collector, with the env's own failures named and chained.

Both collector families (the on-policy one in :mod:`typedrl.ppo` and the
differentiable one in :mod:`typedrl.apg`) step envs through :func:`step_env`,
so an exception raised inside an env reads the same whichever trainer hit it.
"""

from typedrl._results import StepResult
from typedrl.errors import ConfigError, EnvContractError, EnvError, NonFiniteError
from typedrl.protocols import VecEnv
from typedrl.types import Action

__all__ = ["step_env"]

# Errors that already say what went wrong in typedrl's words: they pass through
# with a note naming the step, instead of being wrapped.
_PASS_THROUGH = (ConfigError, EnvContractError, NonFiniteError, EnvError)


def step_env(env: VecEnv, action: Action, *, step: int, iteration: int) -> StepResult:
    """``env.step(action)``; an exception of the env's own becomes :class:`EnvError`.

    Args:
        env: The env to step.
        action: The action batch.
        step: The step of the rollout, named in the message.
        iteration: The trainer's iteration, named in the message.

    Raises:
        EnvError: The env raised an exception of its own: the message names
            the env's type, the exception's type, the step and the iteration,
            and the exception is chained as ``__cause__``.
        ConfigError, EnvContractError, NonFiniteError: Raised by the env as
            they are, with a note naming the step and the iteration.

    Example:
        >>> import torch
        >>> from typedrl.testing import CountingVecEnv
        >>> env = CountingVecEnv(num_envs=2, terminate_after=3)
        >>> _ = env.reset(seed=0)
        >>> step_env(env, torch.zeros(2, 1), step=0, iteration=0).reward.shape
        torch.Size([2])
    """
    try:
        return env.step(action)
    except Exception as error:
        where = f"step {step} of iteration {iteration}"
        if isinstance(error, _PASS_THROUGH):
            error.add_note(f"raised by the env at {where}")
            raise
        raise EnvError(
            f"the env ({type(env).__name__}) raised {type(error).__name__} at {where}: {error}"
        ) from error
