"""The VecEnv rules on the env's members and on what reset and step return."""

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

import gymnasium as gym
import torch
from tensordict import TensorDict
from torch import Tensor

from typedrl._results import StepResult
from typedrl.envs._checker._actions import ActionSampler, ActionSpace, supported_action_space
from typedrl.envs._checker._observations import LeafSpec, check_obs, host, obs_spec, row_list, show
from typedrl.envs._checker._report import Recorder
from typedrl.errors import NonFiniteError
from typedrl.protocols import DifferentiableVecEnv, VecEnv

__all__ = [
    "EnvContext",
    "StepParts",
    "call_step",
    "check_reset",
    "check_step_parts",
    "done_rows",
    "inspect_env",
    "unpack_step",
]

_VEC_MEMBERS = (
    "num_envs",
    "device",
    "single_observation_space",
    "single_action_space",
    "provides_final_obs",
    "reset",
    "step",
    "close",
)
_MISSING = object()


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class EnvContext:
    """What the static checks learned about the env; the dynamic checks need all of it."""

    env: Any
    """The env under test (typed ``Any``: it is whatever the user passed)."""

    num_envs: int
    """A valid ``num_envs``."""

    device: torch.device
    """A valid ``device``."""

    spec: Mapping[str, LeafSpec] | None
    """Expected observation leaves, or ``None`` when the space is unusable."""

    sampler: ActionSampler | None
    """Action source, or ``None`` when the action space is unusable."""

    provides_final_obs: bool | None
    """The env's flag, or ``None`` when it is not a bool."""


def _read(rec: Recorder, rule: str, env: object, name: str, *, key: str | None = None) -> object:
    """Read ``env.<name>`` as a check of ``rule``; ``_MISSING`` when it fails."""
    rec.ran(rule)
    try:
        return getattr(env, name)
    except Exception as exc:  # a missing or raising member is a violation, not a crash
        rec.fail(rule, f"reading env.{name} raised {type(exc).__name__}: {exc}", key=key)
    return _MISSING


def inspect_env(rec: Recorder, env: object, *, differentiable: bool) -> EnvContext | None:
    """Check the protocol, num_envs, device and spaces rules; ``None`` if no rollout can run."""
    proto: type = DifferentiableVecEnv if differentiable else VecEnv
    members = (*_VEC_MEMBERS, "detach_state") if differentiable else _VEC_MEMBERS
    rec.ran("protocol")
    missing = [m for m in members if inspect.getattr_static(env, m, _MISSING) is _MISSING]
    try:
        member = isinstance(env, proto)
    except Exception:  # a property raised while isinstance read it: its own rule reports that
        member = not missing
    if not member:
        rec.fail(
            "protocol",
            f"expected an instance of {proto.__name__} (members {list(members)}), "
            f"got {type(env).__name__}, which lacks {missing}",
        )
    flag = _read(rec, "protocol", env, "provides_final_obs")
    provides = flag if isinstance(flag, bool) else None
    if flag is not _MISSING and provides is None:
        rec.fail("protocol", f"expected provides_final_obs to be a bool, got {show(flag)}")
    num_envs = _read(rec, "num_envs", env, "num_envs")
    if num_envs is not _MISSING and (
        isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs <= 0
    ):
        rec.fail("num_envs", f"expected a positive int, got {show(num_envs)}")
    device = _read(rec, "device", env, "device")
    if device is not _MISSING and not isinstance(device, torch.device):
        rec.fail("device", f"expected a torch.device, got {show(device)}")
    spec = _observation_spec(rec, env)
    sampler_space = _action_space(rec, env, differentiable=differentiable)
    if rec.failed("num_envs") or rec.failed("device"):
        return None
    if not isinstance(num_envs, int) or not isinstance(device, torch.device):
        return None
    sampler = None
    if sampler_space is not None:
        sampler = ActionSampler(space=sampler_space, num_envs=num_envs, device=device)
    return EnvContext(
        env=env,
        num_envs=num_envs,
        device=device,
        spec=spec,
        sampler=sampler,
        provides_final_obs=provides,
    )


def _observation_spec(rec: Recorder, env: object) -> dict[str, LeafSpec] | None:
    key = "single_observation_space"
    space = _read(rec, "spaces", env, key, key=key)
    if space is _MISSING:
        return None
    try:
        return obs_spec(space)
    except TypeError as exc:
        rec.fail("spaces", f"expected a supported space: {exc}", key=key)
    return None


def _action_space(rec: Recorder, env: object, *, differentiable: bool) -> ActionSpace | None:
    key = "single_action_space"
    space = _read(rec, "spaces", env, key, key=key)
    if space is _MISSING:
        return None
    if not isinstance(space, gym.Space) or not supported_action_space(space):
        rec.fail(
            "spaces",
            "expected a gymnasium Box, Discrete, MultiDiscrete or MultiBinary space, "
            f"got {show(space)}",
            key=key,
        )
        return None
    if differentiable and not isinstance(space, gym.spaces.Box):
        rec.fail(
            "spaces",
            f"expected a Box action space (a differentiable env), got {space!r}",
            key=key,
        )
        return None
    return space


def check_reset(rec: Recorder, ctx: EnvContext, seed: int) -> TensorDict | None:
    """Call ``reset(seed=seed)`` and check what comes back; return the observation if usable."""
    where = f"reset(seed={seed})"
    outcome: object = _MISSING
    with rec.guard("reset.returns", what=where):
        try:
            outcome = ctx.env.reset(seed=seed)
        except NonFiniteError as exc:  # an env (an adapter) that checks its own values
            rec.fail("obs.finite", f"{where} raised NonFiniteError: {exc}")
    if outcome is _MISSING:
        return None
    if not isinstance(outcome, tuple | list) or len(outcome) != 2:
        rec.fail("reset.returns", f"{where}: expected a tuple (obs, info), got {show(outcome)}")
        return None
    obs, info = outcome
    if not isinstance(obs, TensorDict) or not isinstance(info, dict):
        rec.fail(
            "reset.returns",
            f"{where}: expected (TensorDict, dict), got ({show(obs)}, {show(info)})",
        )
    usable = check_obs(
        rec, obs, num_envs=ctx.num_envs, device=ctx.device, spec=ctx.spec, where=where, step=None
    )
    return obs if usable and isinstance(obs, TensorDict) else None


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class StepParts:
    """The pieces of whatever ``step`` returned, each as it came."""

    # Fields mirror StepResult; a plain tuple has no final_obs and no valid.

    obs: object
    reward: object
    terminated: object
    truncated: object
    info: object
    final_obs: object
    valid: object
    is_step_result: bool


def unpack_step(result: object) -> StepParts | None:
    """Split a step's result into its parts; ``None`` if it is not even a 5-sequence."""
    if isinstance(result, StepResult):
        return StepParts(
            obs=result[0],
            reward=result[1],
            terminated=result[2],
            truncated=result[3],
            info=result[4],
            final_obs=result.final_obs,
            valid=result.valid,
            is_step_result=True,
        )
    if isinstance(result, tuple | list) and len(result) == 5:
        obs, reward, terminated, truncated, info = result
        return StepParts(
            obs=obs,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            info=info,
            final_obs=None,
            valid=None,
            is_step_result=False,
        )
    return None


def call_step(rec: Recorder, ctx: EnvContext, action: Tensor, step: int) -> StepParts | None:
    outcome: object = _MISSING
    with rec.guard("step.returns", what=f"step(action) with {show(action)}", step=step):
        try:
            outcome = ctx.env.step(action)
        except NonFiniteError as exc:  # an env (an adapter) that checks its own values
            rec.fail("step.finite", f"step(action) raised NonFiniteError: {exc}", step=step)
    if outcome is _MISSING:
        return None
    parts = unpack_step(outcome)
    if parts is None:
        size = f" of length {len(outcome)}" if isinstance(outcome, tuple | list) else ""
        rec.fail(
            "step.returns",
            f"expected a StepResult (obs, reward, terminated, truncated, info), "
            f"got {show(outcome)}{size}",
            step=step,
        )
    elif not parts.is_step_result:
        items = ", ".join(
            f"{name}={show(value)}"
            for name, value in zip(
                ("obs", "reward", "terminated", "truncated", "info"),
                (parts.obs, parts.reward, parts.terminated, parts.truncated, parts.info),
                strict=True,
            )
        )
        rec.fail(
            "step.returns",
            f"expected a StepResult, got a plain {type(outcome).__name__} ({items}); return "
            "StepResult(obs, reward, terminated, truncated, info, final_obs=...)",
            step=step,
        )
    return parts


def _row_tensor_problem(value: object, num_envs: int, *, floating: bool) -> str | None:
    kind = "floating-point" if floating else "torch.bool"
    if not isinstance(value, Tensor):
        return f"expected a {kind} tensor [{num_envs}], got {show(value)}"
    dtype_ok = value.is_floating_point() if floating else value.dtype == torch.bool
    if list(value.shape) != [num_envs] or not dtype_ok:
        return f"expected a {kind} tensor [{num_envs}], got {value.dtype} {list(value.shape)}"
    return None


def check_step_parts(rec: Recorder, ctx: EnvContext, parts: StepParts, step: int) -> None:
    check_obs(
        rec,
        parts.obs,
        num_envs=ctx.num_envs,
        device=ctx.device,
        spec=ctx.spec,
        where="step(action) obs",
        step=step,
    )
    with rec.guard("step.reward", step=step):
        problem = _row_tensor_problem(parts.reward, ctx.num_envs, floating=True)
        if problem is not None:
            rec.fail("step.reward", problem, step=step, key="reward")
    with rec.guard("step.flags", step=step):
        for name, flag in (("terminated", parts.terminated), ("truncated", parts.truncated)):
            problem = _row_tensor_problem(flag, ctx.num_envs, floating=False)
            if problem is not None:
                rec.fail("step.flags", problem, step=step, key=name)
    with rec.guard("step.device", step=step):
        named = {"reward": parts.reward, "terminated": parts.terminated}
        named |= {"truncated": parts.truncated, "valid": parts.valid}
        for name, value in named.items():
            if isinstance(value, Tensor) and value.device != ctx.device:
                rec.fail(
                    "step.device",
                    f"expected {name} on env.device {ctx.device}, got {value.device}",
                    step=step,
                    key=name,
                )
    with rec.guard("step.finite", step=step):
        reward = parts.reward
        if (
            isinstance(reward, Tensor)
            and reward.is_floating_point()
            and reward.device == ctx.device
            and list(reward.shape) == [ctx.num_envs]
        ):
            values = host(reward)
            bad = ~torch.isfinite(values) if values is not None else None
            if bad is not None and bool(bad.any()):
                rec.fail(
                    "step.finite",
                    f"expected a finite reward, got NaN or infinity in rows {row_list(bad)}",
                    step=step,
                    key="reward",
                )
    with rec.guard("step.info", step=step):
        if not isinstance(parts.info, dict):
            rec.fail("step.info", f"expected info to be a dict, got {show(parts.info)}", step=step)
    if parts.is_step_result:
        with rec.guard("step.valid", step=step):
            problem = _row_tensor_problem(parts.valid, ctx.num_envs, floating=False)
            if problem is not None:
                rec.fail("step.valid", problem, step=step, key="valid")


def done_rows(parts: StepParts, num_envs: int) -> Tensor | None:
    """``terminated | truncated`` on the CPU, or ``None`` when the flags are unusable."""
    flags = []
    for value in (parts.terminated, parts.truncated):
        if not isinstance(value, Tensor) or value.dtype != torch.bool:
            return None
        if list(value.shape) != [num_envs]:
            return None
        readable = host(value)
        if readable is None:
            return None
        flags.append(readable)
    return flags[0] | flags[1]
