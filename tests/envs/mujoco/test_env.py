"""MujocoVecEnv: the differentiable-env contract on the MuJoCo cart-pole."""

import sys
from pathlib import Path
from typing import Any, Literal

import pytest
import torch

from typedrl.envs import check_differentiable_vec_env, make
from typedrl.envs.mujoco import CartPoleSwingUpTask, MujocoVecEnv
from typedrl.errors import ConfigError, MissingDependencyError


def _env(
    num_envs: int = 3,
    *,
    dtype: Literal["float32", "float64"] = "float64",
    seed: int = 0,
    **kwargs: Any,
) -> MujocoVecEnv:
    return MujocoVecEnv(
        task=CartPoleSwingUpTask(), num_envs=num_envs, dtype=dtype, seed=seed, **kwargs
    )


def _actions(num_steps: int, num_envs: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(num_steps, num_envs, 1, generator=generator, dtype=dtype) * 1.6 - 0.8


def test_differentiable_checker_passes() -> None:
    """Every rule of check_differentiable_vec_env holds, autoreset and gradients included."""
    env = _env(max_episode_steps=4)
    report = check_differentiable_vec_env(env, num_steps=8, max_examples=1)
    assert report.ok, str(report)


def test_gradient_matches_central_differences() -> None:
    """d(summed reward over 8 steps)/d(actions) agrees with central differences in float64."""
    env = _env(num_envs=2)
    base = _actions(8, 2, torch.float64)

    def total(actions: torch.Tensor) -> torch.Tensor:
        env.reset(seed=5)
        return sum((env.step(actions[t]).reward.sum() for t in range(8)), torch.zeros(()))

    actions = base.clone().requires_grad_()
    (gradient,) = torch.autograd.grad(total(actions), actions)
    eps = 1e-6
    for index in [(0, 1, 0), (5, 0, 0)]:
        plus, minus = base.clone(), base.clone()
        plus[index] += eps
        minus[index] -= eps
        with torch.no_grad():
            finite = (total(plus) - total(minus)) / (2 * eps)
        torch.testing.assert_close(gradient[index], finite, rtol=1e-6, atol=1e-9)
    assert gradient[:, :, 0].abs().min() > 0


def test_autoreset_restarts_only_the_rows_that_ended() -> None:
    """A row that ends restarts graph-free with exact final_obs; other rows keep their graph."""
    short = _env(num_envs=3, max_episode_steps=3)
    long = _env(num_envs=3, max_episode_steps=50)
    # Stagger the clocks: row 0 ends after one step, rows 1 and 2 later.
    short.reset(seed=1)
    long.reset(seed=1)
    state = short.state_dict()
    state["started"] = torch.tensor([-2, 0, 0])
    short.load_state_dict(state)
    action = torch.full((3, 1), 0.5, dtype=torch.float64, requires_grad=True)
    ended = short.step(action)
    reference = long.step(action)
    assert ended.truncated.tolist() == [True, False, False]
    # final_obs is the terminal observation, the same as the env that went on.
    assert ended.final_obs is not None
    torch.testing.assert_close(ended.final_obs["obs"], reference.obs["obs"], rtol=0, atol=0)
    torch.testing.assert_close(ended.obs["obs"][1:], reference.obs["obs"][1:], rtol=0, atol=0)
    assert not torch.equal(ended.obs["obs"][0], reference.obs["obs"][0])
    (restarted,) = torch.autograd.grad(
        ended.obs["obs"][0].sum(), action, retain_graph=True, allow_unused=True
    )
    assert restarted is None or torch.count_nonzero(restarted) == 0
    (kept,) = torch.autograd.grad(ended.obs["obs"][1:].sum(), action, retain_graph=True)
    (expected,) = torch.autograd.grad(reference.obs["obs"][1:].sum(), action)
    torch.testing.assert_close(kept, expected, rtol=0, atol=0)
    (terminal,) = torch.autograd.grad(ended.final_obs["obs"][0].sum(), action)
    assert terminal[0, 0] != 0


def test_termination_off_the_rail_restarts_hanging() -> None:
    """A cart pushed past the rail's end terminates; its row restarts with the pole down."""
    env = MujocoVecEnv(task=CartPoleSwingUpTask(x_limit=0.2), num_envs=2, dtype="float64")
    env.reset(seed=0)
    push = torch.tensor([[1.0], [0.0]], dtype=torch.float64)
    result = env.step(push)
    for _ in range(60):
        if bool(result.terminated[0]):
            break
        result = env.step(push)
    assert result.terminated.tolist() == [True, False]
    assert result.final_obs is not None
    assert float(result.final_obs["obs"][0, 0]) > 0.2
    assert float(result.obs["obs"][0, 2]) < -0.99


def test_detach_state_cuts_the_graph_and_keeps_the_values() -> None:
    """detach_state returns the last observation, graph-free; stepping goes on from it."""
    env = _env(num_envs=2)
    env.reset(seed=0)
    action = torch.zeros(2, 1, dtype=torch.float64, requires_grad=True)
    result = env.step(action)
    assert result.obs["obs"].requires_grad
    detached = env.detach_state()
    assert not detached["obs"].requires_grad
    torch.testing.assert_close(detached["obs"], result.obs["obs"].detach(), rtol=0, atol=0)
    after = env.step(torch.zeros(2, 1, dtype=torch.float64))
    assert not after.obs["obs"].requires_grad


def test_seeding_is_per_row_and_reproducible() -> None:
    """The same seed replays the same run; row i does not depend on num_envs."""
    actions = _actions(8, 4, torch.float64)
    runs = []
    for num_envs in (4, 4, 2):
        env = _env(num_envs=num_envs, max_episode_steps=3)
        obs, _ = env.reset(seed=7)
        trace = [obs["obs"]]
        trace.extend(env.step(actions[t, :num_envs]).obs["obs"] for t in range(8))
        runs.append(torch.stack(trace))
    torch.testing.assert_close(runs[0], runs[1], rtol=0, atol=0)
    torch.testing.assert_close(runs[0][:, :2], runs[2], rtol=0, atol=0)
    other = _env(num_envs=4)
    assert not torch.equal(other.reset(seed=8)[0]["obs"], runs[0][0])


def test_state_dict_resumes_exactly() -> None:
    """An env restored from state_dict continues bit for bit (state, clocks, streams)."""
    actions = _actions(20, 3, torch.float64, seed=3)
    first = _env(max_episode_steps=4, seed=3)
    first.reset()
    for t in range(7):
        first.step(actions[t])
    saved = first.state_dict()
    expected = [first.step(actions[t]) for t in range(7, 20)]
    second = _env(max_episode_steps=4, seed=99)
    second.load_state_dict(saved)
    for t, reference in zip(range(7, 20), expected, strict=True):
        result = second.step(actions[t])
        assert torch.equal(result.obs["obs"], reference.obs["obs"])
        assert torch.equal(result.reward, reference.reward)
        assert torch.equal(result.truncated, reference.truncated)


def test_float32_and_float64_agree() -> None:
    """The physics runs in the env's dtype; float32 follows float64 closely."""
    actions = _actions(10, 2, torch.float64)
    single, double = _env(num_envs=2, dtype="float32"), _env(num_envs=2, dtype="float64")
    single.reset(seed=2)
    double.reset(seed=2)
    for t in range(9):
        single.step(actions[t].float())
        double.step(actions[t])
    low = single.step(actions[9].float())
    high = double.step(actions[9])
    assert low.obs["obs"].dtype == torch.float32
    assert low.reward.dtype == torch.float32
    assert high.obs["obs"].dtype == torch.float64
    torch.testing.assert_close(low.obs["obs"].double(), high.obs["obs"], rtol=1e-4, atol=1e-4)


def test_properties_and_repr() -> None:
    """Control interval, solver iterations, spaces and the repr describe the env."""
    env = _env(num_envs=2, solver_iterations=8)
    assert env.control_dt == pytest.approx(0.02)
    assert env.solver_iterations == 8
    assert isinstance(env.task, CartPoleSwingUpTask)
    assert env.single_action_space.shape == (1,)
    assert env.single_observation_space.shape == (5,)
    assert env.observation_normalize_mask.tolist() == [True, True, False, False, True]
    assert "solver_iterations=8" in repr(env)


def test_invalid_options_raise_config_errors(tmp_path: Path) -> None:
    """A bad solver iteration count says what was expected."""
    with pytest.raises(ConfigError, match="solver_iterations"):
        _env(solver_iterations=0)


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without mujoco-torch, building an env (directly or by id) names the extra."""
    monkeypatch.setitem(sys.modules, "mujoco_torch", None)
    with pytest.raises(MissingDependencyError, match=r"typedrl\[mujoco-torch\]"):
        _env()
    with pytest.raises(MissingDependencyError, match=r"typedrl\[mujoco-torch\]"):
        make("typedrl/MujocoCartPoleSwingUp-v0", num_envs=1)
