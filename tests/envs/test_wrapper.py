"""The delegating env wrapper base: nothing a policy reads from the env is dropped."""

from typing import Any, cast

import pytest
import torch
from torch import Tensor

from typedrl.envs import CartPoleSwingUp, PointMass, observation_normalize_mask_of
from typedrl.envs._wrapper import DifferentiableVecEnvWrapper, VecEnvWrapper
from typedrl.errors import CheckpointError
from typedrl.protocols import SupportsContactForces, SupportsStateDict, VecEnv
from typedrl.recording import EpisodeRecorder
from typedrl.testing import ContactQuadraticEnv, CountingVecEnv, QuadraticEnv
from typedrl.types import EnvScalar


class _Spoiled(VecEnvWrapper):
    """A wrapper that overrides nothing but its name."""


def test_a_wrapper_passes_the_observation_normalize_mask_through() -> None:
    """Plain, nested and recording wrappers all show the wrapped env's mask."""
    env = CartPoleSwingUp(num_envs=2)
    expected = env.observation_normalize_mask.tolist()
    assert expected == [True, True, False, False, True]
    for wrapped in (VecEnvWrapper(env), _Spoiled(_Spoiled(env)), EpisodeRecorder(env)):
        assert wrapped.observation_normalize_mask.tolist() == expected
        mask = observation_normalize_mask_of(wrapped)
        assert mask is not None
        assert mask.tolist() == expected


def test_a_wrapper_of_an_env_without_a_mask_has_none() -> None:
    """No mask is invented for an env that has none (getattr's default applies)."""
    wrapped = EpisodeRecorder(VecEnvWrapper(CountingVecEnv(num_envs=2)))
    assert observation_normalize_mask_of(wrapped) is None
    assert getattr(wrapped, "observation_normalize_mask", "absent") == "absent"


def test_the_differentiable_wrapper_keeps_the_mask_or_normalises_everything() -> None:
    """DifferentiableVecEnvWrapper passes a mask through and means all features otherwise."""
    env = CartPoleSwingUp(num_envs=2)
    assert torch.equal(
        DifferentiableVecEnvWrapper(env).observation_normalize_mask, env.observation_normalize_mask
    )


class _Repeat(DifferentiableVecEnvWrapper):
    """Two steps of the wrapped env per step: not the env's steps."""

    preserves_steps = False


class _OwnContacts(DifferentiableVecEnvWrapper):
    """Reports contacts of its own, twice the wrapped env's."""

    def contact_force_norm(self) -> EnvScalar:
        """Twice the wrapped env's contact norms."""
        return 2.0 * cast("SupportsContactForces", self.env).contact_force_norm()


def test_a_wrapper_passes_contact_forces_through() -> None:
    """Plain, nested, differentiable and recording wrappers report the wrapped env's contacts."""
    env = ContactQuadraticEnv(num_envs=2, horizon=4, contact_scale=10.0)
    wrappers = (
        VecEnvWrapper(env),
        _Spoiled(_Spoiled(env)),
        DifferentiableVecEnvWrapper(env),
        EpisodeRecorder(DifferentiableVecEnvWrapper(env)),
    )
    obs, _ = env.reset(seed=0)
    env.step(torch.ones(2, 1) - obs["obs"])
    assert env.contact_force_norm().tolist() == [10.0, 10.0]
    for wrapped in wrappers:
        assert isinstance(wrapped, SupportsContactForces)
        assert wrapped.contact_force_norm().tolist() == [10.0, 10.0]


def test_a_wrapper_of_an_env_without_contact_forces_has_none() -> None:
    """No contact forces are invented: the runtime protocol check stays False."""
    env = QuadraticEnv(num_envs=2)
    for wrapped in (
        VecEnvWrapper(env),
        DifferentiableVecEnvWrapper(env),
        EpisodeRecorder(_Spoiled(env)),
    ):
        assert not isinstance(wrapped, SupportsContactForces)
        assert not hasattr(wrapped, "contact_force_norm")


def test_a_wrapper_that_changes_the_steps_does_not_forward_contact_forces() -> None:
    """preserves_steps=False: the wrapped env's last step is not the wrapper's, so no contacts."""
    wrapped = _Repeat(ContactQuadraticEnv(num_envs=2))
    assert not isinstance(wrapped, SupportsContactForces)


def test_a_wrapper_with_its_own_contact_forces_keeps_them() -> None:
    """A wrapper that measures contacts itself is not overridden by the wrapped env's."""
    env = ContactQuadraticEnv(num_envs=2, horizon=4, contact_scale=10.0)
    wrapped = _OwnContacts(env)
    obs, _ = wrapped.reset(seed=0)
    wrapped.step(torch.ones(2, 1) - obs["obs"])
    assert isinstance(wrapped, SupportsContactForces)
    assert wrapped.contact_force_norm().tolist() == [20.0, 20.0]


# ---------------------------------------------------------------- checkpointable state


def _play(env: VecEnv, steps: int) -> list[Tensor]:
    """The rewards of ``steps`` steps of a fixed action on PointMass's two rows."""
    return [env.step(torch.full((2, 2), 0.3)).reward for _ in range(steps)]


def _checkpointable(env: VecEnv) -> SupportsStateDict:
    """``env`` as checkpointable (a final wrapper gets the methods only per instance)."""
    assert isinstance(env, SupportsStateDict)
    return env


def _state_of(env: VecEnv) -> dict[str, Any]:
    return _checkpointable(env).state_dict()


def test_a_wrapper_passes_the_env_state_through() -> None:
    """Plain, nested and differentiable wrappers checkpoint the wrapped env, under its keys."""
    for wrap in (VecEnvWrapper, lambda env: _Spoiled(_Spoiled(env)), DifferentiableVecEnvWrapper):
        env = PointMass(num_envs=2, seed=0)
        wrapped = wrap(env)
        wrapped.reset(seed=1)
        _play(wrapped, 3)
        state = _state_of(wrapped)
        assert state.keys() == env.state_dict().keys()
        expected = _play(wrapped, 5)
        # Loaded into a fresh wrapped env, and into a bare one: the same steps follow.
        for other in (wrap(PointMass(num_envs=2, seed=9)), PointMass(num_envs=2, seed=9)):
            assert isinstance(other, SupportsStateDict)
            other.load_state_dict(state)
            assert all(map(torch.equal, _play(other, 5), expected))


def test_a_wrapper_of_an_env_without_state_has_none() -> None:
    """No state is invented: the runtime protocol check stays False, own state or not."""
    for wrapped in (
        VecEnvWrapper(CountingVecEnv(num_envs=2)),
        DifferentiableVecEnvWrapper(QuadraticEnv(num_envs=2)),
        EpisodeRecorder(CountingVecEnv(num_envs=2)),
    ):
        assert not isinstance(wrapped, SupportsStateDict)
        assert not hasattr(wrapped, "load_state_dict")


def test_a_wrapper_that_checkpoints_itself_keeps_its_state() -> None:
    """ContactQuadraticEnv defines state_dict; a wrapper of it passes that state through."""
    env = ContactQuadraticEnv(num_envs=2)
    env.reset(seed=0)
    assert _state_of(VecEnvWrapper(env)).keys() == {"x", "t", "generator", "contact"}


def test_the_episode_recorder_checkpoints_its_record_with_the_env() -> None:
    """A recorder resumed mid-episode records the same episodes as an uninterrupted one."""
    recorder = EpisodeRecorder(PointMass(num_envs=2, seed=0, max_episode_steps=4))
    recorder.reset(seed=1)
    _play(recorder, 6)
    state = _state_of(recorder)
    assert state.keys() == {"env", "wrapper"}
    assert state["wrapper"]["lengths"] == [[4], [4]]
    _play(recorder, 5)
    resumed = EpisodeRecorder(PointMass(num_envs=2, seed=5, max_episode_steps=4))
    _checkpointable(resumed).load_state_dict(state)
    _play(resumed, 5)
    assert resumed.lengths == recorder.lengths == [[4, 4], [4, 4]]
    assert resumed.returns == recorder.returns


def test_a_state_of_another_layout_is_refused() -> None:
    """Unwrapped into a recorder, a recorder's into a bare env, a bad record: CheckpointError."""
    env = PointMass(num_envs=2, seed=0)
    wrapped = EpisodeRecorder(env)
    wrapped.reset(seed=1)
    recorder = _checkpointable(wrapped)
    with pytest.raises(CheckpointError, match=r"expected keys \['env', 'wrapper'\].*got \['has_"):
        recorder.load_state_dict(env.state_dict())
    with pytest.raises(CheckpointError, match=r"PointMass.*got \['env', 'wrapper'\]"):
        PointMass(num_envs=2).load_state_dict(recorder.state_dict())
    state = recorder.state_dict()
    state["wrapper"]["steps"] = state["wrapper"]["steps"].float()
    with pytest.raises(CheckpointError, match=r"'steps' must be a 1-D torch.int64 tensor"):
        recorder.load_state_dict(state)
    state = recorder.state_dict()
    state["wrapper"]["returns"] = [[]] * 3
    with pytest.raises(
        CheckpointError, match=r"expected 2 rows .* got \{'lengths': 2, 'returns': 3"
    ):
        recorder.load_state_dict(state)
