"""Tests for typedrl.shac._algorithm in whole runs: checkpoints, exact resume, DDP, summary."""

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.loggers import RecordingLogger
from tests.multiprocess import run_in_fresh_process, run_two_ranks
from tests.shac.windows import (
    ENV_ID,
    assert_bit_identical,
    assert_same_weights,
    cartpole_trainer,
    critic_steps,
    shac_of,
    weights,
)
from tests.training.test_fabric import launch_two_rank_fabric
from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.checkpoint import load_checkpoint
from typedrl.envs import make
from typedrl.shac import SHACConfig
from typedrl.training import RunOptions

# ---------------------------------------------------------------- checkpoints


def test_checkpoint_holds_both_critics_optimizers_schedulers_and_the_sampler(
    tmp_path: Path,
) -> None:
    """last.ckpt holds both critics, both optimizers and schedulers, and the critic sampler."""
    trainer = cartpole_trainer(
        shac={"normalize_returns": True},
        options=RunOptions(run_dir=tmp_path, loggers=[], progress=False),
    )
    trainer.train()
    checkpoint = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    shac = shac_of(trainer)
    assert {"policy", "critic", "target_critic", "return_normalizer", "algorithm"} <= set(
        checkpoint.modules
    )
    assert "critic_sampler.rank0" in checkpoint.modules
    assert set(checkpoint.optimizers) == {"policy", "critic"}
    assert set(checkpoint.schedulers) == {"policy", "critic"}
    assert_same_weights(checkpoint.modules["critic"], dict(shac.critic.state_dict()))
    assert_same_weights(checkpoint.modules["target_critic"], dict(shac.target_critic.state_dict()))
    assert checkpoint.modules["algorithm"] == {"applied": 2, "skipped": 0}
    assert checkpoint.optimizers["critic"]["state"][0]["step"] == critic_steps(shac)
    assert checkpoint.schedulers["critic"]["last_epoch"] == 2
    assert checkpoint.config["algorithm"] == trainer.config.algorithm.to_dict()


RESUME_UPDATES = (3, 2)
RESUME_SHAC: dict[str, Any] = {
    "normalize_returns": True,
    "critic_iterations": 2,
    "critic_minibatches": 2,
}


def resume_trainer(
    run_dir: Path | None, logger: RecordingLogger | None = None
) -> DifferentiableTrainer:
    """The trainer of the resume test: N + M planned updates (linear schedules), normalised."""
    return cartpole_trainer(
        num_envs=3,
        segment_length=4,
        total_updates=sum(RESUME_UPDATES),
        shac=RESUME_SHAC,
        normalize_observations=True,
        layer_norm=True,
        options=RunOptions(
            run_dir=run_dir, loggers=[] if logger is None else [logger], progress=False
        ),
        seed=7,
    )


def _resume_in_fresh_process(checkpoint: str, out: str, threads: int) -> None:
    # The parent's thread count: a reduction split over other threads rounds differently.
    torch.set_num_threads(threads)
    trainer = resume_trainer(None)
    trainer.load(checkpoint)
    result = trainer.train()
    shac = shac_of(trainer)
    torch.save(
        {
            "iterations": result.iterations,
            "weights": weights(trainer),
            "optimizers": {
                "policy": shac.optimizer.state_dict(),
                "critic": shac.critic_optimizer.state_dict(),
            },
            "sampler": shac.sampler.get_state(),
        },
        out,
    )


def test_resume_is_bit_exact_in_a_fresh_process(tmp_path: Path) -> None:
    """N + M updates equal N updates (stopped by a signal), saved, resumed in a new process, M."""
    uninterrupted = resume_trainer(None)
    uninterrupted.train()
    previous = signal.getsignal(signal.SIGINT)
    first, _second = RESUME_UPDATES

    def interrupt(metrics: dict[str, float]) -> None:
        if metrics.get("time/iteration") == float(first):
            os.kill(os.getpid(), signal.SIGINT)

    stopped = resume_trainer(tmp_path, RecordingLogger(on_log=interrupt))
    result = stopped.train()
    assert signal.getsignal(signal.SIGINT) is previous
    assert (result.iterations, result.stopped_by_signal) == (first, True)
    assert any(
        not torch.equal(value, weights(uninterrupted)[key])
        for key, value in weights(stopped).items()
    )
    out = tmp_path / "resumed.pt"
    run_in_fresh_process(
        _resume_in_fresh_process,
        str(tmp_path / "checkpoints" / "last.ckpt"),
        str(out),
        torch.get_num_threads(),
    )
    resumed: dict[str, Any] = torch.load(out, weights_only=True)
    assert resumed["iterations"] == sum(RESUME_UPDATES)
    assert_same_weights(weights(uninterrupted), resumed["weights"])
    shac = shac_of(uninterrupted)
    assert_bit_identical(shac.optimizer.state_dict(), resumed["optimizers"]["policy"], "policy")
    assert_bit_identical(
        shac.critic_optimizer.state_dict(), resumed["optimizers"]["critic"], "critic"
    )
    assert torch.equal(shac.sampler.get_state(), resumed["sampler"])


# ---------------------------------------------------------------- distributed


def _ddp_worker(rank: int, port: int, out_dir: str) -> None:
    fabric = launch_two_rank_fabric(rank, port)
    result: dict[str, Any] = {}
    try:
        config = DifferentiableTrainerConfig(
            total_updates=3,
            segment_length=4,
            hidden=(16,),
            normalize_observations=True,
            algorithm=SHACConfig(
                critic_hidden=(16,),
                critic_iterations=2,
                critic_minibatches=4,
                normalize_returns=True,
            ),
            seed=5,
        )
        # 2 and 4 rows: 8 and 16 samples, 4 minibatches of 2 and of 4.
        env = make(ENV_ID, num_envs=(2, 4)[rank], seed=30 + rank, device=fabric.device)
        trainer = DifferentiableTrainer(
            env=env, config=config, fabric=fabric, options=RunOptions(progress=False, loggers=[])
        )
        initial = weights(trainer)
        fit = trainer.train()
        shac = shac_of(trainer)
        result = {
            "initial": initial,
            "weights": weights(trainer),
            "iterations": fit.iterations,
            "applied": shac.counters["applied"],
            "critic_steps": critic_steps(shac),
        }
    except Exception as error:
        result = {"error": f"{type(error).__name__}: {error}"}
    torch.save(result, Path(out_dir) / f"rank{rank}.pt")


def _results(out_dir: Path) -> Iterator[dict[str, Any]]:
    for rank in (0, 1):
        yield torch.load(out_dir / f"rank{rank}.pt", weights_only=False)


@pytest.mark.distributed
def test_ddp_ranks_hold_identical_actor_critic_and_target(tmp_path: Path) -> None:
    """2 gloo ranks with 2 and 4 rows: identical policy, critic, target critic and statistics."""
    run_two_ranks(_ddp_worker, str(tmp_path))
    first, second = _results(tmp_path)
    assert "error" not in first, first.get("error")
    assert "error" not in second, second.get("error")
    assert first["iterations"] == second["iterations"] == 3
    assert first["applied"] == second["applied"] == 3
    assert first["critic_steps"] == second["critic_steps"] == 3 * 2 * 4
    assert_same_weights(first["initial"], second["initial"])
    assert_same_weights(first["weights"], second["weights"])
    moved = [
        k for k in first["weights"] if not torch.equal(first["weights"][k], first["initial"][k])
    ]
    assert any(k.startswith("policy.") for k in moved)
    assert any(k.startswith("critic.") for k in moved)
    assert any(k.startswith("target_critic.") for k in moved)


def _ddp_uneven_worker(rank: int, port: int, out_dir: str) -> None:
    fabric = launch_two_rank_fabric(rank, port)
    message = ""
    try:
        config = DifferentiableTrainerConfig(
            total_updates=2,
            segment_length=3,
            hidden=(8,),
            algorithm=SHACConfig(critic_hidden=(8,), critic_iterations=1, critic_minibatches=4),
        )
        env = make(ENV_ID, num_envs=(3, 4)[rank], seed=rank, device=fabric.device)
        DifferentiableTrainer(
            env=env, config=config, fabric=fabric, options=RunOptions(progress=False, loggers=[])
        ).train()
    except Exception as error:
        message = f"{type(error).__name__}: {error}"
    torch.save({"message": message}, Path(out_dir) / f"rank{rank}.pt")


@pytest.mark.distributed
def test_ddp_ranks_with_uneven_windows_train_the_critic_alike(tmp_path: Path) -> None:
    """Ranks of 3 and 4 rows (windows of 9 and 12 samples) train without error."""
    run_two_ranks(_ddp_uneven_worker, str(tmp_path))
    first, second = _results(tmp_path)
    assert first["message"] == second["message"] == ""


def test_the_run_summary_names_shac(tmp_path: Path) -> None:
    """summary.json says "shac" for a SHAC run (the checkpoint kind stays "apg")."""
    trainer = cartpole_trainer(
        options=RunOptions(run_dir=tmp_path, progress=False, loggers=[]), total_updates=1
    )
    assert trainer.algorithm_name == "shac"
    trainer.train()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["algorithm"] == "shac"
    assert load_checkpoint(tmp_path / "checkpoints" / "last.ckpt").kind == "apg"
