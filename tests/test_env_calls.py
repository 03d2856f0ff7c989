"""Tests for typedrl._env_calls: stepping a user's env with its failures named."""

import pytest
import torch

from typedrl._env_calls import step_env
from typedrl._results import StepResult
from typedrl.errors import EnvContractError, EnvError
from typedrl.testing import QuadraticEnv
from typedrl.types import Action


class _Raising:
    """Steps like QuadraticEnv until told to raise ``error``."""

    def __init__(self, error: Exception) -> None:
        self.env = QuadraticEnv(num_envs=2)
        self.error = error

    def __getattr__(self, name: str) -> object:
        return getattr(self.env, name)

    def step(self, action: Action) -> StepResult:
        raise self.error


def test_returns_the_step_result() -> None:
    """A healthy env's result comes back as it is."""
    env = QuadraticEnv(num_envs=2)
    env.reset(seed=0)
    result = step_env(env, torch.zeros(2, 1), step=0, iteration=0)
    assert result.reward.shape == (2,)


def test_wraps_the_envs_own_exception() -> None:
    """Any other exception becomes EnvError naming the env, the step and the iteration."""
    env = _Raising(KeyError("joint"))
    with pytest.raises(EnvError, match=r"_Raising\) raised KeyError at step 4 of iteration 2"):
        step_env(env, torch.zeros(2, 1), step=4, iteration=2)  # type: ignore[arg-type]


def test_passes_typedrl_errors_through_with_a_note() -> None:
    """An error already in typedrl's words keeps its type and gains a note naming the step."""
    env = _Raising(EnvContractError("no reset"))
    with pytest.raises(EnvContractError, match="no reset") as info:
        step_env(env, torch.zeros(2, 1), step=1, iteration=3)  # type: ignore[arg-type]
    assert info.value.__notes__ == ["raised by the env at step 1 of iteration 3"]
