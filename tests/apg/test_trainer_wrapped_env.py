"""Tests for typedrl.apg._trainer on a wrapped env: its checkpoint holds the env's state."""

from pathlib import Path
from typing import Any

from tests.apg.test_trainer import RESUME, assert_same, full_state, point_mass, trainer_for
from typedrl.checkpoint import load_checkpoint
from typedrl.testing import DifferentiableVecEnvWrapper


def test_resume_on_a_wrapped_env_is_bit_exact(tmp_path: Path) -> None:
    """A run on a wrapped PointMass resumed from epoch_2 of 4 updates ends as the uninterrupted."""
    fields: dict[str, Any] = {**RESUME, "total_updates": 4}
    uninterrupted = trainer_for(
        DifferentiableVecEnvWrapper(point_mass(seed=11)),
        run_dir=tmp_path,
        options={"checkpoint_every_iterations": 2},
        **fields,
    )
    uninterrupted.train()
    checkpoint = tmp_path / "checkpoints" / "epoch_00000002.ckpt"
    # The env's state, under the keys of the unwrapped env's.
    saved = load_checkpoint(checkpoint).modules["collector.rank0"]
    assert saved["env"].keys() == point_mass().state_dict().keys()
    resumed = trainer_for(DifferentiableVecEnvWrapper(point_mass(seed=11)), **fields)
    resumed.load(checkpoint)
    resumed.train()
    assert_same(full_state(resumed), full_state(uninterrupted))
