"""NewtonVecEnv on the Hopper: the differentiable-env contract and its terminations."""

import torch

from typedrl.envs import check_differentiable_vec_env, make
from typedrl.envs.newton import HopperTask, NewtonVecEnv


def test_differentiable_checker_passes() -> None:
    """Every rule of check_differentiable_vec_env holds, autoreset and gradients included."""
    env = NewtonVecEnv(task=HopperTask(), num_envs=3, seed=0, max_episode_steps=6)
    report = check_differentiable_vec_env(env, num_steps=10, max_examples=2)
    assert report.ok, str(report)


def test_hopper_stands_without_action_and_falls_when_pushed_over() -> None:
    """Zero actions keep it up for 50 steps (it topples after about 80); a pitch rate ends it."""
    env = make("typedrl/NewtonHopper-v0", num_envs=2, seed=0)
    assert isinstance(env, NewtonVecEnv)
    env.reset(seed=0)
    with torch.no_grad():
        for _ in range(50):
            result = env.step(torch.zeros(2, 3))
            assert not bool(result.terminated.any())
        state = env.state_dict()
        state["state"][:, 6 + 2] = 10.0  # pitch rate, rad/s
        env.load_state_dict(state)
        ended = torch.zeros(2, dtype=torch.bool)
        for _ in range(10):
            ended |= env.step(torch.zeros(2, 3)).terminated
    assert bool(ended.all())
