"""The delegating env wrapper base: nothing a policy reads from the env is dropped."""

import torch

from typedrl.envs import CartPoleSwingUp, observation_normalize_mask_of
from typedrl.envs._wrapper import DifferentiableVecEnvWrapper, VecEnvWrapper
from typedrl.recording import EpisodeRecorder
from typedrl.testing import CountingVecEnv


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
