"""PPO's default policy on third-party image envs: MiniGrid DoorKey and Atari Pong.

Needs ``nox -s thirdparty``'s packages (minigrid, ale-py, opencv).
"""

import json
import re
import shlex
from pathlib import Path

import pytest
import torch
from torch import nn

from typedrl.cli import main
from typedrl.envs import make
from typedrl.policies import ImageEncoder, MLPActorCritic
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.training import RunOptions

pytestmark = pytest.mark.thirdparty

ROOT = Path(__file__).resolve().parents[2]


def _guide_command(page: str, start: str) -> list[str]:
    """The first ``typedrl`` command of a guide that starts with ``start``, as argv."""
    text = (ROOT / page).read_text().replace("\\\n", " ")
    match = re.search(rf"^\s*\$ typedrl ({re.escape(start)}.*)$", text, re.MULTILINE)
    assert match is not None, f"{page} shows no `typedrl {start}` command"
    return shlex.split(match[1])


def test_minigrid_doorkey_trains_from_the_guides_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The MiniGrid guide's command trains DoorKey-5x5 on its image and direction (a short run)."""
    argv = _guide_command("docs/guides/minigrid.rst", "train minigrid:")
    where = argv.index("--run-dir")
    argv = argv[:where] + argv[where + 2 :]
    short = ["--total-timesteps", "2048", "--num-envs", "4", "--set", "num_steps=64"]
    run_dir = tmp_path / "doorkey"
    status = main(
        [*argv, *short, "--eval-episodes", "2", "--no-progress", "--run-dir", str(run_dir)]
    )
    assert status == 0
    assert "eval score" in capsys.readouterr().out
    config = (run_dir / "config.yaml").read_text()
    assert "encoder: small" in config
    assert 'FilterObservation(filter_keys=["direction", "image"])' in config


def test_minigrid_mission_is_refused_naming_the_wrappers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """check-env and train refuse MiniGrid's text mission in one line naming both fixes."""
    env_id = "minigrid:MiniGrid-Empty-5x5-v0"
    assert main(["check-env", env_id]) != 0
    checked = capsys.readouterr().err
    assert main(["train", env_id, "--run-dir", str(tmp_path / "run"), "--no-progress"]) != 0
    trained = capsys.readouterr().err
    for err in (checked, trained):
        assert "observation space['mission']" in err
        assert 'FilterObservation(filter_keys=["direction", "image"])' in err
        assert "minigrid.wrappers:ImgObsWrapper" in err


PONG_WRAPPERS = (
    "AtariPreprocessing(frame_skip=4, noop_max=30)",
    "FrameStackObservation(stack_size=4)",
)


def test_pong_builds_the_nature_cnn_and_trains_a_step(tmp_path: Path) -> None:
    """ALE/Pong-v5 with AtariPreprocessing and 4 stacked frames: a Nature CNN, not a 100800 MLP."""
    torch.set_num_threads(1)
    env = make(
        "ale_py:ALE/Pong-v5",
        num_envs=2,
        seed=0,
        env_kwargs={"frameskip": 1},
        wrappers=PONG_WRAPPERS,
    )
    assert env.single_observation_space.shape == (4, 84, 84)
    config = PPOConfig(
        total_timesteps=64,
        num_steps=32,
        batch_size=32,
        num_mini_epochs=1,
        actor_hidden=(),
        critic_hidden=(),
    )
    agent = PPOAgent(env=env, config=config, options=RunOptions(progress=False, run_dir=tmp_path))
    result = agent.fit()
    env.close()
    assert result.env_steps == 64
    policy = agent.policy
    assert isinstance(policy, MLPActorCritic)
    encoder = policy.actor_encoding.images[0]
    assert isinstance(encoder, ImageEncoder)
    assert encoder.kind == "nature"
    first = next(module for module in policy.modules() if isinstance(module, nn.Conv2d | nn.Linear))
    assert isinstance(first, nn.Conv2d)
    assert first.in_channels == 4
    assert max(m.in_features for m in policy.modules() if isinstance(m, nn.Linear)) == 3136


def test_envpool_pong_trains_from_the_guides_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Atari guide's EnvPool command: Pong-v5's stacked frames reach the Nature CNN."""
    argv = _guide_command("docs/guides/atari.rst", "train typedrl.envs:make_envpool")
    budget = argv.index("--total-timesteps")
    argv[budget + 1] = "2048"
    argv += ["--no-progress", "--eval-episodes", "1", "--run-dir", str(tmp_path / "run")]
    assert main(argv) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "nature CNN on 4x84x84 images (512 features)" in first
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["global_step"] == 2048


def test_envpool_is_seeded_by_the_run() -> None:
    """The same seed gives the same frames; another seed other ones (EnvPool seeds at creation)."""
    frames = []
    for seed in (5, 5, 6):
        env = make(
            "typedrl.envs:make_envpool", num_envs=2, seed=seed, env_kwargs={"task_id": "Pong-v5"}
        )
        obs, _ = env.reset()
        for _ in range(40):
            obs = env.step(torch.full((2,), 2))[0]  # UP, every step
        frames.append(obs["obs"].clone())
        env.close()
    assert torch.equal(frames[0], frames[1])
    assert not torch.equal(frames[0], frames[2])


@pytest.mark.slow
def test_the_doorkey_file_solves_doorkey_within_100k_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The tuned DoorKey-5x5 file, seed 0: eval return >= 0.9 (16 episodes) at 100k steps."""
    argv = ["train", "minigrid:MiniGrid-DoorKey-5x5-v0", "--total-timesteps", "100000"]
    assert main([*argv, "--no-progress", "--run-dir", str(tmp_path / "run")]) == 0
    capsys.readouterr()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["global_step"] == 100_352
    assert summary["final_eval_score"] >= 0.9
