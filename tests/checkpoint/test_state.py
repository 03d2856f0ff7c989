"""Tests for typedrl.checkpoint._state: TrainerState, GeneratorState and Counters."""

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from typedrl.checkpoint import load_into
from typedrl.errors import CheckpointError, ConfigError
from typedrl.testing import CounterState
from typedrl.training import Counters, GeneratorState, TrainerState

_GROUPS = ("modules", "optimizers", "schedulers", "rank_local")


def _policy() -> nn.Module:
    return nn.Linear(2, 1)


def test_every_group_holds_checkpointable_objects_by_name() -> None:
    """Modules, optimizers, schedulers and rank-local state of the usual kinds are accepted."""
    policy = _policy()
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    sampler = GeneratorState(torch.Generator())
    state = TrainerState(
        modules={"policy": policy, "counter": CounterState()},
        optimizers={"policy": optimizer},
        schedulers={"policy": scheduler},
        rank_local={"sampler": sampler},
    )
    assert state.modules["policy"] is policy
    assert state.optimizers["policy"] is optimizer
    assert state.schedulers["policy"] is scheduler
    assert state.rank_local["sampler"] is sampler


def test_groups_default_to_empty_and_are_read_only_copies() -> None:
    """Omitted groups are empty; every group is a read-only copy of the given mapping."""
    modules: dict[str, Any] = {"policy": _policy()}
    state = TrainerState(modules=modules)
    assert (dict(state.optimizers), dict(state.schedulers), dict(state.rank_local)) == ({}, {}, {})
    modules["critic"] = _policy()
    assert sorted(state.modules) == ["policy"]
    with pytest.raises(TypeError):
        state.modules["critic"] = _policy()  # type: ignore[index]


def test_the_policy_is_required() -> None:
    """modules without "policy" raises ConfigError listing the names given."""
    with pytest.raises(ConfigError, match=r"under 'policy', got \['actor', 'critic'\]"):
        TrainerState(modules={"actor": _policy(), "critic": _policy()})
    with pytest.raises(ConfigError, match=r"under 'policy', got \[\]"):
        TrainerState(modules={})


@pytest.mark.parametrize("group", _GROUPS)
@pytest.mark.parametrize("key", ["", "policy.rank0", "a.b"])
def test_bad_keys_are_refused(group: str, key: str) -> None:
    """Keys must be non-empty str without '.' (the rank suffix separator)."""
    groups: dict[str, Any] = {"modules": {"policy": _policy()}}
    groups[group] = {**groups.get(group, {}), key: CounterState()}
    with pytest.raises(ConfigError, match=rf"TrainerState\.{group} keys must be non-empty str"):
        TrainerState(**groups)


def test_generator_state_round_trip() -> None:
    """A restored generator repeats the draws made after its state was saved."""
    generator = torch.Generator().manual_seed(123)
    torch.rand(5, generator=generator)
    holder = GeneratorState(generator)
    saved = holder.state_dict()
    assert sorted(saved) == ["generator"]
    assert saved["generator"].dtype == torch.uint8
    first = torch.rand(4, generator=generator)
    holder.load_state_dict(saved)
    assert torch.equal(torch.rand(4, generator=generator), first)


def test_generator_state_restores_into_another_generator() -> None:
    """The state of one generator, loaded into another, makes it draw the same numbers."""
    source = torch.Generator().manual_seed(7)
    target = GeneratorState(torch.Generator().manual_seed(8))
    target.load_state_dict(GeneratorState(source).state_dict())
    assert torch.equal(torch.rand(3, generator=target.generator), torch.rand(3, generator=source))


def test_generator_state_survives_a_checkpoint_file(tmp_path: Path) -> None:
    """The state dict saved with torch.save and read with weights_only=True restores the stream."""
    generator = torch.Generator().manual_seed(11)
    path = tmp_path / "state.pt"
    torch.save(GeneratorState(generator).state_dict(), path)
    expected = torch.rand(3, generator=generator)
    restored = GeneratorState(torch.Generator())
    restored.load_state_dict(torch.load(path, weights_only=True))
    assert torch.equal(torch.rand(3, generator=restored.generator), expected)


@pytest.mark.parametrize(
    "state",
    [
        {},
        {"state": torch.zeros(4, dtype=torch.uint8)},
        {"generator": torch.zeros(4)},
        {"generator": [1, 2, 3]},
        {"generator": None},
    ],
)
def test_generator_state_refuses_a_bad_state(state: dict[str, Any]) -> None:
    """A state without a uint8 "generator" tensor raises ConfigError listing the keys given."""
    holder = GeneratorState(torch.Generator().manual_seed(1))
    before = holder.generator.get_state()
    with pytest.raises(
        ConfigError, match=r"GeneratorState expects \{'generator': <uint8 tensor>\}"
    ):
        holder.load_state_dict(state)
    assert torch.equal(holder.generator.get_state(), before)


def test_a_bad_generator_state_in_a_checkpoint_names_the_component(tmp_path: Path) -> None:
    """Through load_into (the trainer's resume path) the error names the component and file."""
    holder = GeneratorState(torch.Generator())
    path = tmp_path / "last.ckpt"
    with pytest.raises(CheckpointError, match=r"cannot restore rank_local\['sampler'\]"):
        load_into(holder, {}, name="rank_local['sampler']", path=path)


def test_counters_round_trip_and_refuse_other_names() -> None:
    """Counters save and restore by name; a saved state with other names raises ConfigError."""
    counters = Counters("applied", "skipped")
    counters["applied"] += 2
    restored = Counters("applied", "skipped")
    restored.load_state_dict(counters.state_dict())
    assert (restored["applied"], restored["skipped"]) == (2, 0)
    with pytest.raises(ConfigError, match="expects"):
        Counters("applied").load_state_dict(counters.state_dict())
