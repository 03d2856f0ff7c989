"""Gymnasium ``VectorEnv`` views of a built-in torch env: NumPy arrays or torch tensors."""

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

__all__ = ["GymnasiumVectorView", "NumpyVectorView"]


class _TorchEnvView:
    """What both views share: the torch env, its spaces batched, its action dtype, its close.

    Each view declares ``torch_env`` itself, so that the API reference documents it there.
    """

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

    def close_extras(self, **kwargs: Any) -> None:
        """Close the wrapped torch env."""
        del kwargs
        self._env.close()


@final
class GymnasiumVectorView(_TorchEnvView, gym.vector.VectorEnv[Tensor, Tensor, Tensor]):
    """Gymnasium's ``VectorEnv`` interface over a :class:`BaseTorchVecEnv`.

    This is what ``gymnasium.make_vec("typedrl/<Name>-v0", num_envs=N,
    array_type="torch")`` returns (:class:`NumpyVectorView` without
    ``array_type``). The array type is
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
        >>> envs = gym.make_vec("typedrl/CartPole-v0", num_envs=4, array_type="torch")
        >>> obs, info = envs.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
        >>> type(obs).__name__, tuple(obs.shape), sorted(info)
        ('Tensor', (4, 4), ['_final_obs', 'final_obs'])
        >>> envs.close()
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012

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


@final
class NumpyVectorView(
    _TorchEnvView, gym.vector.VectorEnv[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any]]
):
    """Gymnasium's ``VectorEnv`` interface over a :class:`BaseTorchVecEnv`, with NumPy arrays.

    This is what ``gymnasium.make_vec("typedrl/<Name>-v0", num_envs=N)`` returns
    (its default ``vectorization_mode`` is the registered vector entry point):
    one batched torch env, stepped without gradients, whose results are copied
    to NumPy as Gymnasium's own vector envs return them, so that Gymnasium's
    vector wrappers (``RecordEpisodeStatistics``, ``NormalizeReward``,
    ``ClipAction``, ...) take it. Observations are float ``[num_envs, obs_dim]``
    of the observation space's dtype, rewards float ``[num_envs]`` of the same
    dtype, terminations and truncations ``bool`` ``[num_envs]``. Actions are
    NumPy arrays as ``action_space.sample()`` returns them.

    Autoreset is same-step (``metadata["autoreset_mode"] ==
    AutoresetMode.SAME_STEP``), as in Gymnasium's ``SyncVectorEnv(...,
    autoreset_mode=AutoresetMode.SAME_STEP)``: on a step where some rows end,
    the info holds ``"final_obs"``, an object array with the terminal
    observation of each row that ended (``None`` elsewhere), and
    ``"_final_obs"``, the mask of those rows. Gymnasium's vector
    ``NormalizeObservation`` accepts next-step envs only: use
    ``vectorization_mode="sync"`` (or the single-env ``NormalizeObservation``
    in ``wrappers``) for it.

    Args:
        env: The torch env to view; the view closes it on ``close()``.

    Example:
        >>> import gymnasium as gym
        >>> envs = gym.make_vec("typedrl/Pendulum-v0", num_envs=4, max_episode_steps=2)
        >>> obs, info = envs.reset(seed=0)
        >>> _ = envs.step(envs.action_space.sample())
        >>> obs, reward, terminated, truncated, info = envs.step(envs.action_space.sample())
        >>> type(obs).__name__, obs.dtype.name, truncated.tolist(), info["final_obs"].shape
        ('ndarray', 'float32', [True, True, True, True], (4,))
        >>> envs.close()
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012

    @property
    def torch_env(self) -> BaseTorchVecEnv:
        """The wrapped torch env."""
        return self._env

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[Any], dict[str, Any]]:
        """Reset every row; see :meth:`BaseTorchVecEnv.reset`."""
        obs, info = self._env.reset(seed=seed, options=options)
        return _numpy(obs["obs"]), info

    def step(
        self, actions: npt.NDArray[Any]
    ) -> tuple[
        npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any], dict[str, Any]
    ]:
        """Step every row; rows that end are reset in the same step.

        Returns:
            ``(obs, reward, terminated, truncated, info)`` as NumPy arrays, with
            ``info["final_obs"]`` and ``info["_final_obs"]`` when some row ended.
        """
        action = torch.as_tensor(
            np.array(actions, copy=True), dtype=self._action_dtype, device=self._env.device
        )
        with torch.no_grad():
            result = self._env.step(action)
        terminated = _numpy(result.terminated)
        truncated = _numpy(result.truncated)
        done = terminated | truncated
        info: dict[str, Any] = dict(result.info)
        if result.final_obs is not None and done.any():
            ended = _numpy(result.final_obs["obs"])
            final_obs = np.full(self.num_envs, None, dtype=object)
            for row in np.flatnonzero(done):
                final_obs[row] = ended[row]
            info["final_obs"] = final_obs
            info["_final_obs"] = done
        return _numpy(result.obs["obs"]), _numpy(result.reward), terminated, truncated, info


def _numpy(tensor: Tensor) -> npt.NDArray[Any]:
    """A C-ordered NumPy copy of a tensor, which the caller may keep and modify."""
    array: npt.NDArray[Any] = tensor.detach().cpu().numpy().copy()
    return array
