"""Observation checks shared by reset and step, and the value helpers the checkers use."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, final

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict
from torch import Tensor

from typedrl._validation import describe
from typedrl.envs._checker._report import Recorder
from typedrl.errors import EnvContractError
from typedrl.protocols import VecEnv

__all__ = [
    "FirstObsDtypeCheck",
    "LeafSpec",
    "check_obs",
    "check_obs_dtypes",
    "equal_rows",
    "host",
    "leaves",
    "obs_spec",
    "row_list",
    "show",
]


def show(value: object) -> str:
    """Describe a value for a message: dtype, shape and device for arrays, else its repr."""
    if isinstance(value, Tensor):
        return f"Tensor(dtype={value.dtype}, shape={list(value.shape)}, device={value.device})"
    if isinstance(value, np.ndarray):
        return f"numpy.ndarray(dtype={value.dtype}, shape={list(value.shape)})"
    if isinstance(value, TensorDict):
        return f"TensorDict(batch_size={list(value.batch_size)}, keys={sorted(leaves(value))})"
    return describe(value)


def leaves(obs: TensorDict) -> dict[str, Tensor]:
    """Every leaf of ``obs`` by its key, nested keys joined with ``"."``."""
    result: dict[str, Tensor] = {}
    for key, value in obs.items(include_nested=True, leaves_only=True):
        raw: object = key
        name = ".".join(map(str, raw)) if isinstance(raw, tuple) else str(raw)
        if isinstance(value, Tensor):
            result[name] = value
    return result


def host(value: Tensor) -> Tensor | None:
    """A detached CPU copy of ``value``, or ``None`` when its values cannot be read (meta)."""
    if value.device.type == "meta":
        return None
    return value.detach().to("cpu", copy=True)


def row_list(mask: Tensor, limit: int = 8) -> str:
    """The indices where a 1-D bool ``mask`` is true, shortened."""
    rows = torch.nonzero(mask).flatten().tolist()
    text = ", ".join(str(row) for row in rows[:limit])
    return f"[{text}{', ...' if len(rows) > limit else ''}]"


def equal_rows(first: Tensor, second: Tensor) -> Tensor:
    """Per-row exact equality of two same-shaped tensors (NaN equals NaN)."""
    same = first == second
    if first.is_floating_point():
        same = same | (torch.isnan(first) & torch.isnan(second))
    return same.reshape(same.shape[0], -1).all(dim=1)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class LeafSpec:
    """What one observation leaf must look like, from the observation space."""

    shape: tuple[int, ...]
    """Shape of one row's value."""

    dtype: torch.dtype | None
    """Exact dtype (``Box``), or ``None`` when any integer dtype will do."""

    space: str
    """The space, for messages."""


def _torch_dtype(dtype: np.dtype[Any]) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype=dtype)).dtype


def obs_spec(space: object, prefix: str = "") -> dict[str, LeafSpec]:
    """The expected leaves of an observation, or raise ``TypeError`` for unsupported spaces.

    A ``Box`` observation space means one leaf ``"obs"``; a ``Dict`` space means
    one leaf per key (nested ``Dict`` spaces give nested keys). ``Box`` leaves
    must have the space's dtype; ``Discrete``, ``MultiDiscrete`` and
    ``MultiBinary`` leaves any integer dtype (or ``bool`` for ``MultiBinary``).
    """
    if isinstance(space, gym.spaces.Dict):
        result: dict[str, LeafSpec] = {}
        for name, sub in space.spaces.items():
            result.update(obs_spec(sub, f"{prefix}{name}."))
        return result
    key = prefix[:-1] if prefix else "obs"
    if isinstance(space, gym.spaces.Box):
        return {
            key: LeafSpec(shape=space.shape, dtype=_torch_dtype(space.dtype), space=repr(space))
        }
    if isinstance(space, gym.spaces.Discrete | gym.spaces.MultiDiscrete | gym.spaces.MultiBinary):
        return {key: LeafSpec(shape=tuple(space.shape or ()), dtype=None, space=repr(space))}
    raise TypeError(
        f"unsupported observation space {space!r} at {key!r}; expected Box, Discrete, "
        "MultiDiscrete, MultiBinary or a Dict of them"
    )


def _dtype_ok(leaf: Tensor, spec: LeafSpec) -> bool:
    if spec.dtype is not None:
        return leaf.dtype == spec.dtype
    return leaf.dtype == torch.bool or not (leaf.is_floating_point() or leaf.is_complex())


def check_obs_dtypes(obs: TensorDict, space: gym.Space[Any], *, where: str) -> None:
    """Raise :class:`~typedrl.errors.EnvContractError` for a leaf of another dtype than its space.

    The collectors' check of an env's first observations (not of every
    step), with the rule of the checker's ``obs.spec``: a ``Box`` leaf has the
    space's dtype exactly, a discrete leaf any integer dtype. Keys the space
    does not declare, and spaces the checker does not support, are left to it.

    Example:
        >>> box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        >>> obs = TensorDict({"obs": torch.zeros(3, 2, dtype=torch.float64)}, batch_size=[3])
        >>> check_obs_dtypes(obs, box, where="reset")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        typedrl.errors.EnvContractError: reset: observation 'obs' expected torch.float32 ...
    """
    try:
        spec = obs_spec(space)
    except TypeError:
        return
    for name, leaf in leaves(obs).items():
        want = spec.get(name)
        if want is None or _dtype_ok(leaf, want):
            continue
        expected = str(want.dtype) if want.dtype is not None else "an integer dtype"
        raise EnvContractError(
            f"{where}: observation {name!r} expected {expected} (the dtype of "
            f"single_observation_space {want.space}), got {leaf.dtype}; return that dtype, "
            "or declare the dtype the env returns (typedrl check-env finds every such leaf)"
        )


@final
class FirstObsDtypeCheck:
    """A collector's check of its env's observation dtypes, until the first step passed it.

    Called with every reset's and step's observation, it runs
    :func:`check_obs_dtypes` on resets until a step's observation has been
    checked, and then never again: the rollout loop stays free of it (collectors
    pass it the last step's observation, after the loop, and stop calling it
    once :attr:`done`).

    Args:
        env: The env whose ``single_observation_space`` declares the dtypes.
    """

    def __init__(self, env: VecEnv) -> None:
        self._space = env.single_observation_space
        self._name = type(env).__name__
        self.done = False
        """Whether a step's observation passed: every later call returns at once."""

    def __call__(self, obs: TensorDict, call: Literal["reset", "step"]) -> TensorDict:
        """Check ``obs``, returned by the env's ``call``, unless a step was checked; return it."""
        if not self.done:
            check_obs_dtypes(obs, self._space, where=f"{self._name}.{call}()")
            self.done = call == "step"
        return obs


def check_obs(
    rec: Recorder,
    obs: object,
    *,
    num_envs: int,
    device: torch.device,
    spec: Mapping[str, LeafSpec] | None,
    where: str,
    step: int | None,
) -> bool:
    """Check an observation against the obs.* rules; return whether it is a usable TensorDict."""
    if not isinstance(obs, TensorDict):
        rec.fail(
            "obs.batch_size",
            f"{where}: expected a TensorDict with batch_size [{num_envs}], got {show(obs)}",
            step=step,
        )
        return False
    with rec.guard("obs.batch_size", what=f"{where}: inspecting the observation", step=step):
        if list(obs.batch_size) != [num_envs]:
            rec.fail(
                "obs.batch_size",
                f"{where}: expected batch_size [{num_envs}] (num_envs), got {list(obs.batch_size)}",
                step=step,
            )
    found = leaves(obs)
    with rec.guard("obs.device", what=f"{where}: inspecting leaf devices", step=step):
        for name, leaf in found.items():
            if leaf.device != device:
                rec.fail(
                    "obs.device",
                    f"{where}: expected the leaf on env.device {device}, got {leaf.device}",
                    step=step,
                    key=name,
                )
    if spec is not None:
        with rec.guard("obs.spec", what=f"{where}: comparing with the space", step=step):
            _check_spec(rec, found, num_envs=num_envs, spec=spec, where=where, step=step)
    with rec.guard("obs.finite", what=f"{where}: reading the values", step=step):
        for name, leaf in found.items():
            values = host(leaf) if leaf.is_floating_point() and leaf.device == device else None
            if values is None or values.ndim == 0 or values.shape[0] != num_envs:
                continue
            bad = ~torch.isfinite(values).reshape(num_envs, -1).all(dim=1)
            if bool(bad.any()):
                rec.fail(
                    "obs.finite",
                    f"{where}: expected finite values, got NaN or infinity in rows {row_list(bad)}",
                    step=step,
                    key=name,
                )
    return True


def _check_spec(
    rec: Recorder,
    found: Mapping[str, Tensor],
    *,
    num_envs: int,
    spec: Mapping[str, LeafSpec],
    where: str,
    step: int | None,
) -> None:
    missing = sorted(set(spec) - set(found))
    extra = sorted(set(found) - set(spec))
    if missing or extra:
        rec.fail(
            "obs.spec",
            f"{where}: expected keys {sorted(spec)} from single_observation_space, got "
            f"{sorted(found)} (missing {missing}, unexpected {extra})",
            step=step,
        )
    for name in sorted(set(spec) & set(found)):
        leaf, want = found[name], spec[name]
        shape = [num_envs, *want.shape]
        dtype = str(want.dtype) if want.dtype is not None else "an integer dtype"
        if list(leaf.shape) != shape or not _dtype_ok(leaf, want):
            rec.fail(
                "obs.spec",
                f"{where}: expected shape {shape} ([num_envs, *space.shape]) and {dtype} "
                f"from {want.space}, got shape {list(leaf.shape)} and {leaf.dtype}",
                step=step,
                key=name,
            )
