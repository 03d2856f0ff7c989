"""Tests for typedrl.envs._gymnasium.GymnasiumVecEnv."""

import copy as copy_module
from collections.abc import Callable
from typing import Any, Literal

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import create_empty_array

from typedrl import StepResult
from typedrl.envs import make
from typedrl.envs._checker import check_vec_env
from typedrl.envs._gymnasium import GymnasiumVecEnv
from typedrl.errors import ConfigError, EnvContractError, SpecError
from typedrl.protocols import VecEnv
from typedrl.testing._gym_envs import RandomEndsEnv, RandomEndsVectorEnv


class _SpacesEnv(gym.Env[Any, Any]):
    """A single env with configurable spaces that returns samples of them."""

    def __init__(self, observation_space: gym.Space[Any], action_space: gym.Space[Any]) -> None:
        self.observation_space = observation_space
        self.action_space = action_space
        self.last_action: Any = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.observation_space.seed(seed)
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.last_action = action
        return self.observation_space.sample(), 1.0, False, False, {}


def _sync(
    observation_space: gym.Space[Any],
    action_space: gym.Space[Any],
    num_envs: int = 2,
    mode: AutoresetMode = AutoresetMode.SAME_STEP,
) -> SyncVectorEnv:
    return SyncVectorEnv(
        [lambda: _SpacesEnv(observation_space, action_space)] * num_envs, autoreset_mode=mode
    )


BOX_ACTION = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


@pytest.mark.parametrize(
    ("space", "dtype", "shape"),
    [
        (gym.spaces.Box(-1, 1, (3,), np.float64), torch.float32, [2, 3]),
        (gym.spaces.Box(0, 255, (2, 2), np.uint8), torch.uint8, [2, 2, 2]),
        (gym.spaces.Discrete(5), torch.int64, [2]),
        (gym.spaces.MultiDiscrete([2, 3]), torch.int64, [2, 2]),
        (gym.spaces.MultiBinary(4), torch.int8, [2, 4]),
    ],
)
def test_single_array_observations_live_under_obs(
    space: gym.Space[Any], dtype: torch.dtype, shape: list[int]
) -> None:
    """Each supported leaf space becomes obs["obs"] with the documented dtype."""
    env = GymnasiumVecEnv(_sync(space, BOX_ACTION))
    obs, _ = env.reset(seed=0)
    assert list(obs.keys()) == ["obs"]
    assert obs["obs"].dtype == dtype
    assert list(obs["obs"].shape) == shape
    assert obs.device == torch.device("cpu")


def test_dict_observations_keep_their_keys_and_nesting() -> None:
    """Dict spaces become TensorDict keys; nested Dicts become nested TensorDicts."""
    space = gym.spaces.Dict(
        {
            "policy": gym.spaces.Box(-1, 1, (3,)),
            "extra": gym.spaces.Dict({"flag": gym.spaces.Discrete(2)}),
        }
    )
    env = GymnasiumVecEnv(_sync(space, BOX_ACTION, mode=AutoresetMode.SAME_STEP))
    obs, _ = env.reset(seed=0)
    assert set(obs.keys()) == {"policy", "extra"}
    assert obs["extra", "flag"].dtype == torch.int64
    assert list(obs["policy"].shape) == [2, 3]
    assert obs["extra"].batch_size == torch.Size([2])


def test_float64_option() -> None:
    """float_dtype="float64" applies to rewards and float observations."""
    env = GymnasiumVecEnv(_sync(gym.spaces.Box(-1, 1, (3,)), BOX_ACTION), float_dtype="float64")
    obs, _ = env.reset(seed=0)
    result = env.step(torch.zeros(2, 2, dtype=torch.float64))
    assert obs["obs"].dtype == torch.float64
    assert result.reward.dtype == torch.float64


@pytest.mark.parametrize(
    ("space", "action"),
    [
        (gym.spaces.Discrete(3), torch.tensor([0, 2])),
        (gym.spaces.MultiDiscrete([2, 3]), torch.tensor([[1, 2], [0, 0]])),
        (BOX_ACTION, torch.tensor([[0.5, -0.5], [0.0, 1.0]])),
    ],
)
def test_actions_reach_the_env_with_its_dtype(space: gym.Space[Any], action: torch.Tensor) -> None:
    """Torch actions are converted to the space's NumPy dtype, row by row."""
    raw = _sync(gym.spaces.Box(-1, 1, (1,)), space)
    env = GymnasiumVecEnv(raw)
    env.reset(seed=0)
    env.step(action)
    for row, single in enumerate(raw.envs):
        received = np.asarray(single.unwrapped.last_action)  # type: ignore[attr-defined]
        assert received.dtype == space.dtype
        np.testing.assert_array_equal(received, action[row].numpy().astype(space.dtype))


def test_clip_actions_to_box_bounds() -> None:
    """With clip_actions, out-of-bound Box actions are clipped before stepping."""
    raw = _sync(gym.spaces.Box(-1, 1, (1,)), BOX_ACTION)
    env = GymnasiumVecEnv(raw, clip_actions=True)
    env.reset(seed=0)
    env.step(torch.tensor([[5.0, -5.0], [0.25, 0.0]]))
    received = raw.envs[0].unwrapped.last_action  # type: ignore[attr-defined]
    np.testing.assert_array_equal(received, np.array([1.0, -1.0], dtype=np.float32))


def test_clip_actions_needs_a_box() -> None:
    """Clipping a discrete action space is a configuration error."""
    with pytest.raises(ConfigError, match="clip_actions needs a Box"):
        GymnasiumVecEnv(
            _sync(gym.spaces.Box(-1, 1, (1,)), gym.spaces.Discrete(2)), clip_actions=True
        )


def test_wrong_actions_are_rejected() -> None:
    """Shape and dtype errors raise SpecError before anything is stepped."""
    env = GymnasiumVecEnv(_sync(gym.spaces.Box(-1, 1, (1,)), gym.spaces.Discrete(2)))
    env.reset(seed=0)
    with pytest.raises(SpecError, match=r"shape \[2\]"):
        env.step(torch.zeros(2, 1, dtype=torch.int64))
    with pytest.raises(SpecError, match="integer dtype"):
        env.step(torch.zeros(2))


def _random_ends(mode: AutoresetMode, *, copy: bool = True) -> GymnasiumVecEnv:
    factory = lambda: RandomEndsEnv(terminate_prob=0.3, max_steps=4)  # noqa: E731
    return GymnasiumVecEnv(SyncVectorEnv([factory] * 3, autoreset_mode=mode, copy=copy))


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_seeding_reproduces_a_run(mode: AutoresetMode) -> None:
    """Two runs with the same seed and actions produce identical transitions."""
    runs = []
    for _ in range(2):
        env = _random_ends(mode)
        obs, _ = env.reset(seed=7)
        trace = [obs["obs"].clone()]
        for step in range(12):
            result = env.step(torch.full((3,), step % 3, dtype=torch.int64))
            assert result.final_obs is not None
            trace += [result.obs["obs"], result.final_obs["obs"], result.reward]
            trace += [result.terminated, result.truncated]
        runs.append(trace)
        env.close()
    for first, second in zip(*runs, strict=True):
        assert torch.equal(first, second)


@pytest.mark.parametrize("copy", [True, False])
@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_same_step_contract_in_every_mode(mode: AutoresetMode, copy: bool) -> None:
    """Rows that end come back reset (t = 0) while final_obs keeps the terminal step count."""
    env = _random_ends(mode, copy=copy)
    assert isinstance(env, VecEnv)
    assert env.autoreset_mode is mode
    assert not env.emits_ghost_steps
    env.reset(seed=1)
    ended = 0
    for _ in range(20):
        result = env.step(torch.zeros(3, dtype=torch.int64))
        assert result.final_obs is not None
        assert bool(result.valid.all())
        done = result.done
        ended += int(done.sum())
        assert bool((result.obs["obs"][done, 0] == 0).all())
        assert bool((result.final_obs["obs"][done, 0] >= 1).all())
        assert torch.equal(result.final_obs["obs"][~done], result.obs["obs"][~done])
    assert ended > 0


def test_ghost_steps_on_envs_ignoring_reset_mask() -> None:
    """A next-step env that ignores reset_mask: ended rows get one flagged ghost step."""
    env = GymnasiumVecEnv(RandomEndsVectorEnv(num_envs=2, terminate_prob=0.0, max_steps=2))
    assert env.emits_ghost_steps
    env.reset(seed=0)
    zeros = torch.zeros(2, dtype=torch.int64)
    env.step(zeros)
    ended = env.step(zeros)
    assert ended.truncated.tolist() == [True, True]
    assert ended.obs["obs"][:, 0].tolist() == [2.0, 2.0]
    ghost = env.step(zeros)
    assert ghost.valid.tolist() == [False, False]
    assert ghost.reward.tolist() == [0.0, 0.0]
    assert ghost.obs["obs"][:, 0].tolist() == [0.0, 0.0]
    assert env.step(zeros).valid.tolist() == [True, True]


def test_partial_reset_can_be_forced_for_custom_envs() -> None:
    """partial_reset=False on a Sync env switches to ghost handling explicitly."""
    factory = lambda: RandomEndsEnv(terminate_prob=0.0, max_steps=1)  # noqa: E731
    env = GymnasiumVecEnv(SyncVectorEnv([factory]), partial_reset=False)
    assert env.emits_ghost_steps


def test_disabled_autoreset_needs_partial_reset() -> None:
    """An env without autoreset that cannot reset rows is refused at construction."""
    raw = SyncVectorEnv([RandomEndsEnv], autoreset_mode=AutoresetMode.DISABLED)
    with pytest.raises(ConfigError, match="autoreset disabled"):
        GymnasiumVecEnv(raw, partial_reset=False)


def test_rejects_bad_constructor_arguments() -> None:
    """Unsupported observation spaces raise a clear error."""
    tuple_space = gym.spaces.Tuple((gym.spaces.Discrete(2),))
    with pytest.raises(SpecError, match="unsupported observation space"):
        GymnasiumVecEnv(_sync(tuple_space, BOX_ACTION))


def test_bad_autoreset_metadata() -> None:
    """An unknown autoreset mode in the env's metadata is reported with the valid ones."""
    raw = RandomEndsVectorEnv(num_envs=1)
    raw.metadata = {"autoreset_mode": "Sometimes"}
    with pytest.raises(ConfigError, match="Sometimes"):
        GymnasiumVecEnv(raw)


def test_default_seed_applies_to_the_first_reset_only() -> None:
    """default_seed seeds the first unseeded reset; explicit seeds win."""
    seeded = GymnasiumVecEnv(_random_ends(AutoresetMode.SAME_STEP).env, default_seed=3)
    reference = _random_ends(AutoresetMode.SAME_STEP)
    first, _ = seeded.reset()
    expected, _ = reference.reset(seed=3)
    assert torch.equal(first["obs"], expected["obs"])


def test_close_is_idempotent() -> None:
    """close() closes the wrapped env once."""
    env = _random_ends(AutoresetMode.SAME_STEP)
    env.close()
    env.close()
    assert env.env.closed


def test_same_step_env_without_final_obs_is_reported() -> None:
    """A same-step env that ends rows without info['final_obs'] breaks the contract."""

    class _Forgetful(gym.vector.VectorEnv[Any, Any, Any]):
        metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012

        def __init__(self) -> None:
            self.num_envs = 1
            self.single_observation_space = gym.spaces.Box(-1, 1, (1,))
            self.single_action_space = gym.spaces.Discrete(2)

        def reset(self, **_: Any) -> tuple[Any, dict[str, Any]]:
            return np.zeros((1, 1), np.float32), {}

        def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
            return np.zeros((1, 1), np.float32), np.ones(1), np.ones(1, bool), np.zeros(1, bool), {}

    env = GymnasiumVecEnv(_Forgetful(), partial_reset=True)
    env.reset()
    with pytest.raises(SpecError, match=r"without info\['final_obs'\]"):
        env.step(torch.zeros(1, dtype=torch.int64))


def _assert_owns_memory(result: StepResult, env_arrays: list[np.ndarray]) -> None:
    assert result.final_obs is not None
    tensors = [result.obs["obs"], result.final_obs["obs"], result.reward]
    tensors += [result.terminated, result.truncated]
    for tensor in tensors:
        for array in env_arrays:
            assert not np.shares_memory(tensor.numpy(), array)


@pytest.mark.parametrize("copy", [True, False])
@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_results_never_alias_the_envs_buffers(mode: AutoresetMode, copy: bool) -> None:
    """With or without SyncVectorEnv's copy, results own their memory and keep their values."""
    env = _random_ends(mode, copy=copy)
    raw = env.env
    assert isinstance(raw, SyncVectorEnv)
    env.reset(seed=3)
    kept: list[tuple[StepResult, list[torch.Tensor]]] = []
    for _ in range(12):
        result = env.step(torch.ones(3, dtype=torch.int64))
        assert isinstance(raw._observations, np.ndarray)
        _assert_owns_memory(result, [raw._observations])
        kept.append((result, [tensor.clone() for tensor in _parts(result)]))
    for result, snapshot in kept:
        for tensor, expected in zip(_parts(result), snapshot, strict=True):
            assert torch.equal(tensor, expected)


def _parts(result: StepResult) -> list[torch.Tensor]:
    assert result.final_obs is not None
    return [result.obs["obs"], result.final_obs["obs"], result.reward, *result[2:4]]


class _ReusingVectorEnv(gym.vector.VectorEnv[Any, Any, Any]):
    """A same-step vector env that returns the same arrays, rewritten, from every call."""

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012

    def __init__(self) -> None:
        self.num_envs = 2
        self.single_observation_space = gym.spaces.Box(-9, 9, (1,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.obs = np.zeros((2, 1), np.float32)
        self.reward = np.zeros(2, np.float32)
        self.terminated = np.zeros(2, np.bool_)
        self.truncated = np.zeros(2, np.bool_)
        self.copy = True  # same attribute name as Sync/Async envs, no such promise

    def reset(self, **_: Any) -> tuple[Any, dict[str, Any]]:
        self.obs[:] = 0.0
        return self.obs, {}

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        self.obs += 1.0
        self.reward[:] = self.obs[:, 0]
        self.terminated[:] = self.obs[:, 0] % 2 == 0
        self.truncated[:] = ~self.terminated
        final_obs = np.empty(2, dtype=object)
        final_obs[:] = list(self.obs)  # views of the reused buffer
        info = {"final_obs": final_obs, "_final_obs": np.ones(2, np.bool_)}
        return self.obs, self.reward, self.terminated, self.truncated, info


def test_results_never_alias_a_reusing_env() -> None:
    """Arrays of an env that rewrites its buffers in place are copied on every step."""
    raw = _ReusingVectorEnv()
    env = GymnasiumVecEnv(raw, partial_reset=False)
    env.reset()
    first = env.step(torch.zeros(2, dtype=torch.int64))
    second = env.step(torch.zeros(2, dtype=torch.int64))
    assert first.obs["obs"][:, 0].tolist() == [1.0, 1.0]
    assert first.final_obs is not None
    assert first.final_obs["obs"][:, 0].tolist() == [1.0, 1.0]
    assert first.reward.tolist() == [1.0, 1.0]
    assert first.terminated.tolist() == [False, False]
    assert first.truncated.tolist() == [True, True]
    assert second.terminated.tolist() == [True, True]
    _assert_owns_memory(second, [raw.obs, raw.reward, raw.terminated, raw.truncated])


class _UncopiedSyncVectorEnv(SyncVectorEnv):
    """A SyncVectorEnv subclass that hands out its own buffers despite ``copy=True``."""

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        result = super().step(actions)
        return self._observations, self._rewards, self._terminations, self._truncations, result[4]


def test_subclasses_of_sync_envs_are_copied() -> None:
    """Only Gymnasium's own classes are trusted to return fresh arrays."""
    factory = lambda: RandomEndsEnv(terminate_prob=0.3, max_steps=4)  # noqa: E731
    raw = _UncopiedSyncVectorEnv([factory] * 3, autoreset_mode=AutoresetMode.SAME_STEP)
    env = GymnasiumVecEnv(raw)
    env.reset(seed=0)
    for _ in range(6):
        result = env.step(torch.zeros(3, dtype=torch.int64))
        buffers = [raw._observations, raw._rewards, raw._terminations, raw._truncations]
        _assert_owns_memory(result, buffers)


def test_turning_copy_off_later_is_honoured() -> None:
    """copy is read on every step: switching it off makes the adapter copy again."""
    env = _random_ends(AutoresetMode.SAME_STEP)
    raw = env.env
    assert isinstance(raw, SyncVectorEnv)
    env.reset(seed=0)
    raw.copy = False
    result = env.step(torch.zeros(3, dtype=torch.int64))
    assert isinstance(raw._observations, np.ndarray)
    _assert_owns_memory(result, [raw._observations])


@pytest.mark.parametrize("copy", [True, False])
def test_steps_skip_the_envs_deepcopy_and_keep_its_copy_setting(
    copy: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SyncVectorEnv is stepped without its deepcopy; its copy attribute is left as it was."""
    env = _random_ends(AutoresetMode.SAME_STEP, copy=copy)
    raw = env.env
    assert isinstance(raw, SyncVectorEnv)
    env.reset(seed=0)
    copies: list[object] = []

    def counting_deepcopy(value: Any, *args: Any) -> Any:
        copies.append(value)
        return copy_module.deepcopy(value, *args)

    monkeypatch.setattr("gymnasium.vector.sync_vector_env.deepcopy", counting_deepcopy)
    for _ in range(6):
        result = env.step(torch.zeros(3, dtype=torch.int64))
        assert raw.copy is copy
        assert isinstance(raw._observations, np.ndarray)
        _assert_owns_memory(result, [raw._observations])
    assert copies == []


class _FailingStepEnv(gym.Env[Any, Any]):
    """A single env whose step raises."""

    observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        raise RuntimeError("the env failed")


def test_a_failing_step_restores_the_envs_copy_setting() -> None:
    """The copy attribute is restored even when the env's step raises."""
    raw = SyncVectorEnv([_FailingStepEnv] * 2, autoreset_mode=AutoresetMode.SAME_STEP)
    env = GymnasiumVecEnv(raw)
    env.reset(seed=0)
    with pytest.raises(RuntimeError, match="the env failed"):
        env.step(torch.zeros(2, dtype=torch.int64))
    assert raw.copy is True


def test_actions_that_require_grad_are_detached() -> None:
    """A Box action that requires grad reaches the env as plain values."""
    raw = _sync(gym.spaces.Box(-1, 1, (1,)), BOX_ACTION)
    env = GymnasiumVecEnv(raw)
    env.reset(seed=0)
    action = torch.tensor([[0.5, -0.5], [0.25, 0.0]], requires_grad=True)
    env.step(action)
    received = raw.envs[1].unwrapped.last_action  # type: ignore[attr-defined]
    np.testing.assert_array_equal(received, np.array([0.25, 0.0], dtype=np.float32))


@pytest.mark.parametrize("copy", [True, False])
def test_async_results_keep_their_values(copy: bool) -> None:
    """AsyncVectorEnv's shared-memory observations are never aliased by results."""
    factory = lambda: RandomEndsEnv(terminate_prob=0.3, max_steps=4)  # noqa: E731
    raw = AsyncVectorEnv(
        [factory] * 2, autoreset_mode=AutoresetMode.SAME_STEP, copy=copy, context="fork"
    )
    env = GymnasiumVecEnv(raw)
    try:
        env.reset(seed=0)
        kept = [env.step(torch.zeros(2, dtype=torch.int64)) for _ in range(8)]
        assert isinstance(raw.observations, np.ndarray)
        for result in kept:
            _assert_owns_memory(result, [raw.observations])
        counts = [result.obs["obs"][:, 0].tolist() for result in kept]
        assert counts != [counts[-1]] * len(counts)
    finally:
        env.close()


# ------------------------------------------------- checks of the wrapped env's outputs

_Outputs = list[Any]


class _NativeVectorEnv(gym.vector.VectorEnv[Any, Any, Any]):
    """A native (not Sync/Async) vector env of zeros; ``patch`` rewrites one step's outputs.

    The step counter restarts at each ``reset``; ``patch`` sees the outputs of
    step ``at`` as a list ``[obs, reward, terminated, truncated, info]``.
    """

    def __init__(
        self,
        *,
        num_envs: int = 2,
        space: gym.Space[Any] | None = None,
        at: int = 1,
        patch: Callable[[_Outputs], _Outputs] | None = None,
        mode: AutoresetMode = AutoresetMode.SAME_STEP,
    ) -> None:
        self.metadata = {"autoreset_mode": mode}
        self.num_envs = num_envs
        self.single_observation_space = space or gym.spaces.Box(-9, 9, (3,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.at = at
        self.patch = patch
        self.reset_patch: Callable[[Any], Any] | None = None
        self.steps = 0

    def _obs(self) -> Any:
        return create_empty_array(self.single_observation_space, n=self.num_envs)

    def reset(self, **_: Any) -> Any:
        self.steps = 0
        outputs: tuple[Any, dict[str, Any]] = (self._obs(), {})
        return outputs if self.reset_patch is None else self.reset_patch(outputs)

    def step(self, actions: Any) -> Any:
        self.steps += 1
        n = self.num_envs
        outputs: _Outputs = [self._obs(), np.ones(n), np.zeros(n, bool), np.zeros(n, bool), {}]
        if self.patch is not None and self.steps == self.at:
            outputs = self.patch(outputs)
        return tuple(outputs)


def _set(index: int, value: Any) -> Callable[[_Outputs], _Outputs]:
    def patch(outputs: _Outputs) -> _Outputs:
        outputs[index] = value
        return outputs

    return patch


def _step_native(raw: _NativeVectorEnv, steps: int) -> None:
    env = GymnasiumVecEnv(raw, partial_reset=True)
    env.reset(seed=0)
    for _ in range(steps):
        env.step(torch.zeros(raw.num_envs, dtype=torch.int64))


def test_wrong_observation_shape_names_key_step_and_space() -> None:
    """A native env returning [8, 4] observations for a (3,) space fails at the step."""
    raw = _NativeVectorEnv(num_envs=8, at=3, patch=_set(0, np.zeros((8, 4), np.float32)))
    with pytest.raises(EnvContractError) as caught:
        _step_native(raw, 3)
    assert str(caught.value) == (
        "GymnasiumVecEnv.step (step 3): observation 'obs' has shape [8, 4], expected [8, 3] "
        "([num_envs, *space.shape]) from the env's single_observation_space "
        "Box(-9.0, 9.0, (3,), float32); check the env with typedrl.envs.check_vec_env for a "
        "report of every rule"
    )


@pytest.mark.parametrize(
    ("index", "value", "message"),
    [
        (1, np.ones((2, 1)), r"\(step 2\): reward has shape \[2, 1\], expected \[2\]"),
        (1, np.ones(2, bool), r"\(step 2\): reward has dtype bool, expected a real"),
        (1, np.array(["a", "b"]), r"reward has dtype <U1"),
        (2, np.zeros(2, np.int64), r"terminated has dtype int64, expected bool"),
        (3, np.zeros(3, bool), r"truncated has shape \[3\], expected \[2\]"),
        (3, [[False], [False]], r"truncated has shape \[2, 1\], expected \[2\]"),
        (4, ["not", "a", "dict"], r"\(step 2\): info must be a dict, got \['not'"),
        (0, np.zeros((2, 3), bool), r"observation 'obs' has dtype bool, expected a real"),
        (0, np.zeros((2, 3), np.complex64), r"observation 'obs' has dtype complex64"),
        (0, [[0.0, 0.0], [0.0]], r"observation 'obs' must be a NumPy array"),
    ],
)
def test_wrong_step_outputs_are_reported(index: int, value: Any, message: str) -> None:
    """Rewards, flags, info and observations of the wrong shape or dtype raise at the step."""
    with pytest.raises(EnvContractError, match=rf"^GymnasiumVecEnv\.step .*{message}"):
        _step_native(_NativeVectorEnv(at=2, patch=_set(index, value)), 2)


def test_convertible_outputs_pass_the_checks() -> None:
    """Lists, integer rewards and float64 observations for a float32 Box are converted."""
    lists = _NativeVectorEnv(patch=_set(0, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    env = GymnasiumVecEnv(lists, partial_reset=True)
    env.reset()
    assert env.step(torch.zeros(2, dtype=torch.int64)).obs["obs"][1].tolist() == [4.0, 5.0, 6.0]
    integers = _NativeVectorEnv(patch=_set(1, np.array([3, 4])))
    env = GymnasiumVecEnv(integers, partial_reset=True)
    env.reset()
    result = env.step(torch.zeros(2, dtype=torch.int64))
    assert result.reward.tolist() == [3.0, 4.0]
    assert result.reward.dtype == torch.float32


def test_step_outputs_of_the_wrong_arity_are_reported() -> None:
    """A step returning the old 4-tuple API raises EnvContractError."""
    raw = _NativeVectorEnv(patch=lambda outputs: outputs[:4])
    with pytest.raises(EnvContractError, match=r"\(step 1\): the env's step must return the 5"):
        _step_native(raw, 1)


def test_step_numbers_restart_at_reset() -> None:
    """Steps in messages count from 1 after the latest reset."""
    raw = _NativeVectorEnv(at=2, patch=_set(1, np.ones(3)))
    env = GymnasiumVecEnv(raw, partial_reset=True)
    zeros = torch.zeros(2, dtype=torch.int64)
    env.reset()
    env.step(zeros)
    env.reset()
    env.step(zeros)
    with pytest.raises(EnvContractError, match=r"\(step 2\): reward has shape \[3\]"):
        env.step(zeros)


def test_wrong_reset_outputs_are_reported() -> None:
    """Reset observations are checked too; a reset that is not an (obs, info) pair is refused."""
    raw = _NativeVectorEnv()
    raw.reset_patch = lambda outputs: (np.zeros((2, 1), np.float32), {})
    with pytest.raises(
        EnvContractError,
        match=r"^GymnasiumVecEnv\.reset: observation 'obs' has shape \[2, 1\], expected \[2, 3\]",
    ):
        GymnasiumVecEnv(raw, partial_reset=True).reset()
    raw.reset_patch = lambda outputs: outputs[0]
    with pytest.raises(EnvContractError, match=r"reset must return the pair \(obs, info\)"):
        GymnasiumVecEnv(raw, partial_reset=True).reset()
    raw.reset_patch = lambda outputs: (outputs[0], None)
    with pytest.raises(EnvContractError, match=r"GymnasiumVecEnv\.reset: info must be a dict"):
        GymnasiumVecEnv(raw, partial_reset=True).reset()


_DICT_SPACE = gym.spaces.Dict(
    {
        "policy": gym.spaces.Box(-1, 1, (3,)),
        "extra": gym.spaces.Dict({"flag": gym.spaces.Discrete(2)}),
    }
)


@pytest.mark.parametrize(
    ("obs", "message"),
    [
        (
            {"policy": np.zeros((2, 3), np.float32)},
            r"observation has keys \['policy'\], expected \['extra', 'policy'\] "
            r"\(missing \['extra'\], unexpected \[\]\)",
        ),
        (
            {"policy": np.zeros((2, 3), np.float32), "extra": {"flag": np.zeros((2, 1), int)}},
            r"observation \('extra', 'flag'\) has shape \[2, 1\], expected \[2\] .*Discrete\(2\)",
        ),
        (
            {"policy": np.zeros((2, 3), np.float32), "extra": {"flag": np.zeros(2)}},
            r"observation \('extra', 'flag'\) has dtype float64, expected an integer dtype "
            r"\(converted to int64\)",
        ),
        (
            np.zeros((2, 3), np.float32),
            r"observation must be a dict with keys \['extra', 'policy'\]",
        ),
    ],
)
def test_wrong_dict_observations_name_the_key(obs: Any, message: str) -> None:
    """Dict observations are checked leaf by leaf, nested keys included."""
    raw = _NativeVectorEnv(space=_DICT_SPACE, at=1, patch=_set(0, obs))
    with pytest.raises(EnvContractError, match=rf"^GymnasiumVecEnv\.step \(step 1\): {message}"):
        _step_native(raw, 1)


def _ending_row_one(item: Any, rows: int = 2) -> Callable[[_Outputs], _Outputs]:
    """A patch that terminates row 1 and reports ``item`` as its terminal observation."""

    def patch(outputs: _Outputs) -> _Outputs:
        outputs[2] = np.array([False, True])
        final_obs = np.empty(rows, dtype=object)
        final_obs[rows - 1] = item
        outputs[4] = {"final_obs": final_obs, "_final_obs": np.array([False, True])}
        return outputs

    return patch


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        (
            _ending_row_one(np.zeros(4, np.float32)),
            r"info\['final_obs'\] observation 'obs' of row 1 has shape \[4\], expected \[3\] "
            r"\(space.shape\)",
        ),
        (
            _ending_row_one(np.zeros(1, np.float32)),
            r"info\['final_obs'\] observation 'obs' of row 1 has shape \[1\], expected \[3\]",
        ),
        (
            _ending_row_one(np.zeros(3, bool)),
            r"info\['final_obs'\] observation 'obs' of row 1 has dtype bool",
        ),
        (
            _ending_row_one(np.zeros(3, np.float32), rows=1),
            r"info\['final_obs'\] must hold one observation per row \(2 rows; rows \[1\] ended\)",
        ),
    ],
)
def test_wrong_terminal_observations_are_reported(
    patch: Callable[[_Outputs], _Outputs], message: str
) -> None:
    """Each terminal observation of a same-step env is checked against the space's row shape."""
    with pytest.raises(EnvContractError, match=rf"^GymnasiumVecEnv\.step \(step 1\): {message}"):
        _step_native(_NativeVectorEnv(patch=patch), 1)


def test_terminal_observations_of_dict_spaces_are_checked() -> None:
    """A terminal observation missing a key of a Dict space names the row."""
    item = {"policy": np.zeros(3, np.float32)}
    raw = _NativeVectorEnv(space=_DICT_SPACE, patch=_ending_row_one(item))
    with pytest.raises(
        EnvContractError, match=r"info\['final_obs'\] observation of row 1 has keys \['policy'\]"
    ):
        _step_native(raw, 1)


def test_partial_reset_observations_are_checked() -> None:
    """Observations of the partial reset inside a step are checked and named as such."""
    raw = _NativeVectorEnv(mode=AutoresetMode.NEXT_STEP, patch=_set(2, np.array([True, False])))
    env = GymnasiumVecEnv(raw, partial_reset=True)
    env.reset()
    raw.reset_patch = lambda outputs: (np.zeros((2, 5), np.float32), {})
    with pytest.raises(
        EnvContractError,
        match=r"^GymnasiumVecEnv\.step \(step 1\): reset\(options=\{'reset_mask': \.\.\.\}\) "
        r"observation 'obs' has shape \[2, 5\], expected \[2, 3\]",
    ):
        env.step(torch.zeros(2, dtype=torch.int64))


def test_integer_observations_must_stay_integer() -> None:
    """Float pixels for a uint8 Box would be truncated silently: they are refused."""
    space = gym.spaces.Box(0, 255, (2, 2), np.uint8)
    raw = _NativeVectorEnv(space=space, patch=_set(0, np.zeros((2, 2, 2), np.float32)))
    with pytest.raises(
        EnvContractError, match=r"observation 'obs' has dtype float32, expected an integer"
    ):
        _step_native(raw, 1)


# ------------------------------------------------- the space of the returned observations


@pytest.mark.parametrize(
    ("space", "float_dtype", "expected"),
    [
        (
            gym.spaces.Box(-2.5, 3.0, (3,), np.float64),
            "float32",
            gym.spaces.Box(-2.5, 3.0, (3,), np.float32),
        ),
        (
            gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "float64",
            gym.spaces.Box(-1.0, 1.0, (2,), np.float64),
        ),
        (
            gym.spaces.MultiDiscrete([2, 3], dtype=np.int32),
            "float32",
            gym.spaces.MultiDiscrete([2, 3], dtype=np.int64),
        ),
        (
            gym.spaces.Discrete(4, start=1, dtype=np.int32),
            "float32",
            gym.spaces.Discrete(4, start=1, dtype=np.int64),
        ),
    ],
)
def test_observation_space_describes_the_returned_observations(
    space: gym.Space[Any], float_dtype: Literal["float32", "float64"], expected: gym.Space[Any]
) -> None:
    """single_observation_space has the dtypes the adapter returns, and the same bounds."""
    env = GymnasiumVecEnv(_sync(space, BOX_ACTION), float_dtype=float_dtype)
    assert env.single_observation_space == expected
    assert env.env.single_observation_space is space
    obs, _ = env.reset(seed=0)
    result = env.step(torch.zeros(2, 2))
    for batch in (obs, result.obs):
        for row in batch["obs"].numpy():
            assert row.dtype == expected.dtype
            assert env.single_observation_space.contains(row)


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Box(-1, 1, (3,), np.float32),
        gym.spaces.Box(0, 255, (2, 2), np.uint8),
        gym.spaces.Discrete(5),
        gym.spaces.MultiBinary(4),
        _DICT_SPACE,
    ],
)
def test_observation_space_is_the_envs_own_when_nothing_is_converted(
    space: gym.Space[Any],
) -> None:
    """Spaces whose observations keep their dtype are passed through as they are."""
    env = GymnasiumVecEnv(_sync(space, BOX_ACTION))
    assert env.single_observation_space is env.env.single_observation_space


def test_float64_gymnasium_env_passes_the_checker() -> None:
    """A float64 Box env through the adapter (float32 by default) passes check_vec_env."""
    env = make(
        "CartPole-v1",
        num_envs=4,
        seed=0,
        wrappers=[lambda single: gym.wrappers.DtypeObservation(single, np.float64)],
    )
    try:
        assert env.single_observation_space.dtype == np.float32
        report = check_vec_env(env, num_steps=40, max_examples=3)
    finally:
        env.close()
    assert report.ok, str(report)
