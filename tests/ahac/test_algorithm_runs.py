"""Tests for typedrl.ahac._algorithm in whole runs: checkpoints, exact resume, two ranks."""

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.ahac.runs import ahac_of, contact_trainer, same_weights, weights
from tests.loggers import RecordingLogger
from tests.multiprocess import run_two_ranks
from tests.training.test_fabric import launch_two_rank_fabric
from typedrl.ahac import AHACConfig
from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.checkpoint import load_checkpoint
from typedrl.testing import ContactQuadraticEnv
from typedrl.training import RunOptions

RESUME_UPDATES = (3, 3)
RESUME_AHAC: dict[str, Any] = {"normalize_returns": True, "critic_stop_tolerance": 5.0}


def resume_trainer(run_dir: Path | None, logger: RecordingLogger | None = None) -> Any:
    """N + M planned updates (linear schedules, alpha included), normalised, early stops."""
    return contact_trainer(
        num_envs=3,
        total_updates=sum(RESUME_UPDATES),
        ahac=RESUME_AHAC,
        normalize_observations=True,
        options=RunOptions(
            run_dir=run_dir, loggers=[] if logger is None else [logger], progress=False
        ),
        seed=3,
    )


def test_the_checkpoint_holds_the_horizon_and_the_double_critic(tmp_path: Path) -> None:
    """last.ckpt holds H, lambda and the schedule's place, both critics, the summary says ahac."""
    trainer = contact_trainer(options=RunOptions(run_dir=tmp_path, loggers=[], progress=False))
    trainer.train()
    checkpoint = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    ahac = ahac_of(trainer)
    assert checkpoint.kind == "apg"
    assert checkpoint.modules["horizon"] == ahac.horizon.state_dict()
    assert checkpoint.modules["horizon"]["updates"] == 3
    assert {"critic.first.0.weight", "critic.second.0.weight"} <= {
        f"critic.{key}" for key in checkpoint.modules["critic"]
    }
    assert checkpoint.config["algorithm"] == trainer.config.algorithm.to_dict()
    assert '"algorithm": "ahac"' in (tmp_path / "summary.json").read_text()


def test_resume_is_bit_exact(tmp_path: Path) -> None:
    """N + M updates equal N updates (stopped by a signal), saved, resumed, M more."""
    uninterrupted = resume_trainer(None)
    uninterrupted.train()
    first, _second = RESUME_UPDATES
    previous = signal.getsignal(signal.SIGINT)

    def interrupt(metrics: dict[str, float]) -> None:
        if metrics.get("time/iteration") == float(first):
            os.kill(os.getpid(), signal.SIGINT)

    stopped = resume_trainer(tmp_path, RecordingLogger(on_log=interrupt))
    result = stopped.train()
    assert signal.getsignal(signal.SIGINT) is previous
    assert (result.iterations, result.stopped_by_signal) == (first, True)
    assert same_weights(weights(stopped), weights(uninterrupted))
    resumed = resume_trainer(None)
    resumed.load(tmp_path / "checkpoints" / "last.ckpt")
    assert ahac_of(resumed).horizon.state_dict() == ahac_of(stopped).horizon.state_dict()
    assert resumed.train().iterations == sum(RESUME_UPDATES)
    assert same_weights(weights(resumed), weights(uninterrupted)) == []
    done, again = ahac_of(uninterrupted), ahac_of(resumed)
    assert again.horizon.state_dict() == done.horizon.state_dict()
    assert done.horizon.horizon > 2.0  # the windows did change length
    assert torch.equal(done.sampler.get_state(), again.sampler.get_state())


@pytest.mark.parametrize("restart", [False, True])
def test_restart_schedule_restarts_the_dual_step_but_keeps_the_horizon(
    tmp_path: Path, *, restart: bool
) -> None:
    """restart_schedule=True puts alpha back at its start with the rates; H and lambda stay."""
    saved = contact_trainer(options=RunOptions(run_dir=tmp_path, loggers=[], progress=False))
    saved.train()
    before = ahac_of(saved).horizon.state_dict()
    assert before["updates"] == 3
    loaded = contact_trainer(total_updates=6)
    loaded.load(tmp_path / "checkpoints" / "last.ckpt", restart_schedule=restart)
    ahac = ahac_of(loaded)
    horizon, rate = ahac.horizon, ahac.config.horizon_learning_rate
    assert (horizon.horizon, horizon.multiplier) == (before["horizon"], before["multiplier"])
    assert horizon.updates == (0 if restart else 3)
    # Linear over this run's 6 planned updates, to 0: the start, or halfway.
    assert horizon.rate == pytest.approx(rate if restart else rate / 2)
    actor = ahac.config.actor.learning_rate
    assert ahac.optimizer.param_groups[0]["lr"] == pytest.approx(actor if restart else actor / 2)


# ---------------------------------------------------------------- distributed


def _ddp_worker(rank: int, port: int, out_dir: str) -> None:
    fabric = launch_two_rank_fabric(rank, port)
    result: dict[str, Any] = {}
    try:
        config = DifferentiableTrainerConfig(
            total_updates=4,
            hidden=(8,),
            normalize_observations=True,
            algorithm=AHACConfig(
                critic_hidden=(8,),
                horizon_min=2,
                horizon_max=6,
                horizon_learning_rate=2e-3,
                critic_iterations=8,
                critic_stop_tolerance=5.0,
            ),
            seed=5,
        )
        # Ranks of 2 and 3 rows whose contacts differ by a factor of 100: the horizon
        # follows the contacts pooled over both, so it moves the same on both.
        env = ContactQuadraticEnv(
            num_envs=(2, 3)[rank], horizon=5, contact_scale=(100.0, 10_000.0)[rank]
        )
        trainer = DifferentiableTrainer(
            env=env, config=config, fabric=fabric, options=RunOptions(progress=False, loggers=[])
        )
        lengths: list[int] = []
        ahac = ahac_of(trainer)
        original = ahac.update

        def update(*args: Any, **kwargs: Any) -> Any:
            lengths.append(ahac.horizon.steps)
            return original(*args, **kwargs)

        ahac.update = update  # type: ignore[method-assign]
        fit = trainer.train()
        result = {
            "weights": weights(trainer),
            "iterations": fit.iterations,
            "lengths": lengths,
            "horizon": ahac.horizon.state_dict(),
            "passes": fit.metrics["ahac/critic_passes"],
        }
    except Exception as error:
        result = {"error": f"{type(error).__name__}: {error}"}
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")


def _results(out_dir: Path) -> Iterator[dict[str, Any]]:
    for rank in (0, 1):
        yield torch.load(out_dir / f"rank{rank}.pt", weights_only=False)


@pytest.mark.distributed
def test_two_ranks_agree_on_every_horizon(tmp_path: Path) -> None:
    """2 gloo ranks, uneven rows and contacts: the same windows, horizon and weights."""
    run_two_ranks(_ddp_worker, str(tmp_path))
    first, second = _results(tmp_path)
    assert "error" not in first, first.get("error")
    assert "error" not in second, second.get("error")
    assert first["iterations"] == second["iterations"] == 4
    assert first["lengths"] == second["lengths"]
    assert first["horizon"] == second["horizon"]
    assert first["horizon"]["horizon"] > 2.0
    assert first["passes"] == second["passes"]
    assert same_weights(first["weights"], second["weights"]) == []


# ---------------------------------------------------------------- learning


@pytest.mark.slow
def test_ahac_learns_to_drive_the_contact_env_to_zero() -> None:
    """40 updates of 16 rows: the episodes' return (-sum x'^2) improves by more than half."""
    logger = RecordingLogger()
    trainer = contact_trainer(
        num_envs=16,
        contact_scale=600.0,
        total_updates=40,
        ahac={
            "critic_hidden": (16,),
            "horizon_max": 10,
            "horizon_learning_rate": 1e-3,
            "critic_iterations": 16,
        },
        options=RunOptions(progress=False, loggers=[logger]),
        episode=10,
        hidden=(16,),
    )
    trainer.train()
    returns = [m["episode/return_mean"] for m in logger.records if "episode/return_mean" in m]
    first, last = sum(returns[:2]) / 2, sum(returns[-2:]) / 2
    # Seed 0: about -420 over the first episodes, about -160 over the last.
    assert last > 0.6 * first, (first, last)
    assert ahac_of(trainer).horizon.horizon > 2.0
