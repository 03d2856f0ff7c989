"""The per-row pool of initial states of BaseTorchVecEnv, and steps with and without a graph."""

from typing import Any

import jaxtyping
import pytest
import torch

from tests.envs.builtin._factories import DRIFT_LAYOUT, FACTORIES, random_actions
from typedrl.envs.builtin import CartPole, _counter_rng
from typedrl.envs.builtin._base import BaseTorchVecEnv
from typedrl.errors import SpecError

ALL = list(FACTORIES)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("num_envs", "num_episodes"), [(1, 1), (7, 3), (1029, 16)])
def test_uniform_block_equals_uniform_bit_for_bit(
    dtype: torch.dtype, num_envs: int, num_episodes: int
) -> None:
    """The int32 block hash gives exactly uniform()'s values, across the 2**32 wrap too."""
    device = torch.device("cpu")
    keys = _counter_rng.row_keys(2**40 + 3, num_envs, device)
    salts = _counter_rng.draw_salts(5, device)
    first = torch.randint(0, 2**40, (num_envs,), generator=torch.Generator().manual_seed(0))
    first[0] = 2**32 - 2
    work = _counter_rng.BlockWork.allocate(5, num_episodes, num_envs, device)
    block = _counter_rng.uniform_block(
        _counter_rng.to_int32(keys),
        _counter_rng.to_int32(first),
        _counter_rng.to_int32(salts.view(-1)),
        dtype,
        work,
    )
    assert block.shape == (num_episodes * num_envs, 5)
    assert block.dtype == dtype
    for k in range(num_episodes):
        expected = _counter_rng.uniform(keys, first + k, salts, dtype)
        assert torch.equal(block[k * num_envs : (k + 1) * num_envs], expected)


def _expected_initial(env: BaseTorchVecEnv, seed: int, episode: int) -> torch.Tensor:
    """The initial state of every row's given episode, straight from the hash."""
    keys = _counter_rng.row_keys(seed, env.num_envs, env.device)
    salts = _counter_rng.draw_salts(env._num_initial_draws, env.device)
    episodes = torch.full((env.num_envs,), episode, dtype=torch.int64)
    return env._initial_state(_counter_rng.uniform(keys, episodes, salts, env.dtype))


@pytest.mark.parametrize("name", ALL)
def test_pool_refills_across_many_steps_with_a_reset_every_step(name: str) -> None:
    """With a reset in every row at every step, step t starts episode t + 1, far beyond the pool."""
    env = FACTORIES[name](num_envs=5, max_episode_steps=1, dtype="float64")
    env.reset(seed=21)
    generator = torch.Generator().manual_seed(0)
    steps = 3 * env._pool_size + 2
    for step in range(steps):
        result = env.step(random_actions(env, generator))
        assert bool(result.truncated.all())
        expected = env._observe(_expected_initial(env, 21, step + 1))
        assert torch.equal(result.obs["obs"], expected)
    # An unseeded reset starts the next episode of every row.
    assert torch.equal(env.reset()[0]["obs"], env._observe(_expected_initial(env, 21, steps + 1)))


def test_pool_keeps_rows_independent_with_irregular_resets() -> None:
    """Rows that end at different times still draw episode e from hash(seed, row, e)."""
    generator = torch.Generator().manual_seed(5)
    small = CartPole(num_envs=3, max_episode_steps=7, dtype="float64")
    large = CartPole(num_envs=11, max_episode_steps=7, dtype="float64")
    small.reset(seed=8)
    large.reset(seed=8)
    for _ in range(5 * small._pool_size):
        action = torch.randint(0, 2, (11,), generator=generator)
        left = small.step(action[:3])
        right = large.step(action)
        assert torch.equal(left.obs["obs"], right.obs["obs"][:3])
        assert torch.equal(left.done, right.done[:3])
    assert torch.equal(small.reset()[0]["obs"], large.reset()[0]["obs"][:3])


def _rollout(env: BaseTorchVecEnv, mode: str, steps: int) -> list[torch.Tensor]:
    env.reset(seed=13)
    generator = torch.Generator().manual_seed(2)
    values: list[torch.Tensor] = []
    for _ in range(steps):
        action = random_actions(env, generator)
        if mode == "grad":
            action.requires_grad_()
        context = torch.no_grad() if mode == "no_grad" else torch.enable_grad()
        with context:
            result = env.step(action)
        assert result.final_obs is not None
        outputs = (result.obs["obs"], result.final_obs["obs"], result.reward)
        values.extend(tensor.detach() for tensor in outputs)
        values.extend((result.terminated, result.truncated))
        env.detach_state()
    return values


@pytest.mark.parametrize("name", ALL)
def test_steps_with_and_without_a_graph_are_bit_identical(name: str) -> None:
    """Plain, no_grad and graph-recording steps agree bit for bit, pool refills included."""
    env = FACTORIES[name](num_envs=6, max_episode_steps=5)
    steps = env._pool_size + 7
    plain = _rollout(env, "plain", steps)
    no_grad = _rollout(env, "no_grad", steps)
    assert all(torch.equal(a, b) for a, b in zip(plain, no_grad, strict=True))
    if name != "CartPole":
        graph = _rollout(env, "grad", steps)
        assert all(torch.equal(a, b) for a, b in zip(plain, graph, strict=True))


def test_gradients_flow_after_steps_without_a_graph() -> None:
    """A graph-free step leaves a state and observations that autograd can use."""
    env = CartPole(num_envs=4, action_mode="continuous", dtype="float64")
    env.reset(seed=0)
    result = env.step(torch.zeros(4, 1, dtype=torch.float64))
    assert not result.obs["obs"].requires_grad
    action = torch.full((4, 1), 0.5, dtype=torch.float64, requires_grad=True)
    later = env.step(action)
    (action_grad,) = torch.autograd.grad(later.reward.sum(), action)
    assert float(action_grad.abs().sum()) > 0
    # Observations of graph-free steps feed autograd.
    weight = torch.ones(4, dtype=torch.float64, requires_grad=True)
    (weight_grad,) = torch.autograd.grad((result.obs["obs"] @ weight).sum(), weight)
    assert torch.equal(weight_grad, result.obs["obs"].sum(0))


def _masked_twin(name: str, **options: Any) -> tuple[BaseTorchVecEnv, BaseTorchVecEnv]:
    """The same env twice: the CPU's listed restarts, and the accelerators' masked ones."""
    listed = FACTORIES[name](**options)
    masked = FACTORIES[name](**options)
    masked._host_indexing = False
    assert listed._host_indexing
    return listed, masked


@pytest.mark.parametrize("name", ALL)
def test_listed_and_masked_restarts_are_bit_identical(name: str) -> None:
    """Listed restarts with refills on demand equal masked restarts with scheduled refills."""
    listed, masked = _masked_twin(name, num_envs=7, max_episode_steps=6, dtype="float64")
    generator = torch.Generator().manual_seed(3)
    for env in (listed, masked):
        env.reset(seed=4)
    steps = 5 * listed._pool_size + 3
    for step in range(steps):
        action = random_actions(listed, generator)
        left, right = listed.step(action), masked.step(action)
        assert left.final_obs is not None
        assert right.final_obs is not None
        assert torch.equal(left.obs["obs"], right.obs["obs"])
        assert torch.equal(left.final_obs["obs"], right.final_obs["obs"])
        assert torch.equal(left.reward, right.reward)
        assert torch.equal(left.terminated, right.terminated)
        assert torch.equal(left.truncated, right.truncated)
        if step == steps // 2:
            # An unseeded reset in the middle starts every row's next episode.
            assert torch.equal(listed.reset()[0]["obs"], masked.reset()[0]["obs"])
    # Either schedule resumes from the other's state.
    listed.load_state_dict(masked.state_dict())
    for _ in range(2 * listed._pool_size):
        action = random_actions(listed, generator)
        assert torch.equal(listed.step(action).obs["obs"], masked.step(action).obs["obs"])


def test_listed_and_masked_restarts_have_the_same_gradients() -> None:
    """Rows that restart carry no gradient on either path; the others carry the same one."""
    listed, masked = _masked_twin(
        "CartPoleContinuous", num_envs=6, max_episode_steps=3, dtype="float64"
    )
    grads = []
    for env in (listed, masked):
        env.reset(seed=2)
        action = torch.full((6, 1), 0.3, dtype=torch.float64, requires_grad=True)
        total = sum(env.step(action * (k + 1)).reward.sum() for k in range(4))
        assert isinstance(total, torch.Tensor)
        (grad,) = torch.autograd.grad(total, action)
        grads.append(grad)
    assert torch.equal(grads[0], grads[1])
    assert float(grads[0].abs().sum()) > 0


def test_cpu_refills_the_pool_only_when_a_row_used_it_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each refill happens once some row has taken its whole pool, and not before."""
    env = CartPole(num_envs=16, max_episode_steps=40)
    refills: list[int] = []
    refill = env._refill_pool

    def spy() -> None:
        if env._pool.numel():
            # Some row has taken every entry of its pool (column index past the end).
            refills.append(int(env._pool_index.max()) // env.num_envs)
        refill()

    monkeypatch.setattr(env, "_refill_pool", spy)
    env.reset(seed=0)
    generator = torch.Generator().manual_seed(1)
    steps = 20 * env._pool_size
    for _ in range(steps):
        env.step(random_actions(env, generator))
    # A scheduled refill would happen every pool_size steps, 20 times.
    assert 1 <= len(refills) < 20 // 2
    assert all(taken == env._pool_size for taken in refills)


class _WrongRewardShape(BaseTorchVecEnv):
    """A one-dimensional drift whose reward hook returns a wrong shape."""

    def __init__(self) -> None:
        super().__init__(num_envs=3, layout=DRIFT_LAYOUT)

    def _initial_state(self, uniform: torch.Tensor) -> torch.Tensor:
        return uniform

    def _dynamics(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return state + action

    def _reward(
        self, state: torch.Tensor, action: torch.Tensor, next_state: torch.Tensor
    ) -> torch.Tensor:
        return next_state  # [num_envs, 1], not [num_envs]

    def _terminated(self, next_state: torch.Tensor) -> torch.Tensor:
        return next_state[:, 0] > 1

    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        return state.clone()


def test_first_step_validates_what_the_hooks_return(monkeypatch: pytest.MonkeyPatch) -> None:
    """A subclass hook with a wrong shape fails on the first step with SpecError."""
    # What users get: the test suites' runtime shape checks would catch it first.
    monkeypatch.setattr(jaxtyping.config, "jaxtyping_disable", True)
    env = _WrongRewardShape()
    env.reset(seed=0)
    with pytest.raises(SpecError, match="reward"):
        env.step(torch.zeros(3, 1))


def test_a_state_saved_right_after_a_reset_never_reuses_a_stale_pool() -> None:
    """A reset state that still carries an earlier pool (as older versions saved) refills."""
    generator = torch.Generator().manual_seed(6)
    env = CartPole(num_envs=5, max_episode_steps=3, dtype="float64")
    env.reset(seed=1)
    for _ in range(4):
        env.step(random_actions(env, generator))
    stale_pool = env.state_dict()["pool"]
    assert stale_pool.numel() > 0
    env.reset(seed=2)
    state = env.state_dict()
    state["pool"] = stale_pool  # what a version keeping the pool across resets saved
    listed, masked = _masked_twin("CartPole", num_envs=5, max_episode_steps=3, dtype="float64")
    listed.load_state_dict(state)
    masked.load_state_dict(state)
    for _ in range(8):
        action = random_actions(listed, generator)
        expected = env.step(action).obs["obs"]
        assert torch.equal(listed.step(action).obs["obs"], expected)
        assert torch.equal(masked.step(action).obs["obs"], expected)
