"""NewtonVecEnv on the Ant: the differentiable-env contract, gradients in contact, state."""

import gymnasium as gym
import newton
import pytest
import torch

from tests_newton.conftest import DEVICES, actions, ant, needs_cuda
from typedrl.envs import check_differentiable_vec_env, make
from typedrl.envs.builtin import GymnasiumVectorView
from typedrl.envs.newton import AntTask, NewtonVecEnv
from typedrl.errors import ConfigError

_NQ, _NV = 15, 14


@pytest.mark.parametrize("device", DEVICES)
def test_differentiable_checker_passes(device: str) -> None:
    """Every rule of check_differentiable_vec_env holds, autoreset and gradients included."""
    env = ant(max_episode_steps=6, device=device)
    report = check_differentiable_vec_env(env, num_steps=10, max_examples=2)
    assert report.ok, str(report)


def _settled(env: NewtonVecEnv, steps: int = 40) -> None:
    """Reset and let the ant drop onto its feet (every row in contact with the ground)."""
    env.reset(seed=0)
    with torch.no_grad():
        for action in actions(steps, env.num_envs, seed=3).to(env.device):
            env.step(action)
    heights = env.state_dict()["state"][:, 2]
    # Standing on bent legs: well below the 0.75 m start, far above the 0.27 m floor.
    assert bool(((heights > 0.4) & (heights < 0.65)).all()), heights


def _relative_error(autograd: torch.Tensor, finite: torch.Tensor) -> float:
    return float((autograd - finite).norm() / finite.norm())


@pytest.mark.parametrize("device", DEVICES)
def test_action_gradient_in_contact_matches_central_differences(device: str) -> None:
    """d(3-step return)/d(first action) of a standing ant agrees with central differences."""
    env = ant(2, device=device)
    _settled(env)
    saved = env.state_dict()
    plan = actions(3, 2, seed=5).to(device)

    def ret(first: torch.Tensor) -> torch.Tensor:
        env.load_state_dict(saved)
        total = env.step(first).reward
        for action in plan[1:]:
            total = total + env.step(action).reward
        return total.sum()

    first = plan[0].clone().requires_grad_()
    (autograd,) = torch.autograd.grad(ret(first), first)
    eps = 1e-2
    finite = torch.zeros_like(plan[0])
    with torch.no_grad():
        for row in range(2):
            for entry in range(8):
                step = torch.zeros_like(plan[0])
                step[row, entry] = eps
                finite[row, entry] = (ret(plan[0] + step) - ret(plan[0] - step)) / (2 * eps)
    error = _relative_error(autograd, finite)
    print(f"ant action-gradient relative error in contact: {error:.4f}")
    # Measured: 2.6 % (Newton 1.8; the contact points are constants in the bodies' frames).
    assert error < 5e-2


def test_state_gradient_in_contact_matches_central_differences() -> None:
    """d(next observation . w)/d(joint_qd) of a standing ant agrees with central differences."""
    env = ant(2)
    _settled(env)
    saved = env.state_dict()
    action = actions(1, 2, seed=7)[0]
    weights = torch.randn(2, 37, generator=torch.Generator().manual_seed(0))

    def objective(state: torch.Tensor) -> torch.Tensor:
        env.load_state_dict(saved)
        # White-box: the row states are the env's own tensor; give it the probe's graph.
        env._state = state
        result = env.step(action)
        obs: torch.Tensor = result.obs["obs"]
        return (obs * weights).sum() + result.reward.sum()

    start = saved["state"].clone().requires_grad_()
    (gradient,) = torch.autograd.grad(objective(start), start)
    entries = list(range(_NQ, _NQ + _NV))
    autograd = gradient[:, entries]
    finite = torch.zeros_like(autograd)
    with torch.no_grad():
        for row in range(2):
            for column, entry in enumerate(entries):
                eps = 1e-2
                step = torch.zeros_like(start)
                step[row, entry] = eps
                finite[row, column] = (
                    objective(saved["state"] + step) - objective(saved["state"] - step)
                ) / (2 * eps)
    error = _relative_error(autograd, finite)
    print(f"ant joint-velocity-gradient relative error in contact: {error:.4f}")
    # Measured: 1.7 % (Newton 1.8). Gradients w.r.t. positions in contact are not
    # checked: the contact points are constants in the bodies' frames (33 %, see the guide).
    assert error < 5e-2


def test_tile_mass_matrix_matches_newtons_dense_product() -> None:
    """States and gradients agree with Newton's dense J^T M J path to float32 rounding."""
    env = ant(2)
    _settled(env)
    saved = env.state_dict()
    plan = actions(4, 2, seed=9)
    weights = torch.randn(2, 37, generator=torch.Generator().manual_seed(1))

    def rollout() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        env.load_state_dict(saved)
        # White-box: the row states are the env's own tensor; give it the probe's graph.
        start = saved["state"].clone().requires_grad_()
        env._state = start
        taken = plan.clone().requires_grad_()
        total = torch.zeros(())
        for action in taken:
            result = env.step(action)
            total = total + result.reward.sum() + (result.obs["obs"] * weights).sum()
        by_action, by_state = torch.autograd.grad(total, (taken, start))
        env.detach_state()
        # The state's coordinates and velocities (the last action has no effect).
        return total.detach(), by_action, by_state[:, : _NQ + _NV]

    physics = env._physics
    solver = physics._solver
    assert solver.use_tile_gemm
    assert solver.fuse_cholesky
    tile = rollout()
    # White-box: the same model stepped by Newton's default (dense) Featherstone solver.
    physics._solver = newton.solvers.SolverFeatherstone(physics._model)
    dense = rollout()
    torch.testing.assert_close(tile[0], dense[0], rtol=1e-5, atol=0)
    by_action = _relative_error(tile[1], dense[1])
    by_state = _relative_error(tile[2], dense[2])
    print(f"tile vs dense gradient error: actions {by_action:.1e}, state {by_state:.1e}")
    # Measured: 5e-7 and 6e-7 (Newton 1.8, Warp 1.19).
    assert by_action < 1e-5
    assert by_state < 1e-5


def test_rows_do_not_depend_on_each_other() -> None:
    """Rows 0-1 of a 2-row and a 3-row env, seeded alike, move alike (worlds never touch)."""
    small, large = ant(2), ant(3)
    obs_small, _ = small.reset(seed=4)
    obs_large, _ = large.reset(seed=4)
    plan = actions(20, 3, seed=1)
    with torch.no_grad():
        for action in plan:
            obs_small = small.step(action[:2]).obs
            obs_large = large.step(action).obs
    torch.testing.assert_close(obs_small["obs"][:2], obs_large["obs"][:2], rtol=0, atol=0)


def test_seeded_resets_repeat() -> None:
    """The same seed gives the same first observation and the same rollout."""
    env = ant(2)
    first, _ = env.reset(seed=11)
    again, _ = env.reset(seed=11)
    other, _ = env.reset(seed=12)
    assert torch.equal(first["obs"], again["obs"])
    assert not torch.equal(first["obs"], other["obs"])


def test_state_dict_round_trip_continues_bit_for_bit() -> None:
    """An env restored from state_dict continues exactly as the original does."""
    env = ant(2, max_episode_steps=7)
    env.reset(seed=2)
    plan = actions(12, 2, seed=2)
    with torch.no_grad():
        for action in plan[:5]:
            env.step(action)
        saved = env.state_dict()
        expected = [env.step(action) for action in plan[5:]]
        restored = ant(2, max_episode_steps=7)
        restored.load_state_dict(saved)
        for action, want in zip(plan[5:], expected, strict=True):
            got = restored.step(action)
            assert torch.equal(got.obs["obs"], want.obs["obs"])
            assert torch.equal(got.reward, want.reward)
            assert torch.equal(got.truncated, want.truncated)


def test_step_buffers_are_pooled_per_window() -> None:
    """Windows of 4 differentiated steps reuse the same 4 sets of Warp buffers."""
    env = ant(2)
    env.reset(seed=0)
    for _ in range(3):
        total = torch.zeros(())
        for action in actions(4, 2):
            total = total + env.step(action.requires_grad_()).reward.sum()
        torch.autograd.backward(total)
        del total
        env.detach_state()
    assert env.allocated_step_buffers == 4


def test_float64_is_refused() -> None:
    """The physics runs in float32 only: float64 is one ConfigError line."""
    with pytest.raises(ConfigError, match="float32"):
        NewtonVecEnv(task=AntTask(), num_envs=1, dtype="float64")


def test_registered_id_builds_the_env() -> None:
    """typedrl/NewtonAnt-v0 builds through make and through gymnasium.make_vec."""
    env = make("typedrl/NewtonAnt-v0", num_envs=2, seed=0)
    assert isinstance(env, NewtonVecEnv)
    assert env.max_episode_steps == 1000
    view = gym.make_vec("typedrl/NewtonAnt-v0", num_envs=2, array_type="torch")
    assert isinstance(view, GymnasiumVectorView)
    obs, _ = view.reset(seed=0)
    assert obs.shape == (2, 37)


@needs_cuda
def test_cuda_rollout_and_gradients_match_the_cpu() -> None:
    """From a standing (in-contact) state, 8 steps on CUDA and on the CPU agree.

    The states, the return and its gradient w.r.t. the actions; the contact forces
    are summed with atomics on the GPU, so in another order than on the CPU.
    """
    standing = ant(2)
    _settled(standing)
    saved = standing.state_dict()
    results = []
    for device in ("cpu", "cuda"):
        env = ant(2, device=device)
        env.reset(seed=0)
        env.load_state_dict(saved)  # moved to the env's device
        plan = actions(8, 2, seed=11).to(device).requires_grad_()
        total = torch.zeros((), device=device)
        for action in plan:
            total = total + env.step(action).reward.sum()
        (gradient,) = torch.autograd.grad(total, plan)
        results.append((env.state_dict()["state"].cpu(), total.detach().cpu(), gradient.cpu()))
    (cpu_state, cpu_return, cpu_grad), (cuda_state, cuda_return, cuda_grad) = results
    error = float((cuda_grad - cpu_grad).norm() / cpu_grad.norm())
    print(
        f"ant 8 steps in contact, CUDA vs CPU: largest state difference "
        f"{float((cuda_state - cpu_state).abs().max()):.2e}, returns {float(cuda_return):.6f} "
        f"vs {float(cpu_return):.6f}, action-gradient relative difference {error:.2e}"
    )
    torch.testing.assert_close(cuda_state, cpu_state, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(cuda_return, cpu_return, rtol=1e-4, atol=1e-3)
    assert error < 1e-2
