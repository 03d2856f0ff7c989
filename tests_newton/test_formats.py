"""NewtonVecEnv over URDF and USD models: robots from Newton's own example assets."""

import math
import sys
from collections.abc import Mapping
from pathlib import Path

import newton
import pytest
import torch
from jaxtyping import Float
from torch import Tensor

from typedrl.envs import check_differentiable_vec_env
from typedrl.envs.newton import USD_EXTRA, NewtonState, NewtonTask, NewtonTaskSpec
from typedrl.envs.newton import NewtonVecEnv as Env
from typedrl.errors import ConfigError, MissingDependencyError
from typedrl.types import Done, ObsVector, Reward

_ASSETS = Path(newton.__file__).parent / "examples" / "assets"
QUADRUPED_URDF = _ASSETS / "quadruped.urdf"  # 12 hinges, primitive shapes, about 31 kg
CARTPOLE_USD = _ASSETS / "cartpole.usda"  # a cart on a rail and a double pendulum, fixed base


class SwingTask(NewtonTask):
    """A fixed-base cart with a double pendulum: observe every coordinate and velocity."""

    def __init__(self, model_path: Path) -> None:
        self._spec = NewtonTaskSpec(
            model_path=model_path,
            actuated_dofs=(0,),
            gear=(20.0,),
            max_episode_steps=50,
            observation_high=(math.inf,) * 6,
            observation_normalize_mask=(True,) * 6,
            num_initial_draws=3,
            # The stage puts the rail at the origin: a ground plane would cut through it.
            ground=False,
        )

    @property
    def spec(self) -> NewtonTaskSpec:
        return self._spec

    def initial_state(
        self, uniform: Float[Tensor, "num_envs num_draws"], *, joint_q0: Float[Tensor, " nq"]
    ) -> tuple[Tensor, Tensor]:
        joint_q = joint_q0 + 0.2 * (uniform - 0.5)
        return joint_q, torch.zeros_like(joint_q)

    def observe(self, state: NewtonState) -> ObsVector:
        return torch.cat((state.joint_q, state.joint_qd), dim=-1)

    def reward(
        self,
        state: NewtonState,
        action: Float[Tensor, "num_envs act_dim"],
        next_state: NewtonState,
        *,
        dt: float,
    ) -> Reward:
        return torch.cos(next_state.joint_q[:, 1:]).sum(dim=-1) - 0.01 * action[:, 0] ** 2

    def terminated(self, next_state: NewtonState) -> Done:
        return next_state.joint_q[:, 0].abs() > 3.0


class WalkTask(NewtonTask):
    """Move along ``+x``: a free base, then hinges; observe ``joint_q[2:]`` and ``joint_qd``."""

    def __init__(
        self,
        model_path: Path,
        *,
        num_hinges: int,
        gear: float,
        start_height: float,
        importer_options: Mapping[str, object] | None = None,
        **physics: float,
    ) -> None:
        num_q, num_v = 7 + num_hinges, 6 + num_hinges
        self._num_v = num_v
        self._start_height = start_height
        self._spec = NewtonTaskSpec(
            model_path=model_path,
            actuated_dofs=tuple(range(6, num_v)),
            gear=(gear,) * num_hinges,
            max_episode_steps=50,
            observation_high=(math.inf,) * (num_q - 2 + num_v),
            observation_normalize_mask=(True,) * (num_q - 2 + num_v),
            num_initial_draws=num_hinges,
            importer_options=dict(importer_options or {}),
            **physics,  # type: ignore[arg-type]
        )

    @property
    def spec(self) -> NewtonTaskSpec:
        return self._spec

    def initial_state(
        self, uniform: Float[Tensor, "num_envs num_draws"], *, joint_q0: Float[Tensor, " nq"]
    ) -> tuple[Tensor, Tensor]:
        rows = uniform.shape[0]
        joint_q = joint_q0.expand(rows, -1).clone()
        joint_q[:, 2] = self._start_height
        joint_q[:, 7:] += 0.2 * (uniform - 0.5)
        return joint_q, joint_q.new_zeros(rows, self._num_v)

    def observe(self, state: NewtonState) -> ObsVector:
        return torch.cat((state.joint_q[:, 2:], state.joint_qd), dim=-1)

    def reward(
        self,
        state: NewtonState,
        action: Float[Tensor, "num_envs act_dim"],
        next_state: NewtonState,
        *,
        dt: float,
    ) -> Reward:
        return next_state.joint_qd[:, 0] - 0.01 * (action * action).sum(dim=-1)

    def terminated(self, next_state: NewtonState) -> Done:
        return next_state.joint_q[:, 2] < 0.1


def quadruped(**options: object) -> WalkTask:
    """Newton's URDF quadruped on a free base (a URDF's base is fixed unless told).

    Passive springs hold its legs straight. The contact damping is 1e3: the default
    1e4 on its feet is unstable at 1/960 s (dropped, the robot is thrown metres up).
    """
    return WalkTask(
        QUADRUPED_URDF,
        num_hinges=12,
        gear=40.0,
        start_height=0.7,
        importer_options={"floating": True, **options},
        contact_kd=1.0e3,
        joint_stiffness=200.0,
        joint_damping=5.0,
    )


def _settle(env: Env, steps: int) -> Tensor:
    """Zero actions for ``steps`` steps from a seeded reset, no row ending; the rows' states."""
    assert env.max_episode_steps > steps
    env.reset(seed=0)
    with torch.no_grad():
        for step in range(steps):
            result = env.step(torch.zeros(env.num_envs, len(env.task.spec.actuated_dofs)))
            ended = result.terminated | result.truncated
            assert not bool(ended.any()), f"rows {ended.nonzero().flatten().tolist()} at {step}"
    state: Tensor = env.state_dict()["state"]
    return state


def test_urdf_quadruped_passes_the_differentiable_checker() -> None:
    """A URDF robot with a free base: every rule of the checker, gradients included."""
    env = Env(task=quadruped(), num_envs=2, max_episode_steps=6)
    assert env.task.spec.model_format == "urdf"
    assert env.single_observation_space.shape == (17 + 18,)
    report = check_differentiable_vec_env(env, num_steps=10, max_examples=2)
    assert report.ok, str(report)


def test_urdf_quadruped_lands_and_stands() -> None:
    """Dropped from 0.7 m, it lands on its feet and stands, none falling, for two seconds."""
    env = Env(task=quadruped(), num_envs=2, max_episode_steps=1000)
    heights = [_settle(env, steps)[:, 2] for steps in (30, 75, 120)]
    # Measured: 0.50 m from about 0.3 s on; unsprung, the legs fold to the ground.
    for height in heights:
        assert bool(torch.isfinite(height).all())
        assert bool(((height > 0.45) & (height < 0.55)).all()), heights


def test_urdf_base_is_fixed_without_the_floating_option() -> None:
    """Without ``floating`` the URDF base is welded to the world: 12 dofs, so 6..17 is refused."""
    task = WalkTask(QUADRUPED_URDF, num_hinges=12, gear=40.0, start_height=0.7)
    with pytest.raises(ConfigError, match=r"must index the model's 12 generalised velocities"):
        Env(task=task, num_envs=1)


def test_usd_cartpole_passes_the_differentiable_checker() -> None:
    """A USD stage: every rule of the checker, gradients included; 60 steps stay finite."""
    env = Env(task=SwingTask(CARTPOLE_USD), num_envs=2, max_episode_steps=6)
    assert env.task.spec.model_format == "usd"
    assert env.single_observation_space.shape == (6,)
    report = check_differentiable_vec_env(env, num_steps=10, max_examples=2)
    assert report.ok, str(report)
    state = _settle(Env(task=SwingTask(CARTPOLE_USD), num_envs=2, max_episode_steps=1000), steps=60)
    assert bool(torch.isfinite(state).all())
    # Started off the rest pose, the unpowered poles still swing: the velocities are not 0.
    assert bool((state[:, 4:6].abs() > 1e-3).all()), state[:, 4:6]


def test_an_option_the_importer_does_not_take_is_refused() -> None:
    """A misspelt importer option is one ConfigError naming it and the importer."""
    with pytest.raises(ConfigError, match=r"add_urdf takes no 'flaoting'"):
        Env(task=quadruped(flaoting=True), num_envs=1)


def test_an_unreadable_model_file_is_a_config_error(tmp_path: Path) -> None:
    """A file the importer cannot parse is a ConfigError naming the file and its format."""
    broken = tmp_path / "broken.urdf"
    broken.write_text("<robot name='x'><link name='a'></robot>")
    task = WalkTask(broken, num_hinges=1, gear=1.0, start_height=0.5)
    with pytest.raises(ConfigError, match=r"cannot load the URDF file .*broken\.urdf"):
        Env(task=task, num_envs=1)


def test_usd_without_usd_core_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without OpenUSD a USD model is a MissingDependencyError with the extra's pip command."""
    monkeypatch.setitem(sys.modules, "pxr", None)
    with pytest.raises(MissingDependencyError, match=rf"pip install 'typedrl\[{USD_EXTRA}\]'"):
        Env(task=SwingTask(CARTPOLE_USD), num_envs=1)


def test_usd_without_the_schemas_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Newton's USD importer needs newton-usd-schemas too: named with the same extra."""
    monkeypatch.setitem(sys.modules, "newton_usd_schemas", None)
    with pytest.raises(MissingDependencyError, match=rf"pip install 'typedrl\[{USD_EXTRA}\]'"):
        Env(task=SwingTask(CARTPOLE_USD), num_envs=1)


def test_a_mesh_without_newtons_importer_packages_names_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A URDF mesh makes Newton import trimesh: missing, it is a MissingDependencyError."""
    monkeypatch.setitem(sys.modules, "trimesh", None)
    (tmp_path / "foot.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    robot = tmp_path / "robot.urdf"
    robot.write_text(
        "<robot name='r'>"
        "<link name='base'><collision><geometry><box size='0.2 0.2 0.2'/></geometry>"
        "</collision><inertial><mass value='1'/>"
        "<inertia ixx='0.01' ixy='0' ixz='0' iyy='0.01' iyz='0' izz='0.01'/></inertial></link>"
        "<joint name='hinge' type='revolute'><parent link='base'/><child link='foot'/>"
        "<axis xyz='0 1 0'/><limit lower='-1' upper='1' effort='1' velocity='1'/></joint>"
        "<link name='foot'><collision><geometry><mesh filename='foot.obj'/></geometry>"
        "</collision><inertial><mass value='1'/>"
        "<inertia ixx='0.01' ixy='0' ixz='0' iyy='0.01' iyz='0' izz='0.01'/></inertial></link>"
        "</robot>"
    )
    task = WalkTask(robot, num_hinges=1, gear=1.0, start_height=0.5)
    with pytest.raises(MissingDependencyError, match=r"pip install 'newton\[importers\]'"):
        Env(task=task, num_envs=1)
