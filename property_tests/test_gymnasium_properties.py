"""Property tests: the Gymnasium adapter's transitions equal single envs stepped by hand.

For random action sequences and random episode ends, in every autoreset mode,
for Sync and Async vector envs and for a next-step vector env that ignores
``reset_mask`` (ghost steps), every valid transition the adapter reports must
equal the transition of an independent single env with the same seed, and no
transition may be lost or counted twice.
"""

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from hypothesis import given, settings
from hypothesis import strategies as st

from typedrl.envs._gymnasium import GymnasiumVecEnv
from typedrl.testing._gym_envs import RandomEndsEnv, RandomEndsVectorEnv

SEED = 123


def _make_single(terminate_prob: float, max_steps: int) -> RandomEndsEnv:
    return RandomEndsEnv(terminate_prob=terminate_prob, max_steps=max_steps)


class _Reference:
    """Single envs stepped by hand, one per row, with same-step autoreset semantics."""

    def __init__(self, num_envs: int, terminate_prob: float, max_steps: int) -> None:
        self.envs = [_make_single(terminate_prob, max_steps) for _ in range(num_envs)]
        self.obs = [env.reset(seed=SEED + i)[0] for i, env in enumerate(self.envs)]
        self.steps = [0] * num_envs

    def step(self, row: int, action: int) -> dict[str, Any]:
        env = self.envs[row]
        before = self.obs[row]
        next_obs, reward, terminated, truncated, _ = env.step(np.int64(action))
        after = env.reset()[0] if terminated or truncated else next_obs
        self.obs[row] = after
        self.steps[row] += 1
        return {
            "before": before,
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
            "final": next_obs,
            "after": after,
        }


def _build(kind: str, mode: AutoresetMode, num_envs: int, p: float, limit: int) -> GymnasiumVecEnv:
    def factory() -> gym.Env[Any, Any]:
        return _make_single(p, limit)

    raw: gym.vector.VectorEnv[Any, Any, Any]
    if kind == "sync":
        raw = SyncVectorEnv([factory] * num_envs, autoreset_mode=mode)
    elif kind == "async":
        raw = AsyncVectorEnv([factory] * num_envs, autoreset_mode=mode, context="fork")
    else:
        raw = RandomEndsVectorEnv(num_envs=num_envs, terminate_prob=p, max_steps=limit)
    return GymnasiumVecEnv(raw)


def _run(kind: str, mode: AutoresetMode, *, p: float, limit: int, actions: list[list[int]]) -> None:
    num_envs = _NUM_ENVS
    env = _build(kind, mode, num_envs, p, limit)
    reference = _Reference(num_envs, p, limit)
    try:
        obs, _ = env.reset(seed=SEED)
        for i in range(num_envs):
            np.testing.assert_array_equal(obs["obs"][i].numpy(), reference.obs[i])
        pending_reset = [False] * num_envs
        valid_steps = [0] * num_envs
        for row_actions in actions:
            action = torch.tensor(row_actions[:num_envs], dtype=torch.int64)
            result = env.step(action)
            assert result.final_obs is not None
            for i in range(num_envs):
                if not bool(result.valid[i]):
                    # A ghost step: the env reset this row instead of stepping it.
                    assert env.emits_ghost_steps
                    assert pending_reset[i]
                    assert float(result.reward[i]) == 0.0
                    np.testing.assert_array_equal(result.obs["obs"][i].numpy(), reference.obs[i])
                    pending_reset[i] = False
                    continue
                assert not pending_reset[i], "a row that ended took a real step before its reset"
                expected = reference.step(i, row_actions[i])
                valid_steps[i] += 1
                np.testing.assert_array_equal(obs["obs"][i].numpy(), expected["before"])
                assert float(result.reward[i]) == expected["reward"]
                assert bool(result.terminated[i]) == expected["terminated"]
                assert bool(result.truncated[i]) == expected["truncated"]
                np.testing.assert_array_equal(result.final_obs["obs"][i].numpy(), expected["final"])
                done = expected["terminated"] or expected["truncated"]
                if done and env.emits_ghost_steps:
                    np.testing.assert_array_equal(result.obs["obs"][i].numpy(), expected["final"])
                    pending_reset[i] = True
                else:
                    np.testing.assert_array_equal(result.obs["obs"][i].numpy(), expected["after"])
            obs = result.obs
        assert valid_steps == reference.steps
    finally:
        env.close()


_MODES = st.sampled_from(list(AutoresetMode))
_NUM_ENVS = 3


def _action_lists(max_len: int) -> st.SearchStrategy[list[list[int]]]:
    row = st.lists(st.integers(0, 2), min_size=_NUM_ENVS, max_size=_NUM_ENVS)
    return st.lists(row, min_size=1, max_size=max_len)


@given(
    mode=_MODES,
    p=st.sampled_from([0.0, 0.2, 0.5]),
    limit=st.integers(1, 6),
    actions=_action_lists(25),
)
def test_sync_adapter_matches_single_envs(
    mode: AutoresetMode, p: float, limit: int, actions: list[list[int]]
) -> None:
    """SyncVectorEnv in every autoreset mode: exact transitions, none lost or repeated."""
    _run("sync", mode, p=p, limit=limit, actions=actions)


@settings(max_examples=6)
@given(mode=_MODES, limit=st.integers(1, 4), actions=_action_lists(12))
def test_async_adapter_matches_single_envs(
    mode: AutoresetMode, limit: int, actions: list[list[int]]
) -> None:
    """AsyncVectorEnv in every autoreset mode: exact transitions (fewer examples: processes)."""
    _run("async", mode, p=0.3, limit=limit, actions=actions)


@given(p=st.sampled_from([0.0, 0.3, 0.6]), limit=st.integers(1, 5), actions=_action_lists(25))
def test_ghost_steps_never_become_transitions(
    p: float, limit: int, actions: list[list[int]]
) -> None:
    """A next-step env ignoring reset_mask: ghost steps are flagged, real ones exact."""
    _run("vector", AutoresetMode.NEXT_STEP, p=p, limit=limit, actions=actions)
