"""The terminal-observation and autoreset rules, evaluated step by step over the rollouts."""

from dataclasses import dataclass, field
from typing import final

import torch
from tensordict import TensorDict
from torch import Tensor

from typedrl.envs._checker._observations import equal_rows, host, leaves, row_list, show
from typedrl.envs._checker._report import Recorder
from typedrl.envs._checker._vec import EnvContext, StepParts

__all__ = ["EndTracker", "check_final_obs", "ghost_rows"]


@final
@dataclass(slots=True, kw_only=True)
class EndTracker:
    """Episode bookkeeping across rollouts: terminal observations and episode lengths.

    Envs with next-step autoreset (ghost steps) return the terminal observation
    in ``obs`` of a row that ended and reset it during the next step, which
    they mark invalid. An ended row's terminal-observation evidence is
    therefore settled one step later: rows followed by a ghost step are left
    out of the heuristic, and rows whose next step was never seen are dropped.
    """

    num_envs: int
    min_episode_length: int | None
    lengths: Tensor = field(init=False)
    pending: list[tuple[int, int, int, bool]] = field(default_factory=list)
    same_as_reset: list[tuple[int, int, int]] = field(default_factory=list)
    differing: int = 0

    def __post_init__(self) -> None:
        self.lengths = torch.zeros(self.num_envs, dtype=torch.int64)

    def on_reset(self) -> None:
        """A new rollout: lengths restart and unsettled rows are dropped."""
        self.lengths.zero_()
        self.pending.clear()

    def ended(self, example: int, step: int, row: int, *, same_as_obs: bool) -> None:
        """Row ``row`` ended at ``step``; ``same_as_obs`` when its final_obs equals its obs."""
        self.pending.append((example, step, row, same_as_obs))

    def settle(self, ghosts: Tensor | None) -> None:
        """Settle the rows that ended on the previous step, given this step's ghost rows."""
        for example, step, row, same in self.pending:
            if ghosts is not None and bool(ghosts[row]):
                continue  # next-step autoreset: obs held the terminal observation on purpose
            if same:
                self.same_as_reset.append((example, step, row))
            else:
                self.differing += 1
        self.pending.clear()

    def on_step(self, rec: Recorder, done: Tensor | None, ghosts: Tensor | None, step: int) -> None:
        """Count one step per row and check episode lengths (ghost steps start the episode)."""
        self.lengths += 1
        if ghosts is not None:
            self.lengths[ghosts] = 0
        if done is None:
            return
        if self.min_episode_length is not None:
            rec.ran("autoreset.min_length")
            short = done & (self.lengths < self.min_episode_length)
            if bool(short.any()):
                rec.fail(
                    "autoreset.min_length",
                    f"expected episodes of at least {self.min_episode_length} steps "
                    f"(min_episode_length), got rows {row_list(short)} ending after "
                    f"{self.lengths[short].tolist()} steps; a row that reports done again right "
                    "after its autoreset usually means the reset happened one step late",
                    step=step,
                )
        self.lengths[done] = 0

    def finish(self, rec: Recorder) -> None:
        if not self.same_as_reset and not self.differing:
            return
        rec.ran("final_obs.terminal")
        if self.differing == 0:
            shown = ", ".join(
                f"rollout {ex} step {st} row {row}" for ex, st, row in self.same_as_reset[:6]
            )
            rec.fail(
                "final_obs.terminal",
                f"expected final_obs of ended rows to hold the terminal observation, but all "
                f"{len(self.same_as_reset)} ended rows had final_obs equal to the reset obs "
                f"({shown}); store the observation before resetting the row",
            )


def ghost_rows(parts: StepParts, num_envs: int) -> Tensor | None:
    """Rows whose transition the env marked invalid (``~valid``) on the CPU, if readable."""
    valid = parts.valid
    if not isinstance(valid, Tensor) or valid.dtype != torch.bool:
        return None
    if list(valid.shape) != [num_envs]:
        return None
    readable = host(valid)
    return None if readable is None else ~readable


def check_final_obs(
    rec: Recorder,
    ctx: EnvContext,
    parts: StepParts,
    *,
    done: Tensor | None,
    step: int,
    tracker: EndTracker,
    example: int,
) -> None:
    if not parts.is_step_result or ctx.provides_final_obs is None:
        return
    final_obs = parts.final_obs
    if not ctx.provides_final_obs:
        with rec.guard("final_obs.absent", step=step):
            if final_obs is not None:
                rec.fail(
                    "final_obs.absent",
                    f"expected final_obs None because provides_final_obs is False, "
                    f"got {show(final_obs)}",
                    step=step,
                )
        return
    obs = parts.obs
    if not isinstance(obs, TensorDict):
        return
    comparable = False
    with rec.guard("final_obs.present", step=step):
        comparable = _final_obs_shaped_like(rec, obs, final_obs, step)
    if not comparable or done is None or not isinstance(final_obs, TensorDict):
        return
    with rec.guard("final_obs.continuing", step=step):
        same = torch.ones(ctx.num_envs, dtype=torch.bool)
        for name, leaf in leaves(obs).items():
            now, last = host(leaf), host(leaves(final_obs)[name])
            if now is None or last is None or now.ndim == 0:
                continue
            rows_same = equal_rows(now, last)
            same &= rows_same
            moved = ~done & ~rows_same
            if bool(moved.any()):
                rec.fail(
                    "final_obs.continuing",
                    f"expected final_obs == obs for rows that did not end, got different values "
                    f"in rows {row_list(moved)}",
                    step=step,
                    key=name,
                )
        for row in torch.nonzero(done).flatten().tolist():
            tracker.ended(example, step, row, same_as_obs=bool(same[row]))


def _final_obs_shaped_like(rec: Recorder, obs: TensorDict, final_obs: object, step: int) -> bool:
    if not isinstance(final_obs, TensorDict):
        rec.fail(
            "final_obs.present",
            f"expected final_obs, a TensorDict shaped like obs (provides_final_obs is True), got "
            f"{show(final_obs)}; pass final_obs=... to StepResult or declare "
            "provides_final_obs = False",
            step=step,
        )
        return False
    now, last = leaves(obs), leaves(final_obs)
    problems = []
    if final_obs.batch_size != obs.batch_size:
        problems.append(f"batch_size {list(final_obs.batch_size)} vs {list(obs.batch_size)}")
    if sorted(now) != sorted(last):
        problems.append(f"keys {sorted(last)} vs {sorted(now)}")
    for name in sorted(set(now) & set(last)):
        a, b = now[name], last[name]
        if (a.shape, a.dtype, a.device) != (b.shape, b.dtype, b.device):
            problems.append(
                f"{name!r}: {b.dtype} {list(b.shape)} on {b.device} vs "
                f"{a.dtype} {list(a.shape)} on {a.device}"
            )
    if problems:
        rec.fail(
            "final_obs.present",
            f"expected final_obs shaped like obs, got (final_obs vs obs) {'; '.join(problems)}",
            step=step,
        )
    return not problems
