"""The abstract base of the built-in batched, differentiable torch envs."""

import abc
import dataclasses
import secrets
from collections.abc import Sequence
from typing import Any, ClassVar, Literal, TypedDict, Unpack

import gymnasium as gym
import numpy as np
import torch
from jaxtyping import Float, Float64, Shaped
from tensordict import TensorDict
from torch import Tensor

from typedrl._results import StepResult
from typedrl._tensor_checks import ActionChecker
from typedrl._validation import describe, positive_int
from typedrl.envs.builtin import _counter_rng
from typedrl.envs.builtin._render import Canvas, Frame, RenderView
from typedrl.errors import CheckpointError, ConfigError, EnvContractError
from typedrl.types import Action, Done, Obs, ObsMask, ObsVector, Reward

__all__ = ["BaseTorchVecEnv", "EnvLayout", "EnvOptions"]

# Private shape aliases of the subclass hooks (state layout is env-specific).
_State = Float[Tensor, "num_envs state_dim"]
_Draws = Float[Tensor, "num_envs num_draws"]
_EnvAction = Shaped[Tensor, "num_envs *action_shape"]

_DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "float64": torch.float64}
# Pool of initial states: at most this many episodes per row, and about this many
# uniforms in all (a few MiB of work buffers at most).
_MAX_POOL_SIZE = 16
_POOL_ELEMENTS = 2**18

_CLOCK_SALT = 0x7F4A7C15
"""Salt of the random episode-clock draw (apart from the initial-state draws)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class EnvLayout:
    """What an env's physics fixes: its spaces, its reset draws and its default time limit.

    A :class:`BaseTorchVecEnv` subclass passes one to ``__init__``; the options a
    user picks (:class:`EnvOptions`) come beside it.

    Attributes:
        observation_high: Symmetric bounds ``h`` of the observation space
            ``Box(-h, h)`` (``math.inf`` for unbounded features).
        observation_normalize_mask: Per observation feature, whether a trainer
            may normalise it (``False`` for cosines and sines, for example).
        action_space: An ``int`` ``n`` for ``Discrete(n)`` (int64 actions of
            shape ``[num_envs]``), or the bounds ``h`` of ``Box(-h, h)``.
        num_initial_draws: Uniforms :meth:`BaseTorchVecEnv._initial_state`
            consumes per episode.
        max_episode_steps: The time limit unless the user sets one.

    Example:
        >>> layout = EnvLayout(
        ...     observation_high=(1.0, 1.0),
        ...     observation_normalize_mask=(True, True),
        ...     action_space=(1.0,),
        ...     num_initial_draws=2,
        ...     max_episode_steps=100,
        ... )
        >>> layout.max_episode_steps
        100
    """

    observation_high: Sequence[float]
    observation_normalize_mask: Sequence[bool]
    action_space: int | Sequence[float]
    num_initial_draws: int
    max_episode_steps: int

    def __post_init__(self) -> None:
        positive_int("EnvLayout", "num_initial_draws", self.num_initial_draws)
        positive_int("EnvLayout", "max_episode_steps", self.max_episode_steps)
        if isinstance(self.action_space, int):
            positive_int("EnvLayout", "action_space", self.action_space)
        if len(self.observation_normalize_mask) != len(self.observation_high):
            raise ConfigError(
                "EnvLayout: observation_normalize_mask has "
                f"{len(self.observation_normalize_mask)} entries, expected one per "
                f"observation feature ({len(self.observation_high)})"
            )


class EnvOptions(TypedDict, total=False):
    """The options every built-in torch env takes as keywords, beside ``num_envs``.

    Each is optional; the defaults are :class:`BaseTorchVecEnv`'s.

    Attributes:
        max_episode_steps: Time limit; reaching it sets ``truncated``
            (default: the env's own, from its :class:`EnvLayout`).
        clip_actions: Clip Box actions to their bounds before the physics
            (default ``True``).
        seed: Seed used by the first :meth:`~BaseTorchVecEnv.reset` when it gets
            no seed; ``None`` (the default) draws one from the operating system.
        dtype: ``"float32"`` (default) or ``"float64"`` (use float64 for
            gradient checks).
        device: Device of every tensor (default ``"cpu"``).
    """

    max_episode_steps: int | None
    clip_actions: bool
    seed: int | None
    dtype: Literal["float32", "float64"]
    device: torch.device | str


class BaseTorchVecEnv(abc.ABC):
    """Base of batched, differentiable vector envs written in plain torch.

    The base class does everything the vector-env contract asks for; a subclass
    only writes the physics. It implements
    :class:`~typedrl.protocols.DifferentiableVecEnv` and
    :class:`~typedrl.protocols.SupportsObservationNormalizeMask`:

    - observations are a :class:`~tensordict.TensorDict` with one key,
      ``"obs"`` (float ``[num_envs, obs_dim]``), on :attr:`device`;
    - :meth:`step` validates the action (shape, dtype, device; metadata only),
      optionally clips Box actions to their bounds with a differentiable
      :func:`torch.clamp` (the gradient is zero where an action lies outside the
      bounds), then advances the physics; the first step also validates what
      the subclass hooks return (row shapes, dtypes, devices), which later
      steps, running the same tensor code, are trusted to repeat;
    - episodes end by termination (the subclass decides) or by truncation after
      :attr:`max_episode_steps` steps; as with Gymnasium's ``TimeLimit`` both
      flags can be set on the same step;
    - same-step autoreset: a row that ends starts its next episode inside the
      same :meth:`step`; its new state is graph-free, while the step's reward
      and ``final_obs`` keep their graph;
    - :meth:`detach_state` cuts the graph without changing any value;
    - seeding is per row: the initial state of row ``i``'s episode ``k``
      (counted from 0 at the last seeded reset) is a pure function of
      ``(seed, i, k)``, whatever ``num_envs`` is and whatever other rows do.

    A step never synchronises with an accelerator and never loops over rows in
    Python. Initial states come from a per-row pool: the env computes, in one
    batch, the initial states of each row's next ``pool_size`` episodes (a
    counter-based hash of ``(seed, row, episode)``, so a value does not depend
    on when it is computed); a row that ends takes the next entry of its pool.
    On an accelerator the pool is refilled every ``pool_size`` steps (and after
    each :meth:`reset`): a row ends at most once per step, so the pool never
    runs dry, and no step needs to know which rows ended. On the CPU, where
    reading a tensor costs no device synchronisation, the pool is refilled only
    when some row has used it up, which with episodes longer than one step is
    many times less often. Both schedules give bit-identical results.

    Subclasses pass their :class:`EnvLayout` to ``__init__`` and implement
    :meth:`_initial_state`, :meth:`_dynamics`, :meth:`_reward`,
    :meth:`_terminated` and :meth:`_observe`, all batched over rows. An env
    that renders also sets ``_render_view`` and implements ``_draw``,
    which draws one row's observation on a NumPy canvas (see :meth:`render`);
    rendering runs only when :meth:`render` is called. State and
    observation tensors are ``[num_envs, k]``; building them with
    ``stack_columns`` stores them column by column, which makes the
    column-wise physics faster on CPU. Observations may therefore be
    non-contiguous (like Gymnasium's NumPy ``CartPoleVectorEnv``, whose arrays
    are Fortran-ordered): call ``.contiguous()`` before ``.view()``.

    Args:
        num_envs: Number of rows.
        layout: The spaces, reset draws and default time limit.
        **options: :class:`EnvOptions`: ``max_episode_steps``,
            ``clip_actions``, ``seed``, ``dtype`` and ``device``.
    """

    def __init__(self, *, num_envs: int, layout: EnvLayout, **options: Unpack[EnvOptions]) -> None:
        owner = type(self).__name__
        _check_options(owner, options)
        max_episode_steps = options.get("max_episode_steps")
        dtype = options.get("dtype", "float32")
        device = options.get("device", "cpu")
        self._num_envs = positive_int(owner, "num_envs", num_envs)
        self._max_episode_steps = positive_int(
            owner,
            "max_episode_steps",
            layout.max_episode_steps if max_episode_steps is None else max_episode_steps,
        )
        self._num_initial_draws = layout.num_initial_draws
        self._seed = _check_seed(owner, "seed", options.get("seed"))
        self._dtype = _DTYPES[dtype]
        try:
            self._device = torch.device(device)
        except (RuntimeError, TypeError) as err:
            raise ConfigError(
                f"{owner}.device must name a torch device, got {describe(device)}"
            ) from err
        np_dtype = np.dtype(dtype)
        high = np.asarray(layout.observation_high, dtype=np_dtype)
        self._observation_space = gym.spaces.Box(-high, high, dtype=np_dtype)
        self._normalize_mask = torch.tensor(
            list(layout.observation_normalize_mask), dtype=torch.bool, device=self._device
        )
        self._action_space: gym.spaces.Box | gym.spaces.Discrete
        self._clip_bounds: tuple[Tensor, Tensor] | None = None
        if isinstance(layout.action_space, int):
            self._action_space = gym.spaces.Discrete(layout.action_space)
        else:
            action_high = np.asarray(layout.action_space, dtype=np_dtype)
            self._action_space = gym.spaces.Box(-action_high, action_high, dtype=np_dtype)
            if options.get("clip_actions", True):
                bound = torch.as_tensor(action_high, device=self._device)
                self._clip_bounds = (-bound, bound)
        self._where = f"{owner}.step"
        self._check_action = ActionChecker(
            num_envs=self._num_envs,
            space=self._action_space,
            device=self._device,
            where=self._where,
        )
        self._action_shape = torch.Size((self._num_envs, *(self._action_space.shape or ())))
        # The dtype of the last action the checker accepted (None before the first).
        self._accepted_action_dtype: torch.dtype | None = None
        # Per-row state and the step at which each row's episode started; valid
        # after reset(). self._steps counts every step since construction.
        self._state = torch.zeros(0, dtype=self._dtype, device=self._device)
        self._steps = 0
        self._started = torch.zeros(num_envs, dtype=torch.int64, device=self._device)
        self._keys = torch.zeros(num_envs, dtype=torch.int32, device=self._device)
        self._salts = _counter_rng.to_int32(
            _counter_rng.draw_salts(self._num_initial_draws, self._device).view(-1)
        )
        # The pool of initial states: row i's next episodes are the columns
        # i, i + num_envs, ... of self._pool (state_dim x pool_size * num_envs).
        # self._pool_first[i] is the episode of column i; self._pool_index[i] is
        # the column row i takes at its next reset (one num_envs stride further
        # per reset); self._pool_age counts the steps since the last refill.
        self._pool_size = max(
            1, min(_MAX_POOL_SIZE, _POOL_ELEMENTS // (num_envs * self._num_initial_draws))
        )
        self._rows = torch.arange(num_envs, dtype=torch.int64, device=self._device)
        self._pool = torch.zeros(0, 0, dtype=self._dtype, device=self._device)
        self._pool_first = torch.zeros(num_envs, dtype=torch.int64, device=self._device)
        self._pool_index = self._rows.clone()
        self._pool_age = self._pool_size
        self._pool_work: _counter_rng.BlockWork | None = None
        # On the CPU, reading tensors costs no device synchronisation: restart
        # just the rows that ended, and refill the pool only once a row has used
        # it up (see the class docstring). Accelerators take the masked path.
        self._host_indexing = self._device.type == "cpu"
        # The pool age at which _pool_used_up() is asked next (not state: a
        # restored env asks at its next step).
        self._pool_check_age = 0
        self._has_reset = False
        self._closed = False
        # Every row of a built-in env is always valid (no ghost steps); shared by
        # every StepResult, which never modifies it.
        self._all_valid = torch.ones(num_envs, dtype=torch.bool, device=self._device)
        self._result_checked = False

    # ------------------------------------------------------------------ hooks

    @abc.abstractmethod
    def _initial_state(self, uniform: _Draws) -> _State:
        """Map ``num_initial_draws`` uniforms in ``(0, 1]`` per row to initial states."""

    @abc.abstractmethod
    def _dynamics(self, state: _State, action: _EnvAction) -> _State:
        """The next state; differentiable in ``state`` and (for Box actions) ``action``."""

    @abc.abstractmethod
    def _reward(self, state: _State, action: _EnvAction, next_state: _State) -> Reward:
        """The reward of the transition ``state -> next_state`` under ``action``."""

    @abc.abstractmethod
    def _terminated(self, next_state: _State) -> Done:
        """Rows whose ``next_state`` is terminal."""

    @abc.abstractmethod
    def _observe(self, state: _State) -> ObsVector:
        """The observation vector of ``state``."""

    _render_view: ClassVar[RenderView | None] = None
    """Size, world window and frame rate of :meth:`render`'s frames; ``None``: no rendering."""

    def _draw(self, canvas: Canvas, obs: Float64[np.ndarray, " obs_dim"]) -> None:
        """Draw the picture of one row's observation vector (float64, on the host).

        Called by :meth:`render` on a fresh canvas of ``_render_view``; an
        env that sets ``_render_view`` overrides it.
        """
        raise ConfigError(
            f"{type(self).__name__}.render: the env sets _render_view but does not "
            "implement _draw(canvas, obs), which draws its frames"
        )

    # ------------------------------------------------------------- properties

    @property
    def num_envs(self) -> int:
        """Number of rows."""
        return self._num_envs

    @property
    def device(self) -> torch.device:
        """Device of every tensor the env returns and of the actions it accepts."""
        return self._device

    @property
    def dtype(self) -> torch.dtype:
        """Floating-point dtype of states, observations and rewards."""
        return self._dtype

    @property
    def max_episode_steps(self) -> int:
        """Time limit: episodes are truncated after this many steps."""
        return self._max_episode_steps

    @property
    def single_observation_space(self) -> gym.Space[Any]:
        """``Box(-high, high, (obs_dim,))`` of the env's dtype (the ``"obs"`` entry)."""
        return self._observation_space

    @property
    def single_action_space(self) -> gym.Space[Any]:
        """``Discrete(n)`` or ``Box(-high, high, (act_dim,))`` of the env's dtype."""
        return self._action_space

    @property
    def provides_final_obs(self) -> bool:
        """Always ``True``: ``StepResult.final_obs`` holds exact terminal observations."""
        return True

    @property
    def observation_normalize_mask(self) -> ObsMask:
        """``torch.bool`` ``[obs_dim]``; ``False`` for bounded features such as cosines."""
        return self._normalize_mask.clone()

    @property
    def renders(self) -> bool:
        """Whether :meth:`render` draws frames (every built-in env does)."""
        return self._render_view is not None

    @property
    def render_fps(self) -> float:
        """Frames per second of real-time playback: one frame per step, ``1 / dt``.

        Raises:
            ConfigError: If the env does not render.
        """
        return self._checked_render_view("render_fps").fps

    # ------------------------------------------------------------------- API

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Start a new episode in every row.

        Args:
            seed: A non-negative int. Row ``i`` then plays episodes ``0, 1, ...``
                of the stream keyed by ``(seed, i)``. ``None`` continues the
                current streams (every row starts its next episode); the first
                reset without a seed uses the constructor's ``seed``.
            options: ``{"random_elapsed_steps": True}`` starts every row's
                episode clock at a random step in ``[0, max_episode_steps)``
                (a hash of the row's stream, so reproducible), so that the
                time-outs of all rows do not fall on the same step; no other
                option is supported.

        Returns:
            The first observation and an empty info dict.

        Raises:
            ConfigError: If ``seed`` is not a non-negative int or ``options`` holds
                anything else.
            EnvContractError: If the env was closed.
        """
        owner = f"{type(self).__name__}.reset"
        if self._closed:
            raise EnvContractError(_closed_message(owner))
        checked_seed = _check_seed(owner, "seed", seed)
        random_clocks = False
        if options:
            flag = options.get("random_elapsed_steps")
            if set(options) != {"random_elapsed_steps"} or (flag is not True and flag is not False):
                raise ConfigError(
                    f"{owner}: the only reset option is {{'random_elapsed_steps': bool}}, got "
                    f"options={describe(options)}"
                )
            random_clocks = bool(options["random_elapsed_steps"])
        if checked_seed is None and not self._has_reset:
            checked_seed = self._seed if self._seed is not None else secrets.randbits(64)
        if checked_seed is not None:
            keys = _counter_rng.row_keys(checked_seed, self._num_envs, self._device)
            self._keys = _counter_rng.to_int32(keys)
            episode = torch.zeros_like(self._pool_first)
        else:
            episode = self._current_episode() + 1
        # An empty pool at this episode: the first step refills it from the next one.
        self._pool_first = episode + 1
        self._pool_index = self._rows.clone()
        self._pool = self._pool.new_zeros(0, 0)
        self._pool_age = self._pool_size
        self._pool_check_age = 0
        self._state = self._initial_state(self._draws(episode, 1))
        self._started = torch.zeros_like(self._started)
        if random_clocks:
            # As if each row's episode had begun up to max_episode_steps - 1 steps ago.
            # A draw of its own (salted apart from the initial-state draws) of each row's
            # stream at this episode.
            offsets = _counter_rng.uniform(
                self._keys.to(torch.int64) & 0xFFFFFFFF,
                episode,
                _counter_rng.draw_salts(1, self._device) ^ _CLOCK_SALT,
                torch.float64,
            )[:, 0]
            self._started = (
                -(offsets * self._max_episode_steps).long().clamp(max=self._max_episode_steps - 1)
            )
        self._steps = 0
        self._has_reset = True
        return self._wrap(self._observe(self._state)), {}

    def step(self, action: Action) -> StepResult:
        """Advance every row by one step, with same-step autoreset.

        Args:
            action: ``[num_envs, *action_shape]`` on :attr:`device`: floating
                point for Box spaces (cast to the env's dtype), an integer dtype
                for Discrete spaces. Values are not range-checked (that would
                synchronise with the device).

        Returns:
            The step result; ``final_obs`` holds the terminal observation of the
            rows that ended and keeps its graph.

        Raises:
            SpecError: If the action's type, shape, dtype or device is wrong.
            EnvContractError: If :meth:`reset` was never called, or the env was
                closed.
        """
        # The common case inline (a call costs about what the check does): an action like
        # the last one accepted needs no second look; any other goes to the checker.
        if not (
            type(action) is Tensor
            and action.dtype is self._accepted_action_dtype
            and action.shape == self._action_shape
            and action.device == self._device
        ):
            self._check_action(action)
            self._accepted_action_dtype = action.dtype
        if self._closed or not self._has_reset:
            if self._closed:
                raise EnvContractError(_closed_message(self._where))
            raise EnvContractError(f"{self._where}: call reset() before the first step()")
        if action.is_floating_point():
            action = action.to(self._dtype)
            if self._clip_bounds is not None:
                action = torch.clamp(action, *self._clip_bounds)
        next_state, reward, terminated, truncated = self._advance(action)
        obs = self._wrap(self._observe(self._state))
        final_obs = self._wrap(self._observe(next_state))
        if self._result_checked:
            return StepResult.from_trusted(
                obs, reward, terminated, truncated, {}, final_obs=final_obs, valid=self._all_valid
            )
        # The first step checks what the hooks return (row shapes, dtypes,
        # devices); later steps run the same tensor code and are trusted.
        result = StepResult(
            obs, reward, terminated, truncated, {}, final_obs=final_obs, valid=self._all_valid
        )
        self._result_checked = True
        return result

    def detach_state(self) -> Obs:
        """Detach the state from the autograd graph; return the (graph-free) observation."""
        self._state = self._state.detach()
        return self._wrap(self._observe(self._state))

    def render(self, row: int = 0, *, obs: Obs | None = None) -> Frame:
        """Draw one row as an RGB frame, ``[height, width, 3]`` ``uint8``.

        The frame pictures the row's current state (or, with ``obs``, that
        row of a given observation, such as a step's ``final_obs``, the
        terminal state of a row that ended). The values are read with
        ``.detach().cpu()``: rendering never touches the autograd graph, the
        env's state or its random streams, and the same state always gives
        the same frame. Height and width are even (H.264 video needs that).

        Args:
            row: The row to draw, in ``[0, num_envs)``.
            obs: An observation of this env (``"obs"`` of shape
                ``[num_envs, obs_dim]``) to draw instead of the current state.

        Returns:
            The frame.

        Raises:
            ConfigError: If the env does not render (it sets no render view:
                :class:`~typedrl.envs.mujoco.MujocoVecEnv`, for example), if
                ``row`` is not in ``[0, num_envs)``, or if ``obs`` is not an
                observation of this env.
            EnvContractError: If ``obs`` is ``None`` and :meth:`reset` was never
                called.

        Example:
            >>> from typedrl.envs.builtin import Pendulum
            >>> env = Pendulum(num_envs=2)
            >>> _ = env.reset(seed=0)
            >>> frame = env.render(1)
            >>> frame.shape, frame.dtype.name, env.render_fps
            ((400, 400, 3), 'uint8', 20.0)
        """
        owner = f"{type(self).__name__}.render"
        view = self._checked_render_view("render")
        if not 0 <= row < self._num_envs:
            raise ConfigError(
                f"{owner}: row must be in [0, {self._num_envs}) (the env has "
                f"{self._num_envs} rows), got {describe(row)}"
            )
        if obs is None:
            if not self._has_reset:
                raise EnvContractError(f"{owner}: call reset() before render()")
            with torch.no_grad():
                vector = self._observe(self._state.detach())[row]
        else:
            vector = self._checked_render_obs(owner, obs)[row]
        canvas = Canvas(view)
        self._draw(canvas, vector.detach().cpu().to(torch.float64).numpy())
        return canvas.frame()

    def close(self) -> None:
        """Mark the env closed: later :meth:`reset` and :meth:`step` calls raise.

        There is nothing to release (plain tensors); calling it twice is harmless.
        """
        self._closed = True

    def state_dict(self) -> dict[str, Any]:
        """The env's dynamic state, for exact resumes (graph-free copies; no options).

        Restoring it into an env built with the same options continues every
        row exactly where it was: the physical state, the step counters, the
        per-row random streams and the pool of upcoming initial states.
        """
        return {
            "state": self._state.detach().clone(),
            "steps": self._steps,
            "started": self._started.clone(),
            "keys": self._keys.clone(),
            "pool": self._pool.detach().clone(),
            "pool_first": self._pool_first.clone(),
            "pool_index": self._pool_index.clone(),
            "pool_age": self._pool_age,
            "has_reset": self._has_reset,
        }

    def load_state_dict(self, state_dict: dict[str, Any], /) -> None:
        """Restore :meth:`state_dict`; raise CheckpointError if it does not fit this env."""
        owner = f"{type(self).__name__}.load_state_dict"
        # This class's keys: a subclass that saves more restores its own keys itself.
        expected = set(BaseTorchVecEnv.state_dict(self))
        if set(state_dict) != expected:
            raise CheckpointError(
                f"{owner}: expected keys {sorted(expected)}, got {sorted(state_dict)}"
            )
        rows = {
            "started": torch.int64,
            "keys": torch.int32,
            "pool_first": torch.int64,
            "pool_index": torch.int64,
        }
        for key, dtype in rows.items():
            value = state_dict[key]
            if (
                not isinstance(value, Tensor)
                or value.shape != (self._num_envs,)
                or value.dtype != dtype
            ):
                raise CheckpointError(
                    f"{owner}: {key!r} must be a {dtype} tensor of shape [{self._num_envs}], "
                    f"got {describe(value)}"
                )
        state = state_dict["state"]
        if (
            not isinstance(state, Tensor)
            or state.dtype != self._dtype
            or (state.ndim != 2 or state.shape[0] != self._num_envs)
        ):
            raise CheckpointError(
                f"{owner}: 'state' must be a {self._dtype} tensor with {self._num_envs} rows, "
                f"got {describe(state)}"
            )
        pool = state_dict["pool"]
        if not isinstance(pool, Tensor) or not pool.is_floating_point() or pool.ndim != 2:
            raise CheckpointError(
                f"{owner}: 'pool' must be a 2-D float tensor, got {describe(pool)}"
            )
        if not isinstance(state_dict["has_reset"], bool):
            raise CheckpointError(
                f"{owner}: 'has_reset' must be a bool, got {describe(state_dict['has_reset'])}"
            )
        for key in ("steps", "pool_age"):
            if isinstance(state_dict[key], bool) or not isinstance(state_dict[key], int):
                raise CheckpointError(
                    f"{owner}: {key!r} must be an int, got {describe(state_dict[key])}"
                )
        self._state = state.to(self._device).clone()
        self._steps = state_dict["steps"]
        self._pool_age = state_dict["pool_age"]
        self._pool_check_age = 0
        self._has_reset = bool(state_dict["has_reset"])
        self._pool = state_dict["pool"].to(self._device, self._dtype).clone()
        for key in rows:
            setattr(self, f"_{key}", state_dict[key].to(self._device).clone())

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_envs={self._num_envs}, device={self._device}, "
            f"dtype={self._dtype}, max_episode_steps={self._max_episode_steps})"
        )

    # --------------------------------------------------------------- helpers

    def _checked_render_view(self, name: str) -> RenderView:
        view = self._render_view
        if view is None:
            raise ConfigError(
                f"{type(self).__name__}.{name}: {type(self).__name__} does not render (it "
                "sets no _render_view and implements no _draw); the built-in envs of "
                "typedrl.envs.builtin render, or record a Gymnasium env that renders "
                "rgb_array frames"
            )
        return view

    def _checked_render_obs(self, owner: str, obs: Obs) -> Tensor:
        vector = obs.get("obs", None)
        obs_dim = self._observation_space.shape[0]
        if not isinstance(vector, Tensor) or vector.shape != (self._num_envs, obs_dim):
            raise ConfigError(
                f"{owner}: obs must be an observation of this env, a TensorDict whose "
                f"'obs' is [{self._num_envs}, {obs_dim}], got {describe(obs)}"
            )
        return vector

    def _advance(self, action: Action) -> tuple[_State, Reward, Done, Done]:
        """One step of every row, with autoreset; returns the pre-reset state and flags."""
        if self._pool_age >= self._pool_check_age and self._pool_used_up():
            self._refill_pool()
        self._pool_age += 1
        self._steps += 1
        state = self._state
        next_state = self._dynamics(state, action)
        reward = self._reward(state, action, next_state)
        terminated = self._terminated(next_state)
        # A row started at step s is truncated when steps - s reaches the limit.
        truncated = self._started <= self._steps - self._max_episode_steps
        done = terminated | truncated
        if self._host_indexing:
            self._state = self._restart_listed_rows(next_state, done)
        else:
            self._state = self._restart_masked_rows(next_state, done)
        return next_state, reward, terminated, truncated

    def _restart_masked_rows(self, next_state: _State, done: Done) -> _State:
        """Autoreset without reading ``done``: every row gathers a fresh state, one ``where``."""
        fresh = self._pool.index_select(1, self._pool_index).T
        # Internal counters, never part of a graph: updated in place.
        self._pool_index.add_(done, alpha=self._num_envs)
        self._started.masked_fill_(done, self._steps)
        # Rows that ended restart graph-free; the others keep the graph of next_state.
        return torch.where(done.unsqueeze(-1), fresh, next_state)

    def _restart_listed_rows(self, next_state: _State, done: Done) -> _State:
        """Autoreset of just the rows that ended, listed with ``nonzero`` (host memory only).

        The same values as :meth:`_restart_masked_rows`; on the CPU listing the
        rows costs no synchronisation, and the few rows that end in a step are
        cheaper to index than every row is to blend.
        """
        rows = torch.nonzero(done).squeeze(1)
        if rows.numel() == 0:
            return next_state
        columns = self._pool_index.index_select(0, rows)
        fresh = self._pool.index_select(1, columns).T
        self._pool_index.index_put_((rows,), columns + self._num_envs)
        self._started.index_fill_(0, rows, self._steps)
        # Out of place: the rows that ended restart graph-free, the others keep
        # the graph of next_state (whose memory layout the copy keeps).
        return next_state.index_put((rows,), fresh)

    def _pool_used_up(self) -> bool:
        """Whether a row may have taken every entry of its pool (asked once one can have)."""
        if not self._host_indexing or self._steps == 0:
            # Without reading the counters, assume the worst: a reset at every step.
            # Right after a reset the pool is stale or empty (also in states saved
            # by versions that kept the previous pool across resets).
            return True
        # Row i's next entry is column i + k * num_envs after k resets since the
        # refill, so the largest index tells the most resets any row has taken.
        most_taken = int(self._pool_index.max()) // self._num_envs
        left = self._pool.shape[1] // self._num_envs - most_taken
        # A row takes at most one entry per step: no need to ask again sooner.
        self._pool_check_age = self._pool_age + left
        return left <= 0

    def _current_episode(self) -> Tensor:
        """Each row's current episode number (``int64 [num_envs]``)."""
        taken = torch.div(self._pool_index - self._rows, self._num_envs, rounding_mode="floor")
        return self._pool_first - 1 + taken

    def _draws(self, first_episode: Tensor, num_episodes: int) -> _Draws:
        """Uniforms of episodes ``first_episode + k``, ``k < num_episodes``, row-minor."""
        if self._pool_work is None or self._pool_work.hashes.shape[0] != num_episodes:
            work = _counter_rng.BlockWork.allocate(
                self._num_initial_draws, num_episodes, self._num_envs, self._device
            )
        else:
            work = self._pool_work
        if num_episodes == self._pool_size:
            self._pool_work = work
        first = _counter_rng.to_int32(first_episode)
        return _counter_rng.uniform_block(self._keys, first, self._salts, self._dtype, work)

    def _refill_pool(self) -> None:
        """Fill the pool with each row's next ``pool_size`` initial states."""
        self._pool_first = self._current_episode() + 1
        self._pool_index = self._rows.clone()
        self._pool_age = 0
        self._pool_check_age = self._pool_size
        with torch.no_grad():
            self._pool = self._initial_state(self._draws(self._pool_first, self._pool_size)).T

    def _wrap(self, obs: ObsVector) -> Obs:
        # The tensor is already on the device: non_blocking skips a redundant sync check.
        return TensorDict(
            {"obs": obs}, batch_size=[self._num_envs], device=self._device, non_blocking=True
        )


def _closed_message(where: str) -> str:
    return f"{where}: the env is closed (close() was called); build a new env to keep stepping"


def _check_seed(owner: str, name: str, seed: int | None) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or seed < 0:
        raise ConfigError(
            f"{owner}.{name} must be a non-negative int or None, got {describe(seed)}"
        )
    return seed


def _check_options(owner: str, options: EnvOptions) -> None:
    """Refuse what ``**options`` takes at run time but :class:`EnvOptions` does not name."""
    unknown = sorted(set(options) - EnvOptions.__optional_keys__)
    if unknown:
        raise ConfigError(
            f"{owner} got unexpected keyword arguments {unknown}; the env options are "
            f"{sorted(EnvOptions.__optional_keys__)}"
        )
    dtype = options.get("dtype", "float32")
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise ConfigError(f"{owner}.dtype must be one of {list(_DTYPES)}, got {describe(dtype)}")
