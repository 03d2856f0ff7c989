"""The delegating env wrapper base: nothing a policy reads from the env is dropped."""

from typing import cast

import torch

from typedrl.envs import CartPoleSwingUp, observation_normalize_mask_of
from typedrl.envs._wrapper import DifferentiableVecEnvWrapper, VecEnvWrapper
from typedrl.protocols import SupportsContactForces
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
