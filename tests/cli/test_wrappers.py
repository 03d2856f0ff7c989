"""`--wrapper` with arguments for train, check-env and evaluate, and its one-line errors."""

from pathlib import Path

import pytest
import yaml

from typedrl.cli import main

from .factories import SMALL_RUN

_FRAMES = "FrameStackObservation(stack_size=2)"


def _one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The error line ``typedrl ARGV`` prints (exit status 1, no traceback)."""
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    first, hint = err.strip().splitlines()
    assert hint == "(run with --debug for the traceback)"
    return first


def test_train_records_wrappers_with_arguments_and_evaluate_replays_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """config.yaml keeps the spec as given; evaluate rebuilds the stacked observations."""
    run_dir = tmp_path / "run"
    argv = ["train", "CartPole-v1", *SMALL_RUN, "--total-timesteps", "32"]
    argv += ["--wrapper", _FRAMES, "--wrapper", "gymnasium.wrappers.TimeAwareObservation"]
    assert main([*argv, "--run-dir", str(run_dir)]) == 0
    document = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert document["run"]["wrappers"] == [_FRAMES, "gymnasium.wrappers.TimeAwareObservation"]
    capsys.readouterr()
    # Without the wrappers the policy would meet [4] observations instead of [2, 5].
    assert main(["evaluate", str(run_dir), "--episodes", "2", "--num-envs", "2"]) == 0
    out = capsys.readouterr().out
    assert f"wrappers=['{_FRAMES}', 'gymnasium.wrappers.TimeAwareObservation']" in out


def test_a_config_file_takes_the_same_specs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --config file's run.wrappers holds the strings --wrapper takes; a bad one is refused."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"run": {"wrappers": [_FRAMES]}}))
    assert main(["train", "CartPole-v1", "--config", str(config), "--print-config"]) == 0
    assert f"- {_FRAMES}" in capsys.readouterr().out
    config.write_text(yaml.safe_dump({"run": {"wrappers": ["FrameStackObservation(2)"]}}))
    line = _one_line(capsys, ["train", "CartPole-v1", "--config", str(config)])
    assert line.startswith(
        "typedrl: ConfigError: run.wrappers[0]: wrapper 'FrameStackObservation(2)': positional"
    )


def test_check_env_takes_env_kwargs_and_wrappers(capsys: pytest.CaptureFixture[str]) -> None:
    """check-env builds the env as train does: --env-kwargs and --wrapper with arguments."""
    argv = ["check-env", "CartPole-v1", "--num-envs", "2", "--examples", "2", "--num-steps", "8"]
    assert main([*argv, "--wrapper", _FRAMES, "--env-kwargs", "max_episode_steps=5"]) == 0
    assert "env check passed" in capsys.readouterr().out
    factory = ["check-env", "tests.cli.factories:cartpole", "--num-envs", "2"]
    line = _one_line(capsys, [*factory, "--env-kwargs", "no_such_option=1"])
    assert "could not be called with ['no_such_option']" in line


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            "FrameStackObservation(stack=2)",
            "ConfigError: wrapper 'FrameStackObservation(stack=2)': got an unexpected keyword "
            "argument 'stack'; FrameStackObservation takes ['stack_size', 'padding_type']",
        ),
        (
            "FrameStackObservation(stack_size=0)",
            "ConfigError: wrapper 'FrameStackObservation(stack_size=0)' could not wrap the env "
            "with arguments stack_size=0: ValueError:",
        ),
        (
            "FrameStackObservation(stack_size=open('x'))",
            "ConfigError: wrapper \"FrameStackObservation(stack_size=open('x'))\": the value of "
            "'stack_size' (open('x')) is not a Python literal",
        ),
        (
            "tests.cli.factories:NeedsAbsentDependency",
            "MissingDependencyError: wrapper 'tests.cli.factories:NeedsAbsentDependency' needs "
            "the package 'fancy_vision' (module 'fancy_vision'), which is not installed: "
            'pip install "fancy-vision[gpu]"',
        ),
        (
            "tests.cli.factories:ImportsAbsentModule(scale=0.5)",
            "MissingDependencyError: wrapper 'tests.cli.factories:ImportsAbsentModule(scale=0.5)' "
            "needs the package 'absent_pkg' (module 'absent_pkg.core'), which is not installed: "
            "pip install absent_pkg",
        ),
    ],
)
def test_wrapper_errors_are_one_line(
    spec: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad arguments, code in a value and a missing package each name the wrapper in one line."""
    argv = ["check-env", "CartPole-v1", "--num-envs", "2", "--wrapper", spec]
    assert _one_line(capsys, argv).startswith(f"typedrl: {expected}")
