"""Tests for typedrl.apg._trainer with a broken env: it stops or says so, never trains silently."""

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.apg.broken_envs import DetachedReward, NaNReward, SingularReward, point_mass
from tests.loggers import RecordingLogger
from typedrl.apg import (
    APGConfig,
    DifferentiableAlgorithm,
    DifferentiableTrainer,
    DifferentiableTrainerConfig,
)
from typedrl.cli import main
from typedrl.errors import EnvContractError, NonFiniteError
from typedrl.training import SUMMARY_FILE, RunOptions

ZERO_GRADIENT = (
    r"APG: the policy gradient was exactly 0 on each of the first 3 updates, so training can "
    r"never change the policy"
)


def trainer_for(
    env: Any,
    *,
    run_dir: Path | None = None,
    logger: RecordingLogger | None = None,
    algorithm: dict[str, Any] | None = None,
    **config: Any,
) -> DifferentiableTrainer:
    """A small APG trainer (8-wide policy, 4-step segments) on ``env``."""
    fields: dict[str, Any] = {"hidden": (8,), "segment_length": 4, "total_updates": 6, **config}
    return DifferentiableTrainer(
        env=env,
        config=DifferentiableTrainerConfig(**fields, algorithm=APGConfig(**(algorithm or {}))),
        options=RunOptions(
            run_dir=run_dir, progress=False, loggers=[logger] if logger is not None else []
        ),
    )


# ---------------------------------------------------------------- a detached reward


def test_a_detached_reward_stops_training_at_the_third_update() -> None:
    """Zero gradient on updates 0-2: EnvContractError naming the cause and check-env."""
    trainer = trainer_for(DetachedReward(point_mass()))
    with pytest.raises(EnvContractError, match=ZERO_GRADIENT) as raised:
        trainer.train()
    message = str(raised.value)
    assert "reward (or observation) is not connected to the action" in message
    assert "typedrl check-env" in message
    assert trainer.iteration == 2
    assert trainer.algorithm.counters.state_dict() == {"applied": 2, "skipped": 0}
    assert isinstance(trainer.algorithm, DifferentiableAlgorithm)
    assert not trainer.algorithm.updating


@pytest.mark.parametrize(
    "detached",
    [range(4), range(4, 8), range(12, 24)],
    ids=["first-update", "second-update", "after-the-first-three"],
)
def test_a_zero_gradient_on_some_updates_does_not_stop_a_run(detached: range) -> None:
    """Only a gradient that is zero on each of the first three updates stops the run."""
    logger = RecordingLogger()
    trainer_for(DetachedReward(point_mass(), steps=detached), logger=logger).train()
    norms = [record["train/grad_norm"] for record in logger.records]
    assert len(norms) == 6
    zero = [index for index, norm in enumerate(norms) if norm == 0.0]
    assert zero == [step // 4 for step in detached[::4]]


def test_the_command_line_says_it_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`typedrl train module:factory --algo apg` on a detached reward: one line, exit 1."""
    argv = [
        "train",
        "tests.apg.broken_envs:detached_point_mass",
        "--algo",
        "apg",
        "--total-timesteps",
        "4096",
        "--num-envs",
        "2",
        "--run-dir",
        str(tmp_path / "run"),
        "--no-progress",
        "--set",
        "segment_length=4",
    ]
    assert main(argv) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert re.match(rf"typedrl: EnvContractError: {ZERO_GRADIENT}", lines[0])
    assert "typedrl check-env ENV" in lines[0]
    assert lines[-1] == "(run with --debug for the traceback)"


# ---------------------------------------------------------------- skipped updates


def test_skipped_updates_are_counted_in_the_summary_and_warned_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A NaN reward on updates 3-8 of 12: summary.json counts 6 skips, stderr warns once."""
    trainer = trainer_for(
        NaNReward(point_mass(), steps=range(12, 36)), run_dir=tmp_path, total_updates=12
    )
    trainer.train()
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert (summary["applied_updates"], summary["skipped_updates"]) == (6, 6)
    assert summary["num_updates"] == 12
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == [
        "warning: 6 of the 10 updates so far were skipped (a non-finite or too large gradient; "
        "the weights did not move on them). See train/skipped_nonfinite and "
        "train/skipped_large in metrics.csv; algorithm.nonfinite='raise' stops at the first "
        "non-finite update and says whether the env returned NaN"
    ]


def test_the_command_line_prints_the_skipped_updates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`typedrl train` ends with the applied and skipped updates."""
    run_dir = tmp_path / "run"
    argv = ["train", "tests.apg.broken_envs:nan_point_mass", "--algo", "apg"]
    options = ["--total-timesteps", "320", "--num-envs", "2", "--eval-episodes", "2"]
    options += ["--run-dir", str(run_dir)]
    assert main([*argv, *options, "--no-progress", "--set", "segment_length=8"]) == 0
    captured = capsys.readouterr()
    assert "updates         10 applied, 10 skipped" in captured.out.splitlines()
    assert "warning: 5 of the 10 updates so far were skipped" in captured.err
    summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    assert (summary["applied_updates"], summary["skipped_updates"]) == (10, 10)


# ---------------------------------------------------------------- nonfinite="raise"


def test_raise_says_where_the_env_returned_nan() -> None:
    """A NaN reward at global step 10: the error names update 1, its step 2 and row 0."""
    trainer = trainer_for(
        NaNReward(point_mass(), steps=[10]),
        update_horizon=8,
        algorithm={"nonfinite": "raise"},
    )
    with pytest.raises(NonFiniteError) as raised:
        trainer.train()
    assert str(raised.value) == (
        "APG: non-finite gradient norm (nan) at update 1; nothing was updated. The env "
        "returned NaN in its rewards at step 2 of the update (rows [0]): the simulation itself "
        "went non-finite, not only the gradient; find why (typedrl check-env ENV) before "
        "lowering the learning rate"
    )


def test_raise_says_when_only_the_backward_overflowed() -> None:
    """Finite rewards and observations with a NaN gradient: the learning rate is the suspect."""
    trainer = trainer_for(SingularReward(point_mass()), algorithm={"nonfinite": "raise"})
    with pytest.raises(
        NonFiniteError,
        match=r"at update 0; nothing was updated\. The env's rewards and observations of this "
        r"update were finite, so the backward pass overflowed: lower the learning rate",
    ):
        trainer.train()
