"""Property tests: APG's objectives against closed forms and invariances, and its skipped updates.

Every check runs in float64 on :class:`~typedrl.testing.QuadraticEnv` with a
deterministic linear policy, so two runs from one seed walk the same
trajectory. Tolerances: ``rtol=1e-10`` (``atol=1e-12``) where two
computations sum the same terms in another order; bit-exact where the same
operations run in the same order.

Segmentation: an update's ``accumulate_segment`` calls each run their
backward at once, so consecutive segments fed to one update must be cut
apart by ``detach_state`` (the trainer's TBPTT). Detaching changes the
gradient by design and never the loss. The gradient of the uncut objective
is recovered, for any cut, by giving each segment its whole history: segment
``[a, b)`` is collected after replaying steps ``[0, a)`` on a fresh env from
the same seed, with the graph kept; the update's discount still continues
across the segments.
"""

import copy
import dataclasses
from typing import Any

import torch
from hypothesis import given
from hypothesis import strategies as st
from torch import Tensor

from typedrl.apg import APG, APGConfig, DifferentiableCollector, DifferentiableRollout
from typedrl.apg._collector import first_done_mask
from typedrl.apg._config import DecaySchedule, OptimizerName
from typedrl.distributed import SingleProcess
from typedrl.testing import LinearDifferentiablePolicy, QuadraticEnv

F64 = torch.float64
RTOL, ATOL = 1e-10, 1e-12

_segment_lengths = st.lists(st.integers(1, 5), min_size=1, max_size=5)
_gammas = st.floats(0.0, 1.0)
_seeds = st.integers(0, 2**16)


def _policy(weight: float, bias: float) -> LinearDifferentiablePolicy:
    policy = LinearDifferentiablePolicy(obs_dim=1, act_dim=1).double()
    with torch.no_grad():
        policy.linear.weight.fill_(weight)
        policy.linear.bias.fill_(bias)
    return policy


def _collector(*, num_envs: int, horizon: int, seed: int) -> DifferentiableCollector:
    collector = DifferentiableCollector(
        QuadraticEnv(num_envs=num_envs, horizon=horizon, dtype="float64")
    )
    collector.reset(seed=seed)
    return collector


def _apg(policy: LinearDifferentiablePolicy, **config: Any) -> APG:
    return APG(policy, APGConfig(**config), dist=SingleProcess(), planned_updates=None)


def _grads(apg: APG) -> list[Tensor]:
    return [
        torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for p in apg.parameters
    ]


def _segmented(
    lengths: list[int], *, horizon: int, seed: int, gamma: float, detach: bool
) -> tuple[float, list[Tensor]]:
    """One segmented update over ``sum(lengths)`` steps: its loss and accumulated gradient."""
    policy = _policy(-0.3, 0.1)
    apg = _apg(policy, gamma=gamma)
    apg.begin_update()
    if detach:
        collector = _collector(num_envs=2, horizon=horizon, seed=seed)
        for length in lengths:
            apg.accumulate_segment(collector.collect(policy, num_steps=length))
            collector.detach_state()
    else:
        start = 0
        for length in lengths:
            # Replay the history with its graph, so the segment's rewards reach every action.
            collector = _collector(num_envs=2, horizon=horizon, seed=seed)
            if start:
                collector.collect(policy, num_steps=start)
            apg.accumulate_segment(collector.collect(policy, num_steps=length))
            start += length
    grads = _grads(apg)
    # The loss is the per-step mean over the update (the same total for every cut).
    return apg.finish_update().metrics["loss/policy"], grads


@given(_segment_lengths, st.integers(1, 8), _seeds, _gammas)
def test_segmentation_never_changes_the_loss(
    lengths: list[int], horizon: int, seed: int, gamma: float
) -> None:
    """Any cut of one update into detached segments gives the loss of one uncut segment."""
    whole, _ = _segmented([sum(lengths)], horizon=horizon, seed=seed, gamma=gamma, detach=True)
    cut, _ = _segmented(lengths, horizon=horizon, seed=seed, gamma=gamma, detach=True)
    torch.testing.assert_close(cut, whole, rtol=RTOL, atol=ATOL)


@given(_segment_lengths, st.integers(1, 8), _seeds, _gammas)
def test_segments_with_their_whole_history_give_the_uncut_gradient(
    lengths: list[int], horizon: int, seed: int, gamma: float
) -> None:
    """Without detaching, any cut gives the loss and the gradient of the uncut update."""
    whole_loss, whole_grads = _segmented(
        [sum(lengths)], horizon=horizon, seed=seed, gamma=gamma, detach=True
    )
    loss, grads = _segmented(lengths, horizon=horizon, seed=seed, gamma=gamma, detach=False)
    torch.testing.assert_close(loss, whole_loss, rtol=RTOL, atol=ATOL)
    for grad, whole in zip(grads, whole_grads, strict=True):
        torch.testing.assert_close(grad, whole, rtol=RTOL, atol=ATOL)


def test_detaching_a_segment_changes_the_gradient() -> None:
    """The detached cut is what makes the two properties above differ (not a vacuous check)."""
    kwargs: dict[str, Any] = {"horizon": 20, "seed": 0, "gamma": 0.9}
    _, whole = _segmented([4], detach=True, **kwargs)
    _, detached = _segmented([2, 2], detach=True, **kwargs)
    _, replayed = _segmented([2, 2], detach=False, **kwargs)
    assert not torch.allclose(detached[0], whole[0])
    torch.testing.assert_close(replayed[0], whole[0], rtol=RTOL, atol=ATOL)


@st.composite
def _done_patterns(draw: st.DrawFn) -> tuple[Tensor, Tensor, Tensor]:
    """``(terminated, truncated, objective_scale)`` for a rollout of 1..8 steps and 1..4 rows."""
    steps, rows = draw(st.integers(1, 8)), draw(st.integers(1, 4))
    flags = st.lists(st.booleans(), min_size=steps * rows, max_size=steps * rows)
    terminated = torch.tensor(draw(flags)).reshape(steps, rows)
    truncated = torch.tensor(draw(flags)).reshape(steps, rows) & ~terminated
    scale = torch.tensor(draw(st.lists(st.floats(0.0, 4.0), min_size=rows, max_size=rows)))
    return terminated, truncated, scale.to(F64)


def _complete(
    terminated: Tensor,
    truncated: Tensor,
    scale: Tensor,
    *,
    seed: int,
    gamma: float,
    perturbation: float,
) -> tuple[float, list[Tensor]]:
    """Loss and gradient of one complete rollout whose dead steps get an extra reward term."""
    steps, rows = terminated.shape
    policy = _policy(-0.4, 0.2)
    apg = _apg(policy, gamma=gamma, entropy_coef=0.0)
    # A long horizon: every done of the rollout is the drawn one.
    collector = _collector(num_envs=rows, horizon=1000, seed=seed)
    rollout = collector.collect(policy, num_steps=steps)
    done = terminated | truncated
    alive = first_done_mask(done)
    dead = (~alive).to(F64)
    # A term with a gradient of its own, on dead steps only.
    actions = rollout.actions.squeeze(-1)
    rewards = rollout.rewards + dead * perturbation * (actions**3 + 1.0)
    masked: DifferentiableRollout = dataclasses.replace(
        rollout, rewards=rewards, terminated=terminated, truncated=truncated, alive_mask=alive
    )
    apg.begin_update()
    apg.accumulate_complete_rollout(masked, objective_scale=scale)
    grads = _grads(apg)
    return apg.finish_update().metrics["loss/policy"], grads


@given(_done_patterns(), _seeds, _gammas, st.floats(-100.0, 100.0))
def test_rewards_after_a_rows_first_done_change_nothing(
    pattern: tuple[Tensor, Tensor, Tensor], seed: int, gamma: float, perturbation: float
) -> None:
    """Perturbing any reward after a row's first done leaves loss and gradient bit-identical."""
    terminated, truncated, scale = pattern
    plain = _complete(terminated, truncated, scale, seed=seed, gamma=gamma, perturbation=0.0)
    perturbed = _complete(
        terminated, truncated, scale, seed=seed, gamma=gamma, perturbation=perturbation
    )
    assert perturbed[0] == plain[0]
    for grad, reference in zip(perturbed[1], plain[1], strict=True):
        assert torch.equal(grad, reference)


@given(
    st.floats(-1.5, 0.5),
    st.integers(1, 10),
    _gammas,
    st.integers(1, 4),
    _seeds,
)
def test_gradient_on_quadratic_env_equals_the_closed_form(
    weight: float, steps: int, gamma: float, rows: int, seed: int
) -> None:
    """a = w x: dJ/dw = -x0^2 sum_t gamma^t 2(t+1)(1+w)^(2t+1), averaged over rows."""
    policy = _policy(weight, 0.0)
    apg = _apg(policy, gamma=gamma)
    # No done within the rollout: the horizon is one step longer.
    collector = _collector(num_envs=rows, horizon=steps + 1, seed=seed)
    rollout = collector.collect(policy, num_steps=steps, deterministic=True)
    x0 = rollout.initial_observation["obs"].squeeze(-1)
    apg.begin_update()
    apg.accumulate_complete_rollout(rollout)
    grad = policy.linear.weight.grad
    assert grad is not None
    t = torch.arange(steps, dtype=F64)
    growth = torch.tensor(1.0 + weight, dtype=F64)
    dj_dw = -(x0**2) * (gamma**t * 2.0 * (t + 1.0) * growth ** (2.0 * t + 1.0)).sum()
    # The loss is -mean_i J_i.
    expected = -dj_dw.mean()
    torch.testing.assert_close(grad.reshape(()), expected, rtol=RTOL, atol=ATOL)


_optimizers: st.SearchStrategy[OptimizerName] = st.sampled_from(["adam", "adamw", "sgd"])
_schedules: st.SearchStrategy[DecaySchedule] = st.sampled_from(["constant", "linear", "cosine"])


def _state(apg: APG) -> dict[str, Any]:
    return {
        "parameters": [p.detach().clone() for p in apg.parameters],
        "optimizer": copy.deepcopy(apg.optimizer.state_dict()),
        "scheduler": copy.deepcopy(apg.scheduler.state_dict()),
        "lr": [group["lr"] for group in apg.optimizer.param_groups],
    }


def _assert_same(a: Any, b: Any) -> None:
    if isinstance(a, Tensor):
        assert isinstance(b, Tensor)
        assert a.dtype == b.dtype
        assert torch.equal(a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict)
        assert a.keys() == b.keys()
        for key in a:
            _assert_same(a[key], b[key])
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple)
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    else:
        assert a == b


def _run(
    updates: list[bool],
    optimizer: OptimizerName,
    schedule: DecaySchedule,
    *,
    check_skips: bool,
) -> APG:
    """Updates on QuadraticEnv segments; ``False`` entries get a NaN reward and are skipped."""
    policy = _policy(-0.3, 0.1)
    apg = APG(
        policy,
        APGConfig(optimizer=optimizer, learning_rate_schedule=schedule, momentum=0.0),
        dist=SingleProcess(),
        planned_updates=4,
    )
    applied = 0
    for finite in updates:
        # Each update sees the rollout of its applied index, so both runs see the same data.
        collector = _collector(num_envs=2, horizon=3, seed=applied)
        rollout = collector.collect(policy, num_steps=4)
        before = _state(apg)
        apg.begin_update()
        if finite:
            apg.accumulate_segment(rollout)
            applied += 1
        else:
            poison = torch.ones(4, 2, dtype=F64)
            poison[1, 0] = float("nan")
            apg.accumulate_segment(dataclasses.replace(rollout, rewards=rollout.rewards * poison))
        metrics = apg.finish_update().metrics
        assert metrics["train/skipped_nonfinite"] == float(not finite)
        if check_skips and not finite:
            _assert_same(_state(apg), before)
    return apg


@given(st.lists(st.booleans(), min_size=1, max_size=8), _optimizers, _schedules)
def test_skipped_updates_leave_everything_bit_identical(
    updates: list[bool], optimizer: OptimizerName, schedule: DecaySchedule
) -> None:
    """Each skip changes nothing; a run with skips equals the run of its applied updates alone."""
    with_skips = _run(updates, optimizer, schedule, check_skips=True)
    applied_only = _run([u for u in updates if u], optimizer, schedule, check_skips=False)
    assert with_skips.counters.state_dict() == {
        "applied": sum(updates),
        "skipped": len(updates) - sum(updates),
    }
    _assert_same(_state(with_skips), _state(applied_only))
