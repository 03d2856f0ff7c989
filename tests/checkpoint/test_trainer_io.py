"""Tests for typedrl.checkpoint._trainer_io: a trainer's state saved, read and restored."""

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from typedrl.checkpoint import Checkpoint, capture_rng_state, load_checkpoint
from typedrl.checkpoint._state import Progress
from typedrl.checkpoint._trainer_io import (
    read_trainer_checkpoint,
    restore_trainer_state,
    save_trainer_state,
)
from typedrl.distributed import SingleProcess
from typedrl.errors import CheckpointError, ConfigError
from typedrl.seeding import derive_seed
from typedrl.testing import CounterState
from typedrl.training import GeneratorState, TrainerState

_DIST = SingleProcess()


class _Normalizer:
    """Rank-local state whose statistics are shared across ranks."""

    def __init__(self) -> None:
        self.mean = 0.0
        self.row_return = 0.0

    def state_dict(self) -> dict[str, Any]:
        return {"mean": self.mean, "row_return": self.row_return}

    def load_state_dict(self, state_dict: dict[str, Any], /) -> None:
        self.mean, self.row_return = state_dict["mean"], state_dict["row_return"]

    def load_shared_state_dict(self, state_dict: dict[str, Any], /) -> None:
        self.mean = state_dict["mean"]


def _state(*, weight: float, steps: int, sampler_seed: int = 0) -> TrainerState:
    policy = torch.nn.Linear(1, 1, bias=False)
    torch.nn.init.constant_(policy.weight, weight)
    return TrainerState(
        modules={"policy": policy},
        optimizers={"policy": torch.optim.SGD(policy.parameters(), lr=0.1)},
        rank_local={
            "collector": CounterState(steps=steps),
            "sampler": GeneratorState(torch.Generator().manual_seed(sampler_seed)),
        },
    )


def _save(path: Path | None, state: TrainerState, *, config: dict[str, Any]) -> Path | None:
    return save_trainer_state(
        path,
        lambda: state,
        dist=_DIST,
        kind="ppo",
        progress=Progress(iteration=7, env_steps=448, best_score=12.5),
        config=lambda: config,
        policy_factory=None,
        env_id="CartPole-v1",
    )


def _restore(checkpoint: Checkpoint, state: TrainerState, path: Path) -> Progress:
    return restore_trainer_state(
        checkpoint, state, file=path, dist=_DIST, owner="MyTrainer", seed=3
    )


def test_nothing_is_asked_or_written_without_a_path_on_one_rank() -> None:
    """A single-process save to ``None`` returns at once, without asking for the state."""

    def no_state() -> TrainerState:
        raise AssertionError("the state was asked for")

    written = save_trainer_state(
        None,
        no_state,
        dist=_DIST,
        kind="ppo",
        progress=Progress(iteration=0, env_steps=0, best_score=None),
        config=dict,
        policy_factory=None,
        env_id=None,
    )
    assert written is None


def test_a_saved_state_is_restored_with_progress_and_rng(tmp_path: Path) -> None:
    """Weights, rank-local state, counters, best score and the global RNG come back exactly."""
    saved = _state(weight=2.0, steps=5)
    path = _save(tmp_path / "last.ckpt", saved, config={"lr": 0.1})
    assert path == tmp_path / "last.ckpt"
    following = torch.rand(3)
    checkpoint = read_trainer_checkpoint(path, dist=_DIST, kind="ppo", mismatch=None)
    assert sorted(checkpoint.modules) == ["collector.rank0", "policy", "sampler.rank0"]
    assert checkpoint.counters == {"iteration": 7, "env_steps": 448}
    assert (checkpoint.config, checkpoint.env_id) == ({"lr": 0.1}, "CartPole-v1")
    restored = _state(weight=0.0, steps=0)
    progress = _restore(checkpoint, restored, path)
    assert progress == Progress(iteration=7, env_steps=448, best_score=12.5)
    assert restored.modules["policy"].state_dict()["weight"].item() == 2.0
    collector = restored.rank_local["collector"]
    assert isinstance(collector, CounterState)
    assert collector.steps == 5
    assert torch.equal(torch.rand(3), following)


def test_a_config_that_cannot_be_stored_fails_the_save(tmp_path: Path) -> None:
    """A config the checkpoint refuses raises (on every rank) and writes no file."""
    with pytest.raises(ConfigError, match=r"Checkpoint.config\['sizes'\] must be JSON-like"):
        _save(tmp_path / "last.ckpt", _state(weight=1.0, steps=0), config={"sizes": (1, 2)})
    assert not (tmp_path / "last.ckpt").exists()


def test_a_mismatch_on_rank_zero_stops_the_read(tmp_path: Path) -> None:
    """The reason ``mismatch`` gives is raised; ``None`` lets the checkpoint through."""
    path = _save(tmp_path / "last.ckpt", _state(weight=1.0, steps=0), config={"lr": 0.1})
    assert path is not None
    refusal = CheckpointError(f"{path}: saved with another config")
    with pytest.raises(CheckpointError, match="saved with another config"):
        read_trainer_checkpoint(path, dist=_DIST, kind="ppo", mismatch=lambda _: refusal)
    fits = read_trainer_checkpoint(path, dist=_DIST, kind="ppo", mismatch=lambda _: None)
    assert fits.counters == {"iteration": 7, "env_steps": 448}


def test_a_missing_or_foreign_file_is_refused(tmp_path: Path) -> None:
    """A file that is not there, or of another kind, raises naming it."""
    with pytest.raises(CheckpointError, match="does not exist"):
        read_trainer_checkpoint(tmp_path / "none.ckpt", dist=_DIST, kind="ppo", mismatch=None)
    path = _save(tmp_path / "last.ckpt", _state(weight=1.0, steps=0), config={})
    assert path is not None
    with pytest.raises(CheckpointError, match="apg"):
        read_trainer_checkpoint(path, dist=_DIST, kind="apg", mismatch=None)


def test_a_piece_without_saved_state_is_named(tmp_path: Path) -> None:
    """Restoring into a state with an object the checkpoint lacks names the group and object."""
    path = _save(tmp_path / "last.ckpt", _state(weight=1.0, steps=0), config={})
    assert path is not None
    checkpoint = load_checkpoint(path)
    larger = _state(weight=0.0, steps=0)
    larger = TrainerState(modules={**larger.modules, "critic": torch.nn.Linear(1, 1)})
    with pytest.raises(CheckpointError) as raised:
        _restore(checkpoint, larger, path)
    assert str(raised.value) == (
        f"{path}: no modules state for ['critic'] (it holds ['collector.rank0', 'policy', "
        "'sampler.rank0']); not a checkpoint of this MyTrainer's setup"
    )


def test_the_legacy_epoch_counter_resumes_the_iteration(tmp_path: Path) -> None:
    """A checkpoint counting ``epoch`` instead of ``iteration`` resumes at that iteration."""
    path = _save(tmp_path / "last.ckpt", _state(weight=1.0, steps=0), config={})
    assert path is not None
    checkpoint = replace(load_checkpoint(path), counters={"epoch": 4})
    progress = _restore(checkpoint, _state(weight=0.0, steps=0), path)
    assert (progress.iteration, progress.env_steps) == (4, 0)


def test_another_world_size_keeps_shared_state_and_rederives_streams(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Saved by two ranks, resumed by one: shared parts kept, generators re-seeded, a note."""
    saved = _state(weight=2.0, steps=5)
    normalizer = _Normalizer()
    normalizer.mean, normalizer.row_return = 1.5, 9.0
    saved = TrainerState(
        modules=saved.modules, rank_local={**saved.rank_local, "normalizer": normalizer}
    )
    path = _save(tmp_path / "last.ckpt", saved, config={})
    assert path is not None
    one_rank = load_checkpoint(path)
    two_ranks = replace(
        one_rank,
        rng=(capture_rng_state(), capture_rng_state()),
        metadata=replace(one_rank.metadata, world_size=2),
    )
    sampler = torch.Generator().manual_seed(99)
    restored_normalizer = _Normalizer()
    collector = CounterState(steps=0)
    restored = TrainerState(
        modules={"policy": torch.nn.Linear(1, 1, bias=False)},
        rank_local={
            "collector": collector,
            "sampler": GeneratorState(sampler),
            "normalizer": restored_normalizer,
        },
    )
    progress = _restore(two_ranks, restored, path)
    assert progress.iteration == 7
    assert (restored_normalizer.mean, restored_normalizer.row_return) == (1.5, 0.0)
    assert collector.steps == 0
    expected = torch.Generator().manual_seed(derive_seed(3, "sampler", rank=0, index=7))
    assert torch.equal(torch.rand(2, generator=sampler), torch.rand(2, generator=expected))
    first = torch.rand(2)
    torch.manual_seed(derive_seed(3, "init", rank=0, index=7))
    assert torch.equal(torch.rand(2), first)
    assert "world size changed 2 -> 1" in capsys.readouterr().err
