"""Adapter from any Gymnasium vector env to the typedrl vector-env contract."""

import math
from typing import Any, Final, Literal, final

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from typedrl._results import StepResult
from typedrl._tensor_checks import ActionChecker, action_dtype_for
from typedrl._validation import describe
from typedrl.envs._spaces import (
    ObservationConverter,
    as_numpy,
    check_finite,
    new_tensordict,
)
from typedrl.errors import (
    ConfigError,
    EnvContractError,
    EnvError,
    NonFiniteError,
    SpecError,
    TypedRLError,
)
from typedrl.seeding import env_seed
from typedrl.types import Action, Obs, Valid

__all__ = ["GymnasiumVecEnv", "check_env_hint"]

_FLOAT_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64}
_STEP = "GymnasiumVecEnv.step"
_RESET = "GymnasiumVecEnv.reset"
_PARTIAL_RESET_OBS = "reset(options={'reset_mask': ...}) observation"


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
    dtypes), described by :attr:`single_observation_space`; rewards float
    ``[num_envs]`` in the float dtype; flags ``torch.bool``. ``info`` is
    Gymnasium's info dict (NumPy values) without the ``final_obs`` entries,
    which move to ``result.final_obs``.

    Observations never alias the wrapped env's arrays. A Gymnasium
    ``SyncVectorEnv`` or ``AsyncVectorEnv`` is stepped with its ``copy``
    attribute switched off for the call (and then restored): the adapter's own
    copy or cast of the observation replaces the env's ``copy.deepcopy`` of it.

    Every output of the wrapped env is checked before it is converted, on
    its metadata: each observation leaf (of ``reset``,
    ``step``, the partial resets and each terminal observation) must have the
    shape ``[num_envs, *space.shape]`` of the wrapped env's
    ``single_observation_space`` and a dtype that converts to the leaf's
    dtype without losing meaning; rewards must be a real ``[num_envs]`` array,
    ``terminated`` and ``truncated`` bool ``[num_envs]`` arrays, ``info`` a
    dict. Anything else raises :class:`~typedrl.errors.EnvContractError`
    naming the key and the step (counted from 1 after each ``reset``). The
    returned tensors are on :attr:`device` by construction.

    Floating-point observation leaves and rewards must be finite (one
    ``np.isfinite(array).all()`` per array, on the host, where the arrays
    are anyway), so that a NaN never reaches a policy. A non-finite value
    raises :class:`~typedrl.errors.NonFiniteError` naming the key, the row,
    the value and the step.

    An exception raised inside the wrapped env's ``reset`` or ``step`` becomes
    :class:`~typedrl.errors.EnvError` naming the env, the call, the step and
    the exception's type and message (chained as its cause). Every message of
    the env's faults is one line and ends with the next step: ``typedrl
    check-env <env_id>`` when ``env_id`` is known.

    Seeds are folded into the range NumPy's legacy ``RandomState`` accepts
    for every row (:func:`~typedrl.seeding.env_seed`: row ``i`` of a Sync or
    Async vector env gets ``seed + i < 2**32``), so the 63-bit seeds a run
    derives reach envs such as dm_control's; smaller seeds pass unchanged.

    Args:
        env: The Gymnasium vector env; the adapter owns it and closes it.
        device: Device of every returned tensor and of the accepted actions.
        float_dtype: Dtype of rewards and floating-point observations.
        clip_actions: Clip ``Box`` actions to the action space's bounds.
        partial_reset: Whether the env honours ``reset_mask``; ``None`` decides
            from the env type (``True`` for Sync/Async vector envs).
        default_seed: Seed of the first ``reset`` when it is called without one.
        env_id: The id the env was built from (``"CartPole-v1"``,
            ``"my_envs:make_env"``), named in messages; ``None`` names the
            wrapped env's ``spec.id`` or type instead.

    Example:
        >>> import gymnasium as gym, torch
        >>> raw = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
        >>> env = GymnasiumVecEnv(raw)
        >>> obs, _ = env.reset(seed=0)
        >>> result = env.step(torch.zeros(2, dtype=torch.int64))
        >>> list(result.obs["obs"].shape), result.reward.dtype, env.emits_ghost_steps
        ([2, 4], torch.float32, False)
    """

    def __init__(
        self,
        env: gym.vector.VectorEnv[Any, Any, Any],
        *,
        device: torch.device | str = "cpu",
        float_dtype: Literal["float32", "float64"] = "float32",
        clip_actions: bool = False,
        partial_reset: bool | None = None,
        default_seed: int | None = None,
        env_id: str | None = None,
    ) -> None:
        self.env: Final = env
        """The wrapped Gymnasium vector env."""
        self.device: Final = torch.device(device)
        """Device of every returned tensor."""
        self.num_envs: Final = int(env.num_envs)
        """Number of rows of the wrapped env."""
        self.autoreset_mode: Final = _autoreset_mode(env)
        """The wrapped env's own autoreset mode."""
        self.provides_final_obs: Final = True
        """Always ``True``: terminal observations are exact in every mode."""
        self._on_cpu = self.device.type == "cpu"
        self._float_dtype = _FLOAT_DTYPES[float_dtype]
        if partial_reset is None:
            partial_reset = isinstance(env.unwrapped, SyncVectorEnv | AsyncVectorEnv)
        self._partial_reset = bool(partial_reset)
        if self.autoreset_mode is AutoresetMode.DISABLED and not self._partial_reset:
            raise ConfigError(
                "an env with autoreset disabled must accept reset(options={'reset_mask': ...}); "
                "pass partial_reset=True if it does"
            )
        self.emits_ghost_steps: Final = (
            self.autoreset_mode is AutoresetMode.NEXT_STEP and not self._partial_reset
        )
        """``True`` when resets happen inside the next step (see the class docstring)."""
        self._observations = ObservationConverter(
            env.single_observation_space,
            num_envs=env.num_envs,
            device=self.device,
            float_dtype=self._float_dtype,
        )
        # The one leaf that step() converts inline, on the CPU (the converter does the rest).
        self._obs_leaf = self._observations.single_leaf if self._on_cpu else None
        self._batch_size = torch.Size((self.num_envs,))
        self._action_space = env.single_action_space
        self._action_dtype = action_dtype_for(self._action_space, self._float_dtype)
        self._check_action = ActionChecker(
            num_envs=self.num_envs,
            space=self._action_space,
            device=self.device,
            where="GymnasiumVecEnv.step",
        )
        self._action_shape = torch.Size((self.num_envs, *(self._action_space.shape or ())))
        self._accepted_action_dtype: torch.dtype | None = None
        self._clip: tuple[torch.Tensor, torch.Tensor] | None = None
        if clip_actions:
            if not isinstance(self._action_space, gym.spaces.Box):
                raise ConfigError(
                    f"clip_actions needs a Box action space, got {self._action_space!r}"
                )
            self._clip = (
                torch.as_tensor(self._action_space.low, device=self.device),
                torch.as_tensor(self._action_space.high, device=self.device),
            )
        self._numpy_action_dtype = np.dtype(
            self._action_space.dtype if self._action_space.dtype is not None else np.int64
        )
        self._numpy_float_dtype = np.dtype(np.float32 if float_dtype == "float32" else np.float64)
        # Whether step() views accepted actions as NumPy inline: no clipping, on the
        # host, a torch dtype whose NumPy dtype is the env's (see _accept_action).
        self._plain_actions = False
        # Exactly these classes (not subclasses, not wrappers) are known to return
        # reward and flag arrays that nothing else holds, and to copy their
        # observation buffers only when ``copy`` is set: see _returns_fresh_arrays.
        self._known_env: SyncVectorEnv | AsyncVectorEnv | None = None
        if type(env) is SyncVectorEnv or type(env) is AsyncVectorEnv:
            self._known_env = env
        self._same_step = self.autoreset_mode is AutoresetMode.SAME_STEP
        self._default_seed = default_seed
        self._pending_ghosts = np.zeros(env.num_envs, dtype=np.bool_)
        self._all_valid = torch.ones(env.num_envs, dtype=torch.bool, device=self.device)
        self._row_shape = (self.num_envs,)
        self.env_id: Final = env_id
        """The id the env was built from, or ``None``."""
        self._name, self._next_step = _names(env, env_id)
        # Steps since the last reset, for messages.
        self._steps = 0
        self._closed = False

    @property
    def single_observation_space(self) -> gym.Space[Any]:
        """The space of the observations the adapter returns, one row.

        The wrapped env's single observation space with the dtypes the adapter
        converts to: a floating ``Box`` in the adapter's float dtype, with the
        same bounds (a float64 ``Box`` becomes a float32 one by default),
        ``Discrete`` and ``MultiDiscrete`` spaces int64 ones. It is the wrapped
        env's space itself when nothing is converted; ``env.single_observation_space``
        is always the wrapped env's own.
        """
        return self._observations.converted_space

    @property
    def single_action_space(self) -> gym.Space[Any]:
        """The wrapped env's single action space."""
        space: gym.Space[Any] = self.env.single_action_space
        return space

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Reset every row with ``seed``, passed to the wrapped env's ``reset``.

        ``seed`` is first folded by :func:`~typedrl.seeding.env_seed` (a
        seed up to ``2**32 - num_envs`` is passed unchanged). Sync and Async
        vector envs seed row ``i`` with ``seed + i``; a ``vector_entry_point``
        env applies its own rule (Gymnasium's NumPy ``CartPoleVectorEnv``
        seeds one generator for all rows).

        Raises:
            EnvContractError: If the observation or info does not fit the contract.
            NonFiniteError: If a floating-point observation is NaN or infinite.
            EnvError: If the wrapped env raised an exception of its own.
        """
        if seed is None:
            seed, self._default_seed = self._default_seed, None
        else:
            self._default_seed = None
        if seed is not None:
            seed = env_seed(seed, rows=self.num_envs)
        try:
            try:
                outputs = self.env.reset(seed=seed, options=options)
            except TypedRLError:
                raise
            except Exception as error:
                raise self._env_raised(error, f"reset(seed={seed})") from error
            raw_obs, info = _reset_outputs(outputs, _RESET, None)
            self._pending_ghosts[:] = False
            self._steps = 0
            return self._observations.batch(raw_obs, where=_RESET), info
        except _ENV_FAULTS as error:
            self._add_next_step(error)
            raise

    def step(self, action: Action) -> StepResult:
        """Step every row; rows that end are reset before this returns (see the class).

        Raises:
            SpecError: If the action's type, shape, dtype or device is wrong.
            EnvContractError: If an output of the wrapped env does not have the
                shape or dtype the contract asks for (see the class).
            NonFiniteError: If a floating-point observation or a reward is NaN
                or infinite.
            EnvError: If the wrapped env raised an exception of its own.
        """
        # The hot path reads straight through; most checks of an output are
        # written out here, since a call costs about as much as the check (the
        # two flag arrays share one helper whose first line is that check: the
        # adapter-overhead benchmark shows no difference). Whatever fails
        # a check (a new kind of action, an output to check or convert the slow
        # way) or needs more work (ghost rows, rows that ended) goes to a named
        # method or function.
        if not (
            type(action) is torch.Tensor
            and action.dtype is self._accepted_action_dtype
            and action.shape == self._action_shape
            and action.device == self.device
        ):
            self._accept_action(action)

        # 1. The action as NumPy; _step steps the env and checks its outputs (2-4).
        numpy_action = (
            action.numpy()
            if self._plain_actions and not action.requires_grad
            else self._numpy_action(action)
        )
        try:
            return self._step(numpy_action)
        except _ENV_FAULTS as error:
            self._add_next_step(error)
            raise

    def _step(self, numpy_action: np.ndarray) -> StepResult:
        """:meth:`step` from the action as the env takes it (see :meth:`step`)."""
        known = self._known_env
        self._steps = step = self._steps + 1
        outputs = self._env_step(numpy_action, step)
        if not (type(outputs) is tuple and len(outputs) == 5):
            outputs = _outputs(outputs, 5, _STEP, step)
        raw_obs, raw_reward, raw_terminated, raw_truncated, info = outputs
        if type(info) is not dict:
            _check_info(info, _STEP, step)
        # Reward and flag arrays of a known env are always new (see _known_env).
        fresh = known is not None
        row_shape = self._row_shape
        if not (
            type(raw_reward) is np.ndarray
            and raw_reward.shape == row_shape
            and raw_reward.dtype.kind in "fiu"
        ):
            raw_reward = _reward(raw_reward, row_shape, step)
        # Unless the arrays are known to be fresh, the flags are copied: the
        # tensors must not alias arrays the env may reuse.
        terminated = _owned_flags(raw_terminated, row_shape, "terminated", step, fresh=fresh)
        truncated = _owned_flags(raw_truncated, row_shape, "truncated", step, fresh=fresh)
        valid = (
            self._ghost_validity(terminated, truncated)
            if self.emits_ghost_steps
            else self._all_valid
        )

        # 2. The observation, always copied or cast (it may be the env's own buffer):
        # one array under "obs" inline, anything else by the converter.
        leaf = self._obs_leaf
        if (
            leaf is not None
            and type(raw_obs) is np.ndarray
            and raw_obs.shape == leaf.batch_shape
            and raw_obs.dtype.kind in leaf.kinds
        ):
            # astype always copies; its cast costs a fraction of torch's.
            obs_array = raw_obs.astype(leaf.dtype)
            if leaf.floating and not np.isfinite(obs_array).all():
                check_finite(obs_array, leaf, (_STEP, step, "observation"))
            obs_tensor = torch.from_numpy(obs_array)
            obs = new_tensordict({"obs": obs_tensor}, self._batch_size, self.device)
        else:
            obs = self._observations.batch(raw_obs, copy=True, where=_STEP, step=step)

        # 3. Rows that ended. NumPy on the host, so no device synchronisation; on
        # a few rows, count_nonzero costs a fraction of ndarray.any() (and of
        # building done).
        if np.count_nonzero(terminated) == 0 and np.count_nonzero(truncated) == 0:
            final_obs = obs
        else:
            obs, final_obs, info = self._ended(obs, raw_obs, info, terminated | truncated, step)

        # 4. The result; astype copies, so the reward never aliases the env's array.
        reward_array = raw_reward.astype(self._numpy_float_dtype)
        if not np.isfinite(reward_array).all():
            raise _nonfinite_reward(raw_reward, reward_array, step)
        reward = torch.from_numpy(reward_array)
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

    def _env_step(self, numpy_action: np.ndarray, step: int) -> Any:
        """The wrapped env's ``step``; an exception of its own becomes :class:`EnvError`."""
        known = self._known_env
        try:
            if known is None:
                return self.env.step(numpy_action)
            # The observation is copied (or cast) by step() in any case, so the env's
            # own copy of it (a copy.deepcopy) is skipped; the setting is restored.
            copy_setting = known.copy
            known.copy = False
            try:
                return known.step(numpy_action)
            finally:
                known.copy = copy_setting
        except TypedRLError:
            raise
        except Exception as error:
            raise self._env_raised(error, f"step {step}") from error

    def _numpy_action(self, action: Action) -> np.ndarray:
        """The accepted ``action``, clipped if configured, as the NumPy array the env expects."""
        if self._clip is not None:
            action = torch.clamp(action, self._clip[0], self._clip[1])
        if not self._on_cpu:
            action = action.detach().cpu()
        elif action.requires_grad:
            action = action.detach()
        numpy_action = action.numpy()
        if numpy_action.dtype is not self._numpy_action_dtype:
            numpy_action = numpy_action.astype(self._numpy_action_dtype)
        return numpy_action

    def _accept_action(self, action: Action) -> None:
        """Check an action unlike the last one accepted; remember its dtype if it passes.

        An action like the last one accepted (same dtype, shape and device)
        needs no second look: the check reads nothing else.
        """
        self._check_action(action)
        self._accepted_action_dtype = action.dtype
        self._plain_actions = (
            self._clip is None
            and self._on_cpu
            and torch.empty(0, dtype=action.dtype).numpy().dtype is self._numpy_action_dtype
        )

    def _ghost_validity(self, terminated: np.ndarray, truncated: np.ndarray) -> Valid:
        """Rows whose transition is real, for an env that resets inside the next step.

        The rows that ended on the previous step took their env's reset in this
        step: their transitions are ghosts. The rows that end now are next.
        """
        valid = self._all_valid
        if self._pending_ghosts.any():
            valid = self._to_device(torch.from_numpy(~self._pending_ghosts))
        self._pending_ghosts = terminated | truncated
        return valid

    def _ended(
        self, obs: Obs, raw_obs: Any, info: dict[str, Any], done: np.ndarray, step: int
    ) -> tuple[Obs, Obs, dict[str, Any]]:
        """``(obs, final_obs, info)`` of a step in which the rows ``done`` ended."""
        if self._same_step:
            # The env has reset the rows; their terminal observations are in info.
            return obs, self._same_step_final_obs(raw_obs, info, done, step), info
        if not self._partial_reset:
            # Ghost handling: the env resets these rows inside the next step.
            return obs, obs, info
        # Reset just the rows that ended, so their next step is a real step.
        try:
            outputs = self.env.reset(options={"reset_mask": done})
        except TypedRLError:
            raise
        except Exception as error:
            rows = done.nonzero()[0].tolist()
            call = f"reset(options={{'reset_mask': ...}}) of rows {rows} after step {step}"
            raise self._env_raised(error, call) from error
        reset_obs, reset_info = _reset_outputs(outputs, _STEP, step)
        new_obs = self._observations.batch(
            reset_obs,
            copy=not self._returns_fresh_arrays(),
            where=_STEP,
            step=step,
            what=_PARTIAL_RESET_OBS,
        )
        if reset_info:
            info = {**info, "reset_info": reset_info}
        return new_obs, obs, info

    def _returns_fresh_arrays(self) -> bool:
        """Whether the env's latest ``reset`` arrays are copies nothing else holds.

        Gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv`` always return new
        reward and flag arrays and, with ``copy=True`` (their default), a
        ``copy.deepcopy`` of their observation buffers: the adapter then
        converts them without copying them again. ``copy`` is read on every
        call because it is a public attribute that may change.

        ``step`` does not ask: it calls these envs with ``copy`` switched off
        for the call and copies (or casts, which copies) the observation
        itself, which costs a fraction of the ``deepcopy``.
        """
        known = self._known_env
        return known is not None and known.copy is True

    def _env_raised(self, error: Exception, call: str) -> EnvError:
        """The :class:`EnvError` for an exception the wrapped env raised in ``call``."""
        said = " ".join(str(error).split())
        return EnvError(f"the env {self._name} raised {type(error).__name__} in {call}: {said}")

    def _add_next_step(self, error: TypedRLError) -> None:
        """End the message of an env's fault with the next step (once)."""
        text = str(error)
        if not text.endswith(self._next_step):
            error.args = (f"{text}; {self._next_step}", *error.args[1:])

    def _to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor if self._on_cpu else tensor.to(self.device, non_blocking=True)

    def _same_step_final_obs(
        self, raw_obs: Any, info: dict[str, Any], done: np.ndarray, step: int
    ) -> Obs:
        """Build final_obs from Gymnasium's per-row ``info["final_obs"]`` object array."""
        rows: list[int] = done.nonzero()[0].tolist()
        if "final_obs" not in info:
            raise SpecError(
                f"{_STEP} (step {step}): a same-step autoreset env ended rows {rows} "
                "without info['final_obs']"
            )
        terminal = info.pop("final_obs")
        info.pop("_final_obs", None)
        try:
            items = [terminal[i] for i in rows]
        except (TypeError, IndexError, KeyError) as error:
            raise EnvContractError(
                f"{_STEP} (step {step}): info['final_obs'] must hold one observation per row "
                f"({self.num_envs} rows; rows {rows} ended), got {describe(terminal)}"
            ) from error
        return self._observations.batch_with_rows(
            raw_obs, rows, items, where=_STEP, step=step, what="info['final_obs'] observation"
        )

    def close(self) -> None:
        """Close the wrapped env (idempotent)."""
        if not self._closed:
            self.env.close()
            self._closed = True


def _names(env: gym.vector.VectorEnv[Any, Any, Any], env_id: str | None) -> tuple[str, str]:
    """How messages name the env, and the next step they end with."""
    spec = env.spec
    named = env_id if env_id is not None else (spec.id if spec is not None else None)
    name = repr(named) if named is not None else type(env.unwrapped).__name__
    return name, check_env_hint(env_id)


def check_env_hint(env_id: str | None) -> str:
    """The next step that ends the message of every fault of an env: check it alone.

    Example:
        >>> check_env_hint("my_envs:make_env")
        'run `typedrl check-env my_envs:make_env` for a report of every rule'
    """
    if env_id is None:
        return "check the env with typedrl.envs.check_vec_env for a report of every rule"
    return f"run `typedrl check-env {env_id}` for a report of every rule"


# What an env's fault raises out of reset and step, each given the next step.
_ENV_FAULTS = (EnvContractError, NonFiniteError, EnvError)


def _nonfinite_reward(raw: np.ndarray, converted: np.ndarray, step: int) -> NonFiniteError:
    """The error for a step whose reward (``raw``, as ``converted``) is not all finite."""
    rows: list[int] = (~np.isfinite(converted)).nonzero()[0].tolist()
    row = rows[0]
    value = raw[row].item()
    # A finite value beyond the float dtype's range became infinite in the cast.
    shown = repr(value) if not math.isfinite(value) else f"{value!r} (inf as {converted.dtype})"
    return NonFiniteError(
        f"{_STEP} (step {step}): reward of row {row} is {shown}, expected a finite number "
        f"(non-finite rows: {rows})"
    )


# An identity test is enough on the fast path: a boolean dtype that is not the
# canonical instance only costs the checked copy.
_BOOL = np.dtype(np.bool_)


def _owned_flags(
    flags: Any, row_shape: tuple[int], name: str, step: int, *, fresh: bool
) -> np.ndarray:
    """``flags``, checked (bool ``[num_envs]``), as an array nothing else holds.

    A copy unless ``fresh``.
    """
    if type(flags) is np.ndarray and flags.dtype is _BOOL and flags.shape == row_shape:
        return flags if fresh else flags.copy()
    array = _row_array(flags, row_shape, name, step, kinds="b", expected="bool ([num_envs] flags)")
    return np.array(array, dtype=np.bool_, copy=True)


def _reward(reward: object, row_shape: tuple[int], step: int) -> np.ndarray:
    """``reward`` as an array, checked: real ``[num_envs]``."""
    return _row_array(
        reward, row_shape, "reward", step, kinds="fiu", expected="a real (float or integer) dtype"
    )


def _row_array(
    value: object, row_shape: tuple[int], name: str, step: int, *, kinds: str, expected: str
) -> np.ndarray:
    """The env's per-row output ``name`` as an array: a dtype of ``kinds``, ``[num_envs]``."""
    array = as_numpy(value, (_STEP, step, name))
    if array.dtype.kind not in kinds:
        raise EnvContractError(
            f"{_STEP} (step {step}): {name} has dtype {array.dtype}, expected {expected}"
        )
    if array.shape != row_shape:
        raise EnvContractError(
            f"{_STEP} (step {step}): {name} has shape {list(array.shape)}, expected "
            f"{list(row_shape)} ([num_envs])"
        )
    return array


def _check_info(info: object, where: str, step: int | None) -> None:
    if not isinstance(info, dict):
        at = where if step is None else f"{where} (step {step})"
        raise EnvContractError(f"{at}: info must be a dict, got {describe(info)}")


def _outputs(outputs: Any, length: int, where: str, step: int | None) -> tuple[Any, ...]:
    """``outputs`` as a tuple if it is a tuple or list of ``length`` items; raise otherwise."""
    if isinstance(outputs, tuple | list) and len(outputs) == length:
        return tuple(outputs)
    at = where if step is None else f"{where} (step {step})"
    if length == 5:
        expected = (
            "the env's step must return the 5-tuple (obs, reward, terminated, truncated, info)"
        )
    else:
        expected = "the env's reset must return the pair (obs, info)"
    raise EnvContractError(f"{at}: {expected}, got {describe(outputs)}")


def _reset_outputs(outputs: Any, where: str, step: int | None) -> tuple[Any, dict[str, Any]]:
    """The ``(obs, info)`` of a wrapped env's ``reset``, checked as a pair with a dict."""
    if not (type(outputs) is tuple and len(outputs) == 2):
        outputs = _outputs(outputs, 2, where, step)
    raw_obs, info = outputs
    if type(info) is not dict:
        _check_info(info, where, step)
    return raw_obs, info
