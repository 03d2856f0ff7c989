"""Hypothesis-driven rollouts that evaluate the step, terminal-observation and seeding rules."""

import contextlib
import itertools
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import hypothesis
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from torch import Tensor

from typedrl.envs._checker._actions import ActionSampler, Plan
from typedrl.envs._checker._report import Recorder
from typedrl.envs._checker._seeding import Trace, check_seeding, snapshot, snapshot_obs
from typedrl.envs._checker._terminal import EndTracker, check_final_obs, ghost_rows
from typedrl.envs._checker._vec import (
    EnvContext,
    call_step,
    check_reset,
    check_step_parts,
    done_rows,
)

__all__ = ["leaves_no_cache_folder", "run_rollouts"]

_HYPOTHESIS_HOME = ".hypothesis"
"""Hypothesis's storage folder in the working directory, unless HYPOTHESIS_STORAGE_DIRECTORY
names another."""


@contextlib.contextmanager
def leaves_no_cache_folder() -> Iterator[None]:
    """Remove the ``.hypothesis/`` folder hypothesis creates in the working directory, if it did.

    The rollouts keep no example database (``database=None``), but hypothesis
    also caches the literals it finds in local modules (the user's own, and
    ``typedrl``'s when it is not under site-packages) in
    ``.hypothesis/constants/``, with no setting to turn that off. A folder that
    existed before is left alone, as is anything else in a new one (another
    process's database); a ``HYPOTHESIS_STORAGE_DIRECTORY`` is the user's choice
    and is left alone too. Nothing process-wide is changed.
    """
    home = Path.cwd() / _HYPOTHESIS_HOME
    ours = not home.exists() and not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY")
    try:
        yield
    finally:
        if ours and home.is_dir():
            shutil.rmtree(home / "constants", ignore_errors=True)
            with contextlib.suppress(OSError):
                (home / ".gitignore").unlink(missing_ok=True)
                home.rmdir()  # only when nothing else is in it


def _rollout(
    rec: Recorder,
    ctx: EnvContext,
    *,
    reset_seed: int,
    actions: Sequence[Tensor],
    tracker: EndTracker,
    example: int,
) -> Trace | None:
    obs = check_reset(rec, ctx, reset_seed)
    if obs is None:
        return None
    tracker.on_reset()
    trace = Trace(reset=snapshot_obs(obs), steps=[])
    for step, action in enumerate(actions):
        parts = call_step(rec, ctx, action, step)
        if parts is None:
            break
        check_step_parts(rec, ctx, parts, step)
        done = done_rows(parts, ctx.num_envs)
        ghosts = ghost_rows(parts, ctx.num_envs)
        tracker.settle(ghosts)
        check_final_obs(rec, ctx, parts, done=done, step=step, tracker=tracker, example=example)
        tracker.on_step(rec, done, ghosts, step)
        trace.steps.append(snapshot(parts))
    return trace


def run_rollouts(
    rec: Recorder,
    ctx: EnvContext,
    sampler: ActionSampler,
    *,
    seed: int,
    num_steps: int,
    max_examples: int,
    min_episode_length: int | None,
) -> None:
    """Run hypothesis-drawn rollouts, checking every step, then replay each for seeding."""
    tracker = EndTracker(num_envs=ctx.num_envs, min_episode_length=min_episode_length)
    counter = itertools.count()

    @hypothesis.seed(seed)
    @settings(
        max_examples=max_examples,
        database=None,
        derandomize=True,
        deadline=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        print_blob=False,
    )
    @given(sampler.strategy(num_steps))
    def explore(plan: Plan) -> None:
        example = next(counter)
        reset_seed, steps = plan
        actions = [sampler.materialize(step) for step in steps]
        trace = _rollout(
            rec, ctx, reset_seed=reset_seed, actions=actions, tracker=tracker, example=example
        )
        if trace is not None:
            check_seeding(
                rec, ctx, reset_seed=reset_seed, actions=actions, trace=trace, example=example
            )

    with leaves_no_cache_folder():
        explore()
    tracker.finish(rec)
