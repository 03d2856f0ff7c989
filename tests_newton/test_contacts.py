"""NewtonVecEnv's contact forces (SupportsContactForces) and AHAC on them."""

import json
from pathlib import Path

import torch

from tests_newton.conftest import actions, ant
from typedrl.cli import main
from typedrl.protocols import SupportsContactForces


def test_the_ant_reports_no_contact_in_the_air_and_its_feet_on_the_ground() -> None:
    """Zero before touching the ground; once down, every row presses on it."""
    env = ant(num_envs=3)
    assert isinstance(env, SupportsContactForces)
    env.reset(seed=0)
    assert env.contact_force_norm().tolist() == [0.0, 0.0, 0.0]
    norms = []
    with torch.no_grad():
        for action in actions(40, env.num_envs, seed=3):
            env.step(action)
            norms.append(env.contact_force_norm())
    # Dropped from 0.75 m, the first step is in the air.
    assert norms[0].tolist() == [0.0, 0.0, 0.0]
    last = norms[-1]
    assert last.shape == (3,)
    assert last.dtype == torch.float32
    assert not last.requires_grad
    # Random actions bounce it: each row pushes hundreds of newtons in its last 10 steps.
    pressed = torch.stack(norms[-10:]).amax(dim=0)
    assert bool((pressed > 300.0).all()), pressed


def test_ahac_trains_on_the_hopper_from_the_command_line(tmp_path: Path) -> None:
    """Two updates of 2 envs on the Hopper, windows of the horizon's 8 steps, a summary."""
    run_dir = tmp_path / "run"
    argv = ["train", "typedrl/NewtonHopper-v0", "--algo", "ahac", "--run-dir", str(run_dir)]
    budget = ["--num-envs", "2", "--total-timesteps", "32"]
    assert main([*argv, *budget, "--eval-episodes", "1", "--no-progress"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["algorithm"], summary["global_step"]) == ("ahac", 32)
