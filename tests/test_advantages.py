"""Tests for typedrl.advantages: compute_gae and discount_weights."""

import math

import pytest
import torch
from jaxtyping import TypeCheckError

from typedrl.advantages import compute_gae, discount_weights
from typedrl.errors import ConfigError

Tensor = torch.Tensor


def _column(*values: float) -> Tensor:
    return torch.tensor(values, dtype=torch.float64).unsqueeze(1)


def _flags(pattern: str) -> Tensor:
    """One env's flags over time, from a string such as "10" (True, then False)."""
    return torch.tensor([char == "1" for char in pattern], dtype=torch.bool).unsqueeze(1)


def _gae(
    *,
    rewards: Tensor,
    values: Tensor,
    next_values: Tensor,
    terminated: Tensor | None = None,
    truncated: Tensor | None = None,
    valid: Tensor | None = None,
    gamma: float = 0.9,
    gae_lambda: float = 0.8,
) -> tuple[Tensor, Tensor]:
    never = torch.zeros_like(rewards, dtype=torch.bool)
    return compute_gae(
        rewards=rewards,
        values=values,
        next_values=next_values,
        terminated=never if terminated is None else terminated,
        truncated=never if truncated is None else truncated,
        valid=~never if valid is None else valid,
        gamma=gamma,
        gae_lambda=gae_lambda,
    )


def test_gae_without_episode_ends_matches_the_formula() -> None:
    """Two steps, no done: A_1 = delta_1, A_0 = delta_0 + gamma * lambda * A_1."""
    advantages, returns = _gae(
        rewards=_column(1.0, 2.0), values=_column(0.5, 1.5), next_values=_column(1.5, 3.0)
    )
    delta_1 = 2.0 + 0.9 * 3.0 - 1.5
    delta_0 = 1.0 + 0.9 * 1.5 - 0.5
    assert advantages[:, 0].tolist() == pytest.approx([delta_0 + 0.72 * delta_1, delta_1])
    assert returns[:, 0].tolist() == pytest.approx([delta_0 + 0.72 * delta_1 + 0.5, delta_1 + 1.5])


def test_termination_zeroes_the_bootstrap_and_cuts_the_recursion() -> None:
    """A terminated step ignores next_values, even non-finite, and stops the recursion."""
    advantages, returns = _gae(
        rewards=_column(1.0, 2.0),
        values=_column(0.5, 0.25),
        next_values=_column(math.nan, 4.0),
        terminated=_flags("10"),
    )
    delta_1 = 2.0 + 0.9 * 4.0 - 0.25
    assert advantages[:, 0].tolist() == pytest.approx([1.0 - 0.5, delta_1])
    assert torch.isfinite(returns).all()


def test_truncation_bootstraps_from_next_values_and_cuts_the_recursion() -> None:
    """A truncated step bootstraps from V(final_obs) and does not look past the reset."""
    advantages, _ = _gae(
        rewards=_column(1.0, 2.0),
        values=_column(0.5, 0.25),
        next_values=_column(10.0, 4.0),
        truncated=_flags("10"),
    )
    assert advantages[0, 0].item() == pytest.approx(1.0 + 0.9 * 10.0 - 0.5)


def test_terminated_and_truncated_together_count_as_terminated() -> None:
    """When both flags are set, the bootstrap is zeroed."""
    advantages, _ = _gae(
        rewards=_column(1.0),
        values=_column(0.5),
        next_values=_column(10.0),
        terminated=_flags("1"),
        truncated=_flags("1"),
    )
    assert advantages.item() == pytest.approx(0.5)


def test_ghost_steps_are_zero_and_do_not_leak() -> None:
    """A ghost step after a done gets A = 0 and return 0; NaNs in it change nothing."""
    rewards = _column(1.0, math.nan, 3.0)
    values = _column(0.5, math.nan, 1.0)
    next_values = _column(2.0, math.nan, 2.0)
    advantages, returns = _gae(
        rewards=rewards,
        values=values,
        next_values=next_values,
        truncated=_flags("100"),
        valid=_flags("101"),
    )
    assert advantages[:, 0].tolist() == pytest.approx([1.0 + 1.8 - 0.5, 0.0, 3.0 + 1.8 - 1.0])
    assert returns[:, 0].tolist() == pytest.approx([1.0 + 1.8, 0.0, 3.0 + 1.8])


def test_ghost_step_cuts_the_recursion_even_without_a_done() -> None:
    """An out-of-contract ghost without a preceding done still carries nothing back."""
    advantages, _ = _gae(
        rewards=_column(1.0, 5.0),
        values=_column(0.0, 0.0),
        next_values=_column(0.0, 0.0),
        valid=_flags("10"),
    )
    assert advantages[:, 0].tolist() == [1.0, 0.0]


@pytest.mark.parametrize(("gae_lambda", "expected_first"), [(0.0, 1.0), (1.0, 1.0 + 0.9 * 2.0)])
def test_lambda_extremes(gae_lambda: float, expected_first: float) -> None:
    """lambda = 0 gives the one-step TD error; lambda = 1 the bootstrapped return."""
    advantages, _ = _gae(
        rewards=_column(1.0, 2.0),
        values=_column(0.0, 0.0),
        next_values=_column(0.0, 0.0),
        gae_lambda=gae_lambda,
    )
    assert advantages[0, 0].item() == pytest.approx(expected_first)


def test_envs_are_independent() -> None:
    """Each column is computed as if alone."""
    generator = torch.Generator().manual_seed(0)
    rewards, values, next_values = torch.randn(3, 5, 4, generator=generator, dtype=torch.float64)
    terminated = torch.rand(5, 4, generator=generator) < 0.3
    advantages, returns = _gae(
        rewards=rewards, values=values, next_values=next_values, terminated=terminated
    )
    for env in range(4):
        column = slice(env, env + 1)
        single, single_returns = _gae(
            rewards=rewards[:, column],
            values=values[:, column],
            next_values=next_values[:, column],
            terminated=terminated[:, column],
        )
        assert torch.equal(advantages[:, column], single)
        assert torch.equal(returns[:, column], single_returns)


def test_dtype_promotion_and_override() -> None:
    """Results use the promoted input dtype unless dtype is given."""
    rewards = torch.ones(2, 3, dtype=torch.float32)
    values = torch.zeros(2, 3, dtype=torch.float32)
    advantages, returns = _gae(rewards=rewards, values=values, next_values=values.double())
    assert advantages.dtype == returns.dtype == torch.float64
    never = torch.zeros(2, 3, dtype=torch.bool)
    advantages, returns = compute_gae(
        rewards=rewards,
        values=values,
        next_values=values,
        terminated=never,
        truncated=never,
        valid=~never,
        gamma=0.99,
        gae_lambda=0.95,
        dtype=torch.float64,
    )
    assert advantages.dtype == returns.dtype == torch.float64
    assert advantages[0].tolist() == pytest.approx([1.0 + 0.99 * 0.95] * 3)


_GOOD: dict[str, object] = {
    "rewards": torch.zeros(4, 2),
    "values": torch.zeros(4, 2),
    "next_values": torch.zeros(4, 2),
    "terminated": torch.zeros(4, 2, dtype=torch.bool),
    "truncated": torch.zeros(4, 2, dtype=torch.bool),
    "valid": torch.ones(4, 2, dtype=torch.bool),
    "gamma": 0.99,
    "gae_lambda": 0.95,
}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("rewards", torch.zeros(4)),  # not [num_steps, num_envs]
        ("values", torch.zeros(4, 3)),  # num_envs differs from the rewards'
        ("next_values", torch.zeros(5, 2)),  # num_steps differs from the rewards'
        ("rewards", torch.zeros(4, 2, dtype=torch.int64)),  # not floating point
        ("terminated", torch.zeros(4, 2)),  # not bool
        ("valid", [[True, True]] * 4),  # not a tensor
    ],
)
def test_runtime_checks_refuse_wrong_shapes(name: str, value: object) -> None:
    """Under the suite's jaxtyping checks, a tensor off its annotation is refused by name."""
    with pytest.raises(TypeCheckError, match=f"parameter '{name}'"):
        compute_gae(**{**_GOOD, name: value})  # type: ignore[arg-type]


def test_runtime_checks_accept_the_documented_shapes() -> None:
    """Annotated arguments and results agree: [num_steps, num_envs] in, the same shape out."""
    never = torch.zeros(5, 2, dtype=torch.bool)
    advantages, returns = compute_gae(
        rewards=torch.ones(5, 2, dtype=torch.float16),
        values=torch.zeros(5, 2),
        next_values=torch.zeros(5, 2, dtype=torch.float64),
        terminated=never,
        truncated=never,
        valid=~never,
        gamma=0.9,
        gae_lambda=0.9,
    )
    assert advantages.shape == returns.shape == (5, 2)


@pytest.mark.usefixtures("without_runtime_checks")
@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("gamma", 1.5, r"gamma must lie in \[0, 1\], got 1\.5"),
        ("gamma", -0.1, r"gamma must lie in \[0, 1\]"),
        ("gae_lambda", math.nan, "gae_lambda must be a finite float, got nan"),
        ("gae_lambda", True, "gae_lambda must be a finite float"),
        ("dtype", torch.int64, "dtype must be a floating dtype, got torch.int64"),
    ],
)
def test_compute_gae_refuses_values_that_would_give_silent_nonsense(
    name: str, value: object, message: str
) -> None:
    """A discount or lambda outside [0, 1], or an integer dtype, raises ConfigError."""
    kwargs = {**_GOOD, name: value}
    with pytest.raises(ConfigError, match=message):
        compute_gae(**kwargs)  # type: ignore[arg-type]


def test_discount_weights_restart_after_each_done() -> None:
    """d_0 is the given discount, d_{t+1} = 1 after a done and gamma * d_t otherwise."""
    done = torch.tensor([[False, True], [True, False], [False, False], [False, True]])
    weights, following = discount_weights(torch.tensor([1.0, 0.5]), done, 0.5)
    assert weights.tolist() == [
        [1.0, 0.5],
        [0.5, 1.0],
        [1.0, 0.5],
        [0.5, 0.25],
    ]
    assert following.tolist() == [0.25, 1.0]


def test_discount_weights_keep_the_graph_of_the_discount() -> None:
    """The weights are differentiable in the incoming discount (no detach inside)."""
    discount = torch.tensor([2.0], requires_grad=True)
    weights, _ = discount_weights(discount, torch.zeros(3, 1, dtype=torch.bool), 0.9)
    torch.autograd.backward(weights.sum())
    assert discount.grad is not None
    assert discount.grad.tolist() == pytest.approx([1.0 + 0.9 + 0.81])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_gae_matches_cpu_without_host_sync() -> None:
    """On CUDA the computation never synchronises and equals the CPU result."""
    generator = torch.Generator().manual_seed(0)
    rewards, values, next_values = torch.randn(3, 16, 8, generator=generator)
    terminated = torch.rand(16, 8, generator=generator) < 0.1
    truncated = torch.rand(16, 8, generator=generator) < 0.1
    valid = torch.rand(16, 8, generator=generator) < 0.9
    cpu = compute_gae(
        rewards=rewards,
        values=values,
        next_values=next_values,
        terminated=terminated,
        truncated=truncated,
        valid=valid,
        gamma=0.99,
        gae_lambda=0.95,
    )
    inputs = [t.cuda() for t in (rewards, values, next_values, terminated, truncated, valid)]
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        cuda = compute_gae(
            rewards=inputs[0],
            values=inputs[1],
            next_values=inputs[2],
            terminated=inputs[3],
            truncated=inputs[4],
            valid=inputs[5],
            gamma=0.99,
            gae_lambda=0.95,
        )
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for expected, got in zip(cpu, cuda, strict=True):
        torch.testing.assert_close(got.cpu(), expected)
