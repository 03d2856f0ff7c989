"""Tests for typedrl.training._options: RunOptions defaults, conversions and validation."""

import dataclasses
from pathlib import Path

import pytest
from lightning_fabric.loggers.csv_logs import CSVLogger

from typedrl.errors import ConfigError
from typedrl.training import RunOptions


def test_defaults() -> None:
    """Nothing written, evaluation at the end only, last.ckpt every 100 iterations or 60 s."""
    options = RunOptions()
    assert options.run_dir is None
    assert options.env_id is None
    assert options.eval_every_steps is None
    assert options.eval_episodes == 10
    assert options.checkpoint_every_iterations is None
    assert options.last_checkpoint_every_iterations == 100
    assert options.last_checkpoint_every_seconds == 60.0
    assert options.loggers is None
    assert options.progress is True


def test_a_str_run_dir_becomes_a_path() -> None:
    """run_dir given as str is stored as a Path; a Path is kept as is."""
    assert RunOptions(run_dir="runs/a").run_dir == Path("runs/a")
    assert isinstance(RunOptions(run_dir="runs/a").run_dir, Path)
    path = Path("runs/b")
    assert RunOptions(run_dir=path).run_dir == path


def test_a_loggers_list_becomes_a_tuple(tmp_path: Path) -> None:
    """A list of Fabric loggers is stored as a tuple of the same loggers, in order."""
    first, second = CSVLogger(tmp_path / "a"), CSVLogger(tmp_path / "b")
    given = [first, second]
    options = RunOptions(loggers=given)
    assert options.loggers == (first, second)
    assert isinstance(options.loggers, tuple)
    given.clear()
    assert options.loggers == (first, second)
    assert RunOptions(loggers=[]).loggers == ()


def test_integer_seconds_become_float() -> None:
    """last_checkpoint_every_seconds given as int is stored as a float."""
    options = RunOptions(last_checkpoint_every_seconds=5)
    assert options.last_checkpoint_every_seconds == 5.0
    assert type(options.last_checkpoint_every_seconds) is float


def test_valid_values_are_kept() -> None:
    """Every field accepts its documented values, None included where allowed."""
    options = RunOptions(
        env_id="CartPole-v1",
        eval_every_steps=1,
        eval_episodes=3,
        checkpoint_every_iterations=7,
        last_checkpoint_every_iterations=None,
        last_checkpoint_every_seconds=None,
        progress=False,
    )
    assert options.env_id == "CartPole-v1"
    assert (options.eval_every_steps, options.eval_episodes) == (1, 3)
    assert options.checkpoint_every_iterations == 7
    assert options.last_checkpoint_every_iterations is None
    assert options.last_checkpoint_every_seconds is None
    assert options.progress is False
    assert RunOptions(last_checkpoint_every_seconds=0.25).last_checkpoint_every_seconds == 0.25


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("run_dir", b"runs", r"RunOptions\.run_dir must be a str, a Path or None, got b'runs'"),
        ("loggers", "csv", r"RunOptions\.loggers must be a sequence of Fabric loggers or None"),
        ("loggers", ["csv"], r"RunOptions\.loggers must hold Fabric Logger objects"),
        ("best_metric", "score", r"RunOptions\.best_metric must name an evaluation metric"),
    ],
)
def test_the_fields_with_checks_of_their_own(field: str, value: object, message: str) -> None:
    """run_dir, loggers and best_metric have checks of their own; each names the rule."""
    with pytest.raises(ConfigError, match=message):
        RunOptions(**{field: value})  # type: ignore[arg-type]


def test_a_single_logger_is_not_a_sequence(tmp_path: Path) -> None:
    """One logger where a sequence is expected raises ConfigError naming loggers."""
    with pytest.raises(ConfigError, match=r"RunOptions\.loggers must be a sequence"):
        RunOptions(loggers=CSVLogger(tmp_path))  # type: ignore[arg-type]


def test_options_are_frozen_and_keyword_only() -> None:
    """Fields cannot be reassigned; positional arguments are refused."""
    options = RunOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.eval_episodes = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        RunOptions("runs")  # type: ignore[call-arg]
