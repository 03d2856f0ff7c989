"""`typedrl train` on an env that holds its process's one simulation, as Isaac Lab's envs do."""

import csv
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import typedrl.envs
import typedrl.envs._isaaclab
from tests.multiprocess import run_two_ranks
from typedrl import StepResult
from typedrl.cli import main
from typedrl.errors import ConfigError, EnvError
from typedrl.protocols import VecEnv
from typedrl.seeding import derive_seed
from typedrl.testing import VecEnvWrapper
from typedrl.types import Action

_ENV = "typedrl/CartPole-v0"
"""The stand-in: a built-in env that the tests declare to hold one simulation."""

_EVAL_SEED = derive_seed(0, "eval_env", rank=0)
_TRAIN = [
    "train",
    _ENV,
    "--total-timesteps",
    "256",
    "--num-envs",
    "4",
    "--eval-episodes",
    "4",
    "--no-progress",
    "--set",
    "num_steps=16",
    "--set",
    "batch_size=32",
]


class _Watched(VecEnvWrapper):
    """An env whose steps and ``close`` are reported to its :class:`_OneSimulation`."""

    def __init__(self, env: VecEnv, *, on_step: Callable[[], None], on_close: Callable[[], None]):
        super().__init__(env)
        self._on_step = on_step
        self._on_close = on_close

    def step(self, action: Action) -> StepResult:
        """Report the step, then step the wrapped env."""
        self._on_step()
        return self.env.step(action)

    def close(self) -> None:
        """Close the wrapped env and report it."""
        self.env.close()
        self._on_close()


class _OneSimulation:
    """Stands in for ``typedrl.envs.make``: refuses a second open env and logs every event."""

    def __init__(self, make: Callable[..., VecEnv]) -> None:
        self._make = make
        self.events: list[tuple[str, int]] = []
        """``("make", num_envs)`` and ``("close", index of the env made)``, in order."""
        self.seeds: list[int | None] = []
        self.is_open = False
        self.step_hooks: dict[int, Callable[[int], None]] = {}
        """Called with the step count on every step of the env made at that index."""

    def make(self, env_id: str, **kwargs: Any) -> VecEnv:
        if self.is_open:
            raise ConfigError(f"make({env_id!r}): one simulation per process, one is open")
        index = len(self.seeds)
        self.events.append(("make", kwargs["num_envs"]))
        self.seeds.append(kwargs.get("seed"))
        env = self._make(env_id, **kwargs)
        self.is_open = True
        steps = [0]

        def on_step() -> None:
            steps[0] += 1
            hook = self.step_hooks.get(index)
            if hook is not None:
                hook(steps[0])

        def on_close() -> None:
            self.is_open = False
            self.events.append(("close", index))

        return _Watched(env, on_step=on_step, on_close=on_close)


@pytest.fixture
def one_simulation(monkeypatch: pytest.MonkeyPatch) -> _OneSimulation:
    """Make the stand-in id take the one-simulation path and watch the envs it gets."""
    stand_in = _OneSimulation(typedrl.envs.make)
    monkeypatch.setattr(
        typedrl.envs._isaaclab, "holds_one_simulation", lambda env_id: env_id == _ENV
    )
    monkeypatch.setattr(typedrl.envs, "make", stand_in.make)
    return stand_in


@pytest.mark.parametrize(
    ("env_id", "expected"),
    [
        ("Isaac-Cartpole", True),
        ("Isaac-Cartpole-Direct", True),
        ("typedrl/CartPole-v0", False),
        ("CartPole-v1", False),
        ("my_envs:Isaac", False),
    ],
)
def test_isaac_lab_ids_hold_one_simulation(env_id: str, expected: bool) -> None:
    """Exactly the ids that make() sends to Isaac Lab hold one simulation."""
    assert typedrl.envs._isaaclab.holds_one_simulation(env_id) is expected


def test_final_evaluation_runs_after_the_training_env_is_closed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], one_simulation: _OneSimulation
) -> None:
    """No eval env beside the training env; the fresh one comes after it closed; the summary."""
    run_dir = tmp_path / "run"
    assert main([*_TRAIN, "--eval-every", "64", "--run-dir", str(run_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    # Training env (4 rows), closed; then the evaluation env (min(4, 8) rows), closed.
    assert one_simulation.events == [("make", 4), ("close", 0), ("make", 4), ("close", 1)]
    assert one_simulation.seeds == [derive_seed(0, "env", rank=0), _EVAL_SEED]
    # Said once, first, with the reason and what becomes of --eval-every.
    assert out[0] == (
        f"evaluation      at the end: {_ENV} holds this process's one simulation, so the "
        "final policy plays 4 deterministic episodes on a fresh env after the training env "
        "is closed (eval_every=64 does not apply)"
    )
    assert sum(line.startswith("evaluation ") for line in out) == 1
    summary = json.loads((run_dir / "summary.json").read_text())
    score = summary["final_eval_score"]
    assert isinstance(score, float)
    assert score == summary["final_eval_return_mean"]
    assert isinstance(summary["final_eval_return_std"], float)
    # Nothing was evaluated during training, so there is no best checkpoint.
    assert summary["best_score"] is None
    assert summary["checkpoint_best"] is None
    assert summary["checkpoint_last"] == "checkpoints/last.ckpt"
    assert f"eval score      {score:,.2f}" in out
    mean, std = summary["final_eval_return_mean"], summary["final_eval_return_std"]
    assert f"eval return     {mean:,.2f} ± {std:,.2f}" in out
    with (run_dir / "metrics.csv").open(newline="") as handle:
        header = next(csv.reader(handle))
    assert not [name for name in header if name.startswith("eval/")]
    # The recorded score is the deterministic score of the final policy (last.ckpt).
    report = tmp_path / "eval.json"
    argv = ["evaluate", str(run_dir), "--episodes", "4", "--num-envs", "4"]
    assert main([*argv, "--seed", str(_EVAL_SEED), "--json", str(report)]) == 0
    assert json.loads(report.read_text())["score"] == score


def test_other_envs_still_evaluate_beside_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An env that does not hold one simulation gets its eval env at the start, as before."""
    recorded: list[int] = []
    real_make = typedrl.envs.make

    def counting_make(env_id: str, **kwargs: Any) -> VecEnv:
        recorded.append(kwargs["num_envs"])
        return real_make(env_id, **kwargs)

    monkeypatch.setattr(typedrl.envs, "make", counting_make)
    run_dir = tmp_path / "run"
    assert main([*_TRAIN, "--run-dir", str(run_dir)]) == 0
    assert recorded == [4, 4]
    assert not capsys.readouterr().out.startswith("evaluation ")
    assert (run_dir / "checkpoints" / "best.ckpt").is_file()


def test_a_run_stopped_by_a_signal_is_not_evaluated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], one_simulation: _OneSimulation
) -> None:
    """A signal stops training before its budget: no fresh env, no final evaluation."""

    def interrupt(step: int) -> None:
        if step == 20:
            signal.raise_signal(signal.SIGINT)

    one_simulation.step_hooks[0] = interrupt
    run_dir = tmp_path / "run"
    assert main([*_TRAIN, "--run-dir", str(run_dir)]) == 0
    assert one_simulation.events == [("make", 4), ("close", 0)]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stopped_by_signal"] is True
    assert summary["final_eval_score"] is None
    assert summary["final_eval_return_mean"] is None
    out = capsys.readouterr().out
    assert "eval score" not in out
    assert f"resume with: typedrl train --resume {run_dir}" in out


def test_a_failing_final_evaluation_closes_its_env(
    tmp_path: Path, one_simulation: _OneSimulation
) -> None:
    """An error in the final evaluation propagates, the fresh env is closed, the summary kept."""

    def fail(step: int) -> None:
        raise EnvError(f"the simulation failed at step {step}")

    one_simulation.step_hooks[1] = fail
    run_dir = tmp_path / "run"
    with pytest.raises(EnvError, match="the simulation failed at step 1"):
        main(["--debug", *_TRAIN, "--run-dir", str(run_dir)])
    assert one_simulation.events == [("make", 4), ("close", 0), ("make", 4), ("close", 1)]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["global_step"] == 256
    assert summary["final_eval_score"] is None


def _two_rank_worker(rank: int, port: int, run_dir: str, out_dir: str) -> None:
    """One rank of ``typedrl train --devices 2`` on the stand-in; writes the envs it made."""
    os.environ.update(
        {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "GROUP_RANK": "0",
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "TORCHELASTIC_RUN_ID": "typedrl-test",
        }
    )
    stand_in = _OneSimulation(typedrl.envs.make)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(typedrl.envs._isaaclab, "holds_one_simulation", lambda env_id: env_id == _ENV)
        patch.setattr(typedrl.envs, "make", stand_in.make)
        assert main([*_TRAIN, "--devices", "2", "--run-dir", run_dir]) == 0
    (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(stand_in.events))


def test_only_rank_0_evaluates(tmp_path: Path) -> None:
    """With two ranks, rank 0 alone builds the fresh env and scores the final policy."""
    run_dir = tmp_path / "run"
    run_two_ranks(_two_rank_worker, str(run_dir), str(tmp_path))
    events = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert events[0] == [["make", 4], ["close", 0], ["make", 4], ["close", 1]]
    assert events[1] == [["make", 4], ["close", 0]]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["global_step"] >= 256
    assert isinstance(summary["final_eval_score"], float)
