"""Tests for `typedrl evaluate`, the checkpoint lookup and the episode recorders."""

import importlib
import importlib.util
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from typedrl.cli import main
from typedrl.cli._evaluate import rows_for
from typedrl.errors import CheckpointError, ConfigError, EnvContractError, MissingDependencyError
from typedrl.evaluation import EpisodeEvaluator
from typedrl.recording import EpisodeRecorder, record_video
from typedrl.restore import locate_checkpoint
from typedrl.testing import ConstantPolicy, CountingVecEnv

_STATISTICS = ("mean", "std", "min", "max")


def _report(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def test_evaluate_a_run_folder_uses_its_best_checkpoint(
    trained_runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """RUN_DIR means its best.ckpt; the table and RUN_DIR/eval.json hold the statistics."""
    run_dir = trained_runs["ppo_discrete"]
    assert main(["evaluate", str(run_dir), "--episodes", "6", "--num-envs", "4"]) == 0
    out = capsys.readouterr().out
    assert f"{run_dir / 'checkpoints' / 'best.ckpt'} (the run's best)" in out
    # 6 episodes over 4 rows would favour some rows: 3 rows play 2 episodes each.
    assert "3 rows" in out
    header, returns, lengths, episodes = (
        line.split() for line in out.split("\n\n")[1].splitlines()[:4]
    )
    assert header == list(_STATISTICS)
    assert returns[0] == "return"
    assert lengths[0] == "length"
    assert episodes == ["episodes", "6"]
    report = _report(run_dir / "eval.json")
    assert (report["env_id"], report["kind"], report["episodes"]) == ("CartPole-v1", "ppo", 6)
    assert report["checkpoint"] == str(run_dir / "checkpoints" / "best.ckpt")
    assert returns[1:] == [f"{report[f'return_{s}']:.2f}" for s in _STATISTICS]
    assert lengths[1:] == [f"{report[f'length_{s}']:.2f}" for s in _STATISTICS]
    # CartPole pays 1 per step: every episode's return is its length.
    for statistic in _STATISTICS:
        assert report[f"length_{statistic}"] == pytest.approx(report[f"return_{statistic}"])
    assert report["score"] == report["return_mean"]
    assert report["length_min"] <= report["length_mean"] <= report["length_max"]


def test_evaluate_a_checkpoint_file_writes_beside_it(
    trained_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkpoint file's report goes beside it, or where --json says."""
    last = trained_runs["ppo_discrete"] / "checkpoints" / "last.ckpt"
    assert main(["evaluate", str(last), "--episodes", "2", "--num-envs", "2"]) == 0
    assert "(the run's" not in capsys.readouterr().out
    assert _report(last.with_name("last.eval.json"))["episodes"] == 2
    chosen = tmp_path / "reports" / "cartpole.json"
    assert main(["evaluate", str(last), "--episodes", "2", "--json", str(chosen)]) == 0
    assert _report(chosen)["checkpoint"] == str(last)


def test_evaluate_falls_back_to_last_without_a_best_checkpoint(
    trained_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run folder without best.ckpt is scored from last.ckpt, and says so."""
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    source = trained_runs["ppo_discrete"] / "checkpoints" / "last.ckpt"
    shutil.copy(source, run_dir / "checkpoints" / "last.ckpt")
    assert main(["evaluate", str(run_dir), "--episodes", "2", "--num-envs", "2"]) == 0
    assert "(the run's last; it has no best)" in capsys.readouterr().out
    assert locate_checkpoint(run_dir).choice == "last"
    assert (run_dir / "eval.json").is_file()


@pytest.mark.parametrize("name", ["ppo_continuous", "apg", "shac"])
def test_evaluate_every_trainer_family(
    trained_runs: dict[str, Path], name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """PPO (continuous actions), APG and SHAC checkpoints evaluate on their own env."""
    run_dir = trained_runs[name]
    assert main(["evaluate", str(run_dir), "--episodes", "2", "--num-envs", "2"]) == 0
    capsys.readouterr()
    report = _report(run_dir / "eval.json")
    assert report["kind"] == ("ppo" if name.startswith("ppo") else "apg")
    # APG and SHAC share a checkpoint kind; the report names the algorithm that trained it.
    assert report["algorithm"] == name.removesuffix("_continuous")
    assert report["episodes"] == 2
    assert np.isfinite([report[f"return_{s}"] for s in _STATISTICS]).all()


def _first_frame(video: Path) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """The first frame of an MP4 file."""
    import imageio.v2 as imageio

    reader = imageio.get_reader(str(video))
    try:
        frame: np.ndarray[Any, np.dtype[np.uint8]] = reader.get_data(0)
    finally:
        reader.close()
    return frame


def test_evaluate_records_a_video(
    trained_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--video writes an MP4 of the deterministic episode, one frame per step."""
    # imageio-ffmpeg ships no type information.
    imageio_ffmpeg: Any = importlib.import_module("imageio_ffmpeg")

    video = tmp_path / "videos" / "cartpole.mp4"
    argv = ["evaluate", str(trained_runs["ppo_discrete"]), "--episodes", "1", "--num-envs", "1"]
    environ = dict(os.environ)
    assert main([*argv, "--json", str(tmp_path / "eval.json"), "--video", str(video)]) == 0
    assert dict(os.environ) == environ  # SDL's headless driver was set for the recording only
    out = capsys.readouterr().out
    length = _report(tmp_path / "eval.json")["length_mean"]
    # The same seed and one row: the video plays the scored episode, frame by frame.
    assert f"({int(length)} frames, " in out
    assert imageio_ffmpeg.count_frames_and_secs(str(video))[0] == int(length)
    first = _first_frame(video)
    assert first.shape == (400, 600, 3)
    assert first.std() > 0


def test_video_of_several_episodes(trained_runs: dict[str, Path], tmp_path: Path) -> None:
    """record_video plays as many episodes as asked; the frames cover all their steps."""
    from typedrl.checkpoint import load_checkpoint
    from typedrl.envs import make
    from typedrl.restore import restore_policy

    last = trained_runs["ppo_continuous"] / "checkpoints" / "last.ckpt"
    env = EpisodeRecorder(make("Pendulum-v1", num_envs=1, seed=3))
    policy = restore_policy(load_checkpoint(last), env, path=last)
    EpisodeEvaluator(env, num_episodes=2, seed=3).evaluate(policy)
    env.close()
    result = record_video(policy, "Pendulum-v1", path=tmp_path / "p.mp4", episodes=2, seed=3)
    assert result.frames == sum(env.first_lengths(2).tolist()) == 400
    assert result.fps == 30.0
    assert result.seconds == pytest.approx(400 / 30)
    assert result.path.stat().st_size > 0


def test_evaluate_records_a_shac_run_on_a_builtin_env(
    trained_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--video records a SHAC run on typedrl/Pendulum-v0: every state of the scored episode."""
    # imageio-ffmpeg ships no type information.
    imageio_ffmpeg: Any = importlib.import_module("imageio_ffmpeg")

    video = tmp_path / "pendulum.mp4"
    argv = ["evaluate", str(trained_runs["shac"]), "--episodes", "1", "--num-envs", "1"]
    assert main([*argv, "--json", str(tmp_path / "eval.json"), "--video", str(video)]) == 0
    out = capsys.readouterr().out
    length = int(_report(tmp_path / "eval.json")["length_mean"])
    # The reset state, then the state after every step, the terminal one included.
    assert f"({length + 1} frames, " in out
    frames, seconds = imageio_ffmpeg.count_frames_and_secs(str(video))
    assert frames == length + 1
    # Real time: 20 frames per second, one per 0.05 s step.
    assert seconds == pytest.approx((length + 1) / 20, abs=0.1)
    first = _first_frame(video)
    assert first.shape == (400, 400, 3)
    assert first.std() > 0


@pytest.mark.parametrize(
    ("env_id", "push", "fps"),
    [("typedrl/Pendulum-v0", 0.5, 20.0), ("typedrl/CartPoleSwingUp-v0", 1.0, 50.0)],
)
def test_video_of_builtin_envs(env_id: str, push: float, fps: float, tmp_path: Path) -> None:
    """record_video draws a built-in env: each episode gives its length + 1 frames."""
    from typedrl.envs import make

    # imageio-ffmpeg ships no type information.
    imageio_ffmpeg: Any = importlib.import_module("imageio_ffmpeg")

    policy = ConstantPolicy(torch.full((1,), push))
    # A constant push runs the swing-up cart off its rail (terminated) before the time limit.
    options = {"max_episode_steps": 60}
    env = EpisodeRecorder(make(env_id, num_envs=1, seed=2, env_kwargs=options))
    EpisodeEvaluator(env, num_episodes=2, seed=2).evaluate(policy)
    env.close()
    lengths = [int(length) for length in env.first_lengths(2).tolist()]
    result = record_video(
        policy, env_id, path=tmp_path / "v.mp4", episodes=2, seed=2, env_kwargs=options
    )
    assert result.frames == sum(length + 1 for length in lengths)
    assert imageio_ffmpeg.count_frames_and_secs(str(result.path))[0] == result.frames
    assert result.fps == fps
    if env_id.endswith("SwingUp-v0"):
        assert max(lengths) < 60
    else:
        assert lengths == [60, 60]
    one = record_video(policy, env_id, path=tmp_path / "one.mp4", seed=2, env_kwargs=options)
    assert one.frames == lengths[0] + 1


def test_video_refuses_envs_that_do_not_render(
    trained_runs: dict[str, Path], tmp_path: Path
) -> None:
    """An env that draws no frames is refused before any episode is played."""
    report = tmp_path / "eval.json"
    video = tmp_path / "v.mp4"
    # The APG run's PointMass policy would not fit this env: the check comes first.
    argv = ["--debug", "evaluate", str(trained_runs["apg"]), "typedrl/MujocoCartPoleSwingUp-v0"]
    with pytest.raises(ConfigError, match=r"MujocoCartPoleSwingUp-v0' \(MujocoVecEnv\) does not"):
        main([*argv, "--json", str(report), "--video", str(video)])
    assert not report.exists()
    with pytest.raises(ConfigError, match="is a MujocoVecEnv, which does not render"):
        record_video(ConstantPolicy(torch.zeros(1)), "typedrl/MujocoCartPoleSwingUp-v0", path=video)
    assert not video.exists()


def test_video_needs_an_mp4_path(trained_runs: dict[str, Path], tmp_path: Path) -> None:
    """--video and record_video write .mp4 files only."""
    run_dir = str(trained_runs["ppo_discrete"])
    with pytest.raises(ConfigError, match=r"ending in \.mp4"):
        main(["--debug", "evaluate", run_dir, "--video", str(tmp_path / "v.gif")])
    policy = ConstantPolicy(torch.zeros((), dtype=torch.int64))
    with pytest.raises(ConfigError, match=r"ending in \.mp4"):
        record_video(policy, "CartPole-v1", path=tmp_path / "v.avi")
    with pytest.raises(ConfigError, match="episodes must be a positive int"):
        record_video(policy, "CartPole-v1", path=tmp_path / "v.mp4", episodes=0)
    with pytest.raises(ConfigError, match=r"record_video\.fps must be > 0"):
        record_video(policy, "CartPole-v1", path=tmp_path / "v.mp4", fps=0.0)


def test_video_without_the_writer_names_the_extra(
    trained_runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without imageio-ffmpeg, --video raises MissingDependencyError naming the extra."""
    find_spec = importlib.util.find_spec

    def without_ffmpeg(name: str, package: str | None = None) -> Any:
        return None if name == "imageio_ffmpeg" else find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", without_ffmpeg)
    video = str(tmp_path / "v.mp4")
    with pytest.raises(MissingDependencyError, match=r"imageio_ffmpeg.*typedrl\[video\]"):
        main(["--debug", "evaluate", str(trained_runs["ppo_discrete"]), "--video", video])


def test_evaluate_errors(
    trained_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Missing paths, folders without checkpoints and bad counts are one-line errors."""
    with pytest.raises(CheckpointError, match="does not exist"):
        main(["--debug", "evaluate", str(tmp_path / "missing")])
    with pytest.raises(CheckpointError, match=r"without checkpoints/best\.ckpt"):
        main(["--debug", "evaluate", str(tmp_path)])
    run_dir = str(trained_runs["ppo_discrete"])
    with pytest.raises(ConfigError, match="--episodes must be a positive int, got 0"):
        main(["--debug", "evaluate", run_dir, "--episodes", "0"])
    with pytest.raises(ConfigError, match="--num-envs must be a positive int, got -1"):
        main(["--debug", "evaluate", run_dir, "--num-envs", "-1"])
    assert main(["evaluate", str(tmp_path / "missing")]) == 1
    assert "typedrl: CheckpointError:" in capsys.readouterr().err


def test_rows_divide_the_episodes() -> None:
    """The evaluation env gets the most rows up to --num-envs that divide the episodes."""
    assert rows_for(32, 8) == 8
    assert rows_for(6, 4) == 3
    assert rows_for(7, 8) == 7
    assert rows_for(7, 4) == 1
    assert rows_for(1, 8) == 1


def test_episode_recorder_keeps_the_scored_episodes() -> None:
    """EpisodeRecorder sees the episodes the evaluator scores, row after row."""
    env = EpisodeRecorder(CountingVecEnv(num_envs=2, truncate_after=3))
    result = EpisodeEvaluator(env, num_episodes=4).evaluate(ConstantPolicy(torch.zeros(1)))
    lengths = env.first_lengths(2)
    assert lengths.tolist() == [3.0] * 4
    assert float(lengths.mean()) == result.metrics["length_mean"]
    assert all(len(row) >= 2 for row in env.lengths)
    assert env.returns[0][:2] == [6.0, 6.0]
    with pytest.raises(EnvContractError, match="finished fewer than 50 episodes"):
        env.first_lengths(50)
    with pytest.raises(EnvContractError, match="rows all"):
        EpisodeRecorder(CountingVecEnv(num_envs=2, truncate_after=3)).first_lengths(1)
