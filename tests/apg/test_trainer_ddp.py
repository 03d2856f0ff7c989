"""Tests for typedrl.apg._trainer under DDP: two gloo ranks, each stepping its own rows."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.apg.test_trainer import (
    Faulty,
    assert_same,
    full_state,
    obs_normalizer,
    point_mass,
    trainer_for,
)
from tests.multiprocess import run_two_ranks
from tests.training.test_fabric import launch_two_rank_fabric

ROWS = (2, 3)
SEGMENTED: dict[str, Any] = {
    "total_updates": 3,
    "segment_length": 4,
    "update_horizon": 8,
    "normalize_observations": True,
    "adjoint_max_norm": 5.0,
    "seed": 3,
}
COMPLETE: dict[str, Any] = {
    "total_updates": 2,
    "rollout_mode": "complete",
    "update_horizon": 5,
    "gradient_accumulation_steps": 2,
    "normalize_observations": True,
    "seed": 3,
}


def _summary(trainer: Any) -> dict[str, Any]:
    return {
        "state": full_state(trainer),
        "iteration": trainer.iteration,
        "env_steps": trainer.env_steps,
        "count": int(obs_normalizer(trainer).count),
        "skipped_nonfinite": trainer.last_metrics.get("train/skipped_nonfinite"),
    }


def _train_worker(rank: int, port: int, out_dir: str) -> None:
    fabric = launch_two_rank_fabric(rank, port)
    result: dict[str, Any] = {}
    try:
        for name, fields in (("segmented", SEGMENTED), ("complete", COMPLETE)):
            max_steps = 6 if name == "segmented" else 3
            env = point_mass(num_envs=ROWS[rank], seed=100 + rank, max_episode_steps=max_steps)
            trainer = trainer_for(env, fabric=fabric, **fields)
            trainer.train()
            result[name] = _summary(trainer)
    except Exception as error:
        result = {"error": f"{type(error).__name__}: {error}"}
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")


def _nan_worker(rank: int, port: int, out_dir: str) -> None:
    fabric = launch_two_rank_fabric(rank, port)
    result: dict[str, Any] = {}
    try:
        env = point_mass(num_envs=ROWS[rank], seed=100 + rank)
        # Rank 1 only: a NaN reward at global step 10, inside its second update.
        wrapped = Faulty(env, nan_at=[10] if rank == 1 else [])
        # No adjoint clipping: the clipper would zero the NaN rows of the action adjoint.
        fields = {**SEGMENTED, "adjoint_max_norm": None}
        trainer = trainer_for(wrapped, fabric=fabric, **fields)
        trainer.train()
        result = {"summary": _summary(trainer), "counters": trainer.algorithm.counters.state_dict()}
    except Exception as error:
        result = {"error": f"{type(error).__name__}: {error}"}
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")


def _results(out_dir: Path) -> Iterator[dict[str, Any]]:
    for rank in (0, 1):
        result: dict[str, Any] = torch.load(out_dir / f"rank{rank}.pt", weights_only=False)
        assert "error" not in result, f"rank {rank}: {result['error']}"
        yield result


@pytest.mark.distributed
def test_ddp_ranks_with_their_own_rows_train_identical_weights(tmp_path: Path) -> None:
    """Two ranks, 2 and 3 PointMass rows of their own seeds: identical state after every mode."""
    run_two_ranks(_train_worker, str(tmp_path))
    first, second = _results(tmp_path)
    for name, updates, steps, alive in (("segmented", 3, 8, 8), ("complete", 2, 10, 3 * 2)):
        a, b = first[name], second[name]
        total_rows = sum(ROWS)
        assert a["iteration"] == b["iteration"] == updates
        assert a["env_steps"] == b["env_steps"] == updates * steps * total_rows
        # Normaliser statistics are pooled over both ranks' alive rows.
        assert a["count"] == b["count"] == updates * alive * total_rows
        assert a["state"]["counters"] == {"applied": updates, "skipped": 0}
        assert_same(a["state"], b["state"], name)


@pytest.mark.distributed
def test_a_nan_on_one_rank_skips_the_update_on_both(tmp_path: Path) -> None:
    """A NaN reward on rank 1 only skips that update on both ranks; weights stay identical."""
    run_two_ranks(_nan_worker, str(tmp_path))
    first, second = _results(tmp_path)
    for result in (first, second):
        assert result["counters"] == {"applied": 2, "skipped": 1}
        # Only the two applied updates reached the normaliser, on both ranks alike.
        assert result["summary"]["count"] == 2 * 8 * sum(ROWS)
    assert_same(first["summary"]["state"], second["summary"]["state"])
