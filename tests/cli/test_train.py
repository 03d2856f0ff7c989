"""Tests for `typedrl train` and `typedrl evaluate`."""

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from typedrl.cli import main
from typedrl.cli._config import parse_env_kwargs, parse_override
from typedrl.cli._train import _threads
from typedrl.errors import ConfigError, MissingDependencyError


def _evaluate(checkpoint: Path, report: Path, *, episodes: int) -> dict[str, Any]:
    """`typedrl evaluate` on a checkpoint; its JSON report."""
    argv = ["evaluate", str(checkpoint), "--episodes", str(episodes), "--num-envs", "2"]
    assert main([*argv, "--json", str(report)]) == 0
    result: dict[str, Any] = json.loads(report.read_text())
    return result


def test_train_then_evaluate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A short training run writes checkpoints that `typedrl evaluate` can score."""
    run_dir = tmp_path / "run"
    status = main(
        [
            "train",
            "--total-timesteps",
            "1024",
            "--num-envs",
            "8",
            "--run-dir",
            str(run_dir),
            "--no-progress",
            "--set",
            "num_steps=16",
            "--set",
            "batch_size=64",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert "eval score" in out
    last = run_dir / "checkpoints" / "last.ckpt"
    assert last.is_file()
    assert (run_dir / "checkpoints" / "best.ckpt").is_file()
    assert (run_dir / "metrics.csv").is_file()
    # The learning curve is drawn into the run folder (matplotlib is in the test group).
    assert f"curve           {run_dir / 'curve.png'}" in out
    assert (run_dir / "curve.png").read_bytes().startswith(b"\x89PNG")
    assert main(["evaluate", str(last), "--episodes", "4", "--num-envs", "2"]) == 0
    report = json.loads(last.with_name("last.eval.json").read_text())
    assert report["episodes"] == 4
    assert report["score"] > 0
    # The checkpoint knows its env: the built-in CartPole here, whatever the default is.
    assert report["env_id"] == "typedrl/CartPole-v0"


def test_without_matplotlib_train_says_how_to_get_the_curve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "matplotlib" else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    run_dir = tmp_path / "run"
    argv = ["train", "--total-timesteps", "512", "--num-envs", "8", "--run-dir", str(run_dir)]
    assert main([*argv, "--no-progress", "--set", "num_steps=16", "--set", "batch_size=64"]) == 0
    out = capsys.readouterr().out
    assert f"pip install 'typedrl[plot]', then: typedrl plot {run_dir}" in out
    assert not (run_dir / "curve.png").exists()


def test_evaluate_scores_on_the_env_the_checkpoint_was_trained_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A CartPole-v1 checkpoint is scored on CartPole-v1, not on the default env."""
    run_dir = tmp_path / "run"
    argv = ["train", "CartPole-v1", "--total-timesteps", "128", "--num-envs", "4"]
    options = ["--run-dir", str(run_dir), "--no-progress", "--set", "num_steps=16"]
    assert main([*argv, *options, "--set", "batch_size=32"]) == 0
    capsys.readouterr()
    last = run_dir / "checkpoints" / "last.ckpt"
    assert main(["evaluate", str(last), "--episodes", "2", "--num-envs", "2"]) == 0
    assert json.loads(last.with_name("last.eval.json").read_text())["env_id"] == "CartPole-v1"


def test_evaluate_needs_an_env_when_the_checkpoint_has_none(tmp_path: Path) -> None:
    """A checkpoint without an env id asks for one, in one clear error."""
    from typedrl.envs import make
    from typedrl.ppo import PPOAgent, PPOConfig
    from typedrl.training import RunOptions

    config = PPOConfig(total_timesteps=32, num_steps=8, batch_size=16, num_mini_epochs=1)
    env = make("CartPole-v1", num_envs=2, seed=0)
    PPOAgent(env=env, config=config, options=RunOptions(run_dir=tmp_path, progress=False)).fit()
    env.close()
    with pytest.raises(ConfigError, match="does not record the env"):
        main(["--debug", "evaluate", str(tmp_path / "checkpoints" / "last.ckpt")])


def test_train_resume_continues_the_counters(tmp_path: Path) -> None:
    """--resume continues from the saved env-step counter up to the new budget."""
    run_dir = tmp_path / "run"
    common = ["--num-envs", "4", "--no-progress", "--set", "num_steps=16", "--set", "batch_size=32"]
    assert main(["train", "--total-timesteps", "128", "--run-dir", str(run_dir), *common]) == 0
    last = run_dir / "checkpoints" / "last.ckpt"
    resumed = tmp_path / "resumed"
    argv = ["train", "--total-timesteps", "256", "--run-dir", str(resumed), "--resume", str(last)]
    assert main([*argv, *common]) == 0
    assert (resumed / "checkpoints" / "last.ckpt").is_file()


def test_override_parsing() -> None:
    """--set values are JSON, else Python literals, else strings; bad forms are errors."""
    assert parse_override("learning_rate=3e-4") == ("learning_rate", 3e-4)
    assert parse_override("normalize_observations=False") == ("normalize_observations", False)
    assert parse_override("normalize_observations=false") == ("normalize_observations", False)
    assert parse_override("max_grad_norm=None") == ("max_grad_norm", None)
    assert parse_override("name='42'") == ("name", "42")
    assert parse_override("name=two words") == ("name", "two words")
    assert parse_override("learning_rate_schedule=linear") == ("learning_rate_schedule", "linear")
    assert parse_override("actor_hidden=[32, 32]") == ("actor_hidden", [32, 32])
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_override("learning_rate")


def test_env_kwargs_take_python_literals_as_the_wrapper_arguments_do() -> None:
    """``is_slippery=False`` is the bool (it was the truthy text 'False'), as JSON's false is."""
    assert parse_env_kwargs(["is_slippery=False", "map_name=8x8", '{"desc": null}']) == {
        "is_slippery": False,
        "map_name": "8x8",
        "desc": None,
    }


def test_unknown_config_field_is_reported() -> None:
    """A --set for a field PPOConfig does not have names the valid fields."""
    with pytest.raises(ConfigError, match="no fields"):
        main(["--debug", "train", "--total-timesteps", "64", "--no-progress", "--set", "lr=1"])


def test_evaluate_a_run_with_observation_normalisation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The normalisers live in the saved model, so `typedrl evaluate` restores them too."""
    run_dir = tmp_path / "run"
    argv = ["train", "--total-timesteps", "256", "--num-envs", "4", "--run-dir", str(run_dir)]
    options = ["--no-progress", "--set", "num_steps=16", "--set", "batch_size=32"]
    assert main([*argv, *options, "--set", "normalize_observations=true"]) == 0
    capsys.readouterr()
    last = run_dir / "checkpoints" / "last.ckpt"
    assert main(["evaluate", str(last), "--episodes", "2", "--num-envs", "2"]) == 0
    assert json.loads(last.with_name("last.eval.json").read_text())["episodes"] == 2


def test_train_wandb_project_needs_wandb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--wandb-project without W&B installed stops before anything is built."""
    real_find_spec = importlib.util.find_spec

    def without_wandb(name: str, *args: Any) -> Any:
        return None if name == "wandb" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without_wandb)
    run_dir = tmp_path / "run"
    argv = ["train", "--run-dir", str(run_dir), "--wandb-project", "p", "--no-progress"]
    with pytest.raises(MissingDependencyError, match="--wandb-project needs W&B"):
        main(["--debug", *argv])
    assert not run_dir.exists()


def test_train_apg_then_evaluate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--algo apg trains through the differentiable env; evaluate scores its checkpoint."""
    run_dir = tmp_path / "run"
    argv = ["train", "typedrl/PointMass-v0", "--algo", "apg", "--total-timesteps", "1024"]
    options = ["--num-envs", "8", "--run-dir", str(run_dir), "--no-progress"]
    overrides = ["--set", "segment_length=16", "--set", "algorithm.gamma=0.98"]
    assert main([*argv, *options, *overrides]) == 0
    out = capsys.readouterr().out
    assert "eval score" in out
    last = run_dir / "checkpoints" / "last.ckpt"
    from typedrl.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(last)
    assert (checkpoint.kind, checkpoint.env_id) == ("apg", "typedrl/PointMass-v0")
    assert checkpoint.config["segment_length"] == 16
    assert checkpoint.config["algorithm"]["gamma"] == 0.98
    assert main(["evaluate", str(last), "--episodes", "4", "--num-envs", "2"]) == 0
    report = json.loads(last.with_name("last.eval.json").read_text())
    assert (report["env_id"], report["episodes"]) == ("typedrl/PointMass-v0", 4)


def test_apg_overrides_reach_the_nested_algorithm_config() -> None:
    """--set algorithm.<field> sets the APGConfig; an unknown field is named."""
    with pytest.raises(ConfigError, match="APGConfig has no fields"):
        main(["--debug", "train", "--algo", "apg", "--no-progress", "--set", "algorithm.lr=1"])


def test_train_shac_with_a_nested_actor_override(tmp_path: Path) -> None:
    """--algo shac trains SHAC; algorithm.actor.<field> reaches its actor's APGConfig."""
    run_dir = tmp_path / "run"
    argv = ["train", "typedrl/Pendulum-v0", "--algo", "shac", "--total-timesteps", "512"]
    options = ["--num-envs", "8", "--run-dir", str(run_dir), "--no-progress"]
    overrides = ["--set", "segment_length=16", "--set", "algorithm.actor.learning_rate=0.003"]
    assert main([*argv, *options, *overrides, "--set", "algorithm.critic_iterations=2"]) == 0
    from typedrl.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(run_dir / "checkpoints" / "last.ckpt")
    assert checkpoint.config["algorithm"]["actor"]["learning_rate"] == 0.003
    assert checkpoint.config["algorithm"]["critic_iterations"] == 2
    assert {"critic", "target_critic"} <= set(checkpoint.modules)
    assert {"policy", "critic"} <= set(checkpoint.optimizers)


def test_nested_overrides_are_refused_for_ppo() -> None:
    """A dotted --set key for PPO names the configs that have nested fields."""
    with pytest.raises(ConfigError, match=r"PPOConfig has no fields \['algorithm'\]"):
        main(["--debug", "train", "--no-progress", "--set", "algorithm.gamma=0.9"])


def test_a_user_error_prints_one_line_and_exits_non_zero(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Without --debug a TypedRLError is one clear line on stderr and exit status 1."""
    assert main(["train", "--no-progress", "--set", "lr=1"]) == 1
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert lines[0].startswith("typedrl: ConfigError: PPOConfig has no fields ['lr']")
    assert lines[-1] == "(run with --debug for the traceback)"
    assert "Traceback" not in captured.err


def test_threads_default_to_one_on_the_cpu() -> None:
    assert _threads(None, "cpu") == 1
    assert _threads(3, "cpu") == 3
    assert _threads(None, "cuda") is None
    assert _threads(2, "cuda") == 2
    with pytest.raises(ConfigError, match="--threads must be a positive int, got 0"):
        _threads(0, "cpu")


def test_train_runs_on_one_thread_and_restores_the_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    calls: list[int] = []
    real = torch.set_num_threads

    def record(count: int) -> None:
        calls.append(count)
        real(count)

    monkeypatch.setattr(torch, "set_num_threads", record)
    before = torch.get_num_threads()
    argv = ["train", "--total-timesteps", "256", "--num-envs", "8", "--no-progress"]
    run = ["--run-dir", str(tmp_path / "run"), "--set", "num_steps=16", "--set", "batch_size=64"]
    assert main([*argv, *run]) == 0
    # One thread before the launch and again after it (Lightning sets its own), then restored.
    assert len(calls) >= 2
    assert set(calls[:-1]) == {1}
    assert calls[-1] == before
    assert torch.get_num_threads() == before


def test_a_bad_thread_count_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--threads", "0", "--total-timesteps", "256"]) == 1
    assert "--threads must be a positive int, got 0" in capsys.readouterr().err


def test_an_int_beyond_floats_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """--set learning_rate=<400 digits>: the field's one line, not an OverflowError."""
    assert main(["train", "--set", "learning_rate=" + "9" * 400, "--print-config"]) == 1
    err = capsys.readouterr().err
    assert "learning_rate must be" in err
    assert "an integer of 1329 bits (type int)" in err
    assert "Traceback" not in err


def test_contradicting_settings_are_refused(tmp_path: Path) -> None:
    """--seed against --set seed, or a --config of another algo than --algo: one error."""
    with pytest.raises(ConfigError, match="--seed 5 and --set seed=3 contradict each other"):
        main(["--debug", "train", "--seed", "5", "--set", "seed=3", "--print-config"])
    apg = tmp_path / "apg.yaml"
    apg.write_text("algo: apg\nconfig:\n  segment_length: 16\n")
    with pytest.raises(ConfigError, match=r"is a config for algo 'apg', --algo says 'ppo'"):
        main(["--debug", "train", "--config", str(apg), "--algo", "ppo", "--print-config"])
    seeds = tmp_path / "seeds.yaml"
    seeds.write_text("seed: 1\nconfig:\n  seed: 2\n")
    with pytest.raises(ConfigError, match=r"seed: 1 and config\.seed: 2 contradict each other"):
        main(["--debug", "train", "--config", str(seeds), "--print-config"])
    # The same value twice is no contradiction.
    assert main(["train", "--seed", "3", "--set", "seed=3", "--print-config"]) == 0


def test_apg_on_a_gymnasium_env_names_the_differentiable_ones(tmp_path: Path) -> None:
    """--algo apg on CartPole-v1 stops before anything starts, listing the built-in envs."""
    run_dir = tmp_path / "run"
    with pytest.raises(ConfigError, match="the built-in envs are: typedrl/Pendulum-v0, "):
        main(["--debug", "train", "CartPole-v1", "--algo", "apg", "--run-dir", str(run_dir)])
    assert not run_dir.exists()


def test_shac_on_a_newton_env_is_not_refused_as_not_differentiable(tmp_path: Path) -> None:
    """--algo shac on typedrl/NewtonAnt-v0 gets as far as building it (the newton extra)."""
    if importlib.util.find_spec("newton") is not None:
        pytest.skip("newton is installed: tests_newton/test_cli.py trains on it")
    run_dir = tmp_path / "run"
    argv = ["--debug", "train", "typedrl/NewtonAnt-v0", "--algo", "shac", "--run-dir", str(run_dir)]
    with pytest.raises(MissingDependencyError, match=r"typedrl\[newton\]"):
        main([*argv, "--num-envs", "2", "--no-progress"])


def test_a_checkpoint_saved_with_another_config_gets_advice_that_works(tmp_path: Path) -> None:
    """--resume CKPT: the flags that restore its config, and its run folder when it has one."""
    run_dir = tmp_path / "run"
    small = ["--num-envs", "2", "--no-progress", "--set", "num_steps=8", "--set", "batch_size=16"]
    assert main(["train", "--total-timesteps", "32", "--run-dir", str(run_dir), *small]) == 0
    last = run_dir / "checkpoints" / "last.ckpt"
    flags = "--set batch_size=16 --set num_steps=8"
    argv = ["--debug", "train", "--num-envs", "2", "--resume"]
    with pytest.raises(ConfigError) as raised:
        main([*argv, str(last), "--run-dir", str(tmp_path / "more")])
    assert str(raised.value).endswith(
        f"add the options it was saved with: {flags}, or resume its run folder, which keeps "
        f"them: typedrl train --resume {run_dir}"
    )
    alone = tmp_path / "alone.ckpt"  # a checkpoint outside any run folder (saved from Python)
    alone.write_bytes(last.read_bytes())
    with pytest.raises(ConfigError) as raised:
        main([*argv, str(alone), "--run-dir", str(tmp_path / "more")])
    assert str(raised.value).endswith(f"add the options it was saved with: {flags}")
    config = run_dir / "config.yaml"
    config.write_text(config.read_text().replace("num_steps: 8", "num_steps: 4"))
    with pytest.raises(ConfigError, match=r"config\.yaml disagrees with .*last\.ckpt, saved with"):
        main(["--debug", "train", "--resume", str(run_dir), "--total-timesteps", "64"])
