"""Tests for typedrl.apg._collector: the differentiable collector, its graph and its errors."""

import copy
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict
from torch import Tensor, nn

from typedrl._results import StepResult
from typedrl.apg._collector import DifferentiableCollector
from typedrl.envs.builtin import CartPole, PointMass
from typedrl.errors import CheckpointError, ConfigError, EnvContractError, EnvError, SpecError
from typedrl.protocols import Collector, DifferentiableVecEnv
from typedrl.testing import CountingVecEnv, DifferentiableVecEnvWrapper, QuadraticEnv
from typedrl.types import Action, Obs

Spoil = Callable[[int, StepResult], StepResult]


class _LinearPolicy(nn.Module):
    """``a = W x + b (+ std * noise)``, reparameterised; records every action it returns."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        *,
        noise_std: float = 0.0,
        reparameterized: bool = True,
        entropy: bool = True,
    ) -> None:
        super().__init__()
        self.linear = nn.Linear(obs_dim, act_dim)
        self.log_std = nn.Parameter(torch.zeros(act_dim))
        self.noise_std = noise_std
        self._reparameterized = reparameterized
        self._entropy = entropy
        self.taken: list[Tensor] = []

    @property
    def reparameterized(self) -> bool:
        """As given to the constructor."""
        return self._reparameterized

    def act(self, obs: Obs, *, deterministic: bool = False) -> Obs:
        """The linear action, with reparameterised noise unless ``deterministic``."""
        features: Tensor = obs["obs"]
        mean: Tensor = self.linear(features.to(self.linear.weight.dtype))
        action = mean
        if not deterministic and self.noise_std > 0.0:
            action = mean + self.noise_std * torch.randn_like(mean)
        self.taken.append(action)
        outputs: dict[str, Tensor] = {"action": action}
        if self._entropy:
            outputs["entropy"] = self.log_std.sum().expand(features.shape[0])
        return TensorDict(outputs, batch_size=obs.batch_size, device=obs.device)


def _quadratic_policy(weight: float = -0.5, bias: float = 0.1) -> _LinearPolicy:
    policy = _LinearPolicy(1, 1).double()
    with torch.no_grad():
        policy.linear.weight.fill_(weight)
        policy.linear.bias.fill_(bias)
    return policy


def _quadratic(num_envs: int = 3, horizon: int = 50) -> QuadraticEnv:
    return QuadraticEnv(num_envs=num_envs, horizon=horizon, dtype="float64")


def _collector(env: DifferentiableVecEnv, **options: Any) -> DifferentiableCollector:
    collector = DifferentiableCollector(env, **options)
    collector.reset(seed=0)
    return collector


class _Wrapper(DifferentiableVecEnvWrapper):
    """Delegates to a differentiable env; ``spoil(step, result)`` may rewrite each step."""

    def __init__(
        self,
        env: DifferentiableVecEnv,
        spoil: Spoil | None = None,
        *,
        provides_final_obs: bool = True,
    ) -> None:
        super().__init__(env)
        self.spoil = spoil
        self.steps_taken = 0
        self._provides_final_obs = provides_final_obs

    @property
    def provides_final_obs(self) -> bool:
        """As given to the constructor."""
        return self._provides_final_obs

    def step(self, action: Action) -> StepResult:
        """The wrapped env's step, spoiled."""
        result = self.env.step(action)
        if self.spoil is not None:
            result = self.spoil(self.steps_taken, result)
        self.steps_taken += 1
        return result


def _with(result: StepResult, **changes: Any) -> StepResult:
    fields: dict[str, Any] = {
        "obs": result.obs,
        "reward": result.reward,
        "terminated": result.terminated,
        "truncated": result.truncated,
        "final_obs": result.final_obs,
    }
    fields.update(changes)
    return StepResult(
        fields["obs"],
        fields["reward"],
        fields["terminated"],
        fields["truncated"],
        {},
        final_obs=fields["final_obs"],
    )


# ----------------------------------------------------------------- rollouts


def test_is_a_collector_and_shapes_the_rollout() -> None:
    """It implements Collector; every field is [num_steps, num_envs]; episodes are counted."""
    env = _quadratic(num_envs=3, horizon=4)
    collector = _collector(env)
    assert isinstance(collector, Collector)
    assert not collector.needs_reset
    policy = _quadratic_policy()
    start = collector.detach_state()
    rollout = collector.collect(policy, num_steps=6)
    assert (rollout.num_steps, rollout.num_envs) == (6, 3)
    assert rollout.observations.batch_size == (6, 3)
    assert rollout.terminal_observations.batch_size == (6, 3)
    assert rollout.actions.shape == (6, 3, 1)
    for flags in (rollout.terminated, rollout.truncated, rollout.valid, rollout.alive_mask):
        assert flags.shape == (6, 3)
        assert flags.dtype == torch.bool
    assert torch.equal(rollout.initial_observation["obs"], start["obs"])
    assert torch.equal(rollout.observations["obs"][0], start["obs"])
    # Each step's next observation is the following step's input, except where a row restarted.
    assert torch.equal(rollout.terminal_observations["obs"][:3], rollout.observations["obs"][1:4])
    assert bool(rollout.truncated[3].all())
    assert rollout.alive_mask[:, 0].tolist() == [True] * 4 + [False] * 2
    assert int(rollout.episodes.ended.sum()) == 3
    assert torch.equal(rollout.final_observation["obs"], collector.detach_state()["obs"])
    assert rollout.adjoint is not None  # measured by default


def test_never_changes_the_policy_mode() -> None:
    """A policy in train or eval mode stays in it."""
    collector = _collector(_quadratic())
    policy = _quadratic_policy()
    for mode in (True, False):
        policy.train(mode)
        collector.collect(policy, num_steps=2)
        assert policy.training is mode


def test_gradient_matches_the_unrolled_quadratic_objective() -> None:
    """The summed rewards' gradient equals the hand-unrolled x' = x + W x + b objective's."""
    env = _quadratic(num_envs=4)
    collector = _collector(env)
    x = collector.detach_state()["obs"].clone()
    policy = _quadratic_policy(weight=-0.3, bias=0.2)
    rollout = collector.collect(policy, num_steps=3)
    torch.autograd.backward(rollout.rewards.sum())
    weight = torch.full((1, 1), -0.3, dtype=torch.float64, requires_grad=True)
    bias = torch.full((1,), 0.2, dtype=torch.float64, requires_grad=True)
    total = torch.zeros((), dtype=torch.float64)
    for _ in range(3):
        x = x + (x @ weight.T + bias)
        total = total - x.square().sum()
    torch.autograd.backward(total)
    assert policy.linear.weight.grad is not None
    assert policy.linear.bias.grad is not None
    torch.testing.assert_close(policy.linear.weight.grad, weight.grad)
    torch.testing.assert_close(policy.linear.bias.grad, bias.grad)


def test_gradient_reaches_the_policy_through_point_mass_dynamics() -> None:
    """On PointMass the last reward depends on the first action through the physics."""
    env = PointMass(num_envs=5, dtype="float64")
    collector = _collector(env)
    torch.manual_seed(0)
    policy = _LinearPolicy(6, 2, noise_std=0.1).double()
    rollout = collector.collect(policy, num_steps=4)
    (first_action_grad,) = torch.autograd.grad(
        rollout.rewards[-1].sum(), policy.taken[0], retain_graph=True
    )
    assert float(first_action_grad.abs().sum()) > 0.0
    torch.autograd.backward(rollout.rewards.sum() + rollout.entropies.sum())
    for parameter in policy.parameters():
        assert parameter.grad is not None
        assert bool(torch.isfinite(parameter.grad).all())
        assert float(parameter.grad.abs().sum()) > 0.0


def test_alive_mask_ends_after_each_rows_first_done() -> None:
    """Rows ending at different steps are alive up to and including their first done."""

    def spoil(step: int, result: StepResult) -> StepResult:
        terminated = result.terminated.clone()
        if step == 1:
            terminated[0] = True
        if step in (2, 3):
            terminated[2] = True
        return _with(result, terminated=terminated)

    collector = _collector(_Wrapper(_quadratic(num_envs=3), spoil))
    rollout = collector.collect(_quadratic_policy(), num_steps=5)
    assert rollout.alive_mask.T.tolist() == [
        [True, True, False, False, False],
        [True] * 5,
        [True, True, True, False, False],
    ]


def test_continues_the_episodes_of_the_previous_rollout() -> None:
    """Consecutive collects continue the same episodes; the mask restarts with each rollout."""
    collector = _collector(_quadratic(num_envs=2, horizon=3))
    policy = _quadratic_policy()
    first = collector.collect(policy, num_steps=2)
    second = collector.collect(policy, num_steps=4)
    assert not bool(first.truncated.any())
    assert torch.equal(second.initial_observation["obs"], first.final_observation["obs"])
    assert second.truncated[:, 0].tolist() == [True, False, False, True]
    assert second.alive_mask[:, 0].tolist() == [True, False, False, False]
    lengths = second.episodes.lengths[second.episodes.ended]
    assert lengths.tolist() == [3, 3, 3, 3]


def test_detach_state_cuts_the_graph() -> None:
    """After detach_state, a backward over the next rollout never reaches the earlier actions."""
    for cut in (True, False):
        collector = _collector(_quadratic())
        policy = _quadratic_policy()
        collector.collect(policy, num_steps=3)
        earlier = list(policy.taken)
        if cut:
            obs = collector.detach_state()
            assert not obs["obs"].requires_grad
        second = collector.collect(policy, num_steps=2)
        assert not (second.initial_observation["obs"].requires_grad and cut)
        grads = torch.autograd.grad(second.rewards.sum(), earlier, allow_unused=True)
        reached = [grad is not None for grad in grads]
        assert reached == [not cut] * 3


def test_detach_state_needs_a_reset() -> None:
    """detach_state() before reset() says to reset."""
    with pytest.raises(ConfigError, match="call reset"):
        DifferentiableCollector(_quadratic()).detach_state()


def test_clip_actions_keeps_actions_in_bounds_and_blocks_their_gradient() -> None:
    """Clamped actions lie in the space's bounds; clamped coordinates pass no gradient."""
    env = _quadratic(num_envs=3)
    collector = _collector(env, clip_actions=True)
    policy = _quadratic_policy(weight=0.0, bias=50.0)
    rollout = collector.collect(policy, num_steps=2)
    space = env.single_action_space
    assert isinstance(space, gym.spaces.Box)
    assert torch.equal(rollout.actions, torch.full((2, 3, 1), 10.0, dtype=torch.float64))
    assert float(policy.taken[0].detach().max()) == 50.0
    torch.autograd.backward(rollout.rewards.sum())
    assert policy.linear.bias.grad is not None
    assert float(policy.linear.bias.grad.abs().sum()) == 0.0


def test_clip_actions_needs_bounds() -> None:
    """clip_actions on a discrete action space is refused at construction."""
    with pytest.raises(ConfigError, match="clip_actions needs a Box action space"):
        DifferentiableCollector(CartPole(num_envs=2), clip_actions=True)


def test_adjoint_clipping_bounds_each_rows_action_gradient() -> None:
    """With one step, each row's dR/da = -2 x' reaches the parameters clamped to +-max_norm."""
    env = _quadratic(num_envs=6)
    max_norm = 0.5
    collector = _collector(env, adjoint_max_norm=max_norm)
    x = collector.detach_state()["obs"].squeeze(-1).clone()
    policy = _quadratic_policy(weight=0.5, bias=0.3)
    rollout = collector.collect(policy, num_steps=1)
    torch.autograd.backward(rollout.rewards.sum())
    next_x = x + 0.5 * x + 0.3
    adjoint = -2.0 * next_x
    clipped = adjoint.clamp(-max_norm, max_norm)
    assert policy.linear.weight.grad is not None
    assert policy.linear.bias.grad is not None
    torch.testing.assert_close(policy.linear.weight.grad.reshape(()), (clipped * x).sum())
    torch.testing.assert_close(policy.linear.bias.grad.reshape(()), clipped.sum())
    assert rollout.adjoint is not None
    stats = rollout.adjoint.statistics()
    magnitude = adjoint.abs().numpy()
    assert stats["adjoint/rows"] == 6.0
    assert stats["adjoint/clipped_fraction"] == pytest.approx(np.mean(magnitude > max_norm))
    assert stats["adjoint/norm_mean"] == pytest.approx(magnitude.mean())
    assert stats["adjoint/norm_max"] == pytest.approx(magnitude.max())


def test_a_large_adjoint_threshold_changes_nothing() -> None:
    """Clipping above every row's norm gives the unclipped gradient, over several steps."""
    grads = []
    for max_norm in (None, 1e9):
        collector = _collector(_quadratic(), adjoint_max_norm=max_norm)
        policy = _quadratic_policy()
        torch.autograd.backward(collector.collect(policy, num_steps=4).rewards.sum())
        assert policy.linear.weight.grad is not None
        grads.append(policy.linear.weight.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=0)


def test_no_adjoint_when_neither_clipping_nor_measuring() -> None:
    """Without threshold or measuring nothing is attached; each rollout has its own clipper."""
    collector = _collector(_quadratic(), measure_adjoint=False)
    assert collector.collect(_quadratic_policy(), num_steps=2).adjoint is None
    measured = _collector(_quadratic())
    policy = _quadratic_policy()
    first = measured.collect(policy, num_steps=2)
    measured.detach_state()  # otherwise the second backward reaches the first's actions too
    second = measured.collect(policy, num_steps=3)
    assert first.adjoint is not second.adjoint
    torch.autograd.backward(second.rewards.sum())
    assert second.adjoint is not None
    assert first.adjoint is not None
    assert second.adjoint.statistics()["adjoint/rows"] == 9.0
    assert first.adjoint.statistics()["adjoint/rows"] == 0.0


def test_no_grad_collects_without_a_graph() -> None:
    """Under torch.no_grad the rollout carries no graph and nothing is attached."""
    collector = _collector(_quadratic())
    with torch.no_grad():
        rollout = collector.collect(_quadratic_policy(), num_steps=2)
    assert not rollout.rewards.requires_grad
    assert rollout.adjoint is not None
    assert rollout.adjoint.statistics()["adjoint/rows"] == 0.0


def test_entropies_are_zero_without_an_entropy_output() -> None:
    """A policy without "entropy" gives zeros shaped like the rewards."""
    collector = _collector(_quadratic())
    policy = _LinearPolicy(1, 1, entropy=False).double()
    rollout = collector.collect(policy, num_steps=2)
    assert torch.equal(rollout.entropies, torch.zeros(2, 3, dtype=torch.float64))


@pytest.mark.parametrize("make_env", [_quadratic, lambda: PointMass(num_envs=3)])
def test_an_empty_rollout_is_shaped_right(make_env: Callable[[], DifferentiableVecEnv]) -> None:
    """num_steps=0 gives [0, num_envs, ...] fields and leaves the collector where it was."""
    env = make_env()
    collector = _collector(env)
    start = collector.detach_state()
    rollout = collector.collect(_LinearPolicy(start["obs"].shape[-1], 1), num_steps=0)
    space = env.single_action_space
    assert (rollout.num_steps, rollout.num_envs) == (0, 3)
    assert rollout.actions.shape == (0, 3, *(space.shape or ()))
    assert rollout.observations.batch_size == (0, 3)
    assert set(rollout.observations.keys()) == set(start.keys())
    assert rollout.observations["obs"].shape == (0, *start["obs"].shape)
    assert rollout.terminal_observations.batch_size == (0, 3)
    assert rollout.rewards.shape == rollout.alive_mask.shape == (0, 3)
    assert rollout.episodes.ended.shape == (0, 3)
    assert rollout.final_observation is rollout.initial_observation
    assert torch.equal(collector.detach_state()["obs"], start["obs"])


# ----------------------------------------------------------------- errors


@pytest.mark.usefixtures("without_runtime_checks")
def test_refuses_an_env_that_is_not_differentiable() -> None:
    """A plain VecEnv (no detach_state) is refused by name, as a user without mypy sees it."""
    with pytest.raises(ConfigError, match=r"DifferentiableVecEnv.*got CountingVecEnv"):
        DifferentiableCollector(CountingVecEnv(num_envs=2))  # type: ignore[arg-type]


def test_refuses_an_env_without_terminal_observations() -> None:
    """provides_final_obs=False is refused at construction."""
    with pytest.raises(ConfigError, match="provides_final_obs=False"):
        DifferentiableCollector(_Wrapper(_quadratic(), provides_final_obs=False))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"adjoint_max_norm": 0.0}, "adjoint_max_norm must be > 0"),
        ({"observation_limit": -1.0}, "observation_limit must be > 0"),
    ],
)
def test_refuses_bad_options(options: dict[str, Any], message: str) -> None:
    """Options are validated at construction."""
    with pytest.raises(ConfigError, match=message):
        DifferentiableCollector(_quadratic(), **options)


def test_refuses_a_policy_that_is_not_reparameterized() -> None:
    """A policy reporting reparameterized=False is refused, with the fix."""
    policy = _LinearPolicy(1, 1, reparameterized=False).double()
    with pytest.raises(ConfigError, match="reparameterized=False"):
        _collector(_quadratic()).collect(policy, num_steps=2)


def test_refuses_bad_calls() -> None:
    """No reset, a negative num_steps or a missing 'action' is refused with a clear error."""
    policy = _quadratic_policy()
    with pytest.raises(ConfigError, match="call reset"):
        DifferentiableCollector(_quadratic()).collect(policy, num_steps=2)
    collector = _collector(_quadratic())
    with pytest.raises(ConfigError, match="num_steps must be a non-negative int"):
        collector.collect(policy, num_steps=-1)

    class _NoAction(nn.Module):
        reparameterized = True

        def act(self, obs: Obs, *, deterministic: bool = False) -> Obs:
            return TensorDict({"mean": obs["obs"]}, batch_size=obs.batch_size)

    with pytest.raises(SpecError, match=r"holding 'action', got keys \['mean'\] at step 0"):
        collector.collect(_NoAction(), num_steps=2)


def test_refuses_a_misshapen_action() -> None:
    """An action of the wrong width is named as the policy's, before the env sees it."""
    with pytest.raises(SpecError, match="the policy's 'action'"):
        _collector(_quadratic()).collect(_LinearPolicy(1, 2).double(), num_steps=1)


def test_an_env_exception_is_chained_with_the_iteration_and_step() -> None:
    """The env's own exception becomes EnvError naming iteration and step, chained."""

    def spoil(step: int, result: StepResult) -> StepResult:
        if step == 3:
            raise ZeroDivisionError("physics blew up")
        return result

    collector = _collector(_Wrapper(_quadratic(), spoil))
    with pytest.raises(EnvError, match="ZeroDivisionError at step 3 of iteration 7") as info:
        collector.collect(_quadratic_policy(), num_steps=5, iteration=7)
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_missing_final_obs_breaks_the_contract() -> None:
    """provides_final_obs=True with final_obs=None raises EnvContractError naming the step."""
    collector = _collector(
        _Wrapper(
            _quadratic(),
            lambda step, result: _with(result, final_obs=None) if step == 2 else result,
        )
    )
    with pytest.raises(EnvContractError, match="final_obs=None at step 2 of iteration 0"):
        collector.collect(_quadratic_policy(), num_steps=4)


# ----------------------------------------------------------------- state


def _point_mass(seed: int) -> PointMass:
    return PointMass(num_envs=3, max_episode_steps=5, seed=seed, dtype="float64")


def test_state_round_trip_continues_exactly() -> None:
    """A restored collector continues the same episodes, bit for bit."""
    first = _collector(_point_mass(seed=1))
    torch.manual_seed(0)
    policy = _LinearPolicy(6, 2, noise_std=0.3).double()
    first.collect(policy, num_steps=7)
    state = copy.deepcopy(first.state_dict())  # saved at once, as a checkpoint does
    assert not state["obs"]["obs"].requires_grad
    second = DifferentiableCollector(_point_mass(seed=9))
    second.load_state_dict(state)
    assert not second.needs_reset
    torch.manual_seed(3)
    expected = first.collect(policy, num_steps=6)
    torch.manual_seed(3)
    got = second.collect(policy, num_steps=6)
    assert torch.equal(expected.rewards, got.rewards)
    assert torch.equal(expected.observations["obs"], got.observations["obs"])
    assert torch.equal(expected.truncated, got.truncated)
    assert torch.equal(expected.episodes.returns, got.episodes.returns)
    assert torch.equal(expected.episodes.lengths, got.episodes.lengths)
    torch.autograd.backward(got.rewards.sum())  # the restored rollout is differentiable too


def test_an_env_without_state_asks_for_a_reset() -> None:
    """An env without state_dict gives an empty state; loading it asks for a reset."""
    collector = _collector(_quadratic())
    assert collector.state_dict() == {}
    collector.load_state_dict({})
    assert collector.needs_reset
    with pytest.raises(CheckpointError, match="QuadraticEnv has no load_state_dict"):
        collector.load_state_dict(_collector(_point_mass(seed=0)).state_dict())


def test_a_state_of_another_num_envs_is_refused() -> None:
    """A state saved with other num_envs names the key."""
    saved = _collector(_point_mass(seed=0)).state_dict()
    collector = DifferentiableCollector(PointMass(num_envs=4))
    with pytest.raises(CheckpointError, match="'episode_return' must be a tensor of shape"):
        collector.load_state_dict(saved)
    with pytest.raises(CheckpointError, match=r"lacks \['env'\]"):
        collector.load_state_dict({"episode_return": 0, "episode_length": 0})


def test_observations_of_another_dtype_than_the_space_are_refused() -> None:
    """A float32 env's float64 step observations raise EnvContractError at the first collect."""
    env = _Wrapper(PointMass(num_envs=2), lambda _, result: _with(result, obs=result.obs.double()))
    policy = _LinearPolicy(6, 2)
    with pytest.raises(EnvContractError, match=r"^_Wrapper.step\(\): observation 'obs' expected"):
        _collector(env).collect(policy, num_steps=3)
