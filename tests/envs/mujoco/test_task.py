"""MujocoTaskSpec validation and MujocoVecEnv's checks of the model."""

import math
from pathlib import Path

import pytest
import torch
from jaxtyping import Float
from torch import Tensor

from typedrl.envs.mujoco import CARTPOLE_XML, MujocoState, MujocoTask, MujocoTaskSpec, MujocoVecEnv
from typedrl.errors import ConfigError
from typedrl.types import Done, ObsVector, Reward


class _Hanging(MujocoTask):
    """A minimal task over any model: zero state, qpos as observation, no reward."""

    def __init__(self, path: Path, obs_dim: int) -> None:
        self._spec = MujocoTaskSpec(
            model_path=path,
            max_episode_steps=5,
            observation_high=(math.inf,) * obs_dim,
            observation_normalize_mask=(True,) * obs_dim,
            num_initial_draws=1,
        )

    @property
    def spec(self) -> MujocoTaskSpec:
        return self._spec

    def initial_state(
        self, uniform: Float[Tensor, "num_envs 1"], *, qpos0: Float[Tensor, " nq"], na: int
    ) -> MujocoState:
        qpos = qpos0.expand(uniform.shape[0], -1)
        return MujocoState(qpos=qpos, qvel=torch.zeros_like(qpos), act=qpos[:, :na])

    def observe(self, state: MujocoState) -> ObsVector:
        return state.qpos

    def reward(
        self,
        state: MujocoState,
        action: Float[Tensor, "num_envs act_dim"],
        next_state: MujocoState,
        *,
        dt: float,
    ) -> Reward:
        return next_state.qpos[:, 0] * 0.0

    def terminated(self, next_state: MujocoState) -> Done:
        return next_state.qpos[:, 0] > math.inf


def _write(tmp_path: Path, actuator: str, option: str = "") -> Path:
    path = tmp_path / "model.xml"
    path.write_text(
        f"<mujoco>{option}"
        '<worldbody><body><joint name="j" type="slide" axis="1 0 0"/>'
        '<geom type="sphere" size="0.1" mass="1"/></body></worldbody>'
        f"<actuator>{actuator}</actuator></mujoco>"
    )
    return path


def test_spec_rejects_mismatched_feature_lists() -> None:
    """No features or mismatched feature lists raise ConfigError.

    Each field's own check is tested with every config class in ``tests/test_config_classes.py``.
    """
    fields = {
        "model_path": CARTPOLE_XML,
        "max_episode_steps": 5,
        "observation_high": (1.0,),
        "observation_normalize_mask": (True,),
        "num_initial_draws": 1,
    }
    for name, value, message in [
        ("observation_high", (), "observation_high"),
        ("observation_normalize_mask", (True, False), "one bool per observation feature"),
    ]:
        with pytest.raises(ConfigError, match=message):
            MujocoTaskSpec(**{**fields, name: value})  # type: ignore[arg-type]


def test_any_mjcf_model_steps(tmp_path: Path) -> None:
    """A user task on a hand-written model: the env builds, steps and differentiates."""
    path = _write(tmp_path, '<motor joint="j" ctrlrange="-2 2"/>')
    env = MujocoVecEnv(task=_Hanging(path, 1), num_envs=2, dtype="float64")
    assert env.single_action_space.shape == (1,)
    assert float(env.single_action_space.high[0]) == 2.0  # type: ignore[attr-defined]
    env.reset(seed=0)
    action = torch.ones(2, 1, dtype=torch.float64, requires_grad=True)
    result = env.step(action)
    (gradient,) = torch.autograd.grad(result.obs["obs"].sum(), action)
    assert bool((gradient > 0).all())


def test_models_the_env_cannot_drive(tmp_path: Path) -> None:
    """No actuators, an unlimited or asymmetric range, an unsupported feature, bad XML."""
    for actuator, message in [
        ("", "no actuators"),
        ('<motor joint="j"/>', "symmetric"),
        ('<motor joint="j" ctrlrange="-1 2"/>', "symmetric"),
    ]:
        path = _write(tmp_path, actuator)
        with pytest.raises(ConfigError, match=message):
            MujocoVecEnv(task=_Hanging(path, 1), num_envs=1)
    motor = '<motor joint="j" ctrlrange="-1 1"/>'
    implicit = _write(tmp_path, motor, '<option integrator="implicit"/>')
    with pytest.raises(ConfigError, match="does not implement"):
        MujocoVecEnv(task=_Hanging(implicit, 1), num_envs=1)
    broken = tmp_path / "broken.xml"
    broken.write_text("<mujoco><worldbody>")
    with pytest.raises(ConfigError, match="cannot load the MJCF file"):
        MujocoVecEnv(task=_Hanging(broken, 1), num_envs=1)
