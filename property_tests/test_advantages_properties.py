"""Property tests: compute_gae equals the lambda-return from its definition.

The reference never uses the GAE recursion. For each valid step it finds the
last step ``K`` of the step's episode inside the rollout (the first done, or
the rollout's end), builds every n-step return

    G_t^(n) = sum_{i<n} gamma^i r_{t+i} + gamma^n * bootstrap_n

where ``bootstrap_n`` is ``V(s_{t+n})`` inside the episode and, at ``K``,
``next_values_K`` (truncated or rollout end) or 0 (terminated), and mixes them
into the lambda-return

    G_t^lambda = (1 - lambda) * sum_{n=1}^{H-1} lambda^(n-1) G_t^(n) + lambda^(H-1) G_t^(H)

with ``H = K - t + 1``. The advantage is ``G_t^lambda - V(s_t)``.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from typedrl.advantages import compute_gae

_finite = st.floats(-10.0, 10.0, allow_nan=False, width=64)
_unit = st.floats(0.0, 1.0, allow_nan=False)


@dataclass(frozen=True)
class _Rollout:
    rewards: list[list[float]]
    values: list[list[float]]
    next_values: list[list[float]]
    terminated: list[list[bool]]
    truncated: list[list[bool]]
    valid: list[list[bool]]
    gamma: float
    gae_lambda: float


@st.composite
def rollouts(draw: st.DrawFn) -> _Rollout:
    """A consistent ``[num_steps, num_envs]`` rollout with ends and ghosts.

    ``next_values[t]`` equals ``values[t + 1]`` wherever step ``t`` did not end;
    truncated steps get an independent ``V(final_obs)``. Ghost steps appear only
    at the first step or right after a done in the same row, and their entries,
    like the bootstrap of terminated steps, are NaN: they must not matter.
    """
    num_steps, num_envs = draw(st.integers(1, 8)), draw(st.integers(1, 4))

    def floats(rows: int) -> list[list[float]]:
        return [[draw(_finite) for _ in range(num_envs)] for _ in range(rows)]

    def flags() -> list[list[bool]]:
        return [[draw(st.booleans()) for _ in range(num_envs)] for _ in range(num_steps)]

    rewards = floats(num_steps)
    observed = floats(num_steps + 1)  # V(obs_t), including the observation after the last step
    final_values = floats(num_steps)  # V(final_obs_t)
    terminated, truncated, ghost_wish = flags(), flags(), flags()
    values = [list(row) for row in observed[:num_steps]]
    next_values = [
        [final_values[t][n] if truncated[t][n] else observed[t + 1][n] for n in range(num_envs)]
        for t in range(num_steps)
    ]
    valid = [[True] * num_envs for _ in range(num_steps)]
    for t in range(num_steps):
        for n in range(num_envs):
            after_done = t == 0 or terminated[t - 1][n] or truncated[t - 1][n]
            valid[t][n] = not (ghost_wish[t][n] and after_done)
            if terminated[t][n]:
                next_values[t][n] = math.nan
            if not valid[t][n]:
                rewards[t][n] = values[t][n] = next_values[t][n] = math.nan
    return _Rollout(
        rewards=rewards,
        values=values,
        next_values=next_values,
        terminated=terminated,
        truncated=truncated,
        valid=valid,
        gamma=draw(_unit),
        gae_lambda=draw(_unit),
    )


def _reference(rollout: _Rollout) -> tuple[np.ndarray, np.ndarray]:
    """Advantages and returns from the lambda-return definition, one step at a time."""
    num_steps, num_envs = len(rollout.rewards), len(rollout.rewards[0])
    gamma, lam = rollout.gamma, rollout.gae_lambda
    advantages = np.zeros((num_steps, num_envs))
    returns = np.zeros((num_steps, num_envs))
    for n in range(num_envs):
        for t in range(num_steps):
            if not rollout.valid[t][n]:
                continue
            last = t
            while not (
                rollout.terminated[last][n] or rollout.truncated[last][n] or last == num_steps - 1
            ):
                last += 1
            horizon = last - t + 1

            def n_step_return(m: int, n: int = n, t: int = t, last: int = last) -> float:
                discounted = sum(gamma**i * rollout.rewards[t + i][n] for i in range(m))
                if t + m - 1 < last:
                    bootstrap = rollout.values[t + m][n]
                elif rollout.terminated[last][n]:
                    bootstrap = 0.0
                else:
                    bootstrap = rollout.next_values[last][n]
                return discounted + gamma**m * bootstrap

            lambda_return = (1 - lam) * sum(
                lam ** (m - 1) * n_step_return(m) for m in range(1, horizon)
            ) + lam ** (horizon - 1) * n_step_return(horizon)
            advantages[t, n] = lambda_return - rollout.values[t][n]
            returns[t, n] = lambda_return
    return advantages, returns


def _run(rollout: _Rollout, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    return compute_gae(
        rewards=torch.tensor(rollout.rewards, dtype=dtype),
        values=torch.tensor(rollout.values, dtype=dtype),
        next_values=torch.tensor(rollout.next_values, dtype=dtype),
        terminated=torch.tensor(rollout.terminated),
        truncated=torch.tensor(rollout.truncated),
        valid=torch.tensor(rollout.valid),
        gamma=rollout.gamma,
        gae_lambda=rollout.gae_lambda,
        dtype=torch.float64,
    )


@given(rollout=rollouts())
def test_gae_equals_the_lambda_return_definition(rollout: _Rollout) -> None:
    """Advantages and returns match the brute-force lambda-return; ghosts are exactly 0."""
    advantages, returns = _run(rollout, torch.float64)
    expected_advantages, expected_returns = _reference(rollout)
    np.testing.assert_allclose(advantages.numpy(), expected_advantages, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(returns.numpy(), expected_returns, rtol=1e-9, atol=1e-9)
    ghosts = ~torch.tensor(rollout.valid)
    assert torch.all(advantages[ghosts] == 0)
    assert torch.all(returns[ghosts] == 0)


@given(rollout=rollouts())
def test_float32_inputs_accumulated_in_float64_stay_close(rollout: _Rollout) -> None:
    """float32 inputs with dtype=float64 agree with the reference to float32 precision."""
    advantages, _ = _run(rollout, torch.float32)
    assert advantages.dtype == torch.float64
    expected, _ = _reference(rollout)
    np.testing.assert_allclose(advantages.numpy(), expected, rtol=1e-5, atol=1e-4)
