"""typedrl.envs.newton without the newton extra: imports, refuses float64, names the extra."""

import dataclasses
import sys
from pathlib import Path

import pytest

from typedrl.envs import make
from typedrl.envs.builtin._registration import NEWTON_ENV_IDS
from typedrl.envs.newton import (
    EXTRA,
    MODEL_FORMATS,
    AntTask,
    HalfCheetahTask,
    HopperTask,
    NewtonVecEnv,
)
from typedrl.errors import ConfigError, MissingDependencyError


@pytest.fixture
def no_newton(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import newton`` and ``import warp`` fail, whether or not they are installed."""
    monkeypatch.setitem(sys.modules, "newton", None)
    monkeypatch.setitem(sys.modules, "warp", None)


@pytest.mark.usefixtures("no_newton")
def test_building_without_newton_names_the_extra() -> None:
    """NewtonVecEnv and the registered id raise MissingDependencyError with the pip command."""
    with pytest.raises(MissingDependencyError, match=rf"pip install 'typedrl\[{EXTRA}\]'"):
        NewtonVecEnv(task=AntTask(), num_envs=1)
    with pytest.raises(MissingDependencyError, match="newton"):
        make(NEWTON_ENV_IDS[0], num_envs=1)


@pytest.mark.usefixtures("no_newton")
def test_float64_is_refused_first() -> None:
    """float64 is one ConfigError line, before any import is tried."""
    with pytest.raises(ConfigError, match="float32"):
        NewtonVecEnv(task=AntTask(), num_envs=1, dtype="float64")


def test_ant_task_spec() -> None:
    """The Ant drives its eight hinges with DiffRL's timing and has 37 observations."""
    spec = AntTask().spec
    assert spec.actuated_dofs == tuple(range(6, 14))
    assert spec.substeps == 16
    assert spec.control_dt == pytest.approx(1 / 60)
    assert len(spec.observation_high) == 37
    assert spec.max_episode_steps == 1000
    assert spec.model_path.is_file()


def test_task_options_are_validated() -> None:
    """Invalid task options raise ConfigError naming the option."""
    with pytest.raises(ConfigError, match="ctrl_cost_weight"):
        AntTask(ctrl_cost_weight=-1.0)
    with pytest.raises(ConfigError, match="gear"):
        AntTask(gear=0.0)


def test_half_cheetah_task_spec() -> None:
    """The HalfCheetah drives its six hinges with Gymnasium's gears and has 17 observations."""
    spec = HalfCheetahTask().spec
    assert spec.actuated_dofs == tuple(range(3, 9))
    assert spec.gear == (120.0, 90.0, 60.0, 120.0, 60.0, 30.0)
    assert spec.per_dof("joint_stiffness") == (240.0, 180.0, 120.0, 180.0, 120.0, 60.0)
    assert spec.per_dof("joint_damping") == (6.0, 4.5, 3.0, 4.5, 3.0, 1.5)
    assert len(spec.observation_high) == 17
    assert spec.model_path.is_file()


def test_hopper_task_spec() -> None:
    """The Hopper drives its three hinges at 200 N m and has 11 observations."""
    spec = HopperTask().spec
    assert spec.actuated_dofs == (3, 4, 5)
    assert spec.gear == (200.0, 200.0, 200.0)
    assert len(spec.observation_high) == 11
    assert spec.model_path.is_file()


def test_spec_rejects_a_wrong_number_of_per_dof_values() -> None:
    """A per-dof tuple of the wrong length is a ConfigError naming the field."""
    spec = AntTask().spec
    with pytest.raises(ConfigError, match="joint_damping"):
        dataclasses.replace(spec, joint_damping=(1.0, 2.0))
    with pytest.raises(ConfigError, match="actuated_dofs"):
        dataclasses.replace(spec, actuated_dofs=(6, 6, 7, 8, 9, 10, 11, 12))


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("robot.xml", "mjcf"),
        ("robot.MJCF", "mjcf"),
        ("robot.urdf", "urdf"),
        ("robot.usd", "usd"),
        ("robot.usda", "usd"),
        ("robot.usdc", "usd"),
        ("robot.usdz", "usd"),
    ],
)
def test_model_format_follows_the_suffix(tmp_path: Path, name: str, kind: str) -> None:
    """MJCF, URDF and USD files are told apart by their suffix, in any case."""
    path = tmp_path / name
    path.write_text("")
    spec = dataclasses.replace(AntTask().spec, model_path=path)
    assert spec.model_format == kind
    assert MODEL_FORMATS[path.suffix.lower()] == kind


def test_spec_refuses_other_model_files(tmp_path: Path) -> None:
    """A suffix Newton cannot import, or a missing file, is a ConfigError naming the path."""
    mesh = tmp_path / "robot.obj"
    mesh.write_text("")
    with pytest.raises(ConfigError, match=r"model_path must end in one of .xml.*robot\.obj"):
        dataclasses.replace(AntTask().spec, model_path=mesh)
    with pytest.raises(ConfigError, match=r"no model file at .*nope\.urdf"):
        dataclasses.replace(AntTask().spec, model_path=tmp_path / "nope.urdf")


def test_spec_keeps_a_read_only_copy_of_importer_options() -> None:
    """``importer_options`` is copied, read-only and left out of the hash."""
    spec = AntTask().spec
    assert spec.ground is True
    assert dict(spec.importer_options) == {}
    options: dict[str, object] = {"floating": True}
    floating = dataclasses.replace(spec, importer_options=options)
    options["floating"] = False  # the spec holds a read-only copy
    assert dict(floating.importer_options) == {"floating": True}
    with pytest.raises(TypeError):
        floating.importer_options["floating"] = False  # type: ignore[index]
    assert hash(floating) == hash(spec)  # importer_options is left out of the hash
