"""Properties of SHAC: TD(lambda) targets, the window objective, gradients, Polyak, skips, cuts."""

import math
from dataclasses import dataclass

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from torch import Tensor

from tests.shac.windows import (
    F64,
    FeaturePolicy,
    FixedWindow,
    assert_bit_identical,
    make_shac,
    one_update,
    record_fit_calls,
    set_linear_critic,
    snapshot,
    window_rollout,
    window_shac,
)
from typedrl.apg import APGConfig, DifferentiableCollector, DifferentiableRollout
from typedrl.apg._algorithm import ZERO_GRADIENT_UPDATES
from typedrl.testing import QuadraticEnv

RUNNING, TERMINATED, TRUNCATED, BOTH = "running", "terminated", "truncated", "both"
_values = st.floats(-5.0, 5.0, allow_nan=False, width=64)


@dataclass(frozen=True)
class Window:
    """A window drawn in plain Python: ``kinds[t][i]`` says how step ``t`` of row ``i`` ended."""

    rewards: list[list[float]]
    values: list[list[float]]
    next_values: list[list[float]]
    kinds: list[list[str]]

    @property
    def steps(self) -> int:
        """Steps of the window."""
        return len(self.rewards)

    @property
    def rows(self) -> int:
        """Rows of the window."""
        return len(self.rewards[0])

    def flag(self, kind: str) -> Tensor:
        """Where the steps ended as ``kind`` (a step that is ``BOTH`` has both flags)."""
        return torch.tensor([[k in (kind, BOTH) for k in row] for row in self.kinds])

    def rollout(self, scale: Tensor) -> DifferentiableRollout:
        """The window as a rollout read by the critic ``V = obs[1]``."""
        return window_rollout(
            rewards=torch.tensor(self.rewards, dtype=F64),
            values=torch.tensor(self.values, dtype=F64),
            next_values=torch.tensor(self.next_values, dtype=F64),
            terminated=self.flag(TERMINATED),
            truncated=self.flag(TRUNCATED),
            scale=scale,
        )


@st.composite
def windows(draw: st.DrawFn, *, max_steps: int = 6, max_rows: int = 4) -> Window:
    """A consistent window: a running row's ``V(final_obs_t)`` is ``V(s_{t+1})``."""
    steps = draw(st.integers(1, max_steps))
    rows = draw(st.integers(1, max_rows))

    def grid(elements: st.SearchStrategy[float], count: int) -> list[list[float]]:
        flat = draw(st.lists(elements, min_size=count * rows, max_size=count * rows))
        return [flat[t * rows : (t + 1) * rows] for t in range(count)]

    rewards = grid(_values, steps)
    # V(s_0) ... V(s_T): the last one is what a still-running row bootstraps from.
    states = grid(_values, steps + 1)
    terminal = grid(_values, steps)
    flat_kinds = draw(
        st.lists(
            st.sampled_from([RUNNING, RUNNING, TERMINATED, TRUNCATED, BOTH]),
            min_size=steps * rows,
            max_size=steps * rows,
        )
    )
    kinds = [flat_kinds[t * rows : (t + 1) * rows] for t in range(steps)]
    # A done row's final_obs is its terminal observation; a running row's is s_{t+1}.
    next_values = [
        [terminal[t][i] if kinds[t][i] != RUNNING else states[t + 1][i] for i in range(rows)]
        for t in range(steps)
    ]
    return Window(rewards=rewards, values=states[:steps], next_values=next_values, kinds=kinds)


def reference_targets(window: Window, gamma: float, lam: float) -> list[list[float]]:
    """TD(lambda) returns by a backward loop: termination cuts, truncation bootstraps."""
    steps, rows = window.steps, window.rows
    returns = [[0.0] * rows for _ in range(steps)]
    for i in range(rows):
        for t in reversed(range(steps)):
            reward, kind = window.rewards[t][i], window.kinds[t][i]
            # Terminated wins over truncated at the same step: nothing is bootstrapped.
            if kind in (TERMINATED, BOTH):
                returns[t][i] = reward
            elif kind == TRUNCATED or t == steps - 1:
                # G_t = r_t + gamma V(final_obs_t), or V(s_T) at the window's end
                returns[t][i] = reward + gamma * window.next_values[t][i]
            else:
                # G_t = r_t + gamma ((1 - lambda) V(s_{t+1}) + lambda G_{t+1})
                blended = (1.0 - lam) * window.values[t + 1][i] + lam * returns[t + 1][i]
                returns[t][i] = reward + gamma * blended
    return returns


def reference_objective(
    window: Window, gamma: float, discount: list[float], cut: set[tuple[int, int]] | None = None
) -> float:
    """The window objective step by step, averaged over rows; ``cut`` entries end as terminated."""
    cut = cut or set()
    total = 0.0
    for i in range(window.rows):
        d = discount[i]
        kind = RUNNING
        for t in range(window.steps):
            kind = TERMINATED if (t, i) in cut or window.kinds[t][i] == BOTH else window.kinds[t][i]
            if (t, i) not in cut:
                total += d * window.rewards[t][i]
            if kind == TRUNCATED:
                total += d * gamma * window.next_values[t][i]
            # d restarts at 1 after a done, else d <- gamma d.
            d = 1.0 if kind != RUNNING else gamma * d
        if kind == RUNNING:
            total += d * window.next_values[-1][i]
    return total / window.rows


@given(
    window=windows(),
    gamma=st.floats(0.0, 1.0),
    lam=st.floats(0.0, 1.0),
)
def test_td_lambda_targets_match_a_backward_loop(window: Window, gamma: float, lam: float) -> None:
    """The critic's targets are the TD(lambda) returns of a hand-written backward loop."""
    policy, shac = window_shac(actor=APGConfig(gamma=gamma), gae_lambda=lam)
    with pytest.MonkeyPatch.context() as patch:
        calls = record_fit_calls(shac, patch)
        metrics = one_update(shac, window.rollout(policy.scale))
    assert metrics["train/skipped_nonfinite"] == 0.0
    ((_features, targets, mask),) = calls
    expected = torch.tensor(reference_targets(window, gamma, lam), dtype=F64).reshape(-1)
    torch.testing.assert_close(targets, expected, rtol=1e-9, atol=1e-9)
    assert bool(mask.all())
    assert metrics["critic/target_mean"] == pytest.approx(float(expected.mean()), abs=1e-9)


@given(window=windows(), gamma=st.floats(0.0, 1.0))
def test_window_objective_matches_a_step_by_step_reference(window: Window, gamma: float) -> None:
    """sum d_t r_t + d_t gamma V'(final) on truncations + d_T V'(s_T) on running rows."""
    policy, shac = window_shac(actor=APGConfig(gamma=gamma))
    # Each window is one update: its discount starts at 1.
    expected = reference_objective(window, gamma, [1.0] * window.rows)
    metrics = one_update(shac, window.rollout(policy.scale))
    # The metrics are per row (the objective's own scale) and per step.
    steps = window.steps
    assert metrics["train/objective"] * steps == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert metrics["loss/policy"] * steps == pytest.approx(-expected, rel=1e-9, abs=1e-9)
    assert metrics["train/entropy"] == 0.0


@given(
    weight=st.floats(-1.5, -0.5),
    bias=st.floats(-0.3, 0.3),
    critic=st.tuples(st.floats(-2.0, 2.0), st.floats(-2.0, 2.0), st.floats(-2.0, 2.0)),
    gamma=st.floats(0.5, 1.0),
    horizon=st.integers(1, 6),
    warmup=st.integers(0, 5),
    steps=st.integers(1, 8),
    num_envs=st.integers(1, 3),
    seed=st.integers(0, 2**16),
)
def test_actor_gradient_on_a_linear_env_matches_its_closed_form(
    *,
    weight: float,
    bias: float,
    critic: tuple[float, float, float],
    gamma: float,
    horizon: int,
    warmup: int,
    steps: int,
    num_envs: int,
    seed: int,
) -> None:
    """x' = x + w x + b, r = -x'^2, V = c0 + c1 x + c2 x^2: autograd equals forward mode by hand."""
    c0, c1, c2 = critic
    env = QuadraticEnv(num_envs=num_envs, horizon=horizon, dtype="float64")
    policy = FeaturePolicy(squared=True, weight=weight, bias=bias)
    shac = make_shac(policy, feature_width=2, actor=APGConfig(gamma=gamma))
    set_linear_critic(shac, [c1, c2], c0)
    collector = DifferentiableCollector(env)
    collector.reset(seed=seed)
    if warmup:
        collector.collect(policy, num_steps=warmup)
        collector.detach_state()
    rollout = collector.collect(policy, num_steps=steps)
    # The gradient as the actor's backward left it, before the clip and the step.
    spy = FixedWindow(rollout, [policy.linear.weight, policy.linear.bias])
    shac.update(spy, num_steps=steps)
    weight_grad, bias_grad = spy.grads
    assert weight_grad is not None
    assert bias_grad is not None
    grad = (float(weight_grad), float(bias_grad))

    xs = rollout.observations["obs"][..., 0].detach().tolist()
    finals = rollout.terminal_observations["obs"][..., 0].detach().tolist()
    truncated = rollout.truncated.tolist()
    expected_w = expected_b = 0.0
    for i in range(num_envs):
        d, dw, db = 1.0, 0.0, 0.0  # discount and dx_t/dw, dx_t/db (0 at a detached start)
        for t in range(steps):
            x_next = (1.0 + weight) * xs[t][i] + bias
            assert finals[t][i] == pytest.approx(x_next, rel=1e-12, abs=1e-12)
            assert truncated[t][i] == ((warmup + t + 1) % horizon == 0)
            # dx_{t+1}/dtheta = (1 + w) dx_t/dtheta + d(w x_t + b)/dtheta
            dw, db = (1.0 + weight) * dw + xs[t][i], (1.0 + weight) * db + 1.0
            # d r_t = -2 x_{t+1} dx_{t+1}
            expected_w += d * -2.0 * x_next * dw
            expected_b += d * -2.0 * x_next * db
            if truncated[t][i]:
                slope = c1 + 2.0 * c2 * x_next  # V'(x) of the terminal state
                expected_w += d * gamma * slope * dw
                expected_b += d * gamma * slope * db
                # The row restarts from a graph-free state: d <- 1, derivatives <- 0.
                d, dw, db = 1.0, 0.0, 0.0
            else:
                d *= gamma
        if not truncated[-1][i]:
            slope = c1 + 2.0 * c2 * finals[-1][i]
            expected_w += d * slope * dw
            expected_b += d * slope * db
    # loss = -J / num_envs
    assert grad[0] == pytest.approx(-expected_w / num_envs, rel=1e-9, abs=1e-9)
    assert grad[1] == pytest.approx(-expected_b / num_envs, rel=1e-9, abs=1e-9)


@given(alpha=st.floats(0.0, 1.0), seed=st.integers(0, 2**16))
@example(alpha=0.0, seed=0)
@example(alpha=1.0, seed=0)
def test_polyak_update_follows_its_formula(alpha: float, seed: int) -> None:
    """After the critic's fit, theta' <- alpha theta' + (1 - alpha) theta (exact at 0 and 1)."""
    policy = FeaturePolicy()
    shac = make_shac(
        policy, feature_width=2, target_alpha=alpha, critic_hidden=(3,), critic_layer_norm=True
    )
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in shac.target_critic.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=F64))
    old_target = [p.detach().clone() for p in shac.target_critic.parameters()]
    fitted = [
        torch.randn(p.shape, generator=generator, dtype=F64) for p in shac.critic.parameters()
    ]

    original = shac._fit_critic

    def fit(
        features: Tensor, targets: Tensor, mask: Tensor, window_sums: Tensor | None = None
    ) -> tuple[float, float, list[float]]:
        # Fit as usual, then set the critic to known values before the Polyak step.
        losses = original(features, targets, mask, window_sums)
        with torch.no_grad():
            for parameter, value in zip(shac.critic.parameters(), fitted, strict=True):
                parameter.copy_(value)
        return losses

    never = torch.zeros(2, 2, dtype=torch.bool)
    rollout = window_rollout(
        rewards=torch.ones(2, 2, dtype=F64),
        values=torch.zeros(2, 2, dtype=F64),
        next_values=torch.zeros(2, 2, dtype=F64),
        terminated=never,
        truncated=never,
        scale=policy.scale,
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shac, "_fit_critic", fit)
        metrics = one_update(shac, rollout)
    assert metrics["train/skipped_nonfinite"] == 0.0
    for new, old, critic in zip(shac.target_critic.parameters(), old_target, fitted, strict=True):
        torch.testing.assert_close(
            new, alpha * old + (1.0 - alpha) * critic, rtol=1e-12, atol=1e-12
        )
        if alpha == 1.0:
            assert torch.equal(new, old)
        if alpha == 0.0:
            assert torch.equal(new, critic)


@given(
    window=windows(),
    # Fewer applied updates than the zero-gradient guard counts: a window whose
    # objective has no gradient (every reward 0) would otherwise stop the run
    # there, as it must (that guard has its own tests).
    applied=st.integers(1, ZERO_GRADIENT_UPDATES - 1),
    bad=st.sampled_from([math.nan, math.inf, -math.inf]),
    where=st.tuples(st.integers(0, 5), st.integers(0, 3)),
    normalize_returns=st.booleans(),
)
def test_a_skipped_nonfinite_update_changes_nothing(
    window: Window, applied: int, bad: float, where: tuple[int, int], normalize_returns: bool
) -> None:
    """A non-finite gradient skips the update: every weight, moment, rate and sampler as before."""
    policy = FeaturePolicy()
    shac = make_shac(
        policy,
        feature_width=2,
        critic_hidden=(4,),
        critic_layer_norm=True,
        normalize_returns=normalize_returns,
    )
    for _ in range(applied):
        assert one_update(shac, window.rollout(policy.scale))["train/skipped_nonfinite"] == 0.0
    before = snapshot(shac)
    rewards = [list(row) for row in window.rewards]
    step, row = where[0] % window.steps, where[1] % window.rows
    rewards[step][row] = bad
    poisoned = Window(
        rewards=rewards, values=window.values, next_values=window.next_values, kinds=window.kinds
    )
    metrics = one_update(shac, poisoned.rollout(policy.scale))
    assert metrics["train/skipped_nonfinite"] == 1.0
    assert "loss/critic" not in metrics
    assert_bit_identical(before, snapshot(shac))
    assert (shac.counters["applied"], shac.counters["skipped"]) == (applied, 1)


@given(
    window=windows(),
    gamma=st.floats(0.0, 1.0),
    entries=st.sets(st.tuples(st.integers(0, 5), st.integers(0, 3)), min_size=1, max_size=6),
    bad=st.sampled_from(["nan", "inf", "-inf", "large"]),
    limit=st.sampled_from([10.0, 1e6]),
)
def test_exploded_rows_are_cut_and_counted(
    window: Window,
    gamma: float,
    entries: set[tuple[int, int]],
    bad: str,
    limit: float,
) -> None:
    """A terminal observation beyond the limit ends its row like a termination, and is counted."""
    cut = {(t % window.steps, i % window.rows) for t, i in entries}
    value = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "large": 2.0 * limit}[bad]
    policy, shac = window_shac(actor=APGConfig(gamma=gamma), observation_limit=limit)
    rollout = window.rollout(policy.scale)
    spoiled = rollout.terminal_observations["obs"].detach().clone()
    for t, i in cut:
        spoiled[t, i, 0] = value
    rollout.terminal_observations.set("obs", spoiled)
    with pytest.MonkeyPatch.context() as patch:
        calls = record_fit_calls(shac, patch)
        metrics = one_update(shac, rollout)
    expected = reference_objective(window, gamma, [1.0] * window.rows, cut)
    objective = metrics["train/objective"] * window.steps
    assert objective == pytest.approx(expected, rel=1e-9, abs=1e-9)
    # The update applies and reports every cut entry; the critic stays finite.
    assert metrics["train/skipped_nonfinite"] == 0.0
    assert metrics["train/cut_rows"] == float(len(cut))
    ((_features, targets, _mask),) = calls
    assert bool(torch.isfinite(targets).all())
    assert all(bool(torch.isfinite(p).all()) for p in shac.critic.parameters())
