"""Property tests: a checkpoint restores everything exactly; configs follow one JSON rule."""

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from typedrl.checkpoint import Checkpoint, capture_rng_state, load_checkpoint, save_checkpoint
from typedrl.errors import ConfigError
from typedrl.ppo import PPOConfig

_INT64 = st.integers(-(2**63), 2**63 - 1)
_FINITE = st.floats(allow_nan=False, allow_infinity=False)
_NAMES = st.text(min_size=1, max_size=6)

json_leaves = st.one_of(st.none(), st.booleans(), _INT64, _FINITE, st.text(max_size=6))
"""JSON scalars (finite floats, so that equality is meaningful)."""

json_values = st.recursive(
    json_leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(_NAMES, children, max_size=3)
    ),
    max_leaves=12,
)
"""Nested JSON-like values."""

configs = st.dictionaries(_NAMES, json_values, max_size=5)
"""Configs: str-keyed dicts of JSON-like values."""

counters = st.dictionaries(_NAMES, st.one_of(_INT64, _FINITE), max_size=5)
"""Counters: int64-range ints and finite floats."""

_DTYPES = {
    torch.float32: st.floats(width=32),
    torch.float64: st.floats(),
    torch.int64: _INT64,
    torch.bool: st.booleans(),
}


@st.composite
def tensors(draw: st.DrawFn) -> torch.Tensor:
    """A tensor of a checkpointed dtype and random shape, NaN and infinities included."""
    dtype = draw(st.sampled_from(list(_DTYPES)))
    shape = draw(st.lists(st.integers(0, 3), max_size=3))
    values = draw(st.lists(_DTYPES[dtype], min_size=math.prod(shape), max_size=math.prod(shape)))
    return torch.tensor(values, dtype=dtype).reshape(shape)


state_dicts = st.dictionaries(_NAMES, tensors(), max_size=4)
"""Flat state dicts of tensors."""

non_json_leaves = st.one_of(
    st.tuples(st.integers()),
    st.builds(np.float64, _FINITE),
    st.builds(np.int64, st.integers(-(2**63), 2**63 - 1)),
    st.builds(np.bool_, st.booleans()),
    st.sets(st.integers(), max_size=2),
    st.binary(max_size=3),
    st.builds(torch.zeros, st.integers(0, 2)),
)
"""Values a config must refuse."""


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """Integer view of floating tensors, so that NaN payloads and -0.0 compare exactly."""
    if tensor.dtype == torch.float32:
        return tensor.view(torch.int32)
    if tensor.dtype == torch.float64:
        return tensor.view(torch.int64)
    return tensor


def _assert_json_equal(left: object, right: object) -> None:
    assert type(left) is type(right)
    if isinstance(left, dict):
        assert isinstance(right, dict)
        assert list(left) == list(right)
        for key in left:
            _assert_json_equal(left[key], right[key])
    elif isinstance(left, list):
        assert isinstance(right, list)
        assert len(left) == len(right)
        for a, b in zip(left, right, strict=True):
            _assert_json_equal(a, b)
    else:
        assert left == right


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    config=configs,
    counter_values=counters,
    policy=state_dicts,
    normalizer=state_dicts,
    env_id=st.none() | st.text(max_size=12),
)
def test_save_load_restores_everything_exactly(
    tmp_path: Path,
    *,
    config: dict[str, Any],
    counter_values: dict[str, int | float],
    policy: dict[str, torch.Tensor],
    normalizer: dict[str, torch.Tensor],
    env_id: str | None,
) -> None:
    """Every tensor is bit-equal; counters, config and env id equal and of the same type."""
    original = Checkpoint(
        kind="apg",
        env_id=env_id,
        modules={"policy": policy, "observation_normalizer": normalizer},
        counters=counter_values,
        config=config,
        rng=(capture_rng_state(),),
    )
    loaded = load_checkpoint(save_checkpoint(tmp_path / "last.ckpt", original))
    for name, module in original.modules.items():
        restored = loaded.modules[name]
        assert list(restored) == list(module)
        for key, tensor in module.items():
            assert restored[key].dtype == tensor.dtype
            assert restored[key].shape == tensor.shape
            assert torch.equal(_bits(restored[key]), _bits(tensor))
    _assert_json_equal(loaded.counters, original.counters)
    _assert_json_equal(loaded.config, original.config)
    assert loaded.env_id == env_id


@given(config=configs, bad=non_json_leaves, data=st.data())
def test_any_non_json_value_in_a_config_is_refused(
    config: dict[str, Any], bad: object, data: st.DataObject
) -> None:
    """A non-JSON value anywhere in a config raises ConfigError naming its path."""
    path = data.draw(st.lists(_NAMES, min_size=1, max_size=3))
    node = config
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[path[-1]] = bad
    expected = "Checkpoint.config" + "".join(f"[{key!r}]" for key in path)
    with pytest.raises(ConfigError) as error:
        Checkpoint(kind="ppo", modules={"policy": {}}, config=config)
    assert str(error.value).startswith(f"{expected} must be JSON-like")


def _refusal(build: Callable[[], object]) -> str | None:
    try:
        build()
    except ConfigError as error:
        return str(error)
    return None


@given(extra=st.one_of(configs, st.dictionaries(_NAMES, non_json_leaves, min_size=1, max_size=2)))
def test_config_and_checkpoint_apply_one_json_rule(extra: dict[str, Any]) -> None:
    """PPOConfig.extra is refused exactly when a checkpoint would refuse it, with one message."""
    config_error = _refusal(lambda: PPOConfig(extra=extra))
    checkpoint_error = _refusal(
        lambda: Checkpoint(
            kind="ppo", modules={"policy": {}}, config=extra, rng=(capture_rng_state(),)
        )
    )
    if config_error is None or checkpoint_error is None:
        assert config_error is None
        assert checkpoint_error is None
    else:
        assert config_error.removeprefix("PPOConfig.extra") == checkpoint_error.removeprefix(
            "Checkpoint.config"
        )
