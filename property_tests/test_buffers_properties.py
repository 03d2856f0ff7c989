"""Property tests: the experience buffer stores any keys losslessly and names a missing write.

Also the minibatch plan: counts, sizes, index ranges and the coverage guarantee.
"""

import math
from collections import Counter
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from typedrl.buffers import (
    VALID_KEY,
    BufferKey,
    ExperienceBuffer,
    minibatch_count,
    minibatch_indices,
    validate_batch_plan,
)
from typedrl.errors import ConfigError, SpecError

_DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.uint8,
    torch.bool,
]
_FLOAT_KEY = "zz"
"""A float32 key every generated buffer has (generated names use only "a" to "c")."""


@dataclass(frozen=True)
class _Layout:
    num_envs: int
    num_steps: int
    specs: dict[BufferKey, tuple[tuple[int, ...], torch.dtype]]
    seed: int


def _parts(key: BufferKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else key


def _clash_free(keys: list[BufferKey]) -> list[BufferKey]:
    """Keep each key unless it equals, or is a nested prefix of, a kept key (or vice versa)."""
    kept: list[BufferKey] = []
    for key in keys:
        parts = _parts(key)
        if not any(_prefix_related(parts, _parts(other)) for other in kept):
            kept.append(key)
    return kept


def _prefix_related(first: tuple[str, ...], second: tuple[str, ...]) -> bool:
    shorter = min(len(first), len(second))
    return first[:shorter] == second[:shorter]


_names = st.text(alphabet="abc", min_size=1, max_size=2)
_keys: st.SearchStrategy[BufferKey] = st.one_of(_names, st.tuples(_names, _names))


@st.composite
def layouts(draw: st.DrawFn) -> _Layout:
    """Buffer geometry plus a clash-free set of keys with random per-row shapes and dtypes."""
    keys = _clash_free(draw(st.lists(_keys, max_size=6)))
    specs: dict[BufferKey, tuple[tuple[int, ...], torch.dtype]] = {
        key: (
            tuple(draw(st.lists(st.integers(0, 3), max_size=2))),
            draw(st.sampled_from(_DTYPES)),
        )
        for key in keys
    }
    specs[_FLOAT_KEY] = ((2,), torch.float32)
    return _Layout(
        num_envs=draw(st.integers(1, 4)),
        num_steps=draw(st.integers(1, 4)),
        specs=specs,
        seed=draw(st.integers(0, 2**31 - 1)),
    )


def _random_tensor(
    shape: tuple[int, ...], dtype: torch.dtype, generator: torch.Generator
) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.rand(shape, generator=generator) < 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator).to(dtype)
    return torch.randint(0, 100, shape, generator=generator).to(dtype)


def _all_specs(layout: _Layout) -> dict[BufferKey, tuple[tuple[int, ...], torch.dtype]]:
    return {VALID_KEY: ((), torch.bool), **layout.specs}


def _built(layout: _Layout) -> ExperienceBuffer:
    buffer = ExperienceBuffer(num_envs=layout.num_envs, num_steps=layout.num_steps, device="cpu")
    for key, (shape, dtype) in layout.specs.items():
        buffer.register_key(key, shape, dtype)
    return buffer


def _step_data(layout: _Layout, generator: torch.Generator) -> dict[BufferKey, torch.Tensor]:
    return {
        key: _random_tensor((layout.num_envs, *shape), dtype, generator)
        for key, (shape, dtype) in _all_specs(layout).items()
    }


@given(layout=layouts(), data=st.data())
def test_any_keys_fill_and_flatten_losslessly(layout: _Layout, data: st.DataObject) -> None:
    """Writes in any order and grouping come back bit for bit, time-major."""
    buffer = _built(layout)
    buffer.check_spec(_all_specs(layout))
    generator = torch.Generator().manual_seed(layout.seed)
    written = [_step_data(layout, generator) for _ in range(layout.num_steps)]
    writes = [
        (step, group)
        for step, entries in enumerate(written)
        for group in _groups(list(entries), data.draw(st.integers(1, len(entries))))
    ]
    for step, group in data.draw(st.permutations(writes)):
        buffer.write(step, {key: written[step][key] for key in group})
    flat = buffer.flatten()
    stacked = buffer.stacked()
    assert flat.batch_size == torch.Size([layout.num_steps * layout.num_envs])
    assert set(flat.keys(include_nested=True, leaves_only=True)) == set(_all_specs(layout))
    for key, (shape, dtype) in _all_specs(layout).items():
        assert flat[key].dtype == dtype
        assert flat[key].shape == (layout.num_steps * layout.num_envs, *shape)
        expected = torch.stack([step_data[key] for step_data in written])
        assert torch.equal(stacked[key], expected)
        assert torch.equal(flat[key], expected.reshape(layout.num_steps * layout.num_envs, *shape))


def _groups(keys: list[BufferKey], num_groups: int) -> list[list[BufferKey]]:
    """Split keys into ``num_groups`` non-empty consecutive groups."""
    size = math.ceil(len(keys) / num_groups)
    return [keys[i : i + size] for i in range(0, len(keys), size)]


@given(layout=layouts(), data=st.data())
def test_a_missing_write_is_named(layout: _Layout, data: st.DataObject) -> None:
    """A key left out at one step makes the epoch incomplete: the key and the step are named."""
    buffer = _built(layout)
    specs = _all_specs(layout)
    key = data.draw(st.sampled_from(sorted(specs, key=repr)))
    step = data.draw(st.integers(0, layout.num_steps - 1))
    generator = torch.Generator().manual_seed(layout.seed)
    for other_step in range(layout.num_steps):
        step_data = _step_data(layout, generator)
        if other_step == step:
            del step_data[key]
        buffer.write(other_step, step_data)
    with pytest.raises(SpecError) as error:
        buffer.check_complete()
    assert f"{key!r} at steps [{step}]" in str(error.value)


# ------------------------------------------------------------------- minibatches


@st.composite
def batch_plans(draw: st.DrawFn) -> tuple[int, int, int]:
    """(num_samples, batch_size, num_mini_epochs) with 1 <= batch_size <= num_samples."""
    num_samples = draw(st.integers(1, 60))
    return num_samples, draw(st.integers(1, num_samples)), draw(st.integers(1, 5))


@given(plan=batch_plans(), seed=st.integers(0, 2**31 - 1))
def test_minibatch_plan_invariants(plan: tuple[int, int, int], seed: int) -> None:
    """ceil(N*E/B) full batches of in-range int64 indices; each sample E or E+1 times."""
    num_samples, batch_size, epochs = plan
    batches = minibatch_indices(
        num_samples=num_samples,
        batch_size=batch_size,
        num_mini_epochs=epochs,
        generator=torch.Generator().manual_seed(seed),
    )
    count = math.ceil(num_samples * epochs / batch_size)
    assert len(batches) == count
    assert count == minibatch_count(
        num_samples=num_samples, batch_size=batch_size, num_mini_epochs=epochs
    )
    for index, batch in enumerate(batches):
        assert batch.dtype == torch.int64
        assert batch.shape == (batch_size,)
        assert int(batch.min()) >= 0
        assert int(batch.max()) < num_samples
        first, last = index * batch_size, (index + 1) * batch_size - 1
        if first // num_samples == last // num_samples:  # within one permutation
            assert len(set(batch.tolist())) == batch_size
    counts = Counter(torch.cat(batches).tolist())
    assert set(counts) == set(range(num_samples))
    assert set(counts.values()) <= {epochs, epochs + 1}
    surplus = sum(c - epochs for c in counts.values())
    assert surplus == count * batch_size - num_samples * epochs


@given(plan=batch_plans(), seed=st.integers(0, 2**31 - 1))
def test_minibatches_are_concatenated_permutations(plan: tuple[int, int, int], seed: int) -> None:
    """The batches are the generator's permutations, concatenated and cut into chunks."""
    num_samples, batch_size, epochs = plan
    batches = minibatch_indices(
        num_samples=num_samples,
        batch_size=batch_size,
        num_mini_epochs=epochs,
        generator=torch.Generator().manual_seed(seed),
    )
    reference = torch.Generator().manual_seed(seed)
    sequence = torch.cat(
        [torch.randperm(num_samples, generator=reference) for _ in range(epochs + 1)]
    )
    assert torch.equal(torch.cat(batches), sequence[: len(batches) * batch_size])


@given(
    num_envs=st.integers(1, 16),
    num_steps=st.integers(1, 16),
    epochs=st.integers(1, 4),
    batch_size=st.integers(1, 300),
)
def test_batch_plan_is_valid_exactly_when_the_batch_fits(
    num_envs: int, num_steps: int, epochs: int, batch_size: int
) -> None:
    """The per-rank plan matches minibatch_count, or names the numbers when the batch is too big."""
    kwargs = {
        "num_envs": num_envs,
        "num_steps": num_steps,
        "num_mini_epochs": epochs,
        "batch_size": batch_size,
    }
    if batch_size <= num_envs * num_steps:
        count = validate_batch_plan(**kwargs)
        assert count == minibatch_count(
            num_samples=num_envs * num_steps, batch_size=batch_size, num_mini_epochs=epochs
        )
        return
    with pytest.raises(ConfigError) as error:
        validate_batch_plan(**kwargs)
    message = str(error.value)
    assert f"batch_size ({batch_size})" in message
    assert (
        f"num_envs {num_envs} x num_steps {num_steps} = {num_envs * num_steps} per rank" in message
    )
