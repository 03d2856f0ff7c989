"""A Gymnasium ``VectorEnv`` view of a built-in torch env."""

from typing import Any, final

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from jaxtyping import Bool, Float
from torch import Tensor

from typedrl.envs.builtin._base import BaseTorchVecEnv
from typedrl.types import ObsVector

__all__ = ["GymnasiumVectorView"]


@final
class GymnasiumVectorView(gym.vector.VectorEnv[Tensor, Tensor, Tensor]):
    """Gymnasium's ``VectorEnv`` interface over a :class:`BaseTorchVecEnv`.

    This is what ``gymnasium.make_vec("typedrl/<Name>-v0", num_envs=N,
    vectorization_mode="vector_entry_point")`` returns. The array type is
    :class:`torch.Tensor`, on the wrapped env's device: observations are the
    ``"obs"`` entry, float ``[num_envs, obs_dim]``; rewards float
    ``[num_envs]``; terminations and truncations ``torch.bool`` ``[num_envs]``.
    Actions may be tensors or NumPy arrays (``action_space.sample()``); NumPy
    actions are moved to the env's device.

    Autoreset is same-step (``metadata["autoreset_mode"] ==
    AutoresetMode.SAME_STEP``). Every step's info holds ``"final_obs"``, a
    tensor ``[num_envs, obs_dim]`` with the observation each row reached before
    any autoreset, and ``"_final_obs"``, the ``torch.bool`` mask of the rows
    that ended (``terminated | truncated``). Unlike Gymnasium's NumPy envs,
    ``"final_obs"`` is one batched tensor rather than an object array, and both
    keys are always present (checking whether any row ended would synchronise
    with the device).

    Gradients flow as in the wrapped env; use the torch env itself
    (:attr:`torch_env`) for the typed :class:`~typedrl.protocols.StepResult`.

    Args:
        env: The torch env to view; the view closes it on ``close()``.

    Example:
        >>> import gymnasium as gym
        >>> import typedrl.envs.builtin
        >>> envs = gym.make_vec(
        ...     "typedrl/CartPole-v0", num_envs=4, vectorization_mode="vector_entry_point"
        ... )
        >>> obs, info = envs.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
        >>> type(obs).__name__, tuple(obs.shape), sorted(info)
        ('Tensor', (4, 4), ['_final_obs', 'final_obs'])
        >>> envs.close()
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012

    def __init__(self, env: BaseTorchVecEnv) -> None:
        self._env = env
        self.num_envs = env.num_envs
        self.single_observation_space = env.single_observation_space
        self.single_action_space = env.single_action_space
        self.observation_space = batch_space(env.single_observation_space, env.num_envs)
        self.action_space = batch_space(env.single_action_space, env.num_envs)
        self._action_dtype = (
            env.dtype if isinstance(env.single_action_space, gym.spaces.Box) else torch.int64
        )

    @property
    def torch_env(self) -> BaseTorchVecEnv:
        """The wrapped torch env."""
        return self._env

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsVector, dict[str, Any]]:
        """Reset every row; see :meth:`BaseTorchVecEnv.reset`."""
        obs, info = self._env.reset(seed=seed, options=options)
        return obs["obs"], info

    def step(
        self, actions: Tensor | npt.NDArray[Any]
    ) -> tuple[
        ObsVector,
        Float[Tensor, " num_envs"],
        Bool[Tensor, " num_envs"],
        Bool[Tensor, " num_envs"],
        dict[str, Any],
    ]:
        """Step every row; rows that end are reset in the same step.

        Returns:
            ``(obs, reward, terminated, truncated, info)`` as torch tensors, with
            ``info["final_obs"]`` and ``info["_final_obs"]``.
        """
        if isinstance(actions, np.ndarray):
            actions = torch.as_tensor(actions, dtype=self._action_dtype, device=self._env.device)
        result = self._env.step(actions)
        final_obs = result.final_obs
        info: dict[str, Any] = dict(result.info)
        if final_obs is not None:
            info["final_obs"] = final_obs["obs"]
            info["_final_obs"] = result.done
        return result.obs["obs"], result.reward, result.terminated, result.truncated, info

    def close_extras(self, **kwargs: Any) -> None:
        """Close the wrapped torch env."""
        del kwargs
        self._env.close()
