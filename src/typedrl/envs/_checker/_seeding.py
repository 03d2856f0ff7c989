"""The seeding rules: replays reproduce a rollout, and reset accepts every seed a run passes."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import final

import numpy as np
import torch
from tensordict import TensorDict
from torch import Tensor

from typedrl.envs._checker._observations import equal_rows, host, leaves, row_list
from typedrl.envs._checker._report import Recorder
from typedrl.envs._checker._vec import EnvContext, StepParts, unpack_step
from typedrl.seeding import ENV_SEED_LIMIT, SEED_LIMIT

__all__ = ["Snapshot", "Trace", "check_seed_range", "check_seeding", "snapshot", "snapshot_obs"]

Snapshot = dict[str, Tensor]


def snapshot(parts: StepParts) -> Snapshot:
    """Readable CPU copies of every output of a step, for replay comparisons."""
    result: Snapshot = {}
    named: dict[str, object] = {"reward": parts.reward, "terminated": parts.terminated}
    named["truncated"] = parts.truncated
    for prefix, value in (("obs", parts.obs), ("final_obs", parts.final_obs)):
        if isinstance(value, TensorDict):
            named.update({f"{prefix}[{k!r}]": v for k, v in leaves(value).items()})
    for name, value in named.items():
        readable = None
        if isinstance(value, Tensor):
            readable = host(value)
        elif isinstance(value, np.ndarray):
            readable = torch.from_numpy(np.array(value))
        if readable is not None:
            result[name] = readable
    return result


@final
@dataclass(slots=True, kw_only=True)
class Trace:
    reset: Snapshot
    steps: list[Snapshot]


def snapshot_obs(obs: TensorDict) -> Snapshot:
    result: Snapshot = {}
    for name, leaf in leaves(obs).items():
        readable = host(leaf)
        if readable is not None:
            result[f"obs[{name!r}]"] = readable
    return result


def _replay(ctx: EnvContext, reset_seed: int, actions: Sequence[Tensor]) -> Trace:
    outcome = ctx.env.reset(seed=reset_seed)
    obs = outcome[0] if isinstance(outcome, tuple | list) and outcome else None
    trace = Trace(reset=snapshot_obs(obs) if isinstance(obs, TensorDict) else {}, steps=[])
    for action in actions:
        parts = unpack_step(ctx.env.step(action))
        if parts is None:
            break
        trace.steps.append(snapshot(parts))
    return trace


def _difference(first: Snapshot, second: Snapshot) -> tuple[str, str] | None:
    """The first output that differs between two snapshots: (name, description)."""
    for name in sorted(set(first) | set(second)):
        if name not in first or name not in second:
            return name, "present in one run only"
        a, b = first[name], second[name]
        if a.shape != b.shape or a.dtype != b.dtype:
            return name, f"{a.dtype} {list(a.shape)} vs {b.dtype} {list(b.shape)}"
        if a.ndim == 0:
            a, b = a.reshape(1), b.reshape(1)
        differ = ~equal_rows(a, b)
        if bool(differ.any()):
            rows = row_list(differ)
            shown = a[differ][:3].flatten()[:6].tolist(), b[differ][:3].flatten()[:6].tolist()
            return name, f"rows {rows} differ (first run {shown[0]}, replay {shown[1]})"
    return None


def check_seeding(
    rec: Recorder,
    ctx: EnvContext,
    *,
    reset_seed: int,
    actions: Sequence[Tensor],
    trace: Trace,
    example: int,
) -> None:
    with rec.guard("seeding", what=f"replaying rollout {example} with reset(seed={reset_seed})"):
        replay = _replay(ctx, reset_seed, actions[: len(trace.steps)])
        prefix = (
            f"reset(seed={reset_seed}) and the same actions did not reproduce rollout {example}"
        )
        diff = _difference(trace.reset, replay.reset)
        if diff is not None:
            rec.fail("seeding", f"{prefix}: reset obs: {diff[1]}", key=diff[0])
            return
        if len(replay.steps) != len(trace.steps):
            rec.fail(
                "seeding",
                f"{prefix}: the replay stopped after {len(replay.steps)} steps, "
                f"the first run after {len(trace.steps)}",
            )
        for step, (first, second) in enumerate(zip(trace.steps, replay.steps, strict=False)):
            diff = _difference(first, second)
            if diff is not None:
                rec.fail("seeding", f"{prefix}: {diff[1]}", step=step, key=diff[0])
                return


def range_seeds(num_envs: int) -> tuple[int, int]:
    """The seeds of the range rule: the largest a run derives, the largest a NumPy env gets.

    :func:`~typedrl.seeding.derive_seed` returns seeds up to ``2**63 - 1``;
    the Gymnasium adapter folds them (:func:`~typedrl.seeding.env_seed`) so
    that row ``i`` of a vector env gets ``seed + i <= 2**32 - 1``, and passes
    ``2**32 - num_envs`` itself unchanged.
    """
    return SEED_LIMIT - 1, ENV_SEED_LIMIT - num_envs


def check_seed_range(rec: Recorder, ctx: EnvContext) -> None:
    """Reset with the largest seeds a training run may pass; an exception is a violation."""
    rec.ran("seeding.range")
    for seed in range_seeds(ctx.num_envs):
        try:
            ctx.env.reset(seed=seed)
        except Exception as exc:  # the env's refusal is the violation this rule reports
            said = " ".join(str(exc).split())
            rec.fail(
                "seeding.range",
                f"reset(seed={seed}) raised {type(exc).__name__}: {said}; expected every seed "
                "a run passes to be accepted: up to 2**63 - 1 (typedrl.seeding.derive_seed), "
                "folded for a Gymnasium env so that each row's seed is below 2**32 "
                "(typedrl.seeding.env_seed), as NumPy's default_rng and RandomState accept",
            )
            return
