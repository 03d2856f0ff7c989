"""Tests for typedrl.training._options: RunOptions defaults, conversions and validation."""

import dataclasses
import math
from pathlib import Path
from typing import Any

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


class _Text(str):
    """A str subclass (refused where a builtin str is required)."""


_NOT_POSITIVE_INTS: list[Any] = [0, -1, True, False, 1.0, 2.5, "3", [1]]

_BAD_VALUES: list[tuple[str, Any]] = [
    ("run_dir", 3),
    ("run_dir", b"runs"),
    ("run_dir", ["runs"]),
    ("env_id", 3),
    ("env_id", _Text("CartPole-v1")),
    ("env_id", b"CartPole-v1"),
    *[("eval_every_steps", value) for value in _NOT_POSITIVE_INTS],
    *[("eval_episodes", value) for value in [*_NOT_POSITIVE_INTS, None]],
    *[("checkpoint_every_iterations", value) for value in _NOT_POSITIVE_INTS],
    *[("last_checkpoint_every_iterations", value) for value in _NOT_POSITIVE_INTS],
    *[
        ("last_checkpoint_every_seconds", value)
        for value in [0, 0.0, -1.0, math.nan, math.inf, -math.inf, True, "60", [60.0]]
    ],
    ("loggers", "csv"),
    ("loggers", 3),
    ("loggers", [object()]),
    ("loggers", ["csv"]),
    ("progress", 1),
    ("progress", 0),
    ("progress", None),
    ("progress", "yes"),
]


@pytest.mark.parametrize(("field", "value"), _BAD_VALUES)
def test_bad_values_raise_config_error_naming_the_field(field: str, value: Any) -> None:
    """Every invalid value raises ConfigError whose message names RunOptions.<field>."""
    with pytest.raises(ConfigError, match=rf"RunOptions\.{field} must (be|hold) "):
        RunOptions(**{field: value})


def test_a_single_logger_is_not_a_sequence(tmp_path: Path) -> None:
    """One logger where a sequence is expected raises ConfigError naming loggers."""
    with pytest.raises(ConfigError, match=r"RunOptions\.loggers must be a sequence"):
        RunOptions(loggers=CSVLogger(tmp_path))  # type: ignore[arg-type]


def test_the_message_shows_the_value() -> None:
    """The error shows the offending value and its type."""
    with pytest.raises(ConfigError, match=r"got 0 \(type int\)"):
        RunOptions(eval_episodes=0)
    with pytest.raises(ConfigError, match=r"got nan \(type float\)"):
        RunOptions(last_checkpoint_every_seconds=math.nan)


def test_options_are_frozen_and_keyword_only() -> None:
    """Fields cannot be reassigned; positional arguments are refused."""
    options = RunOptions()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.eval_episodes = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        RunOptions("runs")  # type: ignore[call-arg]


def test_loggers_of_the_lightning_package_are_accepted(tmp_path: Path) -> None:
    """A logger built on ``lightning.fabric``'s Logger (PyTorch Lightning's W&B one) is kept.

    Fabric only calls its methods; typedrl itself runs on lightning_fabric.
    """
    from lightning.fabric.loggers.csv_logs import CSVLogger as LightningCSVLogger

    logger: object = LightningCSVLogger(tmp_path)
    options = RunOptions(loggers=[logger])  # type: ignore[list-item]
    assert options.loggers is not None
    assert list(options.loggers) == [logger]
