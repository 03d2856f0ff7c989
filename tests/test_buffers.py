"""Tests for typedrl.buffers: ExperienceBuffer and the minibatch plan."""

import math
from collections import Counter

import pytest
import torch
from jaxtyping import TypeCheckError
from tensordict import TensorDict

from typedrl.buffers import (
    VALID_KEY,
    ExperienceBuffer,
    KeySpec,
    minibatch_count,
    minibatch_indices,
    validate_batch_plan,
)
from typedrl.errors import ConfigError, SpecError
from typedrl.testing import CountingVecEnv, LinearActorCritic

NUM_ENVS = 3
NUM_STEPS = 4


def _buffer(num_envs: int = NUM_ENVS, num_steps: int = NUM_STEPS) -> ExperienceBuffer:
    buffer = ExperienceBuffer(num_envs=num_envs, num_steps=num_steps, device="cpu")
    buffer.register_key("reward", (), torch.float32)
    buffer.register_key(("obs", "policy"), (2,), torch.float32)
    return buffer


def _step_data(step: int, num_envs: int = NUM_ENVS) -> dict[str | tuple[str, ...], torch.Tensor]:
    return {
        "reward": torch.full((num_envs,), float(step)),
        ("obs", "policy"): torch.arange(num_envs * 2.0).reshape(num_envs, 2) + 10 * step,
        VALID_KEY: torch.ones(num_envs, dtype=torch.bool),
    }


def _fill(buffer: ExperienceBuffer) -> None:
    for step in range(buffer.num_steps):
        buffer.write(step, _step_data(step, buffer.num_envs))


# ------------------------------------------------------------------ construction


def test_buffer_registers_valid_at_construction() -> None:
    """A new buffer has exactly the bool "valid" key and its geometry."""
    buffer = ExperienceBuffer(num_envs=2, num_steps=5, device="cpu")
    assert buffer.keys == ("valid",)
    assert buffer.specs == {"valid": KeySpec((), torch.bool)}
    assert (buffer.num_envs, buffer.num_steps, buffer.num_samples) == (2, 5, 10)
    assert buffer.device == torch.device("cpu")
    assert "keys=['valid']" in repr(buffer)


@pytest.mark.usefixtures("without_runtime_checks")
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_envs": 0, "num_steps": 2}, "num_envs must be a positive int, got 0"),
        ({"num_envs": 2, "num_steps": True}, "num_steps must be a positive int, got True"),
        ({"num_envs": 2, "num_steps": 2.0}, "num_steps must be a positive int"),
    ],
)
def test_buffer_rejects_bad_geometry(kwargs: dict[str, object], message: str) -> None:
    """Without runtime checks, non-positive or non-int sizes raise ConfigError with the value."""
    with pytest.raises(ConfigError, match=message):
        ExperienceBuffer(device="cpu", **kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------ registration


def test_register_key_shapes_and_nested_keys() -> None:
    """Keys are stored per row; one-element tuples are the same key as a string."""
    buffer = _buffer()
    buffer.register_key(("action",), [1], torch.float64)
    assert buffer.keys == ("valid", "reward", ("obs", "policy"), "action")
    assert buffer.specs["action"] == KeySpec((1,), torch.float64)
    assert buffer.specs[("obs", "policy")] == ((2,), torch.float32)


def test_register_from_registers_every_leaf() -> None:
    """Every leaf of a TensorDict is registered with its per-row shape and dtype."""
    buffer = ExperienceBuffer(num_envs=2, num_steps=1, device="cpu")
    obs = TensorDict(
        {"policy": torch.zeros(2, 5), "critic": {"state": torch.zeros(2, 3, 4, dtype=torch.int8)}},
        batch_size=[2],
    )
    keys = buffer.register_from(obs, prefix="obs")
    assert keys == (("obs", "policy"), ("obs", "critic", "state"))
    assert buffer.specs[("obs", "critic", "state")] == KeySpec((3, 4), torch.int8)
    outputs = TensorDict({"action": torch.zeros(2, 1), "value": torch.zeros(2)}, [2])
    assert buffer.register_from(outputs) == ("action", "value")


def test_check_spec_accepts_matching_declarations() -> None:
    """Declared keys with the registered shape and dtype pass; extra registered keys are fine."""
    buffer = _buffer()
    buffer.check_spec(
        {"reward": ((), torch.float32), ("obs", "policy"): KeySpec((2,), torch.float32)}
    )
    buffer.check_spec({})


def test_check_spec_reports_every_mismatch() -> None:
    """Missing keys and shape or dtype mismatches are listed with expected and got."""
    buffer = _buffer()
    with pytest.raises(SpecError) as error:
        buffer.check_spec(
            {
                "reward": ((), torch.float64),
                ("obs", "policy"): ([3], torch.float32),
                "hidden": ((8,), torch.float32),
            }
        )
    message = str(error.value)
    assert (
        "key 'reward': expected shape [], dtype torch.float64, got shape [], dtype torch.float32"
        in message
    )
    assert (
        "key ('obs', 'policy'): expected shape [3], dtype torch.float32, got shape [2]" in message
    )
    assert "key 'hidden' is not registered (expected shape [8], dtype torch.float32)" in message
    assert "Registered keys: ['valid', 'reward', ('obs', 'policy')]" in message


# ------------------------------------------------------------------------ writing


def test_write_then_flatten_is_time_major() -> None:
    """Sample t * num_envs + i of the flattened epoch is step t of env i."""
    buffer = _buffer()
    _fill(buffer)
    flat = buffer.flatten()
    assert flat.batch_size == torch.Size([NUM_STEPS * NUM_ENVS])
    for step in range(NUM_STEPS):
        for env in range(NUM_ENVS):
            sample = step * NUM_ENVS + env
            expected = _step_data(step)
            assert flat["reward"][sample] == expected["reward"][env]
            assert torch.equal(flat["obs", "policy"][sample], expected["obs", "policy"][env])
    assert flat["valid"].dtype == torch.bool
    assert set(flat.keys(include_nested=True, leaves_only=True)) == set(buffer.keys)


def test_stacked_keeps_steps_and_envs_apart() -> None:
    """stacked() is [num_steps, num_envs]; adding keys to it leaves the buffer unchanged."""
    buffer = _buffer()
    _fill(buffer)
    data = buffer.stacked()
    assert data.batch_size == torch.Size([NUM_STEPS, NUM_ENVS])
    assert torch.equal(data["reward"][2], torch.full((NUM_ENVS,), 2.0))
    data["advantage"] = torch.zeros(NUM_STEPS, NUM_ENVS)
    data["obs", "extra"] = torch.zeros(NUM_STEPS, NUM_ENVS)
    assert "advantage" not in buffer.stacked()
    assert ("obs", "extra") not in buffer.stacked().keys(include_nested=True)
    assert torch.equal(data.reshape(-1)["reward"], buffer.flatten()["reward"])


def test_write_accepts_tensordicts_with_prefix() -> None:
    """Writing a TensorDict under a prefix fills the nested keys registered with it."""
    buffer = ExperienceBuffer(num_envs=2, num_steps=1, device="cpu")
    obs = TensorDict({"policy": torch.ones(2, 3)}, batch_size=[2])
    buffer.register_from(obs, prefix=("obs",))
    buffer.write(0, obs, prefix="obs")
    buffer.write(0, TensorDict({"valid": torch.ones(2, dtype=torch.bool)}, [2]))
    assert torch.equal(buffer.flatten()["obs"]["policy"], torch.ones(2, 3))


def test_check_complete_names_missing_steps() -> None:
    """Missing writes are reported per key with their steps; reading is refused."""
    buffer = _buffer()
    for step in (0, 2):
        buffer.write(step, _step_data(step))
    buffer.write(1, {"reward": torch.zeros(NUM_ENVS)})
    with pytest.raises(SpecError) as error:
        buffer.check_complete()
    message = str(error.value)
    assert "'reward' at steps [3] (1 of 4)" in message
    assert "('obs', 'policy') at steps [1, 3] (2 of 4)" in message
    with pytest.raises(SpecError, match="the epoch is incomplete"):
        buffer.flatten()
    with pytest.raises(SpecError, match="the epoch is incomplete"):
        buffer.stacked()


def test_check_complete_shortens_long_lists() -> None:
    """Only the first missing steps are listed."""
    buffer = ExperienceBuffer(num_envs=1, num_steps=20, device="cpu")
    with pytest.raises(
        SpecError, match=r"'valid' at steps \[0, 1, 2, 3, 4, 5, 6, 7, \.\.\.\] \(20 of 20\)"
    ):
        buffer.check_complete()


def test_reset_epoch_allows_the_next_epoch() -> None:
    """After reset_epoch every key must be written again, and may be."""
    buffer = _buffer()
    _fill(buffer)
    buffer.check_complete()
    buffer.reset_epoch()
    with pytest.raises(SpecError, match="incomplete"):
        buffer.check_complete()
    for step in range(NUM_STEPS):
        data = _step_data(step)
        data["reward"] = data["reward"] + 100.0
        buffer.write(step, data)
    assert buffer.flatten()["reward"].min().item() == 100.0


def test_collects_a_rollout_from_an_env_and_a_policy() -> None:
    """A realistic collection loop fills the buffer."""
    env = CountingVecEnv(num_envs=2, terminate_after=[2, 3], truncate_after=4)
    policy = LinearActorCritic(obs_dim=3, act_dim=1)
    buffer = ExperienceBuffer(num_envs=2, num_steps=5, device="cpu")
    obs, _ = env.reset(seed=0)
    buffer.register_from(obs, prefix="obs")
    with torch.no_grad():
        buffer.register_from(policy.act(obs))
    buffer.register_key("reward", (), torch.float32)
    buffer.register_key("terminated", (), torch.bool)
    buffer.check_spec({"action": ((1,), torch.float32), "value": ((), torch.float32)})
    for step in range(buffer.num_steps):
        with torch.no_grad():
            out = policy.act(obs)
        result = env.step(out["action"])
        buffer.write(step, obs, prefix="obs")
        buffer.write(step, out)
        buffer.write(
            step,
            {"reward": result.reward, "terminated": result.terminated, "valid": result.valid},
        )
        obs = result.obs
    flat = buffer.flatten()
    assert flat["obs", "obs"].shape == (10, 3)
    # Time-major: (step 0, env 0), (step 0, env 1), (step 1, env 0), ...
    expected = [False, False, True, False, False, True, True, False, False, False]
    assert flat["terminated"].tolist() == expected


# -------------------------------------------------------------------- minibatches


@pytest.mark.parametrize(
    ("num_samples", "batch_size", "num_mini_epochs", "expected"),
    [(10, 5, 2, 4), (10, 4, 3, 8), (10, 10, 1, 1), (7, 3, 1, 3), (1, 1, 5, 5), (12, 5, 4, 10)],
)
def test_minibatch_count_is_the_ceiling(
    num_samples: int, batch_size: int, num_mini_epochs: int, expected: int
) -> None:
    """The count is ceil(N * E / B)."""
    count = minibatch_count(
        num_samples=num_samples, batch_size=batch_size, num_mini_epochs=num_mini_epochs
    )
    assert count == expected == math.ceil(num_samples * num_mini_epochs / batch_size)


@pytest.mark.usefixtures("without_runtime_checks")
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"num_samples": 0, "batch_size": 1, "num_mini_epochs": 1},
            "num_samples must be a positive int, got 0",
        ),
        (
            {"num_samples": 4, "batch_size": 0, "num_mini_epochs": 1},
            "batch_size must be a positive int, got 0",
        ),
        (
            {"num_samples": 4, "batch_size": 2, "num_mini_epochs": 0},
            "num_mini_epochs must be a positive int",
        ),
        (
            {"num_samples": 4, "batch_size": 2.0, "num_mini_epochs": 1},
            "batch_size must be a positive int",
        ),
        (
            {"num_samples": 4, "batch_size": 5, "num_mini_epochs": 3},
            r"batch_size \(5\) must be <= the number of samples \(num_samples = 4\)",
        ),
    ],
)
def test_minibatch_count_rejects_impossible_plans(kwargs: dict[str, object], message: str) -> None:
    """Non-positive sizes and batches larger than the data raise ConfigError with the numbers."""
    with pytest.raises(ConfigError, match=message):
        minibatch_count(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=message):
        minibatch_indices(**kwargs, generator=torch.Generator())  # type: ignore[arg-type]


def test_validate_batch_plan_counts_per_rank() -> None:
    """The per-rank count uses num_envs * num_steps samples."""
    assert validate_batch_plan(num_envs=4, num_steps=8, num_mini_epochs=3, batch_size=10) == 10


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"num_envs": 4, "num_steps": 8, "num_mini_epochs": 2, "batch_size": 33},
            r"batch_size \(33\) must be <= the number of samples "
            r"\(num_envs 4 x num_steps 8 = 32 per rank\)",
        ),
        (
            {"num_envs": 0, "num_steps": 8, "num_mini_epochs": 2, "batch_size": 4},
            "validate_batch_plan.num_envs must be a positive int, got 0",
        ),
        (
            {"num_envs": 4, "num_steps": -1, "num_mini_epochs": 2, "batch_size": 4},
            "num_steps must be a positive int, got -1",
        ),
    ],
)
def test_validate_batch_plan_rejects_impossible_plans(
    kwargs: dict[str, object], message: str
) -> None:
    """ConfigError names the numbers and says they are per rank."""
    with pytest.raises(ConfigError, match=message):
        validate_batch_plan(**kwargs)  # type: ignore[arg-type]


def test_minibatch_indices_follow_the_wrap_around_rule() -> None:
    """Permutations are concatenated, cut into chunks and the last chunk topped up."""
    batches = minibatch_indices(
        num_samples=5, batch_size=3, num_mini_epochs=2, generator=torch.Generator().manual_seed(3)
    )
    reference = torch.Generator().manual_seed(3)
    permutations = [torch.randperm(5, generator=reference) for _ in range(3)]
    expected = torch.cat(permutations)[:12].view(4, 3)
    assert len(batches) == 4
    assert all(batch.dtype == torch.int64 and batch.shape == (3,) for batch in batches)
    assert torch.equal(torch.stack(batches), expected)


def test_minibatch_indices_cover_every_sample() -> None:
    """Every sample appears E or E + 1 times; the surplus equals count * B - N * E."""
    batches = minibatch_indices(
        num_samples=7, batch_size=4, num_mini_epochs=3, generator=torch.Generator().manual_seed(0)
    )
    counts = Counter(torch.cat(batches).tolist())
    assert set(counts) == set(range(7))
    assert set(counts.values()) <= {3, 4}
    assert sum(c - 3 for c in counts.values()) == 6 * 4 - 7 * 3


def test_minibatch_indices_are_reproducible_and_reshuffled() -> None:
    """The same seed gives the same batches; mini-epochs use fresh permutations."""

    def draw(seed: int) -> torch.Tensor:
        batches = minibatch_indices(
            num_samples=64,
            batch_size=64,
            num_mini_epochs=2,
            generator=torch.Generator().manual_seed(seed),
        )
        return torch.stack(batches)

    assert torch.equal(draw(1), draw(1))
    first, second = draw(1)
    assert not torch.equal(first, second)
    assert torch.equal(first.sort().values, torch.arange(64))


# ----------------------------------------------------------- runtime shape checks


def test_runtime_checks_refuse_arguments_off_their_annotations() -> None:
    """Under the suite's jaxtyping checks, a wrongly typed argument is refused by name."""
    buffer = _buffer()
    with pytest.raises(TypeCheckError, match="parameter 'num_steps'"):
        ExperienceBuffer(num_envs=2, num_steps=2.0, device="cpu")  # type: ignore[arg-type]
    with pytest.raises(TypeCheckError, match="parameter 'key'"):
        buffer.register_key(3, (), torch.float32)  # type: ignore[arg-type]
    with pytest.raises(TypeCheckError, match="parameter 'data'"):
        buffer.register_from({"a": torch.zeros(NUM_ENVS)})  # type: ignore[arg-type]
    with pytest.raises(TypeCheckError, match="parameter 'step'"):
        buffer.write(1.0, {"reward": torch.zeros(NUM_ENVS)})  # type: ignore[arg-type]
    with pytest.raises(TypeCheckError, match="parameter 'data'"):
        buffer.write(0, [torch.zeros(NUM_ENVS)])  # type: ignore[arg-type]
    with pytest.raises(TypeCheckError, match="parameter 'generator'"):
        minibatch_indices(num_samples=4, batch_size=2, num_mini_epochs=1, generator=0)  # type: ignore[arg-type]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_buffer_writes_without_host_sync() -> None:
    """On CUDA the device index is resolved and writes never synchronise with the host."""
    buffer = ExperienceBuffer(num_envs=NUM_ENVS, num_steps=NUM_STEPS, device="cuda")
    assert buffer.device == torch.device("cuda", torch.cuda.current_device())
    buffer.register_key("reward", (), torch.float32)
    data = [
        {
            "reward": torch.randn(NUM_ENVS, device="cuda"),
            "valid": torch.ones(NUM_ENVS, dtype=torch.bool, device="cuda"),
        }
        for _ in range(NUM_STEPS)
    ]
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for step, entries in enumerate(data):
            buffer.write(step, entries)
        flat = buffer.flatten()
        generator = torch.Generator(device="cuda").manual_seed(0)
        batches = minibatch_indices(
            num_samples=buffer.num_samples, batch_size=5, num_mini_epochs=2, generator=generator
        )
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.equal(flat["reward"], torch.stack([d["reward"] for d in data]).reshape(-1))
    assert all(batch.device == buffer.device for batch in batches)
