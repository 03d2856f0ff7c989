"""``typedrl.envs.make``: build and wrap a vector env in one call."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode

from typedrl import _validation
from typedrl._validation import describe, positive_int
from typedrl.envs._gymnasium import GymnasiumVecEnv
from typedrl.errors import ConfigError
from typedrl.protocols import VecEnv

__all__ = ["BUILTIN_PREFIX", "make"]

BUILTIN_PREFIX = "typedrl/"
"""Env ids with this prefix name typedrl's built-in torch envs."""

Vectorization = Literal["sync", "async", "vector_entry_point"]
_VECTORIZATIONS: tuple[Vectorization, ...] = ("sync", "async", "vector_entry_point")


@_validation.no_type_check
def make(
    env_id: str,
    *,
    num_envs: int,
    seed: int | None = None,
    device: torch.device | str = "cpu",
    vectorization: Vectorization = "sync",
    wrappers: Sequence[Callable[[gym.Env[Any, Any]], gym.Wrapper[Any, Any, Any, Any]]] = (),
    float_dtype: Literal["float32", "float64"] = "float32",
    clip_actions: bool = False,
    env_kwargs: Mapping[str, Any] | None = None,
) -> VecEnv:
    """Build a vector env by id and present it as a typedrl :class:`~typedrl.protocols.VecEnv`.

    Ids starting with ``"typedrl/"`` build a built-in torch env directly on
    ``device`` (no NumPy round trip); ``vectorization`` and ``wrappers`` do not
    apply to them. Any other id goes through :func:`gymnasium.make_vec` and
    :class:`~typedrl.envs.GymnasiumVecEnv`: ``"sync"`` and ``"async"`` build
    same-step-autoreset Sync/Async vector envs of ``num_envs`` copies (each
    single env wrapped by ``wrappers``, in order); ``"vector_entry_point"``
    uses the env's own vectorised implementation.

    Args:
        env_id: A registered Gymnasium id (``"CartPole-v1"``) or a built-in
            (``"typedrl/Pendulum-v0"``).
        num_envs: Number of rows.
        seed: Seed of the first ``reset`` if that call passes none.
        device: Device of every tensor.
        vectorization: How Gymnasium envs are batched.
        wrappers: Gymnasium wrappers applied to each single env (sync/async only).
        float_dtype: Dtype of rewards and floating-point observations.
        clip_actions: Clip ``Box`` actions to the space's bounds.
        env_kwargs: Keyword arguments of the env's constructor.

    Returns:
        The wrapped env.

    Raises:
        ConfigError: For an unknown vectorization, wrappers where they cannot
            apply, or a non-positive ``num_envs``.

    Example:
        >>> env = make("CartPole-v1", num_envs=4, seed=0)
        >>> obs, _ = env.reset()
        >>> obs["obs"].shape
        torch.Size([4, 4])
        >>> env.close()
    """
    positive_int("make", "num_envs", num_envs)
    kwargs = dict(env_kwargs or {})
    if env_id.startswith(BUILTIN_PREFIX):
        if wrappers or vectorization != "sync":
            raise ConfigError(
                f"make({env_id!r}): built-in envs are torch-native; "
                "vectorization and wrappers do not apply"
            )
        from typedrl.envs.builtin import make_builtin  # noqa: PLC0415 - avoids an import cycle

        env: VecEnv = make_builtin(
            env_id,
            num_envs=num_envs,
            seed=seed,
            device=device,
            dtype=float_dtype,
            clip_actions=clip_actions,
            **kwargs,
        )
        return env
    if env_id.startswith("Isaac-"):
        if wrappers or vectorization != "sync" or float_dtype != "float32":
            raise ConfigError(
                f"make({env_id!r}): Isaac Lab envs are batched on their simulation device in "
                "float32; vectorization, wrappers and float_dtype do not apply"
            )
        from typedrl.envs._isaaclab import make_isaaclab  # noqa: PLC0415 - imports Isaac Lab

        return make_isaaclab(
            env_id,
            num_envs=num_envs,
            device=device,
            seed=seed,
            clip_actions="space" if clip_actions else None,
            env_kwargs=kwargs,
        )
    if vectorization not in _VECTORIZATIONS:
        raise ConfigError(
            f"make: vectorization must be one of {list(_VECTORIZATIONS)}, "
            f"got {describe(vectorization)}"
        )
    if vectorization == "vector_entry_point":
        if wrappers:
            raise ConfigError(
                "make: wrappers apply to single envs and need vectorization 'sync' or 'async'"
            )
        raw = gym.make_vec(
            env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs
        )
    else:
        raw = gym.make_vec(
            env_id,
            num_envs=num_envs,
            vectorization_mode=vectorization,
            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
            wrappers=list(wrappers) or None,
            **kwargs,
        )
    return GymnasiumVecEnv(
        raw,
        device=device,
        float_dtype=float_dtype,
        clip_actions=clip_actions,
        default_seed=seed,
    )
