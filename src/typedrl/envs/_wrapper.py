"""One delegating wrapper base for vector envs.

Every wrapper in the package (the evaluation recorders, the test doubles)
derives from :class:`VecEnvWrapper`, so no wrapper can drop an attribute of
the env it wraps that a policy or a trainer depends on: the observation
normalise mask of a differentiable env is passed through when the wrapped env
has one, and is absent when it has none; so are its contact forces
(:class:`~typedrl.protocols.SupportsContactForces`, which AHAC needs) and its
checkpointable state (:class:`~typedrl.protocols.SupportsStateDict`, which an
exact resume needs).
"""

from typing import Any, ClassVar, Final, cast

import gymnasium as gym
import torch

from typedrl._results import StepResult
from typedrl.errors import CheckpointError
from typedrl.protocols import (
    DifferentiableVecEnv,
    SupportsContactForces,
    SupportsStateDict,
    VecEnv,
)
from typedrl.types import Action, Obs, ObsMask

__all__ = ["DifferentiableVecEnvWrapper", "VecEnvWrapper", "observation_normalize_mask_of"]

_ENV_KEY: Final = "env"
"""Where a wrapper with state of its own keeps the wrapped env's state."""
_WRAPPER_KEY: Final = "wrapper"
"""Where a wrapper with state of its own keeps that state."""


def observation_normalize_mask_of(env: VecEnv) -> ObsMask | None:
    """``env``'s observation normalise mask, through any wrappers, or ``None`` if it has none.

    Read the mask through this function rather than with ``isinstance`` on
    :class:`~typedrl.protocols.SupportsObservationNormalizeMask`: a wrapper
    always declares the property and raises :class:`AttributeError` when the
    env it wraps has no mask, which a runtime protocol check (static since
    Python 3.12) cannot see.

    Example:
        >>> from typedrl.envs import CartPoleSwingUp
        >>> from typedrl.testing import VecEnvWrapper
        >>> env = CartPoleSwingUp(num_envs=2)
        >>> observation_normalize_mask_of(VecEnvWrapper(env)).tolist()
        [True, True, False, False, True]
        >>> from typedrl.testing import CountingVecEnv
        >>> observation_normalize_mask_of(VecEnvWrapper(CountingVecEnv(num_envs=2))) is None
        True
    """
    return getattr(env, "observation_normalize_mask", None)


class VecEnvWrapper:
    """Delegates every :class:`~typedrl.protocols.VecEnv` member to ``env``.

    Subclass it and override only what the test double changes (a spoiled
    reward, a raised exception, a step counter), as Gymnasium's
    ``VectorWrapper`` is used.

    The wrapped env's contact forces
    (:class:`~typedrl.protocols.SupportsContactForces`) are passed through
    exactly when it has them, so a runtime protocol check on the wrapper is
    as true as on the env; a wrapper that measures contacts itself (defines
    ``contact_force_norm``) keeps its own.

    So is its checkpointable state (``state_dict`` and ``load_state_dict``,
    :class:`~typedrl.protocols.SupportsStateDict`), which a collector saves so
    that a resumed run continues the env's rows exactly:

    - a wrapper of an env with state checkpoints that state, under the env's
      own keys, so a wrapper with no state of its own is transparent: a
      checkpoint saved with or without it resumes either way;
    - a wrapper with state of its own overrides :meth:`wrapper_state_dict`
      and :meth:`load_wrapper_state_dict`; its state is then
      ``{"env": <the env's state>, "wrapper": <its own>}``, and loading a
      state of another layout raises :class:`~typedrl.errors.CheckpointError`;
    - a wrapper of an env without state has none either (the collector then
      restarts the env on resume, its own state included);
    - a wrapper that checkpoints itself (defines ``state_dict``) keeps its own.

    Example:
        >>> import torch
        >>> from typedrl.testing import CountingVecEnv
        >>> class Doubled(VecEnvWrapper):
        ...     def step(self, action):
        ...         result = self.env.step(action)
        ...         return StepResult(
        ...             result.obs, 2 * result.reward, result.terminated, result.truncated,
        ...             result.info, final_obs=result.final_obs, valid=result.valid,
        ...         )
        >>> env = Doubled(CountingVecEnv(num_envs=2, terminate_after=3))
        >>> _ = env.reset(seed=0)
        >>> env.step(torch.zeros(2, 1)).reward.tolist()
        [2.0, 2.0]
        >>> from typedrl.protocols import SupportsContactForces
        >>> from typedrl.testing import ContactQuadraticEnv, QuadraticEnv
        >>> isinstance(VecEnvWrapper(ContactQuadraticEnv(num_envs=2)), SupportsContactForces)
        True
        >>> isinstance(VecEnvWrapper(QuadraticEnv(num_envs=2)), SupportsContactForces)
        False
        >>> from typedrl.envs import PointMass
        >>> from typedrl.protocols import SupportsStateDict
        >>> env = PointMass(num_envs=2)
        >>> VecEnvWrapper(env).state_dict().keys() == env.state_dict().keys()
        True
        >>> isinstance(VecEnvWrapper(QuadraticEnv(num_envs=2)), SupportsStateDict)
        False
    """

    preserves_steps: ClassVar[bool] = True
    """Each step of the wrapper is one step of the wrapped env, so what the env measures
    per step (its contact forces) holds for the wrapper's step too. Set it to ``False`` in
    a wrapper that takes several steps of the env per step (an action repeat): the env's
    contact forces are then not passed through."""

    def __init__(self, env: VecEnv) -> None:
        self.env = env
        if (
            self.preserves_steps
            and isinstance(env, SupportsContactForces)
            and not hasattr(type(self), "contact_force_norm")
        ):
            # An instance attribute, set only when the env has the method: a class-level
            # method would make every wrapper look like it measures contacts.
            vars(self)["contact_force_norm"] = env.contact_force_norm
        if isinstance(env, SupportsStateDict) and not hasattr(type(self), "state_dict"):
            # Instance attributes too, so that a wrapper of an env without state has none.
            if type(self).wrapper_state_dict is VecEnvWrapper.wrapper_state_dict:
                vars(self)["state_dict"] = env.state_dict
                vars(self)["load_state_dict"] = env.load_state_dict
            else:
                vars(self)["state_dict"] = self._state_with_env
                vars(self)["load_state_dict"] = self._load_state_with_env

    def wrapper_state_dict(self) -> dict[str, Any]:
        """The wrapper's own state, checkpointed with the wrapped env's.

        Override it (and :meth:`load_wrapper_state_dict`) in a wrapper whose
        own state changes what it does or reports after a resume; the base
        wrapper has none.
        """
        return {}

    def load_wrapper_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore :meth:`wrapper_state_dict`'s output.

        Raises:
            CheckpointError: ``state_dict`` does not fit this wrapper.
        """
        if state_dict:
            raise CheckpointError(
                f"{type(self).__name__}.load_state_dict: expected no state of the wrapper "
                f"itself under 'wrapper', got keys {sorted(state_dict)}"
            )

    def _state_with_env(self) -> dict[str, Any]:
        env = cast("SupportsStateDict", self.env)
        return {_ENV_KEY: env.state_dict(), _WRAPPER_KEY: self.wrapper_state_dict()}

    def _load_state_with_env(self, state_dict: dict[str, Any], /) -> None:
        expected = [_ENV_KEY, _WRAPPER_KEY]
        if sorted(state_dict) != expected:
            raise CheckpointError(
                f"{type(self).__name__}.load_state_dict: expected keys {expected} (the "
                f"state of the wrapped {type(self.env).__name__} and the wrapper's own), got "
                f"{sorted(state_dict)}; was it saved from an env without this wrapper?"
            )
        cast("SupportsStateDict", self.env).load_state_dict(state_dict[_ENV_KEY])
        self.load_wrapper_state_dict(state_dict[_WRAPPER_KEY])

    @property
    def num_envs(self) -> int:
        """The wrapped env's rows."""
        return self.env.num_envs

    @property
    def device(self) -> torch.device:
        """The wrapped env's device."""
        return self.env.device

    @property
    def single_observation_space(self) -> gym.Space[Any]:
        """The wrapped env's observation space."""
        return self.env.single_observation_space

    @property
    def single_action_space(self) -> gym.Space[Any]:
        """The wrapped env's action space."""
        return self.env.single_action_space

    @property
    def provides_final_obs(self) -> bool:
        """As the wrapped env."""
        return self.env.provides_final_obs

    @property
    def observation_normalize_mask(self) -> ObsMask:
        """The wrapped env's observation normalise mask.

        Raises:
            AttributeError: The wrapped env has none (so ``getattr`` with a
                default, and :func:`observation_normalize_mask_of`, see none).
        """
        mask = observation_normalize_mask_of(self.env)
        if mask is None:
            raise AttributeError(
                f"{type(self.env).__name__} has no observation_normalize_mask, so neither "
                f"has its {type(self).__name__}"
            )
        return mask

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Reset the wrapped env."""
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Action) -> StepResult:
        """Step the wrapped env."""
        return self.env.step(action)

    def close(self) -> None:
        """Close the wrapped env."""
        self.env.close()


class DifferentiableVecEnvWrapper(VecEnvWrapper):
    """:class:`VecEnvWrapper` for a :class:`~typedrl.protocols.DifferentiableVecEnv`.

    Also delegates ``detach_state`` and the observation normalise mask (all
    features when the wrapped env has none).
    """

    def __init__(self, env: DifferentiableVecEnv) -> None:
        super().__init__(env)
        self.differentiable_env = env

    def detach_state(self) -> Obs:
        """Detach the wrapped env's state."""
        return self.differentiable_env.detach_state()

    @property
    def observation_normalize_mask(self) -> ObsMask:
        """The wrapped env's mask, or every feature when it has none."""
        mask = observation_normalize_mask_of(self.env)
        if mask is not None:
            return mask
        shape = self.env.single_observation_space.shape or (1,)
        return torch.ones(int(torch.tensor(shape).prod()), dtype=torch.bool)
