"""Property tests: IsaacLabVecEnv transitions equal a reference built from the raw fake."""

from typing import Any

import torch
from hypothesis import given
from hypothesis import strategies as st
from tensordict import TensorDict
from torch import Tensor

from typedrl.envs._isaaclab import IsaacLabObs, IsaacLabVecEnv
from typedrl.testing._isaaclab_fake import FakeDirectRLEnv, FakeManagerBasedRLEnv, FakeRLEnvCfg

_ACTION_DIM = 2


@st.composite
def _scenarios(draw: st.DrawFn) -> tuple[dict[str, Any], type[Any], int, Tensor]:
    """An env config's arguments, a fake kind, a reset seed and an action sequence.

    The config itself is built in the test: its validation runs under beartype in
    the suites, which samples containers with the ``random`` module, and a
    strategy must leave that module's state alone.
    """
    num_envs = draw(st.integers(1, 4))
    cfg = {
        "num_envs": num_envs,
        "action_dim": _ACTION_DIM,
        "episode_length_s": draw(st.sampled_from([0.1, 0.3, 0.5])),
        "termination_radius": draw(st.floats(0.2, 2.0)),
        "is_finite_horizon": draw(st.booleans()),
        "compute_final_obs": draw(st.booleans()),
        "critic": draw(st.sampled_from(["concatenated", "nested", "none"])),
    }
    kind = draw(st.sampled_from([FakeManagerBasedRLEnv, FakeDirectRLEnv]))
    num_steps = draw(st.integers(1, 12))
    values = draw(
        st.lists(
            st.floats(-8.0, 8.0, width=32),
            min_size=num_steps * num_envs * _ACTION_DIM,
            max_size=num_steps * num_envs * _ACTION_DIM,
        )
    )
    actions = torch.tensor(values, dtype=torch.float32).reshape(num_steps, num_envs, _ACTION_DIM)
    return cfg, kind, draw(st.integers(0, 2**16)), actions


def _as_td(obs: IsaacLabObs, num_envs: int) -> TensorDict:
    return TensorDict(obs, batch_size=[num_envs]).clone()


def _equal(first: TensorDict, second: TensorDict) -> bool:
    keys = set(first.keys(include_nested=True, leaves_only=True))
    if keys != set(second.keys(include_nested=True, leaves_only=True)):
        return False
    return all(torch.equal(first.get(key), second.get(key)) for key in keys)


@given(_scenarios())
def test_adapter_matches_reference(scenario: tuple[dict[str, Any], type[Any], int, Tensor]) -> None:
    """Observations, rewards, flags and terminal observations match a hand-mapped reference."""
    cfg_kwargs, kind, seed, actions = scenario
    cfg = FakeRLEnvCfg(**cfg_kwargs)
    n = cfg.num_envs
    reference = kind(cfg)
    env = IsaacLabVecEnv(kind(cfg))
    assert env.provides_final_obs == cfg.compute_final_obs
    raw_obs, _ = reference.reset(seed=seed)
    obs, _ = env.reset(seed=seed)
    assert _equal(obs, _as_td(raw_obs, n))
    for action in actions:
        raw_obs, raw_reward, raw_terminated, raw_time_outs, extras = reference.step(action.clone())
        expected_obs = _as_td(raw_obs, n)
        done = raw_terminated | raw_time_outs
        if cfg.is_finite_horizon:
            expected_terminated, expected_truncated = done.clone(), torch.zeros_like(done)
        else:
            expected_terminated, expected_truncated = raw_terminated.clone(), raw_time_outs.clone()
        expected_final = expected_obs.clone()
        if bool(done.any()):
            terminal = _as_td(extras["final_obs"], n) if cfg.compute_final_obs else None
            if terminal is not None:
                for row in done.nonzero().flatten().tolist():
                    expected_final[row] = terminal[row]
        result = env.step(action.clone())
        assert _equal(result.obs, expected_obs)
        assert torch.equal(result.reward, raw_reward)
        assert torch.equal(result.terminated, expected_terminated)
        assert torch.equal(result.truncated, expected_truncated)
        if cfg.compute_final_obs:
            assert result.final_obs is not None
            assert _equal(result.final_obs, expected_final)
        else:
            assert result.final_obs is None
