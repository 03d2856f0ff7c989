"""Tests for typedrl.apg._algorithm: APG's life cycle, objectives, skips, optimizers, schedules."""

import copy
import dataclasses
import math
from collections.abc import Callable
from typing import Any, Literal

import pytest
import torch
from tensordict import TensorDict
from torch import Tensor, nn

from tests.apg.test_collector import _LinearPolicy, _quadratic_policy
from tests.two_ranks import TwoRanks
from typedrl.apg import APG, APGConfig, DifferentiableCollector, DifferentiableRollout
from typedrl.apg._collector import first_done_mask
from typedrl.distributed import SingleProcess
from typedrl.episodes import EpochEpisodes
from typedrl.errors import ConfigError, NonFiniteError, StateError
from typedrl.testing import QuadraticEnv
from typedrl.training import build_optimizer, build_scheduler
from typedrl.training._update import restart_schedule

F64 = torch.float64
NAN = math.nan

# ---------------------------------------------------------------- helpers


def _rollout(
    rewards: Tensor,
    entropies: Tensor,
    *,
    terminated: Tensor | None = None,
    truncated: Tensor | None = None,
    valid: Tensor | None = None,
) -> DifferentiableRollout:
    """A rollout around given rewards and entropies (zero observations, no adjoint)."""
    steps, rows = rewards.shape
    flags = torch.zeros(steps, rows, dtype=torch.bool)
    terminated = flags if terminated is None else terminated
    truncated = flags.clone() if truncated is None else truncated
    valid = ~flags if valid is None else valid

    def obs(*batch: int) -> TensorDict:
        return TensorDict({"obs": torch.zeros(*batch, 1, dtype=F64)}, batch_size=list(batch))

    return DifferentiableRollout(
        initial_observation=obs(rows),
        observations=obs(steps, rows),
        actions=torch.zeros(steps, rows, 1, dtype=F64),
        rewards=rewards,
        entropies=entropies,
        terminated=terminated,
        truncated=truncated,
        valid=valid,
        alive_mask=first_done_mask(terminated | truncated),
        terminal_observations=obs(steps, rows),
        final_observation=obs(rows),
        episodes=EpochEpisodes(
            returns=torch.zeros(steps, rows, dtype=F64),
            lengths=torch.zeros(steps, rows, dtype=torch.int64),
            ended=flags.clone(),
            return_so_far=torch.zeros(rows, dtype=F64),
            length_so_far=torch.zeros(rows, dtype=torch.int64),
        ),
        adjoint=None,
    )


class _Table(nn.Module):
    """Rewards and entropies as parameters: the gradient of a loss over them is its weights."""

    def __init__(self, steps: int = 8, rows: int = 3, *, seed: int = 0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        self.rewards = nn.Parameter(torch.randn(steps, rows, generator=generator, dtype=F64))
        self.entropies = nn.Parameter(torch.rand(steps, rows, generator=generator, dtype=F64))

    def rollout(
        self,
        start: int = 0,
        stop: int = 2,
        *,
        poison: Tensor | None = None,
        terminated: Tensor | None = None,
        truncated: Tensor | None = None,
        valid: Tensor | None = None,
    ) -> DifferentiableRollout:
        """Steps ``start:stop`` of the table; ``poison`` multiplies the rewards."""
        rewards = self.rewards[start:stop]
        if poison is not None:
            rewards = rewards * poison
        return _rollout(
            rewards,
            self.entropies[start:stop],
            terminated=terminated,
            truncated=truncated,
            valid=valid,
        )

    def reward_grad(self) -> Tensor:
        """The rewards' accumulated gradient (zeros if none)."""
        grad = self.rewards.grad
        return torch.zeros_like(self.rewards) if grad is None else grad.clone()

    def entropy_grad(self) -> Tensor:
        """The entropies' accumulated gradient (zeros if none)."""
        grad = self.entropies.grad
        return torch.zeros_like(self.entropies) if grad is None else grad.clone()


def _nan_at(steps: int, rows: int, step: int, row: int) -> Tensor:
    factor = torch.ones(steps, rows, dtype=F64)
    factor[step, row] = NAN
    return factor


def _apg(policy: nn.Module, planned_updates: int | None = None, **config: Any) -> APG:
    return APG(policy, APGConfig(**config), dist=SingleProcess(), planned_updates=planned_updates)


def _snapshot(apg: APG) -> dict[str, Any]:
    """Deep copies of everything an update may change."""
    return {
        "parameters": [p.detach().clone() for p in apg.parameters],
        "optimizer": copy.deepcopy(apg.optimizer.state_dict()),
        "scheduler": copy.deepcopy(apg.scheduler.state_dict()),
        "lr": [group["lr"] for group in apg.optimizer.param_groups],
        "counters": apg.counters.state_dict(),
    }


def _assert_same(a: Any, b: Any, where: str = "state") -> None:
    """Deep, bit-exact equality of nested dicts, lists and tensors."""
    if isinstance(a, Tensor):
        assert isinstance(b, Tensor), where
        assert a.dtype == b.dtype, where
        assert a.shape == b.shape, where
        assert torch.equal(a, b), f"{where} differs: {a} vs {b}"
    elif isinstance(a, dict):
        assert isinstance(b, dict), where
        assert a.keys() == b.keys(), f"{where}: keys {sorted(a)} vs {sorted(b)}"
        for key in a:
            _assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple), where
        assert len(a) == len(b), where
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{where}[{index}]")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def _quadratic_collector(num_envs: int = 3, horizon: int = 3) -> DifferentiableCollector:
    collector = DifferentiableCollector(
        QuadraticEnv(num_envs=num_envs, horizon=horizon, dtype="float64")
    )
    collector.reset(seed=0)
    return collector


def _policy_with_entropy(log_std: float = 0.3) -> _LinearPolicy:
    policy = _quadratic_policy()
    with torch.no_grad():
        policy.log_std.fill_(log_std)
    return policy


def _applied_update(apg: APG, table: _Table) -> dict[str, float]:
    apg.begin_update()
    apg.accumulate_segment(table.rollout(0, 2))
    return apg.finish_update().metrics


def _skipped_update(apg: APG, table: _Table) -> dict[str, float]:
    apg.begin_update()
    apg.accumulate_segment(table.rollout(0, 2, poison=_nan_at(2, 3, 1, 1)))
    return apg.finish_update().metrics


# ---------------------------------------------------------------- the state machine

_Call = Callable[[APG, _Table], object]


def _begin(apg: APG, table: _Table) -> object:
    del table
    apg.begin_update()
    return None


def _segment(apg: APG, table: _Table) -> object:
    apg.accumulate_segment(table.rollout())
    return None


def _complete(apg: APG, table: _Table) -> object:
    apg.accumulate_complete_rollout(table.rollout())
    return None


def _finish(apg: APG, table: _Table) -> object:
    del table
    return apg.finish_update()


def _cancel(apg: APG, table: _Table) -> object:
    del table
    apg.cancel_update()
    return None


WRONG_ORDER: list[tuple[list[_Call], _Call, str]] = [
    ([], _segment, r"accumulate_segment: no update in progress; call begin_update\(\) first"),
    ([], _complete, r"accumulate_complete_rollout: no update in progress"),
    ([], _finish, r"APG\.finish_update: no update in progress"),
    ([], _cancel, r"APG\.cancel_update: no update in progress"),
    ([_begin], _begin, r"begin_update: an update is already in progress"),
    ([_begin, _segment], _begin, r"begin_update: an update is already in progress"),
    ([_begin, _segment, _finish], _finish, r"finish_update: no update in progress"),
    ([_begin, _segment, _finish], _segment, r"accumulate_segment: no update in progress"),
    ([_begin, _complete, _finish], _complete, r"accumulate_complete_rollout: no update"),
    ([_begin, _segment, _cancel], _cancel, r"cancel_update: no update in progress"),
    ([_begin, _segment, _cancel], _finish, r"finish_update: no update in progress"),
    ([_begin, _finish], _cancel, r"cancel_update: no update in progress"),
]


@pytest.mark.parametrize(("before", "call", "message"), WRONG_ORDER)
def test_every_wrong_order_call_raises_state_error(
    before: list[_Call], call: _Call, message: str
) -> None:
    """A call out of the begin / accumulate / finish-or-cancel order raises and changes nothing."""
    table = _Table()
    apg = _apg(table, optimizer="sgd", learning_rate=0.1)
    for step in before:
        step(apg, table)
    updating = apg.updating
    state = _snapshot(apg)
    grad = table.reward_grad()
    with pytest.raises(StateError, match=message):
        call(apg, table)
    assert apg.updating == updating
    _assert_same(_snapshot(apg), state)
    _assert_same(table.reward_grad(), grad)


@pytest.mark.parametrize(("first", "second"), [(_segment, _complete), (_complete, _segment)])
def test_one_update_cannot_mix_segments_and_complete_rollouts(first: _Call, second: _Call) -> None:
    """The second kind of rollout is refused before its backward; the update can still finish."""
    table = _Table()
    apg = _apg(table, optimizer="sgd", learning_rate=0.1)
    apg.begin_update()
    first(apg, table)
    grad = table.reward_grad()
    with pytest.raises(StateError, match="cannot mix segments and complete rollouts"):
        second(apg, table)
    assert apg.updating
    _assert_same(table.reward_grad(), grad)
    apg.finish_update()
    assert apg.counters.state_dict() == {"applied": 1, "skipped": 0}
    # The next update may choose the other kind.
    apg.begin_update()
    second(apg, table)
    apg.finish_update()
    assert apg.counters["applied"] == 2


def test_updating_follows_the_life_cycle() -> None:
    """updating is True between begin_update and finish_update or cancel_update."""
    table = _Table()
    apg = _apg(table)
    seen = [apg.updating]
    apg.begin_update()
    seen.append(apg.updating)
    apg.finish_update()
    seen.append(apg.updating)
    apg.begin_update()
    seen.append(apg.updating)
    apg.cancel_update()
    seen.append(apg.updating)
    assert seen == [False, True, False, True, False]


def test_begin_update_clears_stale_gradients() -> None:
    """Gradients left on the parameters before begin_update never reach the update."""
    table = _Table()
    apg = _apg(table)
    table.rewards.grad = torch.full_like(table.rewards, 1e6)
    apg.begin_update()
    assert all(p.grad is None for p in apg.parameters)
    apg.accumulate_segment(table.rollout(0, 1))
    assert table.reward_grad()[1:].abs().sum() == 0


def test_cancel_update_changes_nothing() -> None:
    """A cancelled update clears its gradients and steps neither optimizer nor scheduler."""
    table = _Table()
    apg = _apg(table, planned_updates=5, learning_rate_schedule="linear")
    _applied_update(apg, table)
    state = _snapshot(apg)
    apg.begin_update()
    apg.accumulate_segment(table.rollout(0, 3))
    apg.cancel_update()
    assert table.rewards.grad is None
    assert table.entropies.grad is None
    _assert_same(_snapshot(apg), state)


# ---------------------------------------------------------------- the segmented objective


def test_segmented_discount_carries_across_segments_and_restarts() -> None:
    """d continues into the next segment, restarts at 1 after a done and at each update."""
    gamma, rows = 0.5, 3
    table = _Table(steps=7, rows=rows)
    apg = _apg(table, gamma=gamma)
    terminated = torch.zeros(7, rows, dtype=torch.bool)
    truncated = torch.zeros(7, rows, dtype=torch.bool)
    terminated[1, 0] = True  # row 0 ends inside the first segment
    truncated[3, 1] = True  # row 1 ends on the first step of the second segment
    apg.begin_update()
    apg.accumulate_segment(
        table.rollout(0, 3, terminated=terminated[0:3], truncated=truncated[0:3])
    )
    apg.accumulate_segment(
        table.rollout(3, 5, terminated=terminated[3:5], truncated=truncated[3:5])
    )
    weights = -table.reward_grad()[:5] * rows
    expected = torch.tensor(
        [
            [1.0, 1.0, 1.0],
            [0.5, 0.5, 0.5],
            [1.0, 0.25, 0.25],
            [0.5, 0.125, 0.125],
            [0.25, 1.0, 0.0625],
        ],
        dtype=F64,
    )
    torch.testing.assert_close(weights, expected, rtol=0, atol=1e-15)
    apg.finish_update()
    # A new update starts at 1 on every row, mid-episode or not.
    apg.begin_update()
    apg.accumulate_segment(table.rollout(5, 7))
    weights = -table.reward_grad()[5:] * rows
    torch.testing.assert_close(
        weights, torch.tensor([[1.0] * 3, [0.5] * 3], dtype=F64), rtol=0, atol=1e-15
    )
    assert table.reward_grad()[:5].abs().sum() == 0


def test_segmented_loss_matches_a_hand_computation_on_quadratic_rollouts() -> None:
    """On QuadraticEnv (horizon 3, segments of 2) loss and gradient equal the hand-written TBPTT."""
    gamma, coef, rows = 0.9, 0.1, 3
    collector = _quadratic_collector(num_envs=rows, horizon=3)
    policy = _policy_with_entropy()
    apg = _apg(
        policy,
        gamma=gamma,
        entropy_coef=coef,
        optimizer="sgd",
        max_grad_norm=None,
        learning_rate=1e-3,
    )
    # Per update, the discount of its 4 steps (every row ends at global steps 2 and 5):
    # update 1 carries gamma^2 into its second segment; update 2 restarts mid-episode.
    discounts = [[1.0, gamma, gamma**2, 1.0], [1.0, gamma, 1.0, gamma]]
    ends = [[[False, False], [True, False]], [[False, True], [False, False]]]
    for update, weights in enumerate(discounts):
        apg.begin_update()
        hand_loss = 0.0
        hand_grads = [torch.zeros_like(p) for p in apg.parameters]
        for segment in range(2):
            rollout = collector.collect(policy, num_steps=2)
            done = rollout.terminated | rollout.truncated
            assert done.all(dim=1).tolist() == ends[update][segment]
            d = torch.tensor(weights[segment * 2 : segment * 2 + 2], dtype=F64).unsqueeze(1)
            # loss = -(sum_t d_t r_t + c * H) / rows, summed over the update's segments
            loss = -((d * rollout.rewards).sum() + coef * rollout.entropies.sum()) / rows
            grads = torch.autograd.grad(loss, apg.parameters, retain_graph=True)
            hand_grads = [h + g for h, g in zip(hand_grads, grads, strict=True)]
            hand_loss += float(loss.detach())
            apg.accumulate_segment(rollout)
            collector.detach_state()
        for parameter, hand in zip(apg.parameters, hand_grads, strict=True):
            assert parameter.grad is not None
            torch.testing.assert_close(parameter.grad, hand, rtol=1e-12, atol=1e-14)
        before = [p.detach().clone() for p in apg.parameters]
        metrics = apg.finish_update().metrics
        # Averaged over the update's 4 steps; SGD at lr 1e-3 without clipping.
        assert metrics["loss/policy"] == pytest.approx(hand_loss / 4, rel=1e-12)
        for parameter, start, hand in zip(apg.parameters, before, hand_grads, strict=True):
            torch.testing.assert_close(
                parameter.detach(), start - 1e-3 * hand / 4, rtol=1e-12, atol=1e-15
            )


# ---------------------------------------------------------------- the complete objective


def test_complete_objective_masks_after_the_first_done_and_scales_each_row() -> None:
    """J_i = sum_t gamma^t alive r, scaled per row, averaged, times the accumulation scale."""
    gamma, coef, rows = 0.5, 0.2, 3
    table = _Table(steps=5, rows=rows)
    apg = _apg(table, gamma=gamma, entropy_coef=coef)
    terminated = torch.zeros(5, rows, dtype=torch.bool)
    truncated = torch.zeros(5, rows, dtype=torch.bool)
    terminated[1, 0] = True
    truncated[2, 1] = True
    truncated[4, 1] = True  # a second done changes nothing
    scale = torch.tensor([0.5, 1.0, 2.0], dtype=F64)
    alive = torch.tensor([[1, 1, 1], [1, 1, 1], [0, 1, 1], [0, 0, 1], [0, 0, 1]], dtype=F64)
    discount = (gamma ** torch.arange(5, dtype=F64)).unsqueeze(1)
    apg.begin_update()
    for _ in range(2):
        apg.accumulate_complete_rollout(
            table.rollout(0, 5, terminated=terminated, truncated=truncated),
            objective_scale=scale,
            accumulation_scale=0.5,
        )
    # Two microbatches of weight 0.5 each: the gradient is that of one.
    torch.testing.assert_close(
        table.reward_grad(), -discount * alive * scale / rows, rtol=0, atol=1e-15
    )
    torch.testing.assert_close(table.entropy_grad(), -coef * alive / rows, rtol=0, atol=1e-15)
    rewards, entropies = table.rewards.detach(), table.entropies.detach()
    objective = (scale * (discount * alive * rewards).sum(0)).mean()
    entropy = (alive * entropies).sum(0).mean()
    metrics = apg.finish_update().metrics
    assert metrics["train/objective"] == pytest.approx(float(objective), rel=1e-12)
    assert metrics["train/entropy"] == pytest.approx(float(entropy), rel=1e-12)
    assert metrics["loss/policy"] == pytest.approx(float(-(objective + coef * entropy)), rel=1e-12)


def test_complete_objective_never_restarts_the_discount() -> None:
    """Unlike segments, gamma^t runs on from the rollout's start (a float scale works too)."""
    table = _Table(steps=4, rows=2)
    apg = _apg(table, gamma=0.5)
    apg.begin_update()
    apg.accumulate_complete_rollout(table.rollout(0, 4), objective_scale=3.0)
    torch.testing.assert_close(
        table.reward_grad(),
        -3.0 / 2 * torch.tensor([[1.0] * 2, [0.5] * 2, [0.25] * 2, [0.125] * 2], dtype=F64),
    )


def test_complete_objective_on_quadratic_rollouts_ignores_the_next_episode() -> None:
    """With horizon 3 and 5 steps, the loss and gradient are those of the first 3 steps."""
    gamma, rows = 0.9, 3
    collector = _quadratic_collector(num_envs=rows, horizon=3)
    policy = _quadratic_policy()
    apg = _apg(policy, gamma=gamma)
    rollout = collector.collect(policy, num_steps=5)
    assert rollout.alive_mask.all(dim=1).tolist() == [True, True, True, False, False]
    discount = (gamma ** torch.arange(3, dtype=F64)).unsqueeze(1)
    hand = -(discount * rollout.rewards[:3]).sum(0).mean()
    grads = torch.autograd.grad(hand, apg.parameters, retain_graph=True, allow_unused=True)
    apg.begin_update()
    apg.accumulate_complete_rollout(rollout)
    for parameter, grad in zip(apg.parameters, grads, strict=True):
        expected = torch.zeros_like(parameter) if grad is None else grad
        actual = torch.zeros_like(parameter) if parameter.grad is None else parameter.grad
        torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-15)
    assert apg.finish_update().metrics["loss/policy"] == pytest.approx(
        float(hand.detach()), rel=1e-12
    )


def test_complete_rollout_refuses_a_scale_of_the_wrong_length() -> None:
    """A per-row scale for another row count raises ConfigError before any backward."""
    table = _Table()
    apg = _apg(table)
    apg.begin_update()
    with pytest.raises(ConfigError, match=r"objective_scale must be .* \[3\]"):
        apg.accumulate_complete_rollout(table.rollout(), objective_scale=torch.ones(4, dtype=F64))
    assert table.rewards.grad is None


def test_a_nonfinite_objective_scale_skips_the_update() -> None:
    """A NaN weight (a spec checks its own; a hand-written loop may not) is never applied."""
    table = _Table()
    apg = _apg(table)
    before = [p.detach().clone() for p in apg.parameters]
    apg.begin_update()
    apg.accumulate_complete_rollout(table.rollout(), objective_scale=math.nan)
    outcome = apg.finish_update()
    assert not outcome.applied
    assert outcome.metrics["train/skipped_nonfinite"] == 1.0
    assert all(torch.equal(p, old) for p, old in zip(apg.parameters, before, strict=True))


@pytest.mark.parametrize("mode", ["segmented", "complete"])
def test_ghost_transitions_never_train(mode: str) -> None:
    """A step marked invalid contributes neither reward nor entropy to the gradient."""
    table = _Table(steps=3, rows=2)
    apg = _apg(table, entropy_coef=0.1)
    valid = torch.ones(3, 2, dtype=torch.bool)
    valid[1, 0] = False
    apg.begin_update()
    rollout = table.rollout(0, 3, valid=valid)
    if mode == "segmented":
        apg.accumulate_segment(rollout)
    else:
        apg.accumulate_complete_rollout(rollout)
    assert table.reward_grad()[1, 0] == 0
    assert table.entropy_grad()[1, 0] == 0
    assert (table.reward_grad()[valid] != 0).all()


# ---------------------------------------------------------------- the entropy bonus


@pytest.mark.parametrize("mode", ["segmented", "complete"])
def test_entropy_bonus_raises_the_entropy(mode: str) -> None:
    """loss = -(J + c H): the entropy's gradient is -c/rows and a step increases it."""
    rows = 3
    for coef in (0.0, 0.5):
        table = _Table(rows=rows)
        apg = _apg(table, entropy_coef=coef, optimizer="sgd", learning_rate=1.0, max_grad_norm=None)
        before = table.entropies.detach().clone()
        apg.begin_update()
        if mode == "segmented":
            apg.accumulate_segment(table.rollout(0, 2))
        else:
            apg.accumulate_complete_rollout(table.rollout(0, 2))
        torch.testing.assert_close(
            table.entropy_grad()[:2], torch.full((2, rows), -coef / rows, dtype=F64)
        )
        apg.finish_update()
        change = table.entropies.detach()[:2] - before[:2]
        if coef == 0.0:
            assert change.abs().max() == 0
        else:
            assert (change > 0).all()


# ---------------------------------------------------------------- non-finite updates


def test_nonfinite_loss_skips_the_update_after_its_backward() -> None:
    """A NaN reward: backward still frees the graph; weights, optimizer, LR stay bit-identical."""
    collector = _quadratic_collector(num_envs=3, horizon=5)
    policy = _policy_with_entropy()
    apg = _apg(policy, planned_updates=10, learning_rate_schedule="linear", entropy_coef=0.01)
    # One applied update first, so that Adam has moments and the schedule has moved.
    apg.begin_update()
    apg.accumulate_segment(collector.collect(policy, num_steps=4))
    collector.detach_state()
    assert apg.finish_update().metrics["train/skipped_nonfinite"] == 0.0
    state = _snapshot(apg)
    assert state["optimizer"]["state"]  # moments exist
    apg.begin_update()
    rollout = collector.collect(policy, num_steps=4)
    poisoned = dataclasses.replace(rollout, rewards=rollout.rewards * _nan_at(4, 3, 2, 1))
    apg.accumulate_segment(poisoned)
    # The backward ran: the env's graph is freed.
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torch.autograd.backward(rollout.rewards.sum())
    metrics = apg.finish_update().metrics
    assert metrics["train/skipped_nonfinite"] == 1.0
    assert metrics["train/skipped_large"] == 0.0
    assert not math.isfinite(metrics["train/grad_norm"])
    assert not math.isfinite(metrics["loss/policy"])
    assert apg.counters.state_dict() == {"applied": 1, "skipped": 1}
    assert all(p.grad is None for p in apg.parameters)
    assert not apg.updating
    after = _snapshot(apg)
    assert after.pop("counters") == {"applied": 1, "skipped": 1}
    state.pop("counters")
    _assert_same(after, state)


def test_nonfinite_raise_raises_and_leaves_everything_identical() -> None:
    """nonfinite='raise': NonFiniteError naming the update; nothing stepped, nothing counted."""
    table = _Table()
    apg = _apg(table, planned_updates=10, learning_rate_schedule="cosine", nonfinite="raise")
    _applied_update(apg, table)
    state = _snapshot(apg)
    with pytest.raises(NonFiniteError, match=r"non-finite gradient norm \(nan\) at update 1"):
        _skipped_update(apg, table)
    assert not apg.updating
    assert all(p.grad is None for p in apg.parameters)
    _assert_same(_snapshot(apg), state)
    # The algorithm goes on.
    _applied_update(apg, table)
    assert apg.counters.state_dict() == {"applied": 2, "skipped": 0}


@pytest.mark.parametrize("case", ["detached_term", "clipped_adjoint"])
def test_nonfinite_loss_with_a_finite_gradient_is_skipped(case: str) -> None:
    """A non-finite loss skips the update even when its gradient happens to be finite."""
    env = QuadraticEnv(num_envs=3, horizon=5, dtype="float64")
    collector = DifferentiableCollector(
        env, adjoint_max_norm=1.0 if case == "clipped_adjoint" else None
    )
    collector.reset(seed=0)
    policy = _quadratic_policy()
    apg = _apg(policy)
    apg.begin_update()
    rollout = collector.collect(policy, num_steps=4)
    if case == "detached_term":
        term = torch.zeros(4, 3, dtype=F64)
        term[2, 1] = NAN
        rewards = rollout.rewards + term
    else:
        rewards = rollout.rewards * _nan_at(4, 3, 2, 1)
    apg.accumulate_segment(dataclasses.replace(rollout, rewards=rewards))
    metrics = apg.finish_update().metrics
    assert not math.isfinite(metrics["loss/policy"])
    assert apg.counters.state_dict() == {"applied": 0, "skipped": 1}


def test_skip_grad_norm_above_skips_large_updates_only() -> None:
    """A pre-clip norm above skip_grad_norm_above skips (counted); one below is applied."""
    table = _Table()
    probe_table = _Table()
    norm = _applied_update(_apg(probe_table), probe_table)["train/grad_norm"]
    assert norm > 0
    apg = _apg(
        table, planned_updates=5, learning_rate_schedule="linear", skip_grad_norm_above=norm / 2
    )
    state = _snapshot(apg)
    metrics = _applied_update(apg, table)
    assert metrics["train/skipped_large"] == 1.0
    assert metrics["train/skipped_nonfinite"] == 0.0
    assert metrics["train/grad_norm"] == pytest.approx(norm, rel=1e-12)
    assert apg.counters.state_dict() == {"applied": 0, "skipped": 1}
    after = _snapshot(apg)
    after.pop("counters")
    state.pop("counters")
    _assert_same(after, state)
    lenient_table = _Table()
    lenient = _apg(lenient_table, skip_grad_norm_above=norm * 2)
    assert _applied_update(lenient, lenient_table)["train/skipped_large"] == 0.0
    assert lenient.counters.state_dict() == {"applied": 1, "skipped": 0}


# ---------------------------------------------------------------- clipping


@pytest.mark.parametrize("max_norm", [1e-3, 1e3, None])
def test_gradient_is_clipped_to_max_grad_norm(max_norm: float | None) -> None:
    """SGD at lr 1 moves by g * min(1, max_norm / (|g| + 1e-6)); grad_norm is pre-clip."""
    table = _Table()
    apg = _apg(table, optimizer="sgd", learning_rate=1.0, max_grad_norm=max_norm)
    before = [p.detach().clone() for p in apg.parameters]
    apg.begin_update()
    apg.accumulate_segment(table.rollout(0, 2))
    apg.accumulate_segment(table.rollout(2, 5))
    # The update's gradient is the per-step average over its 5 steps.
    grads = [p.grad.clone() / 5 for p in apg.parameters if p.grad is not None]
    norm = float(torch.linalg.vector_norm(torch.cat([g.reshape(-1) for g in grads])))
    metrics = apg.finish_update().metrics
    assert metrics["train/grad_norm"] == pytest.approx(norm, rel=1e-12)
    factor = 1.0 if max_norm is None else min(1.0, max_norm / (norm + 1e-6))
    moved = [start - p.detach() for start, p in zip(before, apg.parameters, strict=True)]
    for move, grad in zip(moved, grads, strict=True):
        torch.testing.assert_close(move, grad * factor, rtol=1e-12, atol=1e-15)
    moved_norm = float(torch.linalg.vector_norm(torch.cat([m.reshape(-1) for m in moved])))
    if max_norm is not None and max_norm < norm:
        assert moved_norm == pytest.approx(max_norm, rel=1e-5)


# ---------------------------------------------------------------- optimizers


@pytest.mark.parametrize(
    ("name", "kind"),
    [("adam", torch.optim.Adam), ("adamw", torch.optim.AdamW), ("sgd", torch.optim.SGD)],
)
def test_each_optimizer_builds_with_its_hyper_parameters(name: str, kind: type) -> None:
    """The named optimizer, with the config's learning rate, betas, eps, decay and momentum."""
    table = _Table()
    config: dict[str, Any] = {
        "optimizer": name,
        "learning_rate": 0.02,
        "weight_decay": 0.01,
        "betas": (0.8, 0.9),
        "adam_eps": 1e-6,
        "momentum": 0.5,
    }
    apg = _apg(table, **config)
    assert type(apg.optimizer) is kind
    group = apg.optimizer.param_groups[0]
    assert group["lr"] == 0.02
    assert group["weight_decay"] == 0.01
    if name == "sgd":
        assert group["momentum"] == 0.5
    else:
        assert group["betas"] == (0.8, 0.9)
        assert group["eps"] == 1e-6
        assert group["fused"] is True
    assert list(group["params"]) == apg.parameters
    before = table.rewards.detach().clone()
    _applied_update(apg, table)
    assert not torch.equal(table.rewards.detach(), before)


def test_build_optimizer_refuses_a_policy_without_trainable_parameters() -> None:
    """No parameter to train is a ConfigError, not an empty optimizer."""
    with pytest.raises(ConfigError, match="no trainable parameters"):
        build_optimizer([], name="adam", learning_rate=1e-3)
    frozen = _Table().requires_grad_(requires_grad=False)
    with pytest.raises(ConfigError, match="no trainable parameters"):
        _apg(frozen)


# ---------------------------------------------------------------- schedules


def _expected_rate(schedule: str, applied: int, planned: int, lr: float, floor: float) -> float:
    progress = min(applied, planned) / planned
    if schedule == "linear":
        return lr - (lr - floor) * progress
    return floor + (lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_schedule_follows_its_formula_over_applied_updates_only(schedule: str) -> None:
    """Skipped updates leave the rate; past the plan it stays at min_learning_rate."""
    lr, floor, planned = 1e-2, 1e-4, 4
    table = _Table()
    apg = _apg(
        table,
        planned_updates=planned,
        learning_rate=lr,
        min_learning_rate=floor,
        learning_rate_schedule=schedule,
    )
    skips = {1, 2, 5}
    applied = 0
    for update in range(10):
        expected = _expected_rate(schedule, applied, planned, lr, floor)
        assert apg.optimizer.param_groups[0]["lr"] == pytest.approx(expected, rel=1e-12)
        if update in skips:
            metrics = _skipped_update(apg, table)
        else:
            metrics = _applied_update(apg, table)
            applied += 1
        assert metrics["train/learning_rate"] == pytest.approx(expected, rel=1e-12)
    assert apg.counters.state_dict() == {"applied": 7, "skipped": 3}
    assert apg.optimizer.param_groups[0]["lr"] == pytest.approx(floor, rel=1e-12)


def test_constant_schedule_never_moves() -> None:
    """The constant schedule keeps the learning rate, with or without a plan."""
    table = _Table()
    apg = _apg(table, planned_updates=None, learning_rate=0.05)
    for _ in range(3):
        _applied_update(apg, table)
    assert apg.optimizer.param_groups[0]["lr"] == 0.05


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
@pytest.mark.parametrize("planned", [None, 0, -3])
def test_decaying_schedule_without_planned_updates_raises(
    schedule: Literal["linear", "cosine"], planned: int | None
) -> None:
    """A decaying schedule is bound to a positive number of planned updates."""
    with pytest.raises(ConfigError, match=rf"{schedule!r} learning-rate schedule is bound"):
        _apg(_Table(), planned_updates=planned, learning_rate_schedule=schedule)
    optimizer = torch.optim.SGD(_Table().parameters(), lr=1.0)
    with pytest.raises(ConfigError, match="total_updates"):
        build_scheduler(
            optimizer,
            schedule=schedule,
            planned_updates=planned,
            learning_rate=1.0,
        )


def test_restart_schedule_restarts_the_curve_but_keeps_the_moments() -> None:
    """restart_schedule goes back to the initial rate; Adam's moments and step counts stay."""
    lr, planned = 1e-2, 4
    table = _Table()
    apg = _apg(table, planned_updates=planned, learning_rate=lr, learning_rate_schedule="linear")
    for _ in range(3):
        _applied_update(apg, table)
    assert apg.optimizer.param_groups[0]["lr"] == pytest.approx(lr / 4, rel=1e-12)
    moments = copy.deepcopy(apg.optimizer.state_dict()["state"])
    parameters = [p.detach().clone() for p in apg.parameters]
    restart_schedule(apg.scheduler)
    assert apg.optimizer.param_groups[0]["lr"] == lr
    assert apg.scheduler.last_epoch == 0
    _assert_same(apg.optimizer.state_dict()["state"], moments)
    _assert_same([p.detach() for p in apg.parameters], parameters)
    assert apg.counters.state_dict() == {"applied": 3, "skipped": 0}
    # The curve runs again from its start.
    assert _applied_update(apg, table)["train/learning_rate"] == lr
    assert apg.optimizer.param_groups[0]["lr"] == pytest.approx(lr * 3 / 4, rel=1e-12)
    assert int(apg.optimizer.state_dict()["state"][0]["step"]) == 4


# ---------------------------------------------------------------- metrics and collectives

_BASE_KEYS = {
    "loss/policy",
    "train/objective",
    "train/entropy",
    "train/grad_norm",
    "train/skipped_nonfinite",
    "train/skipped_large",
    "train/learning_rate",
}
_ADJOINT_KEYS = {
    "adjoint/rows",
    "adjoint/clipped_fraction",
    "adjoint/nonfinite_rows",
    "adjoint/norm_mean",
    "adjoint/norm_max",
}


def test_metrics_keys_with_and_without_adjoint_statistics() -> None:
    """The documented keys; adjoint/* only when the rollouts carry an adjoint clipper."""
    table = _Table()
    assert set(_applied_update(_apg(table), table)) == _BASE_KEYS
    collector = _quadratic_collector(num_envs=3, horizon=5)
    policy = _quadratic_policy()
    apg = _apg(policy)
    apg.begin_update()
    apg.accumulate_segment(collector.collect(policy, num_steps=2))
    collector.detach_state()
    apg.accumulate_segment(collector.collect(policy, num_steps=2))
    metrics = apg.finish_update().metrics
    assert set(metrics) == _BASE_KEYS | _ADJOINT_KEYS
    assert metrics["adjoint/rows"] == 3 * 4  # every action row of both segments
    assert metrics["adjoint/nonfinite_rows"] == 0.0
    assert metrics["adjoint/clipped_fraction"] == 0.0
    assert 0.0 < metrics["adjoint/norm_mean"] <= metrics["adjoint/norm_max"]
    assert all(isinstance(value, float) for value in metrics.values())


def test_one_all_reduce_per_update_averages_gradients_across_ranks() -> None:
    """However many segments, one all-reduce; identical ranks give the single-rank update."""
    single_table, ddp_table = _Table(), _Table()
    single = _apg(single_table, optimizer="sgd", learning_rate=0.1)
    world = TwoRanks()
    ddp = APG(
        ddp_table,
        APGConfig(optimizer="sgd", learning_rate=0.1),
        dist=world,
        planned_updates=None,
    )
    results = []
    for apg, table in ((single, single_table), (ddp, ddp_table)):
        apg.begin_update()
        for start in range(0, 6, 2):
            apg.accumulate_segment(table.rollout(start, start + 2))
        results.append(apg.finish_update().metrics)
    assert world.calls == ["all_reduce_sum"]
    torch.testing.assert_close(ddp_table.rewards, single_table.rewards, rtol=1e-15, atol=0)
    for key in ("loss/policy", "train/objective", "train/entropy", "train/grad_norm"):
        assert results[1][key] == pytest.approx(results[0][key], rel=1e-12)


def test_a_nonfinite_gradient_on_another_rank_skips_here_too() -> None:
    """A NaN in the other rank's gradient reaches this rank through the all-reduce: skipped."""

    def poisoned(tensor: Tensor) -> Tensor:
        other = tensor.clone()
        other[0] = NAN
        return other

    table = _Table()
    apg = APG(table, APGConfig(), dist=TwoRanks(poisoned), planned_updates=None)
    state = _snapshot(apg)
    metrics = _applied_update(apg, table)
    assert metrics["train/skipped_nonfinite"] == 1.0
    assert apg.counters.state_dict() == {"applied": 0, "skipped": 1}
    after = _snapshot(apg)
    after.pop("counters")
    state.pop("counters")
    _assert_same(after, state)
