"""benchmarks/newton_gait.py: the forward-speed column of the locomotion guide's curves."""

from pathlib import Path

import pytest
import torch

from tests._benchmarks import load_benchmark
from typedrl.checkpoint import load_checkpoint
from typedrl.cli import main
from typedrl.envs import make
from typedrl.envs.newton import NewtonVecEnv
from typedrl.evaluation import EpisodeEvaluator
from typedrl.restore import locate_checkpoint, restore_policy, trained_env


def test_gait_plays_the_episodes_typedrl_evaluate_plays(tmp_path: Path) -> None:
    """Its returns and lengths are the evaluator's, and the speed is the root's x velocity."""
    run_dir = tmp_path / "run"
    argv = ["train", "typedrl/NewtonHopper-v0", "--algo", "shac", "--run-dir", str(run_dir)]
    budget = ["--num-envs", "2", "--total-timesteps", "16", "--set", "segment_length=4"]
    assert main([*argv, *budget, "--eval-episodes", "1", "--no-progress"]) == 0
    path = run_dir / "checkpoints" / "last.ckpt"
    gait = load_benchmark("newton_gait")._gait(path, 3, 5)

    checkpoint = load_checkpoint(path)
    env = trained_env(checkpoint, locate_checkpoint(path), env_id=None).make(num_envs=3, seed=5)
    assert isinstance(env, NewtonVecEnv)
    policy = restore_policy(checkpoint, env, path=path)
    result = EpisodeEvaluator(env, num_episodes=3, seed=5).evaluate(policy)
    assert gait["env_steps"] == 16
    assert gait["return"] == result.metrics["return_mean"]
    assert gait["length"] == result.metrics["length_mean"]

    # The speed and height again, row by row: each row's steps up to its first end,
    # read from the observation the step reached (the terminal one where it ended).
    reached, ended = [], []
    obs, _ = env.reset(seed=5)
    with torch.no_grad():
        for _ in range(env.max_episode_steps):
            step = env.step(policy.act(obs, deterministic=True)["action"])
            assert step.final_obs is not None
            reached.append(step.final_obs["obs"])
            ended.append(step.terminated | step.truncated)
            obs = step.obs
            if bool(torch.stack(ended).any(0).all()):
                break
    speeds, heights, lengths = [], [], []
    for row in range(3):
        last = next(t for t, done in enumerate(ended) if bool(done[row]))
        lengths.append(last + 1)
        speeds.append(torch.stack([reached[t][row, 5] for t in range(last + 1)]).double().mean())
        heights.append(torch.stack([reached[t][row, 0] for t in range(last + 1)]).double().mean())
    assert len(set(lengths)) > 1, "the rows should end at different steps"
    assert gait["speed"] == pytest.approx(float(torch.stack(speeds).mean()), rel=1e-9)
    assert gait["height"] == pytest.approx(float(torch.stack(heights).mean()), rel=1e-9)


@pytest.mark.parametrize(
    ("env_id", "height_coordinate"),
    [
        ("typedrl/NewtonAnt-v0", 2),  # the free joint's z
        ("typedrl/NewtonHalfCheetah-v0", 1),  # rootz
        ("typedrl/NewtonHopper-v0", 1),  # rootz
    ],
)
def test_gait_reads_the_roots_velocity_and_height(env_id: str, height_coordinate: int) -> None:
    """The observation entries it reads are joint_qd[0] (x velocity) and the root's height."""
    gait = load_benchmark("newton_gait")
    env = make(env_id, num_envs=2, seed=0)
    assert isinstance(env, NewtonVecEnv)
    obs, _ = env.reset(seed=3)
    state = env.state_dict()["state"]
    # White-box: the state rows are joint_q (nq), joint_qd, then the last action.
    nq = env._nq
    torch.testing.assert_close(obs["obs"][:, gait.FORWARD_VELOCITY[env_id]], state[:, nq])
    torch.testing.assert_close(obs["obs"][:, gait.HEIGHT[env_id]], state[:, height_coordinate])
