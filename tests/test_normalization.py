"""Tests for typedrl.normalization: RunningMeanStd and RewardNormalizer."""

import io
import math
from typing import Any

import pytest
import torch
from jaxtyping import TypeCheckError
from torch import Tensor, nn

from typedrl.distributed import SingleProcess
from typedrl.errors import CheckpointError, ConfigError, NonFiniteError, SpecError
from typedrl.normalization import RewardNormalizer, RunningMeanStd
from typedrl.protocols import SupportsStateDict

DIST = SingleProcess()


def _pop_stats(data: Tensor) -> tuple[Tensor, Tensor]:
    """Mean and population variance over the first axis, in float64."""
    data = data.double()
    return data.mean(dim=0), data.var(dim=0, correction=0)


def _roundtrip(state: dict[str, Any]) -> dict[str, Any]:
    """Save and reload a state dict as a checkpoint would (weights_only)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded: dict[str, Any] = torch.load(buffer, weights_only=True)
    return loaded


# ---------------------------------------------------------------- RunningMeanStd: statistics


def test_updates_match_statistics_of_concatenated_data() -> None:
    """Several batches of a multi-axis feature give the pooled mean and population variance."""
    generator = torch.Generator().manual_seed(0)
    batches = [torch.randn(n, 2, 3, generator=generator) * 5 + 3 for n in (7, 1, 20, 4)]
    rms = RunningMeanStd((2, 3))
    for batch in batches:
        rms.update(batch, dist=DIST)
    mean, var = _pop_stats(torch.cat(batches))
    assert rms.shape == (2, 3)
    assert rms.count.dtype == torch.int64
    assert rms.count.item() == 32
    assert rms.mean.dtype == rms.var.dtype == torch.float64
    torch.testing.assert_close(rms.mean, mean, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(rms.var, var, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(rms.std, var.sqrt(), rtol=1e-12, atol=1e-12)


def test_statistics_are_float64_for_float32_data() -> None:
    """A large offset that float32 accumulation would blur is tracked in float64."""
    data = torch.tensor([[1e6 + 0.5], [1e6 - 0.5]] * 50, dtype=torch.float32)
    rms = RunningMeanStd((1,))
    for chunk in torch.split(data, 7):
        rms.update(chunk, dist=DIST)
    assert rms.mean.item() == 1e6
    assert rms.var.item() == pytest.approx(0.25, rel=1e-9)


def test_empty_normaliser_defaults() -> None:
    """Before any sample: count 0, mean 0, variance 1."""
    rms = RunningMeanStd((3,))
    assert rms.count.item() == 0
    assert rms.mean.tolist() == [0.0, 0.0, 0.0]
    assert rms.var.tolist() == [1.0, 1.0, 1.0]


def test_empty_batch_changes_nothing() -> None:
    """A batch of zero rows (or fully masked) leaves the statistics as they are."""
    rms = RunningMeanStd((1,))
    rms.update(torch.tensor([[1.0], [2.0]]), dist=DIST)
    before = {k: v.clone() for k, v in rms.state_dict().items()}
    rms.update(torch.zeros(0, 1), dist=DIST)
    rms.update(torch.ones(2, 1), dist=DIST, mask=torch.tensor([False, False]))
    for key, value in rms.state_dict().items():
        assert torch.equal(value, before[key])


# ---------------------------------------------------------------- masks


def test_mask_ignores_rows_even_non_finite() -> None:
    """Rows masked out do not count, even when they hold NaN or infinity."""
    data = torch.tensor([[1.0, 2.0], [math.nan, math.inf], [3.0, 6.0], [100.0, -100.0]])
    mask = torch.tensor([True, False, True, False])
    rms = RunningMeanStd((2,), check_finite=True)
    rms.update(data, dist=DIST, mask=mask)
    mean, var = _pop_stats(data[mask])
    assert rms.count.item() == 2
    torch.testing.assert_close(rms.mean, mean)
    torch.testing.assert_close(rms.var, var)


def test_mask_shape_is_checked() -> None:
    """A mask that does not match the batch is rejected by the runtime checker."""
    rms = RunningMeanStd((2,))
    with pytest.raises(TypeCheckError):
        rms.update(torch.zeros(3, 2), dist=DIST, mask=torch.ones(2, dtype=torch.bool))


# ---------------------------------------------------------------- normalize / denormalize


def test_normalize_formula_dtype_and_leading_axes() -> None:
    """(x - mean) / sqrt(var + eps) in x's dtype, for any leading axes."""
    rms = RunningMeanStd((2,), epsilon=1e-2)
    rms.update(torch.tensor([[0.0, 10.0], [2.0, 14.0]]), dist=DIST)
    x = torch.tensor([[[1.0, 12.0], [3.0, 16.0]]])  # [1, 2, 2]: leading axes [1, 2]
    out = rms.normalize(x)
    assert out.dtype == torch.float32
    assert out.shape == x.shape
    expected = (x.double() - torch.tensor([1.0, 12.0])) / torch.sqrt(
        torch.tensor([1.0, 4.0]) + 1e-2
    )
    torch.testing.assert_close(out, expected.float())
    assert rms(x.double()).dtype == torch.float64
    torch.testing.assert_close(rms.denormalize(out), x)


def test_normalize_clamps() -> None:
    """With clip, normalised values stay in [-clip, clip]."""
    rms = RunningMeanStd((1,), clip=1.5, epsilon=0.0)
    rms.update(torch.tensor([[-1.0], [1.0]]), dist=DIST)
    out = rms.normalize(torch.tensor([[-10.0], [0.5], [10.0]]))
    assert out.squeeze(-1).tolist() == [-1.5, 0.5, 1.5]


def test_normalize_keeps_the_graph() -> None:
    """Gradients flow through normalisation (differentiable rollouts need it)."""
    rms = RunningMeanStd((1,), epsilon=0.0)
    rms.update(torch.tensor([[0.0], [4.0]]), dist=DIST)
    x = torch.tensor([[1.0]], requires_grad=True)
    torch.autograd.backward(rms.normalize(x).sum())
    assert x.grad is not None
    assert x.grad.item() == pytest.approx(0.5)


def test_update_does_not_track_gradients() -> None:
    """Updating from a tensor with a graph stores plain statistics."""
    rms = RunningMeanStd((1,))
    x = torch.ones(2, 1, requires_grad=True)
    rms.update(x * 2, dist=DIST)
    assert not rms.mean.requires_grad


# ---------------------------------------------------------------- shape, device, dtype


def test_forward_neither_counts_nor_changes_values_before_a_sample() -> None:
    """A setup forward counts no sample; before any, it normalises with mean 0, variance 1."""
    rms = RunningMeanStd((2,), epsilon=0.0)
    x = torch.tensor([[1.0, -2.0]])
    assert torch.equal(rms(x), x)
    assert rms.count.item() == 0


@pytest.mark.parametrize(
    "x",
    [torch.zeros(4, 3), torch.zeros(4, 2, 2), torch.zeros(2)],
    ids=["width", "extra-axis", "no-batch"],
)
def test_update_shape_mismatch(x: Tensor) -> None:
    """A batch whose feature shape differs from the fixed one is rejected."""
    rms = RunningMeanStd((2,))
    with pytest.raises((SpecError, TypeCheckError)):
        rms.update(x, dist=DIST)


@pytest.mark.usefixtures("without_runtime_checks")
def test_update_shape_mismatch_message() -> None:
    """Without runtime checks, update's own message shows the expected and the given shape."""
    rms = RunningMeanStd((2,))
    with pytest.raises(SpecError, match=r"shape \[batch, 2\], got \[4, 3\]"):
        rms.update(torch.zeros(4, 3), dist=DIST)


def test_integer_input_rejected() -> None:
    """Integer data is refused by the runtime checker."""
    with pytest.raises(TypeCheckError):
        RunningMeanStd((1,)).update(torch.zeros(2, 1, dtype=torch.int64), dist=DIST)


def test_module_casts_keep_float64_and_moves_follow() -> None:
    """Casting the module (half, bf16 precision) keeps float64 statistics; devices follow."""
    model = nn.Sequential(nn.Linear(2, 2), RunningMeanStd((2,)))
    model.half()
    rms = model[1]
    assert isinstance(rms, RunningMeanStd)
    assert rms.mean.dtype == torch.float64
    assert rms.count.dtype == torch.int64
    assert model[0].weight.dtype == torch.float16
    model.to("meta")
    assert rms.mean.device == torch.device("meta")
    assert rms.mean.dtype == torch.float64


# ---------------------------------------------------------------- frozen, finite checks


def test_frozen_update_is_a_no_op() -> None:
    """While frozen, update changes nothing; unfreezing resumes."""
    rms = RunningMeanStd((1,))
    rms.update(torch.ones(2, 1), dist=DIST)
    rms.frozen = True
    rms.update(torch.full((5, 1), 9.0), dist=DIST)
    assert rms.count.item() == 2
    assert rms.mean.item() == 1.0
    rms.frozen = False
    rms.update(torch.full((2, 1), 3.0), dist=DIST)
    assert rms.count.item() == 4
    assert rms.mean.item() == 2.0


def test_check_finite_update_leaves_statistics_unchanged() -> None:
    """With check_finite, a NaN raises before anything changes."""
    rms = RunningMeanStd((1,), check_finite=True)
    rms.update(torch.ones(2, 1), dist=DIST)
    with pytest.raises(NonFiniteError, match=r"rank\(s\) \[0\]"):
        rms.update(torch.tensor([[1.0], [math.nan]]), dist=DIST)
    assert rms.count.item() == 2
    assert rms.mean.item() == 1.0
    with pytest.raises(NonFiniteError, match="1 of 2 values"):
        rms.normalize(torch.tensor([[1.0], [math.inf]]))


def test_without_check_finite_nan_is_not_checked() -> None:
    """The default pays for no check: NaN reaches the statistics."""
    rms = RunningMeanStd((1,))
    rms.update(torch.tensor([[math.nan]]), dist=DIST)
    assert math.isnan(rms.mean.item())


# ---------------------------------------------------------------- config errors


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epsilon": -1.0}, "epsilon must be >= 0"),
        ({"clip": 0.0}, r"clip must be > 0"),
        ({"clip": math.inf}, "clip must be a finite float"),
        ({"shape": (2, -1)}, r"shape\[1\] must be a non-negative int"),
    ],
)
def test_running_mean_std_config_errors(kwargs: dict[str, Any], message: str) -> None:
    """Invalid options raise ConfigError naming the option and the value."""
    with pytest.raises(ConfigError, match=message):
        RunningMeanStd(**{"shape": (1,), **kwargs})


# ---------------------------------------------------------------- state dicts


def test_state_dict_round_trip_exact() -> None:
    """A saved state restores bit-exact statistics into a fresh normaliser."""
    rms = RunningMeanStd((4,))
    for seed in range(3):
        rms.update(torch.randn(5, 4, generator=torch.Generator().manual_seed(seed)), dist=DIST)
    state = _roundtrip(rms.state_dict())
    assert set(state) == {"running_count", "running_mean", "running_var"}
    restored = RunningMeanStd((4,))
    restored.load_state_dict(state)
    assert isinstance(restored, SupportsStateDict)
    for key, value in rms.state_dict().items():
        assert torch.equal(restored.state_dict()[key], value)
        assert restored.state_dict()[key].dtype == value.dtype
    x = torch.randn(3, 4)
    assert torch.equal(restored.normalize(x), rms.normalize(x))


def test_state_dict_inside_a_model() -> None:
    """As a submodule the keys carry the prefix."""
    rms, fresh_rms = RunningMeanStd((3,)), RunningMeanStd((3,))
    model = nn.Sequential(rms, nn.Linear(3, 1))
    rms.update(torch.randn(6, 3), dist=DIST)
    state = model.state_dict()
    assert "0.running_mean" in state
    nn.Sequential(fresh_rms, nn.Linear(3, 1)).load_state_dict(state)
    assert torch.equal(fresh_rms.mean, rms.mean)


def _good_state() -> dict[str, Any]:
    rms = RunningMeanStd((2,))
    rms.update(torch.randn(4, 2), dist=DIST)
    return rms.state_dict()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"running_mean": torch.zeros(3, dtype=torch.float64)}, r"shape \[3\], expected \[2\]"),
        ({"running_count": torch.tensor(2.0)}, "integer scalar tensor"),
        ({"running_count": torch.tensor([2])}, "integer scalar tensor"),
        ({"running_count": torch.tensor(-1)}, "must be >= 0"),
        ({"running_var": torch.tensor([1.0, -1.0])}, "negative entries"),
        ({"running_var": torch.tensor([1.0, math.nan])}, "NaN or infinity"),
        ({"running_mean": torch.zeros(2, dtype=torch.int64)}, "floating-point tensor"),
        ({"extra": torch.zeros(1)}, r"unknown keys \['extra'\]"),
    ],
)
def test_load_state_dict_errors(change: dict[str, Any], message: str) -> None:
    """Malformed states raise CheckpointError naming the entry; the module is unchanged."""
    state = {**_good_state(), **change}
    state = {key: value for key, value in state.items() if value is not None}
    rms = RunningMeanStd((2,))
    rms.update(torch.ones(2, 2), dist=DIST)
    with pytest.raises(CheckpointError, match=message):
        rms.load_state_dict(state)
    assert rms.count.item() == 2
    assert rms.mean.tolist() == [1.0, 1.0]


def test_load_state_dict_missing_entries() -> None:
    """A state without its count or its statistics is refused, naming what is missing."""
    with pytest.raises(
        CheckpointError, match=r"misses keys \['running_count', 'running_mean', 'running_var'\]"
    ):
        RunningMeanStd((2,)).load_state_dict({})
    with pytest.raises(CheckpointError, match=r"misses keys \['running_mean', 'running_var'\]"):
        RunningMeanStd((2,)).load_state_dict({"running_count": torch.tensor(3)})


def test_load_state_dict_non_strict_skips_missing() -> None:
    """With strict=False missing entries are reported, not raised, and nothing changes."""
    rms = RunningMeanStd((2,))
    result = rms.load_state_dict({"running_count": torch.tensor(3)}, strict=False)
    assert result.missing_keys == ["running_mean", "running_var"]
    assert rms.count.item() == 0


# ---------------------------------------------------------------- RewardNormalizer


def _hand_returns(
    rewards: list[list[float]], dones: list[list[bool]], gamma: float
) -> tuple[list[float], list[float]]:
    """Discounted returns seen at each step (step-major) and the final running returns."""
    running = [0.0] * len(rewards[0])
    seen = []
    for step_rewards, step_dones in zip(rewards, dones, strict=True):
        for env, (reward, done) in enumerate(zip(step_rewards, step_dones, strict=True)):
            running[env] = gamma * running[env] + reward
            seen.append(running[env])
            if done:
                running[env] = 0.0
    return seen, running


def test_reward_normalizer_matches_hand_computation() -> None:
    """Returns restart on termination and on truncation; rewards are scaled, not centred."""
    gamma = 0.9
    rewards = [[1.0, -2.0, 0.5], [3.0, 1.0, 0.0], [-1.0, 2.0, 4.0], [0.5, 0.5, 0.5]]
    terminated = [[False, True, False], [False, False, False], [True, False, False], [False] * 3]
    truncated = [[False, False, False], [True, False, False], [False, False, True], [False] * 3]
    dones = [
        [a or b for a, b in zip(te, tr, strict=True)]
        for te, tr in zip(terminated, truncated, strict=True)
    ]
    seen, running = _hand_returns(rewards, dones, gamma)
    norm = RewardNormalizer(gamma=gamma, epsilon=1e-8, clip=None)
    # Two calls (1 step, then 3 steps) must equal one pass over the 4 steps.
    reward_t = torch.tensor(rewards)
    te_t, tr_t = torch.tensor(terminated), torch.tensor(truncated)
    norm.update(reward_t[:1], te_t[:1], tr_t[:1], dist=DIST)
    norm.update(reward_t[1:], te_t[1:], tr_t[1:], dist=DIST)
    expected_var = torch.tensor(seen, dtype=torch.float64).var(correction=0)
    assert norm.running_return.tolist() == pytest.approx(running, rel=1e-12)
    assert norm.return_stats.count.item() == len(seen)
    assert norm.return_stats.var.item() == pytest.approx(expected_var.item(), rel=1e-12)
    scaled = norm.normalize(reward_t)
    assert scaled.dtype == torch.float32
    torch.testing.assert_close(scaled, (reward_t.double() / math.sqrt(expected_var + 1e-8)).float())
    torch.testing.assert_close(norm.denormalize(scaled), reward_t)


def test_reward_normalizer_clamps_and_ignores_ghost_rows() -> None:
    """Ghost rows keep their return and add no sample; scaled rewards are clamped."""
    norm = RewardNormalizer(gamma=1.0, clip=2.0, epsilon=0.0)
    reward = torch.tensor([[1.0, 50.0], [3.0, 1.0]])
    done = torch.zeros(2, 2, dtype=torch.bool)
    mask = torch.tensor([[True, False], [True, True]])
    norm.update(reward, done, done, dist=DIST, mask=mask)
    assert norm.running_return.tolist() == [4.0, 1.0]
    assert norm.return_stats.count.item() == 3
    mean, var = _pop_stats(torch.tensor([1.0, 4.0, 1.0]))
    assert norm.return_stats.mean.item() == pytest.approx(mean.item())
    assert norm.normalize(torch.tensor([100.0, -100.0, 0.0])).tolist() == [2.0, -2.0, 0.0]
    assert norm.scale.item() == pytest.approx(math.sqrt(var.item()))


def test_reward_normalizer_check_finite_changes_nothing() -> None:
    """A NaN reward raises with check_finite, leaving returns and statistics as they were."""
    norm = RewardNormalizer(gamma=0.5, check_finite=True)
    done = torch.zeros(1, 2, dtype=torch.bool)
    norm.update(torch.ones(1, 2), done, done, dist=DIST)
    with pytest.raises(NonFiniteError):
        norm.update(torch.tensor([[1.0, math.nan]]), done, done, dist=DIST)
    assert norm.running_return.tolist() == [1.0, 1.0]
    assert norm.return_stats.count.item() == 2
    with pytest.raises(NonFiniteError):
        norm.normalize(torch.tensor([math.inf]))


def test_reward_normalizer_shape_errors() -> None:
    """A changed num_envs is refused; flags of another shape or a 1-D reward by the checker."""
    norm = RewardNormalizer(gamma=0.99)
    done = torch.zeros(1, 2, dtype=torch.bool)
    norm.update(torch.ones(1, 2), done, done, dist=DIST)
    wide = torch.zeros(1, 3, dtype=torch.bool)
    with pytest.raises(SpecError, match="got 3 envs"):
        norm.update(torch.ones(1, 3), wide, wide, dist=DIST)
    with pytest.raises(TypeCheckError):
        norm.update(torch.ones(1, 2), wide, done, dist=DIST)
    with pytest.raises(TypeCheckError):
        norm.update(torch.ones(2), done[0], done[0], dist=DIST)


def test_reward_normalizer_running_return_before_update() -> None:
    """The running returns exist only after the first update."""
    with pytest.raises(SpecError, match="before its first update"):
        _ = RewardNormalizer(gamma=0.9).running_return


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gamma": 1.5}, r"gamma must lie in \[0, 1\]"),
        ({"gamma": math.nan}, "gamma must be a finite float"),
        ({"gamma": 0.9, "clip": -1.0}, "clip must be > 0"),
        ({"gamma": 0.9, "epsilon": -1.0}, "epsilon must be >= 0"),
    ],
)
def test_reward_normalizer_config_errors(kwargs: dict[str, Any], message: str) -> None:
    """Invalid options raise ConfigError."""
    with pytest.raises(ConfigError, match=message):
        RewardNormalizer(**kwargs)


def test_reward_normalizer_state_round_trip() -> None:
    """Statistics and per-env running returns restore exactly."""
    norm = RewardNormalizer(gamma=0.95)
    generator = torch.Generator().manual_seed(3)
    done = torch.rand(5, 4, generator=generator) < 0.2
    norm.update(torch.randn(5, 4, generator=generator), done, ~done & done, dist=DIST)
    state = _roundtrip(norm.state_dict())
    assert set(state) == {
        "running_return",
        "return_stats.running_count",
        "return_stats.running_mean",
        "return_stats.running_var",
    }
    restored = RewardNormalizer(gamma=0.95)
    restored.load_state_dict(state)
    assert isinstance(restored, SupportsStateDict)
    for key, value in norm.state_dict().items():
        assert torch.equal(restored.state_dict()[key], value)
    assert torch.equal(restored.scale, norm.scale)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"running_return": torch.zeros(2, 2)}, r"shape \[num_envs\]"),
        ({"running_return": torch.zeros(3)}, r"shape \[3\], expected \[4\]"),
        ({"running_return": torch.tensor([math.nan] * 4)}, "NaN or infinity"),
        ({"return_stats.running_count": torch.tensor(-2)}, "must be >= 0"),
        ({"bogus": 1}, r"unknown keys \['bogus'\]"),
    ],
)
def test_reward_normalizer_load_errors(change: dict[str, Any], message: str) -> None:
    """Malformed states raise CheckpointError and change nothing."""
    norm = RewardNormalizer(gamma=0.9)
    done = torch.zeros(1, 4, dtype=torch.bool)
    norm.update(torch.ones(1, 4), done, done, dist=DIST)
    state = {**norm.state_dict(), **change}
    with pytest.raises(CheckpointError, match=message):
        norm.load_state_dict(state)
    assert norm.running_return.tolist() == [1.0] * 4
    assert norm.return_stats.count.item() == 4
