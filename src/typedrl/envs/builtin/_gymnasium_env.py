"""A one-row ``gymnasium.Env`` with NumPy arrays over a built-in torch env."""

from typing import Any, Final, final

import gymnasium as gym
import numpy as np
import numpy.typing as npt
import torch

from typedrl._validation import describe, no_type_check
from typedrl.envs.builtin._base import BaseTorchVecEnv
from typedrl.envs.builtin._render import Frame
from typedrl.errors import ConfigError, EnvContractError, SpecError
from typedrl.types import Obs

__all__ = ["NO_TIME_LIMIT", "GymnasiumEnvView"]

NO_TIME_LIMIT: Final = 2**62
"""A torch env time limit no episode reaches: Gymnasium's ``TimeLimit`` ends episodes instead."""

SingleAction = npt.NDArray[Any] | int | np.integer[Any]
"""An action of one row: a NumPy array of the action space's shape, or an int for ``Discrete``."""


@final
class GymnasiumEnvView(gym.Env[npt.NDArray[np.floating[Any]], SingleAction]):
    """Gymnasium's single-env interface over a one-row :class:`BaseTorchVecEnv`.

    This is what ``gymnasium.make("typedrl/<Name>-v0")`` builds (wrapped, as for
    every registered env, in Gymnasium's ``PassiveEnvChecker``, ``OrderEnforcing``
    and ``TimeLimit``), and so what ``make_vec``'s ``"sync"`` and ``"async"`` modes,
    Stable-Baselines3 and CleanRL step. The physics is the torch env's own.

    - Observations are NumPy arrays of the observation space's dtype
      (``float32`` unless the env was built with ``dtype="float64"``), rewards
      Python floats, ``terminated`` and ``truncated`` Python bools, infos empty.
    - Actions are NumPy arrays of the action space's shape (``float32`` or any
      float dtype for ``Box``); ``Discrete`` actions are ints (Python or NumPy)
      in ``[0, n)``.
    - There is no autoreset: after ``terminated`` (or ``truncated``, from the
      torch env's own time limit) the step's observation is the terminal one
      and the next call must be :meth:`reset`. The torch env has already
      started its next episode by then (it resets rows in the same step); the
      view keeps the terminal observation for :meth:`render` and starts a fresh
      episode at :meth:`reset`.
    - ``reset(seed=s)`` reseeds the torch env's stream, so the same seed gives
      the same episode; ``reset()`` continues it. It also seeds
      ``np_random``, as Gymnasium expects of every env, though the physics
      draws from the torch env's own stream.

    Args:
        env: The torch env, with ``num_envs == 1``; the view closes it on
            :meth:`close`. Registered ids build it with a time limit no episode
            reaches (``NO_TIME_LIMIT``, ``2**62`` steps), so that Gymnasium's ``TimeLimit``
            alone truncates.
        render_mode: ``None`` or ``"rgb_array"`` (frames of the torch env's
            :meth:`~BaseTorchVecEnv.render`); ``gymnasium.make`` also serves
            ``"human"`` and ``"rgb_array_list"`` through its own wrappers.

    Raises:
        ConfigError: If the env has more than one row, or the render mode is
            not one the env supports.

    Example:
        >>> import gymnasium as gym
        >>> env = gym.make("typedrl/CartPole-v0")
        >>> obs, info = env.reset(seed=0)
        >>> obs, reward, terminated, truncated, info = env.step(1)
        >>> obs.dtype.name, obs.shape, reward, terminated, truncated
        ('float32', (4,), 1.0, False, False)
        >>> env.close()
    """

    def __init__(self, env: BaseTorchVecEnv, *, render_mode: str | None = None) -> None:
        owner = type(self).__name__
        if env.num_envs != 1:
            raise ConfigError(
                f"{owner}: the torch env must have one row (num_envs=1), got "
                f"num_envs={env.num_envs}; use gymnasium.make_vec for batches"
            )
        modes = ["rgb_array"] if env.renders else []
        if render_mode is not None and render_mode not in modes:
            raise ConfigError(
                f"{owner}: render_mode must be None or one of {modes} for "
                f"{type(env).__name__}, got {describe(render_mode)}"
            )
        self._env = env
        self.observation_space = env.single_observation_space
        self.action_space = env.single_action_space
        self.render_mode = render_mode
        self.metadata = {"render_modes": modes}
        if env.renders:
            self.metadata["render_fps"] = env.render_fps
        self._action_dtype = (
            env.dtype if isinstance(self.action_space, gym.spaces.Box) else torch.int64
        )
        # The terminal observation of an episode the torch env has already restarted.
        self._final_obs: Obs | None = None

    @property
    def torch_env(self) -> BaseTorchVecEnv:
        """The wrapped one-row torch env."""
        return self._env

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.floating[Any]], dict[str, Any]]:
        """Start a new episode; see :meth:`BaseTorchVecEnv.reset` for ``seed`` and ``options``."""
        super().reset(seed=seed)
        obs, _ = self._env.reset(seed=seed, options=options)
        self._final_obs = None
        return self._to_numpy(obs), {}

    @no_type_check  # the action comes from the user: checked here, in words
    def step(
        self, action: SingleAction
    ) -> tuple[npt.NDArray[np.floating[Any]], float, bool, bool, dict[str, Any]]:
        """Advance the episode by one step.

        Returns:
            ``(obs, reward, terminated, truncated, info)``; when the episode
            ends, ``obs`` is its terminal observation.

        Raises:
            SpecError: If the action does not fit the action space (shape, an
                integer ``Discrete`` action in ``[0, n)``).
            EnvContractError: If the episode ended at the previous step and
                :meth:`reset` was not called since.
        """
        if self._final_obs is not None:
            raise EnvContractError(
                f"{type(self).__name__}.step: the episode ended at the previous step "
                "(terminated or truncated); call reset() before stepping again"
            )
        with torch.no_grad():
            result = self._env.step(self._to_torch(action))
        terminated = bool(result.terminated[0])
        truncated = bool(result.truncated[0])
        obs = result.obs
        if (terminated or truncated) and result.final_obs is not None:
            obs = self._final_obs = result.final_obs
        return self._to_numpy(obs), float(result.reward[0]), terminated, truncated, {}

    def render(self) -> Frame | None:
        """The frame of the current state (the terminal one once an episode ended).

        Returns:
            An RGB ``uint8`` frame ``[height, width, 3]`` in ``"rgb_array"``
            mode, ``None`` without a render mode.
        """
        if self.render_mode is None:
            return None
        return self._env.render(0, obs=self._final_obs)

    def close(self) -> None:
        """Close the torch env."""
        self._env.close()

    def _to_numpy(self, obs: Obs) -> npt.NDArray[np.floating[Any]]:
        # A C-ordered copy of the row: the caller may keep and modify it.
        row: npt.NDArray[np.floating[Any]] = obs["obs"][0].detach().cpu().numpy().copy()
        return row

    def _to_torch(self, action: object) -> torch.Tensor:
        """The action as a ``[1, *action_shape]`` tensor, checked against the action space."""
        space = self.action_space
        array = np.array(action, copy=True)
        if isinstance(space, gym.spaces.Discrete):
            valid = (
                array.shape == ()
                and np.issubdtype(array.dtype, np.integer)
                and int(space.start) <= int(array) < int(space.start + space.n)
            )
            if not valid:
                raise SpecError(
                    f"{type(self).__name__}.step: expected an int action in [{space.start}, "
                    f"{space.start + space.n}) for {space}, got {describe(action)}"
                )
        elif array.shape != space.shape or not np.issubdtype(array.dtype, np.number):
            raise SpecError(
                f"{type(self).__name__}.step: expected a numeric action of shape "
                f"{space.shape} for {space}, got {describe(action)}"
            )
        return torch.as_tensor(array, dtype=self._action_dtype, device=self._env.device).unsqueeze(
            0
        )
