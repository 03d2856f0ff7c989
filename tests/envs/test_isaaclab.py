"""Tests for typedrl.envs._isaaclab.IsaacLabVecEnv, driven by the Isaac Lab fakes."""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import gymnasium as gym
import pytest
import torch
from tensordict import TensorDict
from torch import Tensor

from typedrl.envs._isaaclab import IsaacLabEnvLike, IsaacLabObs, IsaacLabVecEnv
from typedrl.errors import ConfigError, EnvContractError, SpecError
from typedrl.protocols import VecEnv
from typedrl.testing._isaaclab_fake import FakeDirectRLEnv, FakeManagerBasedRLEnv, FakeRLEnvCfg

FakeEnv = FakeManagerBasedRLEnv | FakeDirectRLEnv
FAKES = [FakeManagerBasedRLEnv, FakeDirectRLEnv]
StepTuple = tuple[IsaacLabObs, Tensor, Tensor, Tensor, dict[str, Any]]


def _make(kind: type[FakeEnv], **cfg: Any) -> FakeEnv:
    cfg.setdefault("seed", 0)
    return kind(FakeRLEnvCfg(**cfg))


def _td_equal(first: TensorDict, second: TensorDict) -> bool:
    keys = set(first.keys(include_nested=True, leaves_only=True))
    if keys != set(second.keys(include_nested=True, leaves_only=True)):
        return False
    return all(torch.equal(first.get(key), second.get(key)) for key in keys)


def _push(num_envs: int, value: float = 1.0) -> Tensor:
    return torch.full((num_envs, 2), value)


@dataclass
class _OldCfg:
    """An env config from an Isaac Lab release without ``compute_final_obs``."""

    is_finite_horizon: bool = False


class _Mutated:
    """Delegates to a fake but lets a test corrupt what ``step`` returns."""

    def __init__(
        self,
        inner: FakeEnv,
        mutate: Callable[[StepTuple], StepTuple] = lambda result: result,
        cfg: Any = None,
    ) -> None:
        self.inner = inner
        self.mutate = mutate
        self.num_envs = inner.num_envs
        self.device = inner.device
        self.cfg = inner.cfg if cfg is None else cfg
        self.single_observation_space = inner.single_observation_space
        self.single_action_space: gym.Space[Any] = inner.single_action_space

    def step(self, action: Tensor) -> StepTuple:
        return self.mutate(self.inner.step(action))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[IsaacLabObs, dict[str, Any]]:
        return self.inner.reset(seed=seed, options=options)

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize("kind", FAKES)
def test_conforms_to_protocols(kind: type[FakeEnv]) -> None:
    """The fakes are IsaacLabEnvLike and the adapter is a typedrl VecEnv."""
    fake = _make(kind)
    assert isinstance(fake, IsaacLabEnvLike)
    env = IsaacLabVecEnv(fake)
    assert isinstance(env, VecEnv)
    assert env.env is fake
    assert env.num_envs == 4
    assert env.device == torch.device("cpu")


@pytest.mark.parametrize("kind", FAKES)
@pytest.mark.parametrize("critic", ["concatenated", "nested", "none"])
def test_groups_become_keys(kind: type[FakeEnv], critic: str) -> None:
    """Observation groups are TensorDict keys; term dicts become nested TensorDicts."""
    fake = _make(kind, num_envs=3, critic=critic)
    env = IsaacLabVecEnv(fake)
    obs, _ = env.reset(seed=1)
    assert obs.batch_size == torch.Size([3])
    assert obs.device == torch.device("cpu")
    assert env.single_observation_space is fake.single_observation_space
    expected = {"policy"} if critic == "none" else {"policy", "critic"}
    assert set(obs.keys()) == expected
    assert set(env.single_observation_space.spaces) == expected
    raw = fake.obs_buf
    raw_policy = raw["policy"]
    assert isinstance(raw_policy, Tensor)
    assert torch.equal(obs["policy"], raw_policy)
    if critic == "nested":
        critic_obs = obs["critic"]
        assert isinstance(critic_obs, TensorDict)
        assert critic_obs.batch_size == torch.Size([3])
        assert set(critic_obs.keys()) == {"position", "last_action", "progress"}
        raw_critic = raw["critic"]
        assert isinstance(raw_critic, dict)
        assert torch.equal(critic_obs["progress"], raw_critic["progress"])
    elif critic == "concatenated":
        assert obs["critic"].shape == (3, 5)
    result = env.step(_push(3))
    assert set(result.obs.keys()) == expected


@pytest.mark.parametrize("kind", FAKES)
def test_infinite_horizon_time_outs_are_truncations(kind: type[FakeEnv]) -> None:
    """With is_finite_horizon False, time-outs become truncated and terminated stays apart."""
    env = IsaacLabVecEnv(_make(kind, num_envs=2, episode_length_s=0.3, termination_radius=100.0))
    assert not env.is_finite_horizon
    env.reset(seed=0)
    for _ in range(2):
        result = env.step(_push(2, 0.0))
        assert not result.done.any()
    result = env.step(_push(2, 0.0))
    assert result.truncated.tolist() == [True, True]
    assert result.terminated.tolist() == [False, False]


@pytest.mark.parametrize("kind", FAKES)
def test_finite_horizon_time_outs_are_terminations(kind: type[FakeEnv]) -> None:
    """With is_finite_horizon True, time-outs are reported as terminated, never truncated."""
    fake = _make(
        kind, num_envs=2, episode_length_s=0.3, termination_radius=100.0, is_finite_horizon=True
    )
    env = IsaacLabVecEnv(fake)
    assert env.is_finite_horizon
    env.reset(seed=0)
    env.step(_push(2, 0.0))
    env.step(_push(2, 0.0))
    result = env.step(_push(2, 0.0))
    assert result.terminated.tolist() == [True, True]
    assert result.truncated.tolist() == [False, False]


@pytest.mark.parametrize("kind", FAKES)
def test_termination_and_time_out_together(kind: type[FakeEnv]) -> None:
    """A row that terminates on its last step carries both flags (terminated wins)."""
    env = IsaacLabVecEnv(
        _make(kind, num_envs=1, episode_length_s=0.1, termination_radius=1.5, init_range=0.0)
    )
    env.reset(seed=0)
    result = env.step(_push(1, 20.0))
    assert result.terminated.tolist() == [True]
    assert result.truncated.tolist() == [True]


@pytest.mark.parametrize("kind", FAKES)
@pytest.mark.parametrize("critic", ["concatenated", "nested"])
def test_final_obs_is_exact(kind: type[FakeEnv], critic: str) -> None:
    """Rows that ended hold their pre-reset observation; the other rows equal obs."""
    cfg: dict[str, Any] = {"num_envs": 3, "termination_radius": 1.0, "init_range": 0.0}
    fake = _make(kind, compute_final_obs=True, critic=critic, **cfg)
    env = IsaacLabVecEnv(fake)
    assert env.provides_final_obs
    obs, _ = env.reset(seed=0)
    # Row 0 leaves the radius after three steps (0.1 per unit of action per step).
    action = torch.tensor([[4.0, 0.0], [0.5, 0.0], [0.0, 0.0]])
    dt = fake.cfg.sim_dt
    positions, results = [], []
    for _ in range(3):
        position = obs["policy"]
        for _ in range(fake.cfg.decimation):
            position = position + dt * action
        positions.append(position)
        results.append(env.step(action))
        obs = results[-1].obs
    position, result = positions[-1], results[-1]
    assert result.done.tolist() == [True, False, False]
    final_obs = result.final_obs
    assert final_obs is not None
    assert torch.equal(final_obs["policy"][0], position[0])
    assert not torch.equal(result.obs["policy"][0], position[0])
    assert _td_equal(final_obs[1:], result.obs[1:])
    last_action = final_obs["critic", "last_action"] if critic == "nested" else None
    if last_action is not None:
        assert torch.equal(last_action[0], action[0])
        assert torch.equal(result.obs["critic", "last_action"][0], torch.zeros(2))


@pytest.mark.parametrize("kind", FAKES)
def test_stale_final_obs_rows_are_ignored(kind: type[FakeEnv]) -> None:
    """Rows not done in this step never take values from extras['final_obs']."""

    def poison(result: StepTuple) -> StepTuple:
        obs, reward, terminated, time_outs, extras = result
        if "final_obs" in extras:
            policy = extras["final_obs"]["policy"]
            done = terminated | time_outs
            extras["final_obs"]["policy"] = torch.where(done[:, None], policy, policy + 1000.0)
        return obs, reward, terminated, time_outs, extras

    fake = _make(kind, num_envs=3, termination_radius=1.0, init_range=0.0, compute_final_obs=True)
    env = IsaacLabVecEnv(_Mutated(fake, poison))
    env.reset(seed=0)
    action = torch.tensor([[4.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    results = [env.step(action) for _ in range(5)]
    assert [r.done.tolist() for r in results[2:4]] == [[True, False, False], [False] * 3]
    # After the first done the key stays in extras (stale) on every later step.
    assert "final_obs" in fake.extras
    for result in results:
        final_obs = result.final_obs
        assert final_obs is not None
        keep = ~result.done
        assert torch.equal(final_obs["policy"][keep], result.obs["policy"][keep])
        assert bool((final_obs["policy"].abs() < 100.0).all())


@pytest.mark.parametrize("kind", FAKES)
def test_without_compute_final_obs(kind: type[FakeEnv]) -> None:
    """Without compute_final_obs the adapter says so and never substitutes an observation."""
    env = IsaacLabVecEnv(_make(kind, num_envs=2, episode_length_s=0.1))
    assert not env.provides_final_obs
    env.reset(seed=0)
    result = env.step(_push(2))
    assert result.truncated.all()
    assert result.final_obs is None


def test_final_obs_option() -> None:
    """'required' insists on compute_final_obs; 'ignore' drops terminal observations."""
    with pytest.raises(ConfigError, match="compute_final_obs = True"):
        IsaacLabVecEnv(_make(FakeManagerBasedRLEnv), final_obs="required")
    required = IsaacLabVecEnv(
        _make(FakeManagerBasedRLEnv, compute_final_obs=True), final_obs="required"
    )
    assert required.provides_final_obs
    ignored = IsaacLabVecEnv(
        _make(FakeManagerBasedRLEnv, compute_final_obs=True, episode_length_s=0.1),
        final_obs="ignore",
    )
    assert not ignored.provides_final_obs
    ignored.reset(seed=0)
    assert ignored.step(_push(4)).final_obs is None


def test_config_without_compute_final_obs_field() -> None:
    """Isaac Lab releases without the compute_final_obs field give provides_final_obs False."""
    fake = _make(FakeManagerBasedRLEnv, compute_final_obs=True)
    env = IsaacLabVecEnv(_Mutated(fake, cfg=_OldCfg(is_finite_horizon=True)))
    assert not env.provides_final_obs
    assert env.is_finite_horizon
    with pytest.raises(ConfigError, match="absent"):
        IsaacLabVecEnv(_Mutated(fake, cfg=_OldCfg()), final_obs="required")


@pytest.mark.parametrize("kind", FAKES)
def test_missing_final_obs_entry_raises(kind: type[FakeEnv]) -> None:
    """With the flag on, a step where rows ended without extras['final_obs'] raises."""

    def drop(result: StepTuple) -> StepTuple:
        result[4].pop("final_obs", None)
        return result

    fake = _make(kind, num_envs=2, episode_length_s=0.2, compute_final_obs=True)
    env = IsaacLabVecEnv(_Mutated(fake, drop))
    env.reset(seed=0)
    first = env.step(_push(2, 0.0))
    assert first.final_obs is not None
    assert torch.equal(first.final_obs["policy"], first.obs["policy"])
    with pytest.raises(EnvContractError, match=r"envs \[0, 1\] ended.*final_obs"):
        env.step(_push(2, 0.0))


@pytest.mark.parametrize("kind", FAKES)
def test_logs_surface_only_when_fresh(kind: type[FakeEnv]) -> None:
    """info['log'] appears on steps that rebuilt extras['log'], never for a stale log."""
    env = IsaacLabVecEnv(_make(kind, num_envs=2, episode_length_s=0.2, termination_radius=100.0))
    _, info = env.reset(seed=0)
    assert "log" in info
    first = env.step(_push(2, 0.0))
    assert "log" not in first.info
    second = env.step(_push(2, 0.0))
    assert second.done.all()
    log = second.info["log"]
    assert set(log) == {
        "Episode_Reward/distance",
        "Metrics/success_rate",
        "Episode_Termination/out_of_bounds",
        "Episode_Termination/time_out",
    }
    time_out_log = log["Episode_Termination/time_out"]
    assert isinstance(time_out_log, Tensor)
    assert time_out_log.item() == 1.0
    reward_log = log["Episode_Reward/distance"]
    assert isinstance(reward_log, Tensor)
    assert reward_log.shape == ()
    assert reward_log.dtype == torch.float32
    assert "log" not in env.step(_push(2, 0.0)).info
    assert "log" in env.step(_push(2, 0.0)).info


def test_log_updated_in_place_is_fresh() -> None:
    """A log dict kept across resets counts as fresh when a value is a new object."""
    fake = _make(FakeDirectRLEnv, num_envs=2, episode_length_s=0.2, termination_radius=100.0)
    env = IsaacLabVecEnv(fake)
    _, info = env.reset(seed=0)
    assert "log" in info
    log = fake.extras["log"]
    assert "log" not in env.step(_push(2, 0.0)).info
    second = env.step(_push(2, 0.0))
    assert fake.extras["log"] is log
    assert second.info["log"]["Metrics/success_rate"] == torch.tensor(1.0)
    assert "log" not in env.step(_push(2, 0.0)).info
    log["Extra/number"] = 3
    assert env.step(_push(2, 0.0)).info["log"]["Extra/number"] == 3.0
    assert "log" not in env.step(_push(2, 0.0)).info


def test_bad_log_value_raises() -> None:
    """A log entry that is neither a tensor nor a number is rejected with its key."""

    def corrupt(result: StepTuple) -> StepTuple:
        if "log" in result[4]:
            result[4]["log"] = {"Episode/name": "fast"}
        return result

    env = IsaacLabVecEnv(
        _Mutated(_make(FakeManagerBasedRLEnv, num_envs=1, episode_length_s=0.1), corrupt)
    )
    env.reset(seed=0)
    with pytest.raises(SpecError, match=r"extras\['log'\]\['Episode/name'\]"):
        env.step(_push(1))


@pytest.mark.parametrize("kind", FAKES)
def test_clip_to_scalar(kind: type[FakeEnv]) -> None:
    """A float clip_actions clamps actions to [-c, c] and reports those bounds."""
    fake = _make(kind, num_envs=2)
    env = IsaacLabVecEnv(fake, clip_actions=0.5)
    space = env.single_action_space
    assert space.low.tolist() == [-0.5, -0.5]
    assert space.high.tolist() == [0.5, 0.5]
    env.reset(seed=0)
    env.step(torch.tensor([[2.0, -0.25], [-3.0, 0.5]]))
    assert fake.last_action.tolist() == [[0.5, -0.25], [-0.5, 0.5]]


def test_clip_to_space() -> None:
    """clip_actions='space' clamps to the env's finite bounds."""
    fake = _make(FakeDirectRLEnv, num_envs=1, action_bound=0.25)
    env = IsaacLabVecEnv(fake, clip_actions="space")
    env.reset(seed=0)
    env.step(torch.tensor([[1.0, -1.0]]))
    assert fake.last_action.tolist() == [[0.25, -0.25]]
    narrower = IsaacLabVecEnv(fake, clip_actions=0.1)
    assert narrower.single_action_space.high.tolist() == pytest.approx([0.1, 0.1])
    unclipped = IsaacLabVecEnv(fake)
    assert unclipped.single_action_space is fake.single_action_space


@pytest.mark.parametrize(
    "value",
    [0.0, -1.0, math.nan, math.inf, True, "bounds", pytest.param(10**400, id="int-past-floats")],
)
def test_bad_clip_values(value: Any) -> None:
    """clip_actions must be None, 'space' or a finite float > 0 (an int past floats too)."""
    with pytest.raises(ConfigError, match="clip_actions must be None, 'space' or a finite float"):
        IsaacLabVecEnv(_make(FakeManagerBasedRLEnv), clip_actions=value)


def test_clip_to_space_needs_finite_bounds() -> None:
    """Isaac Lab's unbounded action spaces cannot be clipped to 'space'."""
    with pytest.raises(ConfigError, match="pass a float bound"):
        IsaacLabVecEnv(_make(FakeManagerBasedRLEnv), clip_actions="space")


def test_action_validation() -> None:
    """Actions with the wrong shape or dtype raise SpecError before reaching the env."""
    fake = _make(FakeManagerBasedRLEnv, num_envs=2)
    env = IsaacLabVecEnv(fake)
    env.reset(seed=0)
    with pytest.raises(SpecError, match=r"IsaacLabVecEnv\.step: action must have shape \[2, 2\]"):
        env.step(torch.zeros(2, 3))
    with pytest.raises(SpecError, match="floating point"):
        env.step(torch.zeros(2, 2, dtype=torch.int64))
    assert fake.common_step_counter == 0


def _replace(index: int, value: Any) -> Callable[[StepTuple], StepTuple]:
    def mutate(result: StepTuple) -> StepTuple:
        items = list(result)
        items[index] = value(items[index]) if callable(value) else value
        return cast(StepTuple, tuple(items))

    return mutate


def _obs_change(change: Callable[[IsaacLabObs], None]) -> Callable[[StepTuple], StepTuple]:
    def mutate(result: StepTuple) -> StepTuple:
        obs = dict(result[0])
        change(obs)
        return (obs, *result[1:])

    return mutate


def _final_obs_change(change: Callable[[IsaacLabObs], None]) -> Callable[[StepTuple], StepTuple]:
    def mutate(result: StepTuple) -> StepTuple:
        if "final_obs" in result[4]:
            change(result[4]["final_obs"])
        return result

    return mutate


def _drop_last_column(obs: IsaacLabObs) -> None:
    policy = obs["policy"]
    assert isinstance(policy, Tensor)
    obs["policy"] = policy[:, :1]


def _delete_critic(obs: IsaacLabObs) -> None:
    del obs["critic"]


def _add_group(obs: IsaacLabObs) -> None:
    obs["extra"] = torch.zeros(4, 1)


def _policy_to_list(obs: IsaacLabObs) -> None:
    obs["policy"] = [0.0]  # type: ignore[assignment]


def _policy_to_double(obs: IsaacLabObs) -> None:
    policy = obs["policy"]
    assert isinstance(policy, Tensor)
    obs["policy"] = policy.double()


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (_replace(1, lambda r: r.to(torch.int64)), r"reward from the env must be a floating"),
        (_replace(1, lambda r: r[:2]), r"reward .* of shape \[4\].*got dtype .* shape \[2\]"),
        (_replace(1, lambda r: r.to("meta")), r"reward .* on cpu, got .* on meta"),
        (_replace(1, [0.0] * 4), r"reward from the env must be .* tensor, got \[0\.0"),
        (_replace(2, lambda t: t.float()), r"terminated from the env must be a torch\.bool"),
        (_replace(3, lambda t: t[:, None]), r"time_outs .* shape \[4\].*got .* shape \[4, 1\]"),
        (_replace(4, None), r"extras must be a dict"),
        (_obs_change(_drop_last_column), r"observation 'policy' must have shape \[4, 2\]"),
        (_obs_change(_delete_critic), r"groups must be \['critic', 'policy'\]"),
        (_obs_change(_add_group), r"got \['critic', 'extra', 'policy'\]"),
        (_obs_change(_policy_to_list), r"observation 'policy' must be a torch\.Tensor"),
        (_final_obs_change(_drop_last_column), r"final_obs'\]\['policy'\] must match"),
        (_final_obs_change(_policy_to_double), r"dtype torch\.float32.*got dtype torch\.float64"),
        (_final_obs_change(_delete_critic), r"extras\['final_obs'\] lacks .* 'critic'"),
    ],
)
def test_wrong_env_outputs_raise_spec_error(
    mutate: Callable[[StepTuple], StepTuple], match: str
) -> None:
    """Wrong types, shapes, dtypes, devices or keys from the env raise SpecError."""
    fake = _make(FakeManagerBasedRLEnv, episode_length_s=0.1, compute_final_obs=True)
    env = IsaacLabVecEnv(_Mutated(fake, mutate))
    env.reset(seed=0)
    with pytest.raises(SpecError, match=match):
        env.step(_push(4))


def test_nested_group_term_mismatch() -> None:
    """A nested group must hold exactly its declared terms."""

    def drop_term(obs: IsaacLabObs) -> None:
        critic = obs["critic"]
        assert isinstance(critic, dict)
        obs["critic"] = {k: v for k, v in critic.items() if k != "progress"}

    env = IsaacLabVecEnv(_Mutated(_make(FakeDirectRLEnv, critic="nested"), _obs_change(drop_term)))
    env.reset(seed=0)
    with pytest.raises(SpecError, match=r"group 'critic' must hold the terms"):
        env.step(_push(4))


def test_outputs_are_not_overwritten_by_later_steps() -> None:
    """Reward and flags are copies: Isaac Lab's buffers are reused in place."""
    fake = _make(FakeManagerBasedRLEnv, num_envs=2, episode_length_s=0.2)
    env = IsaacLabVecEnv(fake)
    env.reset(seed=0)
    first = env.step(_push(2))
    reward, truncated = first.reward.clone(), first.truncated.clone()
    second = env.step(_push(2))
    assert second.truncated.all()
    assert torch.equal(first.reward, reward)
    assert torch.equal(first.truncated, truncated)
    assert first.reward is not fake.reward_buf


@pytest.mark.parametrize("kind", FAKES)
def test_reset_seed_reproduces(kind: type[FakeEnv]) -> None:
    """The same seed gives the same observations; another seed does not."""
    env = IsaacLabVecEnv(_make(kind, seed=None))
    first, _ = env.reset(seed=3)
    steps = [env.step(_push(4, 0.3)).obs for _ in range(3)]
    again, _ = env.reset(seed=3)
    assert _td_equal(first, again)
    assert all(_td_equal(env.step(_push(4, 0.3)).obs, s) for s in steps)
    other, _ = env.reset(seed=4)
    assert not torch.equal(first["policy"], other["policy"])


def test_close_is_idempotent() -> None:
    """close() closes the env once; a second call is harmless."""
    fake = _make(FakeDirectRLEnv)
    env = IsaacLabVecEnv(fake)
    env.close()
    env.close()
    assert fake.is_closed


def test_rejects_non_isaaclab_env() -> None:
    """Objects without the Isaac Lab surface are rejected, wrappers with a hint."""
    with pytest.raises(SpecError, match="must be an Isaac Lab RL env"):
        IsaacLabVecEnv(object())  # type: ignore[arg-type]

    class Wrapper:
        unwrapped = _make(FakeDirectRLEnv)

    with pytest.raises(SpecError, match=r"pass env\.unwrapped"):
        IsaacLabVecEnv(Wrapper())  # type: ignore[arg-type]


def test_rejects_unsupported_spaces() -> None:
    """Observation groups must be Box or Dict of Box; actions must be a Box."""
    fake = _make(FakeManagerBasedRLEnv)
    broken = _Mutated(fake)
    broken.single_observation_space = gym.spaces.Dict({"policy": gym.spaces.Discrete(3)})
    with pytest.raises(SpecError, match="group 'policy' must be a Box"):
        IsaacLabVecEnv(broken)
    broken.single_observation_space = gym.spaces.Dict(
        {"critic": gym.spaces.Dict({"term": gym.spaces.Discrete(3)})}
    )
    with pytest.raises(SpecError, match="term 'critic'/'term' must be a Box"):
        IsaacLabVecEnv(broken)
    broken = _Mutated(fake)
    broken.single_action_space = gym.spaces.Discrete(3)
    with pytest.raises(SpecError, match="single_action_space must be a Box"):
        IsaacLabVecEnv(broken)
    broken = _Mutated(fake)
    broken.device = "not-a-device"
    with pytest.raises(SpecError, match="must name a torch device"):
        IsaacLabVecEnv(broken)
    broken = _Mutated(fake, cfg=_OldCfg(is_finite_horizon=1))  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="is_finite_horizon must be a bool"):
        IsaacLabVecEnv(broken)


@pytest.mark.parametrize("kind", FAKES)
def test_wide_seeds_are_folded(kind: type[FakeEnv]) -> None:
    """Seeds beyond Isaac Lab's [0, 2**32) are folded with seed % 2**32, not rejected."""
    fake = _make(kind, num_envs=3)
    with pytest.raises(ValueError, match="Seed must be between"):
        fake.reset(seed=2**40 + 5)
    env = IsaacLabVecEnv(fake)
    wide, _ = env.reset(seed=2**40 + 5)
    folded, _ = env.reset(seed=5)
    assert _td_equal(wide, folded)
