"""Adapter from an Isaac Lab RL env to the typedrl :class:`~typedrl.protocols.VecEnv` contract.

Isaac Lab is never imported: :class:`IsaacLabEnvLike` describes, structurally,
the part of ``isaaclab.envs.ManagerBasedRLEnv`` and ``isaaclab.envs.DirectRLEnv``
the adapter uses, so this module imports (and its fake-backed tests run) on
machines without Isaac Lab.
"""

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Literal, Protocol, TypeAlias, final, runtime_checkable

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict
from torch import Tensor

from typedrl import _validation
from typedrl._results import StepResult
from typedrl._tensor_checks import check_action
from typedrl._validation import describe
from typedrl.errors import ConfigError, EnvContractError, MissingDependencyError, SpecError
from typedrl.seeding import env_seed
from typedrl.types import Action, Done, Obs

__all__ = [
    "ISAACLAB_INSTALL_HINT",
    "IsaacLabEnvCfgLike",
    "IsaacLabEnvLike",
    "IsaacLabObs",
    "IsaacLabVecEnv",
    "holds_one_simulation",
    "make_isaaclab",
]

ISAACLAB_INSTALL_HINT = (
    "install Isaac Lab 3 (kit-less, on Newton): pip install 'newton[sim]' warp-lang usd-core "
    "newton-usd-schemas prettytable psutil trimesh einops lazy_loader Jinja2 scipy h5py "
    "hydra-core toml, then pip install --no-deps --ignore-requires-python isaaclab==3.0.0 "
    "(see the Isaac Lab guide)"
)
"""How to install what :func:`make_isaaclab` imports."""


_MAKE_OPTIONS = frozenset(
    {"overrides", "cfg_hook", "compute_final_obs", "is_finite_horizon", "final_obs"}
)

IsaacLabObs: TypeAlias = dict[str, Tensor | dict[str, Tensor]]
"""Isaac Lab's ``VecEnvObs``: group name -> tensor, or term name -> tensor for groups
whose terms are not concatenated."""

_LogValue: TypeAlias = Tensor | float


@runtime_checkable
class IsaacLabEnvCfgLike(Protocol):
    """The part of an Isaac Lab RL env config (``ManagerBasedRLEnvCfg``, ``DirectRLEnvCfg``) used.

    ``compute_final_obs`` is deliberately not a member: Isaac Lab releases that
    predate it lack the field, so the adapter reads it with ``getattr`` and a
    default of ``False``.
    """

    @property
    def is_finite_horizon(self) -> bool:
        """``True`` when time-outs end a finite-horizon MDP (no bootstrapping on them)."""
        ...


@runtime_checkable
class IsaacLabEnvLike(Protocol):
    """The surface of an Isaac Lab RL env that :class:`IsaacLabVecEnv` uses.

    Both ``isaaclab.envs.ManagerBasedRLEnv`` and ``isaaclab.envs.DirectRLEnv``
    satisfy it (checked statically against the stubs in ``typings/``), as do the
    fakes in :mod:`typedrl.testing`. Pass the unwrapped env (``env.unwrapped``
    of what ``gym.make`` returns): Gymnasium wrappers do not forward these
    attributes.
    """

    @property
    def num_envs(self) -> int:
        """Number of parallel environments."""
        ...

    @property
    def device(self) -> str | torch.device:
        """Simulation device, for example ``"cuda:0"``."""
        ...

    @property
    def cfg(self) -> IsaacLabEnvCfgLike:
        """The env config; ``is_finite_horizon`` and (optionally) ``compute_final_obs`` are read."""
        ...

    @property
    def single_observation_space(self) -> gym.Space[Any]:
        """One env's observation groups: a ``Dict`` of ``Box`` or ``Dict`` of ``Box``."""
        ...

    @property
    def single_action_space(self) -> gym.Space[Any]:
        """One env's action space (a ``Box``)."""
        ...

    def step(self, action: Tensor) -> tuple[IsaacLabObs, Tensor, Tensor, Tensor, dict[str, Any]]:
        """Return ``(obs, reward, terminated, time_outs, extras)`` after a same-step autoreset."""
        ...

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[IsaacLabObs, dict[str, Any]]:
        """Reset every env and return ``(obs, extras)``."""
        ...

    def close(self) -> None:
        """Release the simulation."""
        ...


def _isaaclab_seed(seed: int | None) -> int | None:
    """Fold a seed into ``[0, 2**32)``, the range Isaac Lab accepts.

    Isaac Lab seeds NumPy's legacy generator, which rejects anything else, while
    typedrl derives 63-bit seeds (:func:`~typedrl.seeding.env_seed`, one seed for all rows).
    """
    return None if seed is None else env_seed(seed)


def _as_device(value: object, where: str) -> torch.device:
    """Normalise the env's device; a bare ``"cuda"`` becomes the current CUDA device."""
    if not isinstance(value, str | torch.device):
        raise SpecError(f"{where}: env.device must be a str or torch.device, got {describe(value)}")
    try:
        device = torch.device(value)
    except RuntimeError as err:
        raise SpecError(f"{where}: env.device must name a torch device, got {value!r}") from err
    # torch's stubs type ``index`` as int, but it is None for a bare "cuda".
    index: int | None = device.index
    if device.type == "cuda" and index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def _require_env(env: object, where: str) -> IsaacLabEnvLike:
    """Check the Isaac Lab surface at run time (members only, as ``isinstance`` does)."""
    if not isinstance(env, IsaacLabEnvLike):
        hint = (
            "; pass env.unwrapped (Gymnasium wrappers hide the Isaac Lab attributes)"
            if hasattr(env, "unwrapped")
            else ""
        )
        raise SpecError(
            f"{where}: env must be an Isaac Lab RL env (num_envs, device, cfg, "
            f"single_observation_space, single_action_space, step, reset, close), "
            f"got {describe(env)}{hint}"
        )
    return env


def _observation_layout(
    groups: Mapping[str, gym.Space[Any]], where: str
) -> tuple[tuple[str, str | None, tuple[int, ...]], ...]:
    """Flatten the observation groups into ``(group, term or None, shape)`` leaves."""
    leaves: list[tuple[str, str | None, tuple[int, ...]]] = []
    for group, sub in groups.items():
        if isinstance(sub, gym.spaces.Box):
            leaves.append((group, None, tuple(sub.shape)))
        elif isinstance(sub, gym.spaces.Dict) and sub.spaces:
            for term, leaf in sub.spaces.items():
                if not isinstance(leaf, gym.spaces.Box):
                    raise SpecError(
                        f"{where}: observation term {group!r}/{term!r} must be a Box space, "
                        f"got {describe(leaf)}"
                    )
                leaves.append((group, term, tuple(leaf.shape)))
        else:
            raise SpecError(
                f"{where}: observation group {group!r} must be a Box or a non-empty Dict of "
                f"Box spaces, got {describe(sub)}"
            )
    return tuple(leaves)


def _clip_bounds(
    clip_actions: object, space: gym.spaces.Box, device: torch.device
) -> tuple[Tensor, Tensor, gym.spaces.Box] | None:
    """Resolve ``clip_actions`` to ``(low, high)`` tensors and the reported action space."""
    owner = "IsaacLabVecEnv.clip_actions"
    if clip_actions is None:
        return None
    if clip_actions == "space":
        low = np.asarray(space.low, dtype=np.float64)
        high = np.asarray(space.high, dtype=np.float64)
        if not (np.isfinite(low).any() or np.isfinite(high).any()):
            raise ConfigError(
                f"{owner}='space' needs finite action bounds, but the env's action space is "
                f"{space!r} (Isaac Lab declares unbounded actions); pass a float bound instead"
            )
    else:
        try:
            bound = _validation.positive_float("IsaacLabVecEnv", "clip_actions", clip_actions)
        except ConfigError:  # one message that names every accepted form
            raise ConfigError(
                f"{owner} must be None, 'space' or a finite float > 0, got {describe(clip_actions)}"
            ) from None
        low = np.maximum(np.asarray(space.low, dtype=np.float64), -bound)
        high = np.minimum(np.asarray(space.high, dtype=np.float64), bound)
    reported = gym.spaces.Box(low.astype(space.dtype), high.astype(space.dtype), dtype=space.dtype)
    return (
        torch.as_tensor(low, dtype=torch.float32, device=device),
        torch.as_tensor(high, dtype=torch.float32, device=device),
        reported,
    )


def _log_value(key: str, value: object, where: str) -> _LogValue:
    """A log entry as a detached float tensor (no host sync) or a Python float."""
    if isinstance(value, Tensor):
        return value.detach().float().mean()
    if isinstance(value, int | float):
        return float(value)
    raise SpecError(
        f"{where}: extras['log'][{key!r}] must be a tensor or a number, got {describe(value)}"
    )


@final
class IsaacLabVecEnv:
    """An Isaac Lab RL env (manager-based or direct) as a :class:`~typedrl.protocols.VecEnv`.

    Observation groups (``"policy"``, ``"critic"``, ...) become keys of the
    observation TensorDict (``batch_size == [num_envs]``, on the env's device);
    a group whose terms are not concatenated becomes a nested TensorDict. Isaac
    Lab resets finished envs inside ``step`` (same-step autoreset), as the
    contract requires.

    Episode ends (``terminated`` / ``time_outs`` from the env) map as follows:

    - ``cfg.is_finite_horizon = False`` (Isaac Lab's default, infinite-horizon
      tasks cut by a time limit): ``terminated = terminated``, ``truncated =
      time_outs``. Both flags may be set on one row; ``terminated`` then wins
      (no bootstrapping), as in Gymnasium.
    - ``cfg.is_finite_horizon = True`` (the time limit is part of the MDP):
      ``terminated = terminated | time_outs`` and ``truncated`` is all ``False``:
      nothing is bootstrapped at the horizon.

    Terminal observations: with ``cfg.compute_final_obs = True`` Isaac Lab
    stores the observations of all envs, computed just before the reset, under
    ``extras["final_obs"]`` on steps where some env ended. The adapter then
    builds ``final_obs`` from that entry for the rows that ended in this step
    and from ``obs`` for all other rows (stale rows left over from earlier
    steps are never used) and reports ``provides_final_obs = True``. Without
    the flag the env cannot give terminal observations: ``provides_final_obs``
    is ``False`` and ``final_obs`` is ``None`` (the reset observation is never
    substituted); consumers then bootstrap truncations approximately, as they
    document.

    Logs: when the env writes ``extras["log"]`` afresh, ``info["log"]`` holds
    its entries, tensors as detached 0-d float tensors (their mean; no host
    sync) and numbers as floats. A log is fresh when the dict is a new object
    (Isaac Lab's manager-based envs build one on every step that resets some
    env) or when any of its values is a new object (direct tasks such as the
    cartpole update one dict in place on each reset). Steps without a fresh log
    have no ``"log"`` key.

    Reward, ``terminated`` and ``truncated`` are copies: Isaac Lab overwrites
    its buffers in place on the next step. Observation tensors are used as the
    env returns them (Isaac Lab computes them afresh every step).

    Args:
        env: The unwrapped Isaac Lab env (``gym.make(...).unwrapped``).
        clip_actions: ``None`` (default) passes actions through; a float ``c > 0``
            clamps them to ``[-c, c]`` (intersected with the env's bounds), like
            the RSL-RL wrapper; ``"space"`` clamps to the env's action-space bounds,
            which must be finite somewhere. When clipping, ``single_action_space``
            reports the clipped bounds.
        final_obs: ``"auto"`` (default) provides terminal observations exactly
            when ``env.cfg.compute_final_obs`` is ``True``; ``"required"`` raises
            :class:`~typedrl.errors.ConfigError` unless it is; ``"ignore"`` never
            provides them, even when the env computes them.

    Raises:
        SpecError: If ``env`` lacks the Isaac Lab surface or its spaces are not
            supported, and on every step whose outputs have the wrong type, shape,
            dtype or device.
        ConfigError: If an option is invalid.

    Example:
        >>> import torch
        >>> from typedrl.testing._isaaclab_fake import FakeManagerBasedRLEnv, FakeRLEnvCfg
        >>> cfg = FakeRLEnvCfg(num_envs=2, compute_final_obs=True)
        >>> env = IsaacLabVecEnv(FakeManagerBasedRLEnv(cfg), clip_actions=1.0)
        >>> obs, info = env.reset(seed=0)
        >>> sorted(obs.keys()), obs.batch_size, env.provides_final_obs
        (['critic', 'policy'], torch.Size([2]), True)
        >>> obs, reward, terminated, truncated, info = result = env.step(torch.zeros(2, 2))
        >>> reward.dtype, terminated.tolist(), result.final_obs is not None
        (torch.float32, [False, False], True)
    """

    @_validation.no_type_check  # the env is checked here, with hints (pass env.unwrapped)
    def __init__(
        self,
        env: IsaacLabEnvLike,
        *,
        clip_actions: float | Literal["space"] | None = None,
        final_obs: Literal["auto", "required", "ignore"] = "auto",
    ) -> None:
        where = "IsaacLabVecEnv"
        env = _require_env(env, where)
        num_envs = env.num_envs
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs <= 0:
            raise SpecError(
                f"{where}: env.num_envs must be a positive int, got {describe(num_envs)}"
            )
        is_finite_horizon = env.cfg.is_finite_horizon
        compute_final_obs = getattr(env.cfg, "compute_final_obs", False)
        for name, flag in (
            ("is_finite_horizon", is_finite_horizon),
            ("compute_final_obs", compute_final_obs),
        ):
            if not isinstance(flag, bool):
                raise SpecError(f"{where}: env.cfg.{name} must be a bool, got {describe(flag)}")
        if final_obs == "required" and not compute_final_obs:
            raise ConfigError(
                f"{where}.final_obs='required', but env.cfg.compute_final_obs is False (or absent "
                "in this Isaac Lab version); set env_cfg.compute_final_obs = True before creating "
                "the env, or use final_obs='auto' to accept approximate bootstrapping"
            )
        self.env: Final = env
        """The wrapped Isaac Lab env."""
        self.num_envs: Final = num_envs
        """Number of parallel environments."""
        self.device: Final = _as_device(env.device, where)
        """The simulation device; every tensor in and out lives there."""
        self.is_finite_horizon: Final = is_finite_horizon
        """``env.cfg.is_finite_horizon`` as read at construction."""
        self.provides_final_obs: Final = compute_final_obs and final_obs != "ignore"
        """``True`` when ``cfg.compute_final_obs`` is on and ``final_obs`` is not ``"ignore"``."""
        observation_space = env.single_observation_space
        if not isinstance(observation_space, gym.spaces.Dict) or not observation_space.spaces:
            raise SpecError(
                f"{where}: env.single_observation_space must be a non-empty gymnasium Dict of "
                f"observation groups, got {describe(observation_space)}"
            )
        self.single_observation_space: Final[gym.spaces.Dict] = observation_space
        """The env's observation groups as a gymnasium ``Dict`` (nested for term dicts)."""
        self._layout = _observation_layout(observation_space.spaces, where)
        self._nested_terms = {
            group: frozenset(sub.spaces)
            for group, sub in observation_space.spaces.items()
            if isinstance(sub, gym.spaces.Dict)
        }
        env_action_space = env.single_action_space
        if not isinstance(env_action_space, gym.spaces.Box):
            raise SpecError(
                f"{where}: env.single_action_space must be a Box, got {describe(env_action_space)}"
            )
        clip = _clip_bounds(clip_actions, env_action_space, self.device)
        self._clip_low: Tensor | None = None
        self._clip_high: Tensor | None = None
        action_space = env_action_space
        if clip is not None:
            self._clip_low, self._clip_high, action_space = clip
        self.single_action_space: Final[gym.spaces.Box] = action_space
        """The env's action space, with the clipped bounds when ``clip_actions`` is set."""
        self._last_log: object = None
        self._last_log_values: tuple[tuple[object, object], ...] = ()
        self._closed = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """Reset every env; ``seed`` seeds the simulation through Isaac Lab's ``reset``.

        Isaac Lab accepts only seeds in ``[0, 2**32)`` (it seeds NumPy's legacy
        generator); others are folded into that range with ``seed % 2**32``.

        Returns:
            The first observation and an info dict with ``"log"`` when the reset
            produced a fresh episode log (manager-based envs log the interrupted
            episodes).
        """
        raw_obs, extras = self.env.reset(seed=_isaaclab_seed(seed), options=options)
        obs = self._to_tensordict(raw_obs, "IsaacLabVecEnv.reset")
        return obs, self._info(extras, "IsaacLabVecEnv.reset")

    def step(self, action: Action) -> StepResult:
        """Clip (if configured) and apply ``action``, then map the Isaac Lab step result.

        Only metadata is checked on the way back (no host synchronisation), except
        while ``extras["final_obs"]`` has not yet appeared: until the env first
        writes it, each step checks on the host that no env ended.
        """
        where = "IsaacLabVecEnv.step"
        check_action(
            action,
            num_envs=self.num_envs,
            space=self.single_action_space,
            device=self.device,
            where=where,
        )
        if self._clip_low is not None and self._clip_high is not None:
            action = torch.clamp(
                action, self._clip_low.to(action.dtype), self._clip_high.to(action.dtype)
            )
        raw_obs, reward, terminated, time_outs, extras = self.env.step(action)
        self._check_row("reward", reward, floating=True)
        self._check_row("terminated", terminated, floating=False)
        self._check_row("time_outs", time_outs, floating=False)
        info = self._info(extras, where)
        obs = self._to_tensordict(raw_obs, where)
        if self.is_finite_horizon:
            # The horizon is part of the MDP: a time-out is a true termination.
            new_terminated = terminated | time_outs
            truncated = torch.zeros_like(time_outs)
        else:
            new_terminated = terminated.clone()
            truncated = time_outs.clone()
        final_obs = None
        if self.provides_final_obs:
            final_obs = self._final_obs(obs, new_terminated | truncated, extras)
        return StepResult(
            obs,
            reward.clone(),
            new_terminated,
            truncated,
            info,
            final_obs=final_obs,
        )

    def close(self) -> None:
        """Close the wrapped env; calling it twice is harmless."""
        if not self._closed:
            self._closed = True
            self.env.close()

    def _check_row(self, name: str, value: object, *, floating: bool) -> None:
        expected = "a floating-point" if floating else "a torch.bool"
        if not isinstance(value, Tensor):
            raise SpecError(
                f"IsaacLabVecEnv.step: {name} from the env must be {expected} tensor, "
                f"got {describe(value)}"
            )
        ok_dtype = value.is_floating_point() if floating else value.dtype == torch.bool
        if not ok_dtype or value.shape != (self.num_envs,) or value.device != self.device:
            raise SpecError(
                f"IsaacLabVecEnv.step: {name} from the env must be {expected} tensor of shape "
                f"[{self.num_envs}] (num_envs) on {self.device}, got dtype {value.dtype}, "
                f"shape {list(value.shape)} on {value.device}"
            )

    def _leaf(
        self, raw: Mapping[str, object], group: str, term: str | None, what: str, where: str
    ) -> object:
        if group not in raw:
            raise SpecError(
                f"{where}: {what} lacks the observation group {group!r} (expected groups "
                f"{sorted(self.single_observation_space.spaces)}, got {sorted(raw)})"
            )
        value = raw[group]
        if term is None:
            return value
        if not isinstance(value, Mapping) or term not in value:
            raise SpecError(
                f"{where}: {what} group {group!r} must be a dict holding the term {term!r}, "
                f"got {describe(value)}"
            )
        return value[term]

    def _to_tensordict(self, raw: object, where: str) -> Obs:
        if not isinstance(raw, Mapping):
            raise SpecError(f"{where}: observations must be a dict of groups, got {describe(raw)}")
        if set(raw) != set(self.single_observation_space.spaces):
            raise SpecError(
                f"{where}: observation groups must be "
                f"{sorted(self.single_observation_space.spaces)} "
                f"(env.single_observation_space), got {sorted(raw)}"
            )
        for group, terms in self._nested_terms.items():
            value = raw[group]
            if isinstance(value, Mapping) and set(value) != terms:
                raise SpecError(
                    f"{where}: observation group {group!r} must hold the terms {sorted(terms)}, "
                    f"got {sorted(value)}"
                )
        flat: dict[str, Tensor] = {}
        nested: dict[str, dict[str, Tensor]] = {}
        for group, term, shape in self._layout:
            leaf = self._leaf(raw, group, term, "the observation", where)
            name = group if term is None else f"{group}/{term}"
            expected = (self.num_envs, *shape)
            if not isinstance(leaf, Tensor):
                raise SpecError(
                    f"{where}: observation {name!r} must be a torch.Tensor, got {describe(leaf)}"
                )
            if tuple(leaf.shape) != expected or leaf.device != self.device:
                raise SpecError(
                    f"{where}: observation {name!r} must have shape {list(expected)} "
                    f"([num_envs, *space.shape]) on {self.device}, "
                    f"got {list(leaf.shape)} on {leaf.device}"
                )
            if term is None:
                flat[group] = leaf
            else:
                nested.setdefault(group, {})[term] = leaf
        return self._assemble(flat, nested)

    def _final_obs(self, obs: Obs, done: Done, extras: Mapping[str, Any]) -> Obs:
        where = "IsaacLabVecEnv.step"
        raw = extras.get("final_obs")
        if raw is None:
            # Until the env first writes the entry, whether it is missing legitimately
            # depends on tensor values: this host sync stops once the key exists.
            if bool(done.any()):
                raise EnvContractError(
                    f"{where}: env.cfg.compute_final_obs is True and envs "
                    f"{done.nonzero().flatten().tolist()} ended, but extras has no 'final_obs' "
                    "entry; this Isaac Lab version may not support compute_final_obs: upgrade it "
                    "or pass final_obs='ignore' to accept approximate bootstrapping"
                )
            return obs.clone()
        if not isinstance(raw, Mapping):
            raise SpecError(
                f"{where}: extras['final_obs'] must be a dict of observation groups, "
                f"got {describe(raw)}"
            )
        flat: dict[str, Tensor] = {}
        nested: dict[str, dict[str, Tensor]] = {}
        for group, term, _ in self._layout:
            key: str | tuple[str, str] = group if term is None else (group, term)
            current: Tensor = obs.get(key)
            final = self._leaf(raw, group, term, "extras['final_obs']", where)
            name = group if term is None else f"{group}/{term}"
            if not isinstance(final, Tensor) or (
                final.shape != current.shape
                or final.dtype != current.dtype
                or final.device != current.device
            ):
                got = (
                    f"dtype {final.dtype}, shape {list(final.shape)} on {final.device}"
                    if isinstance(final, Tensor)
                    else describe(final)
                )
                raise SpecError(
                    f"{where}: extras['final_obs'][{name!r}] must match the observation: "
                    f"dtype {current.dtype}, shape {list(current.shape)} on {current.device}; "
                    f"got {got}"
                )
            # Rows that ended take their terminal observation; the rest (including rows
            # left stale from earlier steps) take this step's observation.
            mask = done.view(-1, *([1] * (current.ndim - 1)))
            leaf = torch.where(mask, final, current)
            if term is None:
                flat[group] = leaf
            else:
                nested.setdefault(group, {})[term] = leaf
        return self._assemble(flat, nested)

    def _assemble(self, flat: dict[str, Tensor], nested: dict[str, dict[str, Tensor]]) -> Obs:
        """One TensorDict with the groups in the space's order."""
        groups: dict[str, Tensor | dict[str, Tensor]] = {
            group: flat[group] if group in flat else nested[group]
            for group in self.single_observation_space.spaces
        }
        return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

    def _info(self, extras: object, where: str) -> dict[str, Any]:
        """``info`` from ``extras`` (a fresh ``extras["log"]``); refuses extras that are no dict."""
        if not isinstance(extras, Mapping):
            raise SpecError(f"{where}: extras must be a dict, got {describe(extras)}")
        log = extras.get("log")
        if log is None:
            return {}
        if not isinstance(log, Mapping):
            raise SpecError(f"{where}: extras['log'] must be a dict, got {describe(log)}")
        values = tuple(log.items())
        if log is self._last_log and len(values) == len(self._last_log_values):
            stale = all(
                key == old_key and value is old_value
                for (key, value), (old_key, old_value) in zip(
                    values, self._last_log_values, strict=True
                )
            )
            if stale:
                return {}
        # A new dict or a new value marks a fresh log. The references kept here keep the
        # old objects alive, so a new object can never reuse an old one's identity.
        self._last_log = log
        self._last_log_values = values
        return {"log": {str(key): _log_value(str(key), value, where) for key, value in values}}


def _import_isaaclab(env_id: str) -> Callable[..., Any]:
    """Import Isaac Lab's task registry and return ``parse_env_cfg``."""
    try:
        importlib.import_module("isaaclab_tasks")
        parse_cfg = importlib.import_module("isaaclab_tasks.utils.parse_cfg")
    except ImportError as err:
        raise MissingDependencyError(
            f"make({env_id!r}) needs Isaac Lab, which cannot be imported ({err}); "
            f"{ISAACLAB_INSTALL_HINT}"
        ) from err
    parse_env_cfg: Callable[..., Any] = parse_cfg.parse_env_cfg
    return parse_env_cfg


def holds_one_simulation(env_id: str) -> bool:
    """Whether ``env_id``'s env cannot coexist with a second env in the same process.

    True for Isaac Lab tasks (``"Isaac-..."``, the ids :func:`~typedrl.envs.make`
    sends to :func:`make_isaaclab`): Isaac Lab holds one simulation per process,
    so an evaluation env can only be built once the training env is closed.

    Example:
        >>> holds_one_simulation("Isaac-Cartpole"), holds_one_simulation("CartPole-v1")
        (True, False)
    """
    return env_id.startswith("Isaac-")


def _simulation_is_open() -> bool:
    """Whether this process already holds an Isaac Lab simulation (one env at a time)."""
    sim = importlib.import_module("isaaclab.sim")
    return sim.SimulationContext.instance() is not None


def _overrides(options: Mapping[str, Any], where: str) -> list[str]:
    """The Hydra overrides of ``env_kwargs["overrides"]``."""
    extra = options.get("overrides", ())
    if isinstance(extra, str) or not (
        isinstance(extra, Sequence) and all(isinstance(item, str) for item in extra)
    ):
        raise ConfigError(
            f"{where}: env_kwargs['overrides'] must be a list of 'key=value' strings "
            f"(for example ['env.scene.ground=null']), got {describe(extra)}"
        )
    return list(extra)


def make_isaaclab(
    env_id: str,
    *,
    num_envs: int,
    device: torch.device | str = "cpu",
    seed: int | None = None,
    clip_actions: float | Literal["space"] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
) -> IsaacLabVecEnv:
    """Build a registered Isaac Lab task (``"Isaac-..."``) and wrap it in :class:`IsaacLabVecEnv`.

    Isaac Lab is imported here, lazily; kit-less Isaac Lab 3 runs on its Newton
    physics backend, and its cartpole tasks run on a CPU. The task's registered
    config is parsed with Isaac Lab's ``parse_env_cfg`` (Hydra-style overrides
    from ``env_kwargs["overrides"]``; ``typedrl train --env-kwargs`` passes them),
    given ``num_envs``, ``device`` and ``seed``, and ``compute_final_obs`` is
    switched on unless ``env_kwargs`` says otherwise, so that truncations are
    bootstrapped exactly. Isaac Lab holds one simulation per process: a second
    env cannot be built while one is open.

    Args:
        env_id: A task id registered by ``isaaclab_tasks``, e.g. ``"Isaac-Cartpole"``.
        num_envs: Number of parallel envs (``scene.num_envs``).
        device: Simulation device (``sim.device``), e.g. ``"cpu"`` or ``"cuda:0"``.
        seed: The config's seed (``cfg.seed``, folded into ``[0, 2**32)`` as
            :meth:`IsaacLabVecEnv.reset` does); ``None`` keeps the task's.
        clip_actions: Passed to :class:`IsaacLabVecEnv`.
        env_kwargs: Options: ``overrides`` (list of Hydra-style ``"key=value"``
            strings, e.g. ``"physics=newton_mjwarp"`` or ``"env.scene.ground=null"``),
            ``cfg_hook`` (a callable that edits the parsed config in place),
            ``compute_final_obs`` (bool, default ``True``), ``is_finite_horizon``
            (bool, default: the task's) and ``final_obs`` (the adapter's option).

    Returns:
        The wrapped env; ``close()`` releases the simulation.

    Raises:
        MissingDependencyError: If Isaac Lab cannot be imported (the message says
            how to install it).
        ConfigError: For an unknown option, an option of the wrong type, an
            unregistered id, or a second env while one is open.
    """
    where = f"make_isaaclab({env_id!r})"
    options = dict(env_kwargs or {})
    unknown = sorted(set(options) - _MAKE_OPTIONS)
    if unknown:
        raise ConfigError(
            f"{where}: unknown env_kwargs {unknown}; valid keys are {sorted(_MAKE_OPTIONS)}"
        )
    _validation.positive_int("make_isaaclab", "num_envs", num_envs)
    compute_final_obs = options.get("compute_final_obs", True)
    is_finite_horizon = options.get("is_finite_horizon")
    cfg_hook = options.get("cfg_hook")
    if not isinstance(compute_final_obs, bool):
        raise ConfigError(
            f"{where}: env_kwargs['compute_final_obs'] must be a bool, "
            f"got {describe(compute_final_obs)}"
        )
    if is_finite_horizon is not None and not isinstance(is_finite_horizon, bool):
        raise ConfigError(
            f"{where}: env_kwargs['is_finite_horizon'] must be None or a bool, "
            f"got {describe(is_finite_horizon)}"
        )
    if cfg_hook is not None and not callable(cfg_hook):
        raise ConfigError(
            f"{where}: env_kwargs['cfg_hook'] must be a callable taking the config, "
            f"got {describe(cfg_hook)}"
        )
    overrides = _overrides(options, where)
    parse_env_cfg = _import_isaaclab(env_id)
    if env_id not in gym.registry:
        known = sorted(name for name in gym.registry if name.startswith("Isaac-"))
        raise ConfigError(f"{where}: no Isaac Lab task has this id; registered: {known}")
    if _simulation_is_open():
        raise ConfigError(
            f"{where}: Isaac Lab runs one simulation per process and one is already open; "
            "close the other env first (or build this one in another process)"
        )
    cfg = parse_env_cfg(env_id, device=str(device), num_envs=num_envs, overrides=overrides)
    cfg.compute_final_obs = compute_final_obs
    if is_finite_horizon is not None:
        cfg.is_finite_horizon = is_finite_horizon
    if seed is not None:
        cfg.seed = _isaaclab_seed(seed)
    if cfg_hook is not None:
        cfg_hook(cfg)
    raw = _require_env(gym.make(env_id, cfg=cfg).unwrapped, where)
    try:
        return IsaacLabVecEnv(
            raw, clip_actions=clip_actions, final_obs=options.get("final_obs", "auto")
        )
    except BaseException:
        raw.close()
        raise
