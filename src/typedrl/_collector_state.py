"""The checkpointable state of a collector: the env's state, its current observation, the episodes.

Both collector families (:mod:`typedrl.ppo` and :mod:`typedrl.apg`) save
and restore their state through these two functions, so a checkpoint of
either holds the same keys and resumes by the same rules.
"""

from typing import Any

from tensordict import TensorDict

from typedrl.episodes import EpisodeTracker
from typedrl.errors import CheckpointError
from typedrl.protocols import SupportsStateDict, VecEnv
from typedrl.types import Obs

__all__ = ["collector_state_dict", "load_collector_state"]

_REQUIRED = frozenset({"env", "episode_return", "episode_length"})


def collector_state_dict(env: VecEnv, obs: Obs | None, episodes: EpisodeTracker) -> dict[str, Any]:
    """The env's state, the current observation and the running episodes' statistics.

    Empty when the env is not checkpointable (no ``state_dict``): a resumed run
    then restarts the env. The observation is stored as a nested dict of
    graph-free copies of its leaves (a TensorDict is not plain data).

    Example:
        >>> import torch
        >>> from typedrl.testing import CountingVecEnv
        >>> env = CountingVecEnv(num_envs=2, terminate_after=3)
        >>> obs, _ = env.reset(seed=0)
        >>> tracker = EpisodeTracker(num_envs=2, device=torch.device("cpu"))
        >>> collector_state_dict(env, obs, tracker)
        {}
    """
    if not isinstance(env, SupportsStateDict):
        return {}
    state: dict[str, Any] = {"env": env.state_dict(), **episodes.state_dict()}
    if obs is not None:
        state["obs"] = obs.detach().clone().to_dict()
    return state


def load_collector_state(
    env: VecEnv, state_dict: dict[str, Any], episodes: EpisodeTracker
) -> Obs | None:
    """Restore :func:`collector_state_dict`'s output into ``env`` and ``episodes``.

    Returns:
        The observation to continue from, or ``None`` when the collector must
        reset the env first (an empty state, saved from an env that is not
        checkpointable, or one saved before the first reset).

    Raises:
        CheckpointError: The state holds env state for an env that is not
            checkpointable, lacks a piece (the key is named), or holds an
            observation of another ``num_envs``.
    """
    if not state_dict:
        return None
    if not isinstance(env, SupportsStateDict):
        raise CheckpointError(
            f"the collector state holds env state, but {type(env).__name__} has no load_state_dict"
        )
    missing = sorted(_REQUIRED - set(state_dict))
    if missing:
        raise CheckpointError(f"the collector state lacks {missing}")
    episodes.load_state_dict(state_dict)
    env.load_state_dict(state_dict["env"])
    obs = state_dict.get("obs")
    if obs is None:
        return None
    try:
        return TensorDict(obs, batch_size=[env.num_envs], device=env.device)
    except (RuntimeError, TypeError, ValueError) as error:
        raise CheckpointError(
            f"the collector state's 'obs' must hold tensors with {env.num_envs} rows (one "
            f"per env row); was it saved with another num_envs? ({error})"
        ) from error
