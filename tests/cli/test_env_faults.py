"""A user's faulty Gymnasium env, trained and checked from the command line: one line each."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.factories import SMALL_RUN
from typedrl.cli import main
from typedrl.errors import EnvError

_ENVS = "tests.envs.faulty_envs"
_DEBUG_HINT = "(run with --debug for the traceback)"


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line of a user's error on stderr (and the --debug hint), with no traceback."""
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[1] == _DEBUG_HINT
    return lines[0]


def _train(tmp_path: Path, env: str, *flags: str) -> int:
    run_dir = str(tmp_path / "run")
    return main(["train", env, "--total-timesteps", "64", "--run-dir", run_dir, *SMALL_RUN, *flags])


@pytest.mark.parametrize(
    ("factory", "start"),
    [
        (
            "wide_obs",
            "typedrl: EnvContractError: the env 'tests.envs.faulty_envs:wide_obs' returned an "
            "observation of shape [3] in row 0 from step 3 of its episode, expected [2]",
        ),
        (
            "nan_obs",
            "typedrl: NonFiniteError: GymnasiumVecEnv.step (step 3): observation 'obs' of row 0 "
            "holds nan[0] (as float32), expected finite values",
        ),
        (
            "inf_reward",
            "typedrl: NonFiniteError: GymnasiumVecEnv.step (step 3): reward of row 0 is inf, "
            "expected a finite number",
        ),
        (
            "raise_in_step",
            "typedrl: EnvError: the env 'tests.envs.faulty_envs:raise_in_step' raised "
            "RuntimeError in step 3: physics exploded at joint 3",
        ),
    ],
)
def test_train_reports_an_env_fault_in_one_line(
    factory: str, start: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit status 1; one line naming the key, expected and actual value, row and step."""
    assert _train(tmp_path, f"{_ENVS}:{factory}") == 1
    line = _one_line(capsys)
    assert line.startswith(start), line
    assert line.endswith(f"; run `typedrl check-env {_ENVS}:{factory}` for a report of every rule")


@pytest.mark.parametrize("debug", [False, True])
def test_an_async_worker_fault_is_one_line_unless_debugging(debug: bool, tmp_path: Path) -> None:
    """Gymnasium's own warnings about a failed async worker are left out, but for --debug."""
    root = Path(__file__).parents[2]
    path = os.pathsep.join(filter(None, (str(root), os.environ.get("PYTHONPATH"))))
    argv = [
        sys.executable,
        "-m",
        "typedrl",
        *(["--debug"] if debug else []),
        "train",
        f"{_ENVS}:raise_in_step",
        "--vectorization",
        "async",
        "--total-timesteps",
        "64",
        "--run-dir",
        str(tmp_path / "run"),
        *SMALL_RUN,
    ]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert done.returncode == 1, done.stderr
    if debug:
        assert "Received the following error from Worker" in done.stderr
        assert "Traceback" in done.stderr
        return
    assert done.stderr.splitlines() == [
        f"typedrl: EnvError: the env '{_ENVS}:raise_in_step' raised RuntimeError in step 3: "
        f"physics exploded at joint 3; run `typedrl check-env {_ENVS}:raise_in_step` for a "
        "report of every rule",
        _DEBUG_HINT,
    ]


def test_train_reports_a_factory_that_raises_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A factory that raises: the env, the exception's type and message, before a run folder."""
    assert _train(tmp_path, f"{_ENVS}:broken") == 1
    assert _one_line(capsys) == (
        f"typedrl: EnvError: building env '{_ENVS}:broken' raised FileNotFoundError: "
        f"assets/robot.xml not found; run `typedrl check-env {_ENVS}:broken` to reproduce it alone"
    )
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.parametrize("env", ["CartPole-v1", f"{_ENVS}:bounded"])
def test_train_reports_invalid_env_kwargs_in_one_line(
    env: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--env-kwargs the env's constructor refuses: the kwargs, the env's message, the flag."""
    assert _train(tmp_path, env, "--env-kwargs", "max_episode_steps=-5") == 1
    line = _one_line(capsys)
    assert line.startswith(
        f"typedrl: EnvError: building env '{env}' with env_kwargs {{'max_episode_steps': -5}} "
        "raised ValueError: "
    )
    assert line.endswith("; check --env-kwargs against the env's parameters")


def test_train_debug_shows_the_env_traceback(tmp_path: Path) -> None:
    """With --debug the error propagates, the env's own exception chained as its cause."""
    with pytest.raises(EnvError) as caught:
        main(["--debug", "train", f"{_ENVS}:raise_in_step", "--run-dir", str(tmp_path), *SMALL_RUN])
    assert type(caught.value.__cause__) is RuntimeError


def test_check_env_reports_a_refused_seed_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """check-env resets with the top of the 32-bit range and names the refusal in one line."""
    assert main(["check-env", f"{_ENVS}:small_seeds", "--num-steps", "4", "--examples", "2"]) == 1
    headline, violation = capsys.readouterr().out.splitlines()
    assert headline.startswith("env check failed: 1 violation(s)")
    # 2**63 - 1, folded for 4 rows, is beyond 2**31 already: the first seed tried is refused.
    folded = (2**63 - 1) % (2**32 - 3)
    assert violation.startswith(
        f"  [seeding.range]: reset(seed={2**63 - 1}) raised EnvError: the env "
        f"'{_ENVS}:small_seeds' raised ValueError in reset(seed={folded}): Seed must be "
        "between 0 and 2**31 - 1"
    )
    # Within the report, the env's message does not send the reader back to check-env.
    assert "run `typedrl check-env" not in violation


def test_check_env_reports_nan_observations_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A NaN observation is one violation line naming the key, row and step."""
    assert main(["check-env", f"{_ENVS}:nan_obs", "--num-steps", "4", "--examples", "2"]) == 1
    headline, violation = capsys.readouterr().out.splitlines()
    assert headline.startswith("env check failed: 1 violation(s)")
    assert "observation 'obs' of row 0 holds nan[0] (as float32)" in violation
    assert "run `typedrl check-env" not in violation


def test_check_env_reports_a_factory_that_raises_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A factory that raises stops check-env with one line, as it stops train."""
    assert main(["check-env", f"{_ENVS}:broken"]) == 1
    assert _one_line(capsys).startswith(
        f"typedrl: EnvError: building env '{_ENVS}:broken' raised FileNotFoundError: "
    )


def test_train_seeds_a_legacy_numpy_env_within_32_bits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An env that seeds NumPy's RandomState (as dm_control does) trains and evaluates."""
    assert _train(tmp_path, f"{_ENVS}:legacy_seeds") == 0
    assert capsys.readouterr().err == ""
