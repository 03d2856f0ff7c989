"""The third-party env matrix of docs/guides/gymnasium.rst: check-env and a short train per row.

Each row runs ``typedrl check-env`` and ``typedrl train`` (two envs, 64 env steps)
as a user would, in a subprocess, and checks the outcome the guide's table
records: the command succeeds, the checker reports a violation of the env's own,
or the command refuses in one line that names the fix. ``nox -s thirdparty``
installs the packages; elsewhere the marker deselects these tests.
"""

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

pytestmark = pytest.mark.thirdparty

_ROOT = Path(__file__).resolve().parents[2]

_TRAIN: Final = (
    "--num-envs",
    "2",
    "--total-timesteps",
    "64",
    "--set",
    "num_steps=32",
    "--set",
    "batch_size=32",
    "--eval-episodes",
    "1",
    "--no-progress",
)
"""The shortest PPO run: one iteration of two envs x 32 steps, one evaluation episode."""

_CHECK: Final = ("--num-envs", "2", "--examples", "2", "--num-steps", "16")
"""A short conformance check: two rollouts of 16 steps on two envs."""

OK: Final = "ok"
"""The command succeeds."""


@dataclass(frozen=True, slots=True)
class Row:
    """One row of the matrix: the env and options, and what each command does with them."""

    name: str
    """The row's test id."""
    argv: tuple[str, ...]
    """``ENV`` and the options both commands take (``--env-kwargs``, ``--wrapper``)."""
    check: str = OK
    """``check-env``: :data:`OK`, or a regular expression of its one-line refusal or of the
    violation it reports."""
    train: str = OK
    """``train``: :data:`OK`, or a regular expression of its one-line refusal."""
    train_fails: str | None = None
    """Why ``train`` still fails on this row with a traceback (an expected failure), if it does."""


ROWS: Final = (
    Row("ale-pong", ("ale_py:ALE/Pong-v5",)),
    Row(
        "ale-pong-preprocessed",
        (
            "ale_py:ALE/Pong-v5",
            "--env-kwargs",
            "frameskip=1",
            "--wrapper",
            "AtariPreprocessing(frame_skip=1)",
            "--wrapper",
            "FrameStackObservation(stack_size=4)",
        ),
    ),
    Row(
        "minigrid",
        ("minigrid:MiniGrid-Empty-5x5-v0",),
        check=r"observation space\['mission'\]: unsupported .*--wrapper "
        r"'FilterObservation\(filter_keys=\[\"direction\", \"image\"\]\)'",
        train=r"observation space\['mission'\]: unsupported",
    ),
    Row(
        "minigrid-image",
        ("minigrid:MiniGrid-Empty-5x5-v0", "--wrapper", "FilterObservation(filter_keys=['image'])"),
    ),
    Row(
        "minigrid-direction-image",
        (
            "minigrid:MiniGrid-Empty-5x5-v0",
            "--wrapper",
            "FilterObservation(filter_keys=['direction', 'image'])",
        ),
    ),
    Row("frozenlake", ("FrozenLake-v1",)),
    Row("frozenlake-flat", ("FrozenLake-v1", "--wrapper", "FlattenObservation")),
    Row("taxi", ("Taxi-v4",)),
    Row(
        "blackjack",
        ("Blackjack-v1",),
        check=r"unsupported observation space Tuple.*--wrapper FlattenObservation",
        train=r"unsupported observation space Tuple.*--wrapper FlattenObservation",
    ),
    Row("blackjack-flat", ("Blackjack-v1", "--wrapper", "FlattenObservation")),
    Row("lunarlander", ("LunarLander-v3",)),
    Row("bipedalwalker", ("BipedalWalker-v3",)),
    Row("carracing", ("CarRacing-v3",)),
    Row("fetchreach", ("gymnasium_robotics:FetchReach-v4",)),
    Row("highway", ("highway_env:highway-fast-v0",)),
    Row("dm-control-cartpole", ("shimmy:dm_control/cartpole-swingup-v0",)),
    Row(
        "envpool-make-gymnasium",
        ("envpool:make_gymnasium", "--env-kwargs", "task_id=CartPole-v1"),
        check=r"returned a vector env \(.*\) from a factory without a num_envs parameter",
        train=r"returned a vector env \(.*\) from a factory without a num_envs parameter",
    ),
    Row(
        "envpool-factory",
        ("tests.thirdparty.envpool_factory:cartpole",),
        # EnvPool seeds at creation and ignores reset(seed=...): the checker says so.
        check=r"\[seeding\] .*did not reproduce rollout",
    ),
)


def _params(command: str) -> list[object]:
    """The rows as parameters, a known failure of ``command`` marked as a strict xfail."""
    return [
        pytest.param(
            row,
            id=row.name,
            marks=[pytest.mark.xfail(strict=True, reason=row.train_fails)]
            if command == "train" and row.train_fails is not None
            else [],
        )
        for row in ROWS
    ]


def _typedrl(*argv: str, cwd: Path) -> "subprocess.CompletedProcess[str]":
    """``python -m typedrl ARGV`` in ``cwd``, as a user runs it."""
    # The repository root on the path: tests.thirdparty's factories import from any folder.
    path = os.pathsep.join(filter(None, (str(_ROOT), os.environ.get("PYTHONPATH"))))
    return subprocess.run(
        [sys.executable, "-m", "typedrl", *argv],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _assert_outcome(result: "subprocess.CompletedProcess[str]", expected: str) -> None:
    """The command did what the row says: succeeded, or one line matching ``expected``."""
    said = result.stdout + result.stderr
    assert "Traceback" not in said, said
    if expected == OK:
        assert result.returncode == 0, said
        return
    assert result.returncode == 1, said
    errors = [line for line in result.stderr.splitlines() if line.startswith("typedrl: ")]
    lines = errors or [line for line in result.stdout.splitlines() if line.strip()]
    assert any(re.search(expected, line) for line in lines), said


@pytest.mark.parametrize("row", _params("check-env"))
def test_check_env(row: Row, tmp_path: Path) -> None:
    """``typedrl check-env`` on the row: passes, reports the env's own violation, or refuses."""
    result = _typedrl("check-env", *row.argv, *_CHECK, cwd=tmp_path)
    _assert_outcome(result, row.check)
    assert not (tmp_path / ".hypothesis").exists()


@pytest.mark.parametrize("row", _params("train"))
def test_short_train(row: Row, tmp_path: Path) -> None:
    """``typedrl train`` on the row for 64 env steps: trains, or refuses in one line."""
    run_dir = tmp_path / "run"
    result = _typedrl("train", *row.argv, *_TRAIN, "--run-dir", str(run_dir), cwd=tmp_path)
    _assert_outcome(result, row.train)
    if row.train == OK:
        assert (run_dir / "checkpoints" / "last.ckpt").is_file()
