"""Tests for typedrl._results: StepResult, DifferentiableRolloutSpec, EvaluationResult, step_env.

Each field's own check is tested with every config class in ``tests/test_config_classes.py``.
"""

import math

import pytest
import torch
from tensordict import TensorDict

from typedrl import DifferentiableRolloutSpec, EvaluationResult, StepResult
from typedrl._results import step_env
from typedrl.errors import ConfigError, EnvContractError, EnvError, SpecError
from typedrl.testing import QuadraticEnv
from typedrl.types import Action


def _obs(num_envs: int = 3) -> TensorDict:
    return TensorDict({"obs": torch.arange(num_envs * 2.0).reshape(num_envs, 2)}, [num_envs])


def _flags(num_envs: int = 3) -> torch.Tensor:
    return torch.zeros(num_envs, dtype=torch.bool)


def test_step_result_unpacks_like_gymnasium() -> None:
    """The result is a 5-tuple in Gymnasium's order with named accessors."""
    obs, reward, terminated = _obs(), torch.ones(3), torch.tensor([True, False, False])
    info = {"x": 1}
    result = StepResult(obs, reward, terminated, _flags(), info)
    o, r, te, tr, i = result
    assert o is obs
    assert r is reward
    assert te is terminated
    assert i is info
    assert len(result) == 5
    assert result.obs is obs
    assert result.reward is reward
    assert result.terminated is terminated
    assert result.truncated is tr
    assert result.info is info
    assert result.done.tolist() == [True, False, False]


def test_step_result_extras_default() -> None:
    """Without extras every row is valid and no terminal observation is claimed."""
    result = StepResult(_obs(), torch.ones(3), _flags(), _flags(), {})
    assert result.final_obs is None
    assert result.valid.dtype == torch.bool
    assert result.valid.tolist() == [True, True, True]


def test_step_result_is_immutable() -> None:
    """Attributes cannot be rebound or deleted."""
    result = StepResult(_obs(), torch.ones(3), _flags(), _flags(), {})
    with pytest.raises(AttributeError, match="immutable"):
        result.final_obs = None  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del result.valid


def test_step_result_keeps_extras() -> None:
    """final_obs and valid are stored as given."""
    final = _obs()
    valid = torch.tensor([True, False, True])
    result = StepResult(_obs(), torch.ones(3), _flags(), _flags(), {}, final_obs=final, valid=valid)
    assert result.final_obs is final
    assert result.valid is valid
    assert "final_obs=yes" in repr(result)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("reward", torch.ones(4), r"reward must have shape \[3\]"),
        ("reward", torch.ones(3, dtype=torch.int64), "floating-point"),
        ("reward", [1.0, 1.0, 1.0], "must be a torch.Tensor"),
        ("terminated", torch.zeros(3), "torch.bool tensor, got torch.float32"),
        ("truncated", torch.zeros(3, 1, dtype=torch.bool), r"shape \[3\]"),
        ("valid", torch.ones(2, dtype=torch.bool), r"valid must have shape \[3\]"),
        ("final_obs", _obs(2), r"final_obs must be a TensorDict with batch_size \[3\]"),
        ("obs", {"obs": torch.zeros(3, 2)}, "must be a TensorDict"),
        ("terminated", torch.zeros(3, dtype=torch.bool, device="meta"), "terminated is on meta"),
    ],
)
def test_step_result_rejects_bad_parts(field: str, value: object, message: str) -> None:
    """Each malformed part raises a SpecError naming the field, expected and actual."""
    parts: dict[str, object] = {
        "obs": _obs(),
        "reward": torch.ones(3),
        "terminated": _flags(),
        "truncated": _flags(),
    }
    extras: dict[str, object] = {}
    if field in parts:
        parts[field] = value
    else:
        extras[field] = value
    with pytest.raises(SpecError, match=message):
        StepResult(*parts.values(), {}, **extras)  # type: ignore[arg-type, call-arg]


def test_rollout_spec_defaults_and_metadata_copy() -> None:
    """Defaults apply and metadata becomes a read-only float copy."""
    metadata = {"difficulty": 1}
    spec = DifferentiableRolloutSpec(num_steps=5, metadata=metadata)
    metadata["difficulty"] = 7
    assert spec.num_steps == 5
    assert spec.objective_scale == 1.0
    assert dict(spec.metadata) == {"difficulty": 1.0}
    assert isinstance(spec.metadata["difficulty"], float)


def test_rollout_spec_is_frozen() -> None:
    """Fields cannot be reassigned."""
    spec = DifferentiableRolloutSpec(num_steps=5)
    with pytest.raises(AttributeError):
        spec.num_steps = 6  # type: ignore[misc]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (torch.ones(3, dtype=torch.int64), "float tensor"),
        (torch.ones(3, 1), r"shape \[num_envs\]"),
        (torch.ones(0), "non-empty"),
        (torch.ones(3, requires_grad=True), "detached"),
        (torch.tensor([1.0, math.nan]), "finite and >= 0"),
        (torch.tensor([1.0, -1.0]), "finite and >= 0"),
    ],
)
def test_rollout_spec_rejects_tensor_scale(bad: torch.Tensor, message: str) -> None:
    """A tensor objective scale must be a detached, finite, non-negative [num_envs] float."""
    with pytest.raises(ConfigError, match=message):
        DifferentiableRolloutSpec(num_steps=1, objective_scale=bad)


def test_rollout_spec_accepts_tensor_scale() -> None:
    """A valid per-env scale is kept as the same tensor."""
    scale = torch.tensor([0.0, 0.5, 2.0])
    assert DifferentiableRolloutSpec(num_steps=1, objective_scale=scale).objective_scale is scale


def test_evaluation_result_valid() -> None:
    """Metrics, score and count are kept; metrics as a read-only copy."""
    metrics = {"return_mean": 3.0}
    result = EvaluationResult(metrics=metrics, score=3.0, num_items=2)
    metrics["return_mean"] = 4.0
    assert dict(result.metrics) == {"return_mean": 3.0}
    assert result.score == 3.0
    assert result.num_items == 2


def test_from_trusted_keeps_extras_and_stays_immutable() -> None:
    """from_trusted stores final_obs and valid as given, with the same immutability."""
    obs, final, valid = _obs(), _obs(), torch.tensor([True, False, True])
    result = StepResult.from_trusted(
        obs, torch.ones(3), _flags(), _flags(), {"k": 1}, final_obs=final, valid=valid
    )
    assert result.obs is obs
    assert result.final_obs is final
    assert result.valid is valid
    assert result.info == {"k": 1}
    with pytest.raises(AttributeError, match="immutable"):
        result.valid = valid  # type: ignore[misc]


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
        step_env(env, torch.zeros(2, 1), step=4, iteration=2)


def test_passes_typedrl_errors_through_with_a_note() -> None:
    """An error already in typedrl's words keeps its type and gains a note naming the step."""
    env = _Raising(EnvContractError("no reset"))
    with pytest.raises(EnvContractError, match="no reset") as info:
        step_env(env, torch.zeros(2, 1), step=1, iteration=3)
    assert info.value.__notes__ == ["raised by the env at step 1 of iteration 3"]
