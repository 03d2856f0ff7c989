"""Contract tests of BaseTorchVecEnv, run on every built-in env."""

import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from tests.envs.builtin._factories import DIFFERENTIABLE, FACTORIES, random_actions
from typedrl.envs.builtin import BaseTorchVecEnv, CartPole, EnvLayout, PointMass
from typedrl.errors import ConfigError, EnvContractError, SpecError
from typedrl.protocols import DifferentiableVecEnv, SupportsObservationNormalizeMask

ALL = list(FACTORIES)


@pytest.mark.parametrize("name", ALL)
def test_protocols_and_spaces(name: str) -> None:
    """Every env satisfies the protocols; observations and spaces agree."""
    env = FACTORIES[name](num_envs=5)
    assert isinstance(env, DifferentiableVecEnv)
    assert isinstance(env, SupportsObservationNormalizeMask)
    assert env.provides_final_obs
    obs, info = env.reset(seed=0)
    assert info == {}
    assert list(obs.keys()) == ["obs"]
    space = env.single_observation_space
    assert isinstance(space, gym.spaces.Box)
    assert obs["obs"].shape == (5, *space.shape)
    assert obs["obs"].dtype == torch.float32
    assert env.observation_normalize_mask.shape == space.shape
    assert env.observation_normalize_mask.dtype == torch.bool
    for row in obs["obs"].numpy():
        assert space.contains(row.astype(np.float32))


@pytest.mark.parametrize("name", ALL)
def test_float64_option(name: str) -> None:
    """dtype="float64" makes states, observations, rewards and spaces float64."""
    env = FACTORIES[name](num_envs=3, dtype="float64")
    obs, _ = env.reset(seed=1)
    result = env.step(random_actions(env, torch.Generator().manual_seed(0)))
    assert obs["obs"].dtype == torch.float64
    assert result.reward.dtype == torch.float64
    assert env.single_observation_space.dtype == np.float64
    if isinstance(env.single_action_space, gym.spaces.Box):
        assert env.single_action_space.dtype == np.float64


@pytest.mark.parametrize("name", ALL)
def test_seeding_is_reproducible_and_per_row(name: str) -> None:
    """Row i's initial states depend only on (seed, i, episode), not on num_envs."""
    small = FACTORIES[name](num_envs=3)
    large = FACTORIES[name](num_envs=7)
    first, _ = small.reset(seed=11)
    assert torch.equal(first["obs"], large.reset(seed=11)[0]["obs"][:3])
    assert torch.equal(first["obs"], small.reset(seed=11)[0]["obs"])
    assert not torch.equal(first["obs"], small.reset(seed=12)[0]["obs"])
    # An unseeded reset starts the next episode of every row, again per row.
    small.reset(seed=11)
    assert torch.equal(small.reset()[0]["obs"], large.reset()[0]["obs"][:3])


@pytest.mark.parametrize("name", ALL)
def test_constructor_seed_matches_reset_seed(name: str) -> None:
    """Env(seed=s).reset() equals Env().reset(seed=s)."""
    seeded, _ = FACTORIES[name](num_envs=4, seed=5).reset()
    explicit, _ = FACTORIES[name](num_envs=4).reset(seed=5)
    assert torch.equal(seeded["obs"], explicit["obs"])


def test_rows_are_independent_across_autoresets() -> None:
    """A row's trajectory ignores num_envs and the other rows' actions and resets."""
    generator = torch.Generator().manual_seed(0)
    small = CartPole(num_envs=4, dtype="float64")
    large = CartPole(num_envs=9, dtype="float64")
    small.reset(seed=3)
    large.reset(seed=3)
    ended = torch.zeros(4, dtype=torch.bool)
    for _ in range(80):
        action = torch.randint(0, 2, (9,), generator=generator)
        left = small.step(action[:4])
        right = large.step(action)
        ended |= left.done
        torch.testing.assert_close(left.obs["obs"], right.obs["obs"][:4], rtol=0, atol=1e-12)
        assert torch.equal(left.terminated, right.terminated[:4])
    assert bool(ended.all())


@pytest.mark.parametrize("name", ALL)
def test_time_limit_truncates_with_final_obs(name: str) -> None:
    """At max_episode_steps rows are truncated; final_obs holds the pre-reset observation."""
    limited = FACTORIES[name](num_envs=4, max_episode_steps=3, dtype="float64")
    free = FACTORIES[name](num_envs=4, max_episode_steps=100, dtype="float64")
    limited.reset(seed=2)
    free.reset(seed=2)
    generator = torch.Generator().manual_seed(1)
    final_obs = obs = torch.zeros(())
    for step in range(3):
        action = random_actions(limited, generator, scale=0.1)
        capped = limited.step(action)
        uncapped = free.step(action)
        assert capped.final_obs is not None
        final_obs, obs = capped.final_obs["obs"], capped.obs["obs"]
        torch.testing.assert_close(final_obs, uncapped.obs["obs"])
        assert torch.equal(capped.truncated, torch.full((4,), step == 2))
        assert not bool(capped.terminated.any())
    assert not torch.allclose(obs, final_obs)
    # Episode 1 of each row, the same as an unseeded reset would give.
    replay = FACTORIES[name](num_envs=4, dtype="float64")
    replay.reset(seed=2)
    torch.testing.assert_close(obs, replay.reset()[0]["obs"])


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_gradients_match_finite_differences(name: str) -> None:
    """d(return + final observation)/d(actions) over a 4-step horizon matches gradcheck."""
    env = FACTORIES[name](num_envs=2, dtype="float64", max_episode_steps=50)
    horizon = 4
    actions = random_actions(env, torch.Generator().manual_seed(3), scale=0.5)
    actions = actions.unsqueeze(0).repeat(horizon, 1, 1)

    def rollout(plan: torch.Tensor) -> torch.Tensor:
        env.reset(seed=4)
        total = torch.zeros((), dtype=torch.float64)
        last = total
        for step in range(horizon):
            result = env.step(plan[step])
            assert not bool(result.done.any())
            total = total + result.reward.sum()
            last = result.obs["obs"].sum()
        return total + last

    assert torch.autograd.gradcheck(rollout, (actions.requires_grad_(),), eps=1e-6, atol=1e-5)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_no_gradient_crosses_an_autoreset(name: str) -> None:
    """Reset rows start graph-free; the terminal reward and final_obs keep the gradient."""
    env = FACTORIES[name](num_envs=3, max_episode_steps=2, dtype="float64")
    env.reset(seed=0)
    action = random_actions(env, torch.Generator().manual_seed(0), scale=0.5).requires_grad_()
    env.step(action)
    result = env.step(action.detach().clone())
    assert bool(result.truncated.all())
    assert result.final_obs is not None
    (final_grad,) = torch.autograd.grad(result.final_obs["obs"].sum(), action, retain_graph=True)
    assert float(final_grad.abs().sum()) > 0
    (reset_grad,) = torch.autograd.grad(result.obs["obs"].sum(), action, allow_unused=True)
    assert reset_grad is None or float(reset_grad.abs().sum()) == 0.0


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_detach_state_cuts_the_graph(name: str) -> None:
    """detach_state keeps the values and drops the graph."""
    env = FACTORIES[name](num_envs=2)
    env.reset(seed=0)
    action = random_actions(env, torch.Generator().manual_seed(0)).requires_grad_()
    result = env.step(action)
    assert result.obs["obs"].requires_grad
    detached = env.detach_state()
    assert not detached["obs"].requires_grad
    torch.testing.assert_close(detached["obs"], result.obs["obs"].detach())
    later = env.step(torch.zeros_like(action))
    assert not later.obs["obs"].requires_grad
    assert not later.reward.requires_grad


def test_actions_are_clipped_with_zero_gradient_outside() -> None:
    """clip_actions clamps to the bounds: outside them the action has no effect or gradient."""
    clipped = PointMass(num_envs=1, dtype="float64")
    unclipped = PointMass(num_envs=1, dtype="float64", clip_actions=False)
    clipped.reset(seed=0)
    unclipped.reset(seed=0)
    action = torch.tensor([[3.0, 0.5]], dtype=torch.float64, requires_grad=True)
    result = clipped.step(action)
    (grad,) = torch.autograd.grad(result.obs["obs"].sum(), action)
    assert grad[0, 0] == 0.0
    assert grad[0, 1] != 0.0
    bounded = unclipped.step(torch.tensor([[1.0, 0.5]], dtype=torch.float64))
    torch.testing.assert_close(result.obs["obs"].detach(), bounded.obs["obs"])


def test_invalid_arguments_raise_typed_errors() -> None:
    """Bad constructor arguments, reset arguments and actions raise TypedRLError subclasses."""
    with pytest.raises(ConfigError, match="num_envs"):
        PointMass(num_envs=0)
    env = PointMass(num_envs=2)
    with pytest.raises(EnvContractError, match="reset"):
        env.step(torch.zeros(2, 2))
    with pytest.raises(ConfigError, match="seed"):
        env.reset(seed=-1)
    with pytest.raises(ConfigError, match="options"):
        env.reset(options={"reset_mask": None})
    env.reset(seed=0)
    with pytest.raises(SpecError, match="shape"):
        env.step(torch.zeros(2, 3))
    with pytest.raises(SpecError, match="floating"):
        env.step(torch.zeros(2, 2, dtype=torch.int64))
    with pytest.raises(SpecError, match="integer"):
        CartPole(num_envs=2, seed=0).step(torch.zeros(2))


def test_unknown_or_bad_options_are_refused() -> None:
    """``**options`` refuses a name EnvOptions lacks, and a bad dtype or time limit."""
    with pytest.raises(ConfigError, match=r"unexpected keyword arguments \['max_episode_step'\]"):
        PointMass(num_envs=2, max_episode_step=5)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="dtype must be one of"):
        PointMass(num_envs=2, dtype="float16")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_episode_steps"):
        PointMass(num_envs=2, max_episode_steps=0)
    assert PointMass(num_envs=2, max_episode_steps=7).max_episode_steps == 7
    assert PointMass(num_envs=2, max_episode_steps=None).max_episode_steps == 200


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"observation_normalize_mask": (True,)}, "observation_normalize_mask has 1 entries"),
        ({"num_initial_draws": 0}, "num_initial_draws"),
        ({"max_episode_steps": 0}, "max_episode_steps"),
        ({"action_space": 0}, "action_space"),
    ],
)
def test_env_layout_checks_itself(change: dict[str, Any], match: str) -> None:
    """An EnvLayout a user writes is checked when it is made, before any env uses it."""
    fields: dict[str, Any] = {
        "observation_high": (1.0, 1.0),
        "observation_normalize_mask": (True, False),
        "action_space": 2,
        "num_initial_draws": 1,
        "max_episode_steps": 10,
    }
    EnvLayout(**fields)
    with pytest.raises(ConfigError, match=match):
        EnvLayout(**{**fields, **change})


def test_close_twice_and_repr() -> None:
    """close() is idempotent; repr names the configuration."""
    env: BaseTorchVecEnv = PointMass(num_envs=2)
    assert math.isfinite(float(env.reset(seed=0)[0]["obs"].sum()))
    env.close()
    env.close()
    assert "PointMass(num_envs=2" in repr(env)
    assert env.max_episode_steps == 200


@pytest.mark.parametrize("name", ALL)
def test_step_and_reset_after_close_raise(name: str) -> None:
    """A closed env refuses to step or reset, with an error naming the call."""
    env = FACTORIES[name](num_envs=2)
    env.reset(seed=0)
    action = random_actions(env, torch.Generator().manual_seed(0))
    env.step(action)
    env.close()
    owner = type(env).__name__
    with pytest.raises(EnvContractError, match=rf"{owner}\.step: the env is closed"):
        env.step(action)
    with pytest.raises(EnvContractError, match=rf"{owner}\.reset: the env is closed"):
        env.reset(seed=0)
    never_reset = FACTORIES[name](num_envs=2)
    never_reset.close()
    with pytest.raises(EnvContractError, match="the env is closed"):
        never_reset.step(action)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ALL)
def test_cuda_matches_cpu(name: str) -> None:
    """The same seed gives the same initial states on CUDA and CPU; steps run on CUDA."""
    cpu = FACTORIES[name](num_envs=64, dtype="float64")
    cuda = FACTORIES[name](num_envs=64, dtype="float64", device="cuda")
    obs_cpu, _ = cpu.reset(seed=9)
    obs_cuda, _ = cuda.reset(seed=9)
    torch.testing.assert_close(obs_cuda["obs"].cpu(), obs_cpu["obs"])
    action = random_actions(cpu, torch.Generator().manual_seed(0))
    for _ in range(5):
        left = cpu.step(action)
        right = cuda.step(action.to("cuda"))
        assert right.reward.device.type == "cuda"
        torch.testing.assert_close(right.obs["obs"].cpu(), left.obs["obs"])


@pytest.mark.parametrize(
    "env_id", ["typedrl/CartPole-v0", "typedrl/Pendulum-v0", "typedrl/Reacher-v0"]
)
def test_state_dict_resumes_exactly(env_id: str) -> None:
    """An env restored from state_dict continues bit-identically (rows, counters, streams)."""
    from typedrl.envs import make_builtin

    def actions(env: Any, k: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(k)
        space = env.single_action_space
        if isinstance(space, gym.spaces.Discrete):
            return torch.randint(0, int(space.n), (env.num_envs,), generator=generator)
        return torch.rand(env.num_envs, *space.shape, generator=generator) * 2 - 1

    first = make_builtin(env_id, num_envs=5, seed=3)
    first.reset()
    for k in range(37):
        first.step(actions(first, k))
    saved = first.state_dict()
    expected = [first.step(actions(first, 100 + k)) for k in range(60)]
    second = make_builtin(env_id, num_envs=5, seed=99)
    second.load_state_dict(saved)
    for k, reference in enumerate(expected):
        result = second.step(actions(second, 100 + k))
        assert torch.equal(result.obs["obs"], reference.obs["obs"])
        assert torch.equal(result.reward, reference.reward)
        assert torch.equal(result.terminated, reference.terminated)
        assert torch.equal(result.truncated, reference.truncated)


def test_load_state_dict_rejects_foreign_state() -> None:
    """A state of another env size or with missing keys raises CheckpointError."""
    from typedrl.envs import make_builtin
    from typedrl.errors import CheckpointError

    small = make_builtin("typedrl/CartPole-v0", num_envs=2, seed=0)
    small.reset()
    big = make_builtin("typedrl/CartPole-v0", num_envs=3, seed=0)
    with pytest.raises(CheckpointError, match=r"shape \[3\]"):
        big.load_state_dict(small.state_dict())
    state = small.state_dict()
    del state["pool"]
    with pytest.raises(CheckpointError, match="expected keys"):
        small.load_state_dict(state)


def test_random_elapsed_steps_spread_the_time_outs() -> None:
    """random_elapsed_steps starts each row's clock at a reproducible random step."""
    horizon = 50

    def truncation_steps(seed: int) -> list[int]:
        env = PointMass(num_envs=16, max_episode_steps=horizon)
        env.reset(seed=seed, options={"random_elapsed_steps": True})
        first = [-1] * 16
        for step in range(horizon):
            truncated = env.step(torch.zeros(16, 2)).truncated
            for row in range(16):
                if bool(truncated[row]) and first[row] < 0:
                    first[row] = step
        return first

    steps = truncation_steps(3)
    assert all(0 <= step < horizon for step in steps)  # every row times out in time
    assert len(set(steps)) > 8  # not all on the same step
    assert truncation_steps(3) == steps  # reproducible from the seed
    plain = PointMass(num_envs=4, max_episode_steps=horizon)
    plain.reset(seed=3, options={"random_elapsed_steps": False})
    with pytest.raises(ConfigError, match="random_elapsed_steps"):
        plain.reset(options={"random_elapsed_steps": 1})
