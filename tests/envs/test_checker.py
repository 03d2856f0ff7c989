"""Tests for the env conformance checkers (typedrl.envs._checker)."""

from typing import Any, Literal

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from typedrl._results import StepResult
from typedrl.envs import make
from typedrl.envs._checker import (
    CHECK_RULES,
    CheckReport,
    Violation,
    check_differentiable_vec_env,
    check_vec_env,
)
from typedrl.errors import ConfigError, EnvContractError
from typedrl.testing import CountingVecEnv, QuadraticEnv, ScheduledQuadraticEnv

FAST: dict[str, Any] = {"num_steps": 12, "max_examples": 3}


def _forge(result: StepResult, **changes: object) -> StepResult:
    """A StepResult with some parts replaced, built without validation (as a buggy env might)."""
    parts: dict[str, Any] = {
        "obs": result.obs,
        "reward": result.reward,
        "terminated": result.terminated,
        "truncated": result.truncated,
        "info": result.info,
        "final_obs": result.final_obs,
        "valid": result.valid,
    }
    parts.update(changes)
    return StepResult.from_trusted(**parts)


class _Wrapper:
    """Delegates every VecEnv member to a correct env; subclasses break one thing."""

    def __init__(self, inner: CountingVecEnv | QuadraticEnv) -> None:
        self.inner = inner

    @property
    def num_envs(self) -> object:
        return self.inner.num_envs

    @property
    def device(self) -> object:
        return self.inner.device

    @property
    def single_observation_space(self) -> object:
        return self.inner.single_observation_space

    @property
    def single_action_space(self) -> object:
        return self.inner.single_action_space

    @property
    def provides_final_obs(self) -> object:
        return self.inner.provides_final_obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> object:
        return self.inner.reset(seed=seed, options=options)

    def step(self, action: torch.Tensor) -> object:
        return self.inner.step(action)

    def close(self) -> None:
        self.inner.close()


def _counting(**kwargs: Any) -> CountingVecEnv:
    settings: dict[str, Any] = {"num_envs": 3, "terminate_after": [2, 3, 5], "truncate_after": 4}
    settings.update(kwargs)
    return CountingVecEnv(**settings)


def _assert_only(report: CheckReport, rule: str) -> None:
    assert report.failed_rules == (rule,), str(report)
    assert rule in report.checks_run
    assert all(v.rule == rule for v in report.violations)
    assert rule in str(report)


# ---------------------------------------------------------------- correct envs pass


@pytest.mark.parametrize(
    "env",
    [
        _counting(),
        _counting(provides_final_obs=False, action_space="discrete"),
        CountingVecEnv(num_envs=2),
        QuadraticEnv(num_envs=3, horizon=4),
    ],
    ids=["counting", "counting-no-final-obs-discrete", "counting-never-ends", "quadratic"],
)
def test_correct_vec_envs_pass(env: object) -> None:
    """The shipped mock envs satisfy every VecEnv rule."""
    report = check_vec_env(env, **FAST)
    assert report.ok, str(report)
    report.raise_if_failed()
    assert {"protocol", "step.returns", "obs.spec", "seeding"} <= set(report.checks_run)


@pytest.mark.parametrize("vectorization", ["sync", "vector_entry_point"])
def test_gymnasium_adapter_passes_in_both_autoreset_styles(
    vectorization: Literal["sync", "vector_entry_point"],
) -> None:
    """Same-step and ghost-step CartPole both pass; ghost rows skip the terminal heuristic."""
    env = make("CartPole-v1", num_envs=4, seed=0, vectorization=vectorization)
    try:
        report = check_vec_env(env, num_steps=40, max_examples=3)
    finally:
        env.close()
    assert report.ok, str(report)
    ghosts = vectorization == "vector_entry_point"
    assert ("final_obs.terminal" in report.checks_run) is not ghosts


def test_rules_run_depend_on_what_the_env_does() -> None:
    """Terminal rules run only when episodes end; final_obs.absent only without final_obs."""
    ending = check_vec_env(_counting(), **FAST)
    assert {"final_obs.present", "final_obs.continuing", "final_obs.terminal"} <= set(
        ending.checks_run
    )
    assert "final_obs.absent" not in ending.checks_run
    never = check_vec_env(CountingVecEnv(num_envs=2), **FAST)
    assert "final_obs.terminal" not in never.checks_run
    absent = check_vec_env(_counting(provides_final_obs=False), **FAST)
    assert "final_obs.absent" in absent.checks_run
    assert "final_obs.present" not in absent.checks_run


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_correct_differentiable_envs_pass(dtype: Literal["float32", "float64"]) -> None:
    """QuadraticEnv and ScheduledQuadraticEnv satisfy every rule, gradient rules included."""
    for env in (
        QuadraticEnv(num_envs=3, horizon=5, dtype=dtype),
        ScheduledQuadraticEnv(num_envs=2, horizons=[3, 6], dtype=dtype),
    ):
        report = check_differentiable_vec_env(env, **FAST)
        assert report.ok, str(report)
        gradient_rules = {"grad.reward", "grad.obs", "grad.reset", "detach.values", "detach.cut"}
        assert gradient_rules | {"grad.finite_difference"} <= set(report.checks_run)
    mask_report = check_differentiable_vec_env(QuadraticEnv(num_envs=2, dtype=dtype), **FAST)
    assert "normalize_mask" in mask_report.checks_run


# ---------------------------------------------------------------- static rules


class _NoClose:
    """Has every VecEnv member except close."""

    def __init__(self) -> None:
        self._inner = _counting()
        self.num_envs = 3
        self.device = torch.device("cpu")
        self.single_observation_space = self._inner.single_observation_space
        self.single_action_space = self._inner.single_action_space
        self.provides_final_obs = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> object:
        return self._inner.reset(seed=seed, options=options)

    def step(self, action: torch.Tensor) -> object:
        return self._inner.step(action)


def test_protocol_rule() -> None:
    """An env lacking close() is not a VecEnv; the message names the missing member."""
    report = check_vec_env(_NoClose(), **FAST)
    _assert_only(report, "protocol")
    assert "close" in report.violations[0].message


class _StringNumEnvs(_Wrapper):
    @property
    def num_envs(self) -> object:
        return "3"


def test_num_envs_rule() -> None:
    """A num_envs that is not a positive int is reported; rollouts are skipped."""
    report = check_vec_env(_StringNumEnvs(_counting()), **FAST)
    _assert_only(report, "num_envs")
    assert "step.returns" not in report.checks_run


class _StringDevice(_Wrapper):
    @property
    def device(self) -> object:
        return "cpu"


def test_device_rule() -> None:
    """A device given as a str is reported."""
    _assert_only(check_vec_env(_StringDevice(_counting()), **FAST), "device")


class _RaisingDevice(_Wrapper):
    @property
    def device(self) -> object:
        raise RuntimeError("no device yet")


def test_exception_in_a_member_becomes_a_violation() -> None:
    """A property that raises is a violation of its rule, with the exception text."""
    report = check_vec_env(_RaisingDevice(_counting()), **FAST)
    _assert_only(report, "device")
    assert "RuntimeError: no device yet" in report.violations[0].message


class _TupleObservationSpace(_Wrapper):
    @property
    def single_observation_space(self) -> object:
        return gym.spaces.Tuple((gym.spaces.Box(-1.0, 1.0, (3,)),))


def test_spaces_rule() -> None:
    """An unsupported observation space kind is reported."""
    _assert_only(check_vec_env(_TupleObservationSpace(_counting()), **FAST), "spaces")


# ---------------------------------------------------------------- reset and observations


class _ObsOnlyReset(_Wrapper):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> object:
        obs, _ = self.inner.reset(seed=seed, options=options)
        return obs


def test_reset_returns_rule() -> None:
    """reset returning the observation alone is reported."""
    report = check_vec_env(_ObsOnlyReset(_counting()), **FAST)
    _assert_only(report, "reset.returns")
    assert "TensorDict" in report.violations[0].message


class _UnbatchedReset(_Wrapper):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> object:
        obs, info = self.inner.reset(seed=seed, options=options)
        return TensorDict({"obs": obs["obs"]}, batch_size=[]), info


def test_obs_batch_size_rule() -> None:
    """An observation without the [num_envs] batch dimension is reported."""
    report = check_vec_env(_UnbatchedReset(_counting()), **FAST)
    _assert_only(report, "obs.batch_size")
    assert "[3]" in report.violations[0].message


class _MetaReset(_Wrapper):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> object:
        obs, info = self.inner.reset(seed=seed, options=options)
        return TensorDict({"obs": obs["obs"].to("meta")}, batch_size=[3]), info


def test_obs_device_rule() -> None:
    """An observation leaf off env.device is reported with its key."""
    report = check_vec_env(_MetaReset(_counting()), **FAST)
    _assert_only(report, "obs.device")
    assert report.violations[0].key == "obs"
    assert "meta" in report.violations[0].message


class _WrongObservationSpace(_Wrapper):
    @property
    def single_observation_space(self) -> object:
        return gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)


def test_obs_spec_rule() -> None:
    """Observations whose shape does not match the space are reported."""
    report = check_vec_env(_WrongObservationSpace(_counting()), **FAST)
    _assert_only(report, "obs.spec")
    assert "[3, 4]" in report.violations[0].message
    assert "[3, 3]" in report.violations[0].message


class _DictSpaceMissingKey(_Wrapper):
    @property
    def single_observation_space(self) -> object:
        box = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        return gym.spaces.Dict({"obs": box, "critic": box})


def test_obs_spec_rule_names_missing_dict_keys() -> None:
    """A Dict space key absent from the observations is reported."""
    report = check_vec_env(_DictSpaceMissingKey(_counting()), **FAST)
    _assert_only(report, "obs.spec")
    assert "critic" in report.violations[0].message


class _NaNReset(_Wrapper):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> object:
        obs, info = self.inner.reset(seed=seed, options=options)
        values = obs["obs"].clone()
        values[1, 0] = float("nan")
        return TensorDict({"obs": values}, batch_size=[3]), info


def test_obs_finite_rule() -> None:
    """A NaN in a reset observation is reported with its row."""
    report = check_vec_env(_NaNReset(_counting()), **FAST)
    _assert_only(report, "obs.finite")
    assert "[1]" in report.violations[0].message


# ---------------------------------------------------------------- step outputs


class _PlainTupleStep(_Wrapper):
    def step(self, action: torch.Tensor) -> object:
        return tuple(self.inner.step(action))


def test_step_returns_rule_plain_tuple() -> None:
    """A plain 5-tuple is reported, listing what each element was."""
    report = check_vec_env(_PlainTupleStep(_counting()), **FAST)
    _assert_only(report, "step.returns")
    message = report.violations[0].message
    assert "plain tuple" in message
    assert "reward=Tensor(dtype=torch.float32, shape=[3]" in message


class _NumpyStep(_Wrapper):
    def step(self, action: torch.Tensor) -> object:
        result = self.inner.step(action)
        return (result.obs, result.reward.numpy(), result.terminated, result.truncated, {})


def test_step_returns_numpy_reward_is_reported_precisely() -> None:
    """A numpy reward inside a plain tuple: both the container and the reward are reported."""
    report = check_vec_env(_NumpyStep(_counting()), **FAST)
    assert report.failed_rules == ("step.returns", "step.reward"), str(report)
    assert "numpy.ndarray(dtype=float32, shape=[3])" in str(report)


class _RaisingStep(_Wrapper):
    def step(self, action: torch.Tensor) -> object:
        raise RuntimeError("simulator crashed")


def test_step_raising_is_a_violation_not_a_crash() -> None:
    """An exception from step becomes a step.returns violation carrying its text."""
    report = check_vec_env(_RaisingStep(_counting()), **FAST)
    _assert_only(report, "step.returns")
    assert "RuntimeError: simulator crashed" in report.violations[0].message


class _IntReward(_Wrapper):
    def step(self, action: torch.Tensor) -> object:
        result = self.inner.step(action)
        return _forge(result, reward=result.reward.to(torch.int64))


def test_step_reward_rule() -> None:
    """An integer reward is reported once, with the number of repeats."""
    report = check_vec_env(_IntReward(_counting()), **FAST)
    _assert_only(report, "step.reward")
    assert len(report.violations) == 1
    violation = report.violations[0]
    assert violation.step == 0
    assert violation.key == "reward"
    assert "torch.int64" in violation.message
    assert "more time(s)" in violation.message


class _FloatFlags(_Wrapper):
    def step(self, action: torch.Tensor) -> object:
        result = self.inner.step(action)
        return _forge(result, terminated=result.terminated.float())


def test_step_flags_rule() -> None:
    """Float terminated flags are reported under the terminated key."""
    report = check_vec_env(_FloatFlags(_counting()), **FAST)
    _assert_only(report, "step.flags")
    assert report.violations[0].key == "terminated"


class _MetaReward(_Wrapper):
    def step(self, action: torch.Tensor) -> object:
        result = self.inner.step(action)
        return _forge(result, reward=result.reward.to("meta"))


def test_step_device_rule() -> None:
    """A reward on another device is reported."""
    report = check_vec_env(_MetaReward(_counting()), **FAST)
    _assert_only(report, "step.device")
    assert report.violations[0].key == "reward"


class _NaNReward(_Wrapper):
    def step(self, action: torch.Tensor) -> object:
        result = self.inner.step(action)
        reward = result.reward.clone()
        reward[2] = float("nan")
        return _forge(result, reward=reward)


def test_step_finite_rule() -> None:
    """A NaN reward is reported with its row."""
    report = check_vec_env(_NaNReward(_counting()), **FAST)
    _assert_only(report, "step.finite")
    assert "[2]" in report.violations[0].message


class _ListInfo(_Wrapper):
    def step(self, action: torch.Tensor) -> object:
        return _forge(self.inner.step(action), info=[])


def test_step_info_rule() -> None:
    """An info that is not a dict is reported."""
    _assert_only(check_vec_env(_ListInfo(_counting()), **FAST), "step.info")


class _FloatValid(_Wrapper):
    def step(self, action: torch.Tensor) -> object:
        result = self.inner.step(action)
        return _forge(result, valid=result.valid.float())


def test_step_valid_rule() -> None:
    """A float validity flag is reported."""
    _assert_only(check_vec_env(_FloatValid(_counting()), **FAST), "step.valid")


# ---------------------------------------------------------------- terminal observations


class _MissingFinalObs(_Wrapper):
    def step(self, action: torch.Tensor) -> object:
        return _forge(self.inner.step(action), final_obs=None)


def test_final_obs_present_rule() -> None:
    """provides_final_obs=True with final_obs=None is reported."""
    report = check_vec_env(_MissingFinalObs(_counting()), **FAST)
    _assert_only(report, "final_obs.present")
    assert "provides_final_obs" in report.violations[0].message


class _FinalObsIsResetObs(_Wrapper):
    def step(self, action: torch.Tensor) -> object:
        result = self.inner.step(action)
        return _forge(result, final_obs=result.obs.clone())


def test_final_obs_terminal_rule() -> None:
    """final_obs equal to the post-reset obs for every ended row is reported with rows."""
    report = check_vec_env(_FinalObsIsResetObs(_counting()), **FAST)
    _assert_only(report, "final_obs.terminal")
    assert "row" in report.violations[0].message


class _ShiftedFinalObs(_Wrapper):
    def step(self, action: torch.Tensor) -> object:
        result = self.inner.step(action)
        final_obs = result.final_obs
        assert final_obs is not None
        return _forge(result, final_obs=final_obs.apply(lambda leaf: leaf + 1.0))


def test_final_obs_continuing_rule() -> None:
    """final_obs that differs from obs on rows that did not end is reported."""
    _assert_only(check_vec_env(_ShiftedFinalObs(_counting()), **FAST), "final_obs.continuing")


class _FinalObsDespiteFlag(_Wrapper):
    @property
    def provides_final_obs(self) -> object:
        return False


def test_final_obs_absent_rule() -> None:
    """final_obs returned although provides_final_obs is False is reported."""
    _assert_only(check_vec_env(_FinalObsDespiteFlag(_counting()), **FAST), "final_obs.absent")


def test_autoreset_min_length_rule_is_opt_in() -> None:
    """Episodes of one step violate min_episode_length=2 and nothing when it is unset."""
    env = _counting(terminate_after=[1, 3, 5])
    assert "autoreset.min_length" not in check_vec_env(env, **FAST).checks_run
    report = check_vec_env(env, min_episode_length=2, **FAST)
    _assert_only(report, "autoreset.min_length")
    assert "[0]" in report.violations[0].message


# ---------------------------------------------------------------- seeding


class _IgnoresSeed(_Wrapper):
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> object:
        return self.inner.reset(seed=None, options=options)


def test_seeding_rule() -> None:
    """An env that ignores the reset seed is reported."""
    report = check_vec_env(_IgnoresSeed(QuadraticEnv(num_envs=3, horizon=4)), **FAST)
    _assert_only(report, "seeding")
    assert "did not reproduce" in report.violations[0].message
    assert report.violations[0].key == "obs['obs']"


# ---------------------------------------------------------------- actions and determinism


class _Recording(_Wrapper):
    """Records every action and reset seed; may advertise another action space."""

    def __init__(self, inner: CountingVecEnv, space: gym.Space[Any] | None = None) -> None:
        super().__init__(inner)
        self.space = space
        self.actions: list[torch.Tensor] = []
        self.seeds: list[int | None] = []

    @property
    def single_action_space(self) -> object:
        return self.space if self.space is not None else self.inner.single_action_space

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> object:
        self.seeds.append(seed)
        return self.inner.reset(seed=seed, options=options)

    def step(self, action: torch.Tensor) -> object:
        self.actions.append(action.clone())
        if self.space is not None:
            action = torch.zeros(self.inner.num_envs, 1)
        return self.inner.step(action)


def test_checker_is_deterministic() -> None:
    """The same seed gives the same resets, actions and report; another seed other actions."""
    first, second, other = (_Recording(_counting()) for _ in range(3))
    report_first = check_vec_env(first, seed=5, **FAST)
    report_second = check_vec_env(second, seed=5, **FAST)
    check_vec_env(other, seed=6, **FAST)
    assert report_first == report_second
    assert first.seeds == second.seeds
    assert len(first.actions) == len(second.actions) > 0
    assert all(torch.equal(a, b) for a, b in zip(first.actions, second.actions, strict=True))
    assert first.seeds != other.seeds or not all(
        torch.equal(a, b) for a, b in zip(first.actions, other.actions, strict=False)
    )


def test_box_actions_stay_in_bounds_and_reach_the_edges() -> None:
    """Box actions are float32 [num_envs, 1] within [-1, 1], edges included."""
    env = _Recording(_counting())
    assert check_vec_env(env, num_steps=16, max_examples=6).ok
    actions = torch.stack(env.actions)
    assert actions.dtype == torch.float32
    assert actions.shape[1:] == (3, 1)
    assert float(actions.min()) == -1.0
    assert float(actions.max()) == 1.0


@pytest.mark.parametrize(
    ("space", "high"),
    [
        (gym.spaces.Discrete(3, start=1), [3]),
        (gym.spaces.MultiDiscrete([2, 5]), [1, 4]),
        (gym.spaces.MultiBinary(4), [1, 1, 1, 1]),
    ],
)
def test_integer_actions_are_int64_codes_within_the_space(
    space: gym.Space[Any], high: list[int]
) -> None:
    """Discrete, MultiDiscrete and MultiBinary actions are int64 codes the space contains."""
    env = _Recording(_counting(), space)
    assert check_vec_env(env, **FAST).ok
    actions = torch.stack(env.actions)
    assert actions.dtype == torch.int64
    assert actions.shape[1:] == (3, *(space.shape or ()))
    flat = actions.reshape(-1, len(high))
    assert bool((flat <= torch.tensor(high)).all())
    assert all(space.contains(row.numpy()) for row in actions.reshape(-1, *(space.shape or ())))


def test_large_action_batches_use_patterns() -> None:
    """A wide Box action batch is drawn per step and still stays within the bounds."""
    space = gym.spaces.Box(-2.0, 3.0, (8,), np.float32)
    env = _Recording(_counting(num_envs=16, terminate_after=4), space)
    assert check_vec_env(env, num_steps=8, max_examples=4).ok
    actions = torch.stack(env.actions)
    assert actions.shape[1:] == (16, 8)
    assert float(actions.min()) >= -2.0
    assert float(actions.max()) <= 3.0


# ---------------------------------------------------------------- differentiable rules


class _ScaledGradient(torch.autograd.Function):
    """Identity forward, wrongly scaled backward."""

    @staticmethod
    def forward(ctx: Any, value: torch.Tensor) -> torch.Tensor:
        return value.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return 2.0 * grad


Flaw = Literal[
    "reward_detached",
    "obs_detached",
    "reset_leaks",
    "detach_keeps_graph",
    "detach_moves",
    "wrong_backward",
    "bad_mask",
]


class _Integrator:
    """A float64 differentiable env, ``x' = x + a / 2``, reward ``-|x'|^2``, with one flaw."""

    def __init__(self, *, flaw: Flaw | None = None, num_envs: int = 3, horizon: int = 4) -> None:
        self.flaw = flaw
        self.num_envs = num_envs
        self.horizon = horizon
        self.device = torch.device("cpu")
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float64)
        self.provides_final_obs = True
        self._generator = torch.Generator()
        self._x = torch.zeros(num_envs, 2, dtype=torch.float64)
        self._t = torch.zeros(num_envs, dtype=torch.int64)

    @property
    def observation_normalize_mask(self) -> torch.Tensor:
        if self.flaw == "bad_mask":
            return torch.ones(2)
        return torch.ones(2, dtype=torch.bool)

    def _fresh(self) -> torch.Tensor:
        unit = torch.rand(self.num_envs, 2, generator=self._generator, dtype=torch.float64)
        return 2.0 * unit - 1.0

    def _observe(self, x: torch.Tensor) -> TensorDict:
        return TensorDict({"obs": x}, batch_size=[self.num_envs])

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[TensorDict, dict[str, Any]]:
        if seed is not None:
            self._generator.manual_seed(seed)
        self._x = self._fresh()
        self._t = torch.zeros_like(self._t)
        return self._observe(self._x), {}

    def step(self, action: torch.Tensor) -> StepResult:
        if self.flaw == "wrong_backward":
            # torch types Function.apply without annotations.
            action = _ScaledGradient.apply(action)  # type: ignore[no-untyped-call]
        after = self._x + 0.5 * action
        reward = -(after**2).sum(-1)
        if self.flaw == "reward_detached":
            reward = reward.detach()
        self._t = self._t + 1
        truncated = self._t >= self.horizon
        fresh = self._fresh()
        if self.flaw == "reset_leaks":
            fresh = fresh + (after - after.detach())
        self._x = torch.where(truncated.unsqueeze(-1), fresh, after)
        self._t = torch.where(truncated, torch.zeros_like(self._t), self._t)
        obs = self._x.detach() if self.flaw == "obs_detached" else self._x
        return StepResult(
            self._observe(obs),
            reward,
            torch.zeros_like(truncated),
            truncated,
            {},
            final_obs=self._observe(after),
        )

    def detach_state(self) -> TensorDict:
        if self.flaw == "detach_keeps_graph":
            return self._observe(self._x.detach())
        self._x = self._x.detach()
        if self.flaw == "detach_moves":
            self._x = self._x + 1.0
        return self._observe(self._x)

    def close(self) -> None:
        pass


def test_integrator_without_flaw_passes() -> None:
    """The unbroken test env satisfies every rule (the flawed variants differ in one thing)."""
    report = check_differentiable_vec_env(_Integrator(), **FAST)
    assert report.ok, str(report)
    assert set(report.checks_run) == set(CHECK_RULES) - {"final_obs.absent", "autoreset.min_length"}


@pytest.mark.parametrize(
    ("flaw", "rule"),
    [
        ("reward_detached", "grad.reward"),
        ("obs_detached", "grad.obs"),
        ("reset_leaks", "grad.reset"),
        ("detach_keeps_graph", "detach.cut"),
        ("detach_moves", "detach.values"),
        ("wrong_backward", "grad.finite_difference"),
        ("bad_mask", "normalize_mask"),
    ],
)
def test_differentiable_rule(flaw: Flaw, rule: str) -> None:
    """Each flaw of the differentiable env is reported under its own rule only."""
    _assert_only(check_differentiable_vec_env(_Integrator(flaw=flaw), **FAST), rule)


def test_finite_difference_message_shows_both_gradients() -> None:
    """The finite-difference violation quotes autograd and the numeric estimate."""
    report = check_differentiable_vec_env(_Integrator(flaw="wrong_backward"), **FAST)
    message = report.violations[0].message
    assert "autograd" in message
    assert "finite differences" in message


def test_detach_values_message_shows_the_difference() -> None:
    """The detach.values violation names the rows and the size of the change."""
    report = check_differentiable_vec_env(_Integrator(flaw="detach_moves"), **FAST)
    assert "max |difference| 1" in report.violations[0].message


def test_vec_env_rules_run_for_differentiable_envs() -> None:
    """check_differentiable_vec_env reports VecEnv violations too."""
    report = check_differentiable_vec_env(_IgnoresSeed(QuadraticEnv(num_envs=2)), **FAST)
    assert "seeding" in report.failed_rules
    assert "protocol" in report.failed_rules  # the wrapper has no detach_state


# ---------------------------------------------------------------- reports


class _ManyFlaws(_Wrapper):
    def step(self, action: torch.Tensor) -> object:
        result = self.inner.step(action)
        return _forge(
            result,
            reward=result.reward.to(torch.int64),
            truncated=result.truncated.float(),
            info=None,
            final_obs=None,
        )


def test_all_simultaneous_violations_are_listed() -> None:
    """Several broken rules are all reported, in rule-table order."""
    report = check_vec_env(_ManyFlaws(_counting()), **FAST)
    assert report.failed_rules == ("step.reward", "step.flags", "step.info", "final_obs.present")
    assert not report.ok


def test_raise_if_failed_lists_every_violation() -> None:
    """raise_if_failed raises EnvContractError whose message holds every violation."""
    report = check_vec_env(_ManyFlaws(_counting()), **FAST)
    with pytest.raises(EnvContractError) as caught:
        report.raise_if_failed()
    text = str(caught.value)
    assert len(report.violations) == 4
    for violation in report.violations:
        assert str(violation) in text
    assert len(text.splitlines()) == 1 + len(report.violations)


def test_report_and_violation_values() -> None:
    """Violation and CheckReport are validated, frozen values with readable strings."""
    violation = Violation(rule="seeding", message="differs", step=2, key="reward")
    assert str(violation) == "[seeding] step 2, key 'reward': differs"
    report = CheckReport(violations=(violation,), checks_run=("seeding",))
    assert not report.ok
    assert str(report).splitlines()[1].strip() == str(violation)
    with pytest.raises(ConfigError, match="rule"):
        Violation(rule="no.such.rule", message="x")
    with pytest.raises(ConfigError, match="step must be >= 0"):
        Violation(rule="seeding", message="x", step=-1)
    with pytest.raises(ConfigError, match="checks_run"):
        CheckReport(violations=(), checks_run=("no.such.rule",))
    with pytest.raises(AttributeError):
        violation.rule = "protocol"  # type: ignore[misc]


def test_invalid_options_raise_config_error() -> None:
    """Bad checker options are the caller's error: ConfigError, not a report."""
    with pytest.raises(ConfigError, match="num_steps"):
        check_vec_env(_counting(), num_steps=0)
    with pytest.raises(ConfigError, match="min_episode_length"):
        check_vec_env(_counting(), min_episode_length=0)
    with pytest.raises(ConfigError, match="fd_eps"):
        check_differentiable_vec_env(QuadraticEnv(num_envs=1), fd_eps=0.0)
