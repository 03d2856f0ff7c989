"""Adapter from any Gymnasium vector env to the typedrl vector-env contract."""

from typing import Any, Literal, final

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from typedrl import _validation
from typedrl._tensor_checks import ActionChecker, action_dtype_for
from typedrl._types import Action, Obs
from typedrl._validation import describe
from typedrl._values import StepResult
from typedrl.envs._spaces import ObservationConverter
from typedrl.errors import ConfigError, SpecError

__all__ = ["GymnasiumVecEnv"]

_FLOAT_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64}


def _autoreset_mode(env: gym.vector.VectorEnv[Any, Any, Any]) -> AutoresetMode:
    """Read the env's autoreset mode; Gymnasium's default is ``NEXT_STEP``."""
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    try:
        return mode if isinstance(mode, AutoresetMode) else AutoresetMode(mode)
    except ValueError as error:
        valid = [m.value for m in AutoresetMode]
        raise ConfigError(
            f"env.metadata['autoreset_mode'] must be one of {valid}, got {describe(mode)}"
        ) from error


@final
class GymnasiumVecEnv:
    """Present any Gymnasium vector env as a typedrl :class:`~typedrl.protocols.VecEnv`.

    Whatever the wrapped env's autoreset mode, the adapter keeps typedrl's
    same-step contract: rows that end are reset before ``step`` returns,
    ``final_obs`` holds their exact terminal observation, and ``terminated`` and
    ``truncated`` stay apart.

    ========== ================================================================
    mode       how the adapter keeps the contract
    ========== ================================================================
    SAME_STEP  the env resets in ``step``; terminal observations come from
               ``info["final_obs"]``.
    NEXT_STEP  after a step in which rows ended, the adapter resets just those
               rows with ``reset(options={"reset_mask": done})``, so the env's
               own reset step never happens.
    DISABLED   the same partial reset (the env never resets on its own).
    ========== ================================================================

    Partial resets need an env that honours ``options["reset_mask"]``:
    Gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv`` (and wrappers around
    them) do. Some ``vector_entry_point`` envs, such as Gymnasium's NumPy
    ``CartPoleVectorEnv``, are ``NEXT_STEP`` and ignore it: their reset happens
    inside the next ``step``, while the other rows take a real step. The
    adapter then returns the terminal observation in ``obs`` for the row that
    ended (and in ``final_obs``) and, on the next step, marks that row's
    transition as a ghost (``result.valid[i] == False``, reward 0, never to be
    trained on). :attr:`emits_ghost_steps` says which case applies.

    Observations become a TensorDict (see ``typedrl.envs._spaces`` for
    dtypes); rewards float ``[num_envs]`` in the float dtype; flags
    ``torch.bool``. ``info`` is Gymnasium's info dict (NumPy values) without
    the ``final_obs`` entries, which move to ``result.final_obs``.

    Args:
        env: The Gymnasium vector env; the adapter owns it and closes it.
        device: Device of every returned tensor and of the accepted actions.
        float_dtype: Dtype of rewards and floating-point observations.
        clip_actions: Clip ``Box`` actions to the action space's bounds.
        partial_reset: Whether the env honours ``reset_mask``; ``None`` decides
            from the env type (``True`` for Sync/Async vector envs).
        default_seed: Seed of the first ``reset`` when it is called without one.

    Example:
        >>> import gymnasium as gym, torch
        >>> raw = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
        >>> env = GymnasiumVecEnv(raw)
        >>> obs, _ = env.reset(seed=0)
        >>> result = env.step(torch.zeros(2, dtype=torch.int64))
        >>> list(result.obs["obs"].shape), result.reward.dtype, env.emits_ghost_steps
        ([2, 4], torch.float32, False)
    """

    @_validation.no_type_check
    def __init__(
        self,
        env: gym.vector.VectorEnv[Any, Any, Any],
        *,
        device: torch.device | str = "cpu",
        float_dtype: Literal["float32", "float64"] = "float32",
        clip_actions: bool = False,
        partial_reset: bool | None = None,
        default_seed: int | None = None,
    ) -> None:
        if not isinstance(env, gym.vector.VectorEnv):
            raise ConfigError(
                f"GymnasiumVecEnv wraps a gymnasium.vector.VectorEnv, got {describe(env)}; "
                "build one with gymnasium.make_vec or typedrl.envs.make"
            )
        if float_dtype not in _FLOAT_DTYPES:
            raise ConfigError(
                f"GymnasiumVecEnv.float_dtype must be one of {sorted(_FLOAT_DTYPES)}, "
                f"got {describe(float_dtype)}"
            )
        self._env = env
        self._device = torch.device(device)
        self._on_cpu = self._device.type == "cpu"
        self._num_envs = int(env.num_envs)
        self._float_dtype = _FLOAT_DTYPES[float_dtype]
        self._mode = _autoreset_mode(env)
        if partial_reset is None:
            partial_reset = isinstance(env.unwrapped, SyncVectorEnv | AsyncVectorEnv)
        self._partial_reset = bool(partial_reset)
        if self._mode is AutoresetMode.DISABLED and not self._partial_reset:
            raise ConfigError(
                "an env with autoreset disabled must accept reset(options={'reset_mask': ...}); "
                "pass partial_reset=True if it does"
            )
        self._ghosts = self._mode is AutoresetMode.NEXT_STEP and not self._partial_reset
        self._observations = ObservationConverter(
            env.single_observation_space,
            num_envs=env.num_envs,
            device=self._device,
            float_dtype=self._float_dtype,
        )
        self._action_space = env.single_action_space
        self._action_dtype = action_dtype_for(self._action_space, self._float_dtype)
        self._check_action = ActionChecker(
            num_envs=self._num_envs,
            space=self._action_space,
            device=self._device,
            where="GymnasiumVecEnv.step",
        )
        self._clip: tuple[torch.Tensor, torch.Tensor] | None = None
        if clip_actions:
            if not isinstance(self._action_space, gym.spaces.Box):
                raise ConfigError(
                    f"clip_actions needs a Box action space, got {self._action_space!r}"
                )
            self._clip = (
                torch.as_tensor(self._action_space.low, device=self._device),
                torch.as_tensor(self._action_space.high, device=self._device),
            )
        self._numpy_action_dtype = (
            self._action_space.dtype if self._action_space.dtype is not None else np.int64
        )
        self._numpy_float_dtype = np.float32 if float_dtype == "float32" else np.float64
        # Exactly these classes (not subclasses, not wrappers) are known to return
        # arrays that nothing else holds: see _returns_fresh_arrays.
        self._known_env: SyncVectorEnv | AsyncVectorEnv | None = None
        if type(env) is SyncVectorEnv or type(env) is AsyncVectorEnv:
            self._known_env = env
        self._same_step = self._mode is AutoresetMode.SAME_STEP
        self._default_seed = default_seed
        self._pending_ghosts = np.zeros(env.num_envs, dtype=np.bool_)
        self._all_valid = torch.ones(env.num_envs, dtype=torch.bool, device=self._device)
        self._closed = False

    @property
    def num_envs(self) -> int:
        """Number of rows of the wrapped env."""
        return self._num_envs

    @property
    def device(self) -> torch.device:
        """Device of every returned tensor."""
        return self._device

    @property
    def single_observation_space(self) -> gym.Space[Any]:
        """The wrapped env's single observation space."""
        space: gym.Space[Any] = self._env.single_observation_space
        return space

    @property
    def single_action_space(self) -> gym.Space[Any]:
        """The wrapped env's single action space."""
        space: gym.Space[Any] = self._env.single_action_space
        return space

    @property
    def provides_final_obs(self) -> bool:
        """Always ``True``: terminal observations are exact in every mode."""
        return True

    @property
    def autoreset_mode(self) -> AutoresetMode:
        """The wrapped env's own autoreset mode."""
        return self._mode

    @property
    def emits_ghost_steps(self) -> bool:
        """``True`` when resets happen inside the next step (see the class docstring)."""
        return self._ghosts

    @property
    def env(self) -> gym.vector.VectorEnv[Any, Any, Any]:
        """The wrapped Gymnasium vector env."""
        return self._env

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Reset every row with ``seed``, passed to the wrapped env's ``reset``.

        Sync and Async vector envs seed row ``i`` with ``seed + i``; a
        ``vector_entry_point`` env applies its own rule (Gymnasium's NumPy
        ``CartPoleVectorEnv`` seeds one generator for all rows).
        """
        if seed is None:
            seed, self._default_seed = self._default_seed, None
        else:
            self._default_seed = None
        raw_obs, info = self._env.reset(seed=seed, options=options)
        self._pending_ghosts[:] = False
        return self._observations.batch(raw_obs), info

    def step(self, action: Action) -> StepResult:
        """Step every row; rows that end are reset before this returns (see the class)."""
        self._check_action(action)
        if self._clip is not None:
            action = torch.clamp(action, self._clip[0], self._clip[1])
        if not self._on_cpu:
            action = action.detach().cpu()
        elif action.requires_grad:
            action = action.detach()
        raw_obs, raw_reward, raw_terminated, raw_truncated, info = self._env.step(
            action.numpy().astype(self._numpy_action_dtype, copy=False)
        )
        known = self._known_env
        fresh = known is not None and known.copy is True  # see _returns_fresh_arrays
        # Unless the arrays are known to be fresh, copy them: the tensors must not
        # alias arrays the env may reuse.
        terminated = _owned_flags(raw_terminated, fresh)
        truncated = _owned_flags(raw_truncated, fresh)
        done = terminated | truncated
        # NumPy on the host, so no device synchronisation; on a few rows,
        # count_nonzero costs a fraction of ndarray.any().
        any_done = np.count_nonzero(done) > 0

        valid = self._all_valid
        if self._ghosts:
            if self._pending_ghosts.any():
                valid = self._to_device(torch.from_numpy(~self._pending_ghosts))
            self._pending_ghosts = done
        obs = self._observations.batch(raw_obs, copy=not fresh)
        if not any_done:
            final_obs = obs
        elif self._same_step:
            final_obs = self._same_step_final_obs(raw_obs, info, done)
        elif self._partial_reset:
            # Reset just the rows that ended, so their next step is a real step.
            final_obs = obs
            reset_obs, reset_info = self._env.reset(options={"reset_mask": done.copy()})
            obs = self._observations.batch(reset_obs, copy=not self._returns_fresh_arrays())
            if reset_info:
                info = {**info, "reset_info": reset_info}
        else:
            # Ghost handling: the env resets these rows inside the next step.
            final_obs = obs
        # astype copies, so the reward never aliases the env's array.
        reward = torch.from_numpy(np.asarray(raw_reward).astype(self._numpy_float_dtype))
        terminated_t, truncated_t = torch.from_numpy(terminated), torch.from_numpy(truncated)
        if not self._on_cpu:
            reward, terminated_t, truncated_t = (
                self._to_device(reward),
                self._to_device(terminated_t),
                self._to_device(truncated_t),
            )
        return StepResult.from_trusted(
            obs, reward, terminated_t, truncated_t, info, final_obs=final_obs, valid=valid
        )

    def _returns_fresh_arrays(self) -> bool:
        """Whether the env's latest ``step``/``reset`` arrays are copies nothing else holds.

        Gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv`` always return new
        reward and flag arrays and, with ``copy=True`` (their default), a
        ``copy.deepcopy`` of their observation buffers: the adapter then
        converts them without copying them again. ``copy`` is read on every
        call because it is a public attribute that may change.
        """
        known = self._known_env
        return known is not None and known.copy is True

    def _to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor if self._on_cpu else tensor.to(self._device, non_blocking=True)

    def _same_step_final_obs(self, raw_obs: Any, info: dict[str, Any], done: np.ndarray) -> Obs:
        """Build final_obs from Gymnasium's per-row ``info["final_obs"]`` object array."""
        if "final_obs" not in info:
            raise SpecError(
                "GymnasiumVecEnv.step: a same-step autoreset env ended rows "
                f"{done.nonzero()[0].tolist()} without info['final_obs']"
            )
        rows: list[int] = done.nonzero()[0].tolist()
        terminal = info.pop("final_obs")
        info.pop("_final_obs", None)
        return self._observations.batch_with_rows(raw_obs, rows, [terminal[i] for i in rows])

    def close(self) -> None:
        """Close the wrapped env (idempotent)."""
        if not self._closed:
            self._env.close()
            self._closed = True


_BOOL = np.dtype(np.bool_)


def _owned_flags(flags: Any, fresh: bool) -> np.ndarray:
    """``flags`` as a boolean array that nothing else holds (a copy unless ``fresh``)."""
    # An identity test is enough: a boolean dtype that is not the canonical
    # instance only costs the copy.
    if fresh and type(flags) is np.ndarray and flags.dtype is _BOOL:
        return flags
    return np.array(flags, dtype=np.bool_)
