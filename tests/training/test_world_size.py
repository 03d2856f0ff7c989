"""Tests for resuming on another number of ranks (PPO, APG, SHAC; 2 -> 1 and 1 -> 2)."""

import copy
from pathlib import Path
from typing import Any

import pytest
import torch
from lightning_fabric import Fabric

from tests.apg.test_trainer import assert_same, cpu_fabric, point_mass
from tests.multiprocess import run_two_ranks
from tests.ppo._envs import RandomWalkEnv
from tests.training.test_fabric import launch_two_rank_fabric
from typedrl.apg import DifferentiableTrainer, DifferentiableTrainerConfig, SHACConfig
from typedrl.checkpoint import load_checkpoint
from typedrl.ppo import PPOAgent, PPOConfig
from typedrl.training import AbstractTrainer, RunOptions

ALGORITHMS = ("ppo", "apg", "shac")
ROWS = 2
"""Env rows per rank, kept when the number of ranks changes."""
STEPS = 4
"""Env steps per row and iteration (PPO's num_steps, APG's and SHAC's segment)."""
FIRST, MORE = 2, 2
"""Iterations before the checkpoint, and after the resume."""


def _budget(algo: str, world_sizes: tuple[int, ...]) -> dict[str, Any]:
    """PPO's budget in env steps (iterations of each world in turn); APG's in updates."""
    if algo == "ppo":
        counts = (FIRST, MORE)[: len(world_sizes)]
        steps = sum(n * STEPS * ROWS * w for n, w in zip(counts, world_sizes, strict=True))
        return {"total_timesteps": steps}
    return {"total_updates": FIRST if len(world_sizes) == 1 else FIRST + MORE}


def build(algo: str, fabric: Fabric, run_dir: Path | None, budget: dict[str, Any]) -> Any:
    """A tiny trainer of ``algo`` on this rank, evaluated (2 episodes) at the end."""
    rank = fabric.global_rank
    options = RunOptions(run_dir=run_dir, loggers=[], progress=False, eval_episodes=2)
    if algo == "ppo":
        config = PPOConfig(
            num_steps=STEPS,
            batch_size=4,
            num_mini_epochs=2,
            normalize_observations=True,
            normalize_rewards=True,
            seed=3,
            actor_hidden=(8,),
            critic_hidden=(8,),
            **budget,
        )
        return PPOAgent(
            env=RandomWalkEnv(num_envs=ROWS, seed=100 + rank),
            eval_env=RandomWalkEnv(num_envs=ROWS, seed=200 + rank),
            config=config,
            fabric=fabric,
            options=options,
        )
    shac = algo == "shac"
    algorithm = (
        SHACConfig(critic_hidden=(8,), critic_iterations=1, critic_minibatches=2) if shac else None
    )
    fields: dict[str, Any] = {"algorithm": algorithm} if algorithm is not None else {}
    apg_config = DifferentiableTrainerConfig(
        segment_length=STEPS,
        hidden=(8,),
        normalize_observations=True,
        seed=3,
        **fields,
        **budget,
    )
    return DifferentiableTrainer(
        env=point_mass(num_envs=ROWS, seed=100 + rank),
        eval_env=point_mass(num_envs=ROWS, seed=200 + rank),
        config=apg_config,
        fabric=fabric,
        options=options,
    )


def restored_state(trainer: AbstractTrainer) -> dict[str, Any]:
    """What a resume on another world size restores exactly, deep-copied."""
    state = trainer._state()
    shared = {
        "modules": {name: item.state_dict() for name, item in state.modules.items()},
        "optimizers": {name: item.state_dict() for name, item in state.optimizers.items()},
        "schedulers": {name: item.state_dict() for name, item in state.schedulers.items()},
        "counters": {"iteration": trainer.iteration, "env_steps": trainer.env_steps},
        "best_score": trainer.best_score,
    }
    normalizer = getattr(trainer, "reward_normalizer", None)
    if normalizer is not None:
        shared["return_stats"] = normalizer.return_stats.state_dict()
    return copy.deepcopy(shared)


def saved_state(path: Path) -> dict[str, Any]:
    """The same parts, as the checkpoint file holds them (the shared ones from rank 0)."""
    checkpoint = load_checkpoint(path)
    modules = {name: state for name, state in checkpoint.modules.items() if ".rank" not in name}
    saved: dict[str, Any] = {
        "modules": modules,
        "optimizers": checkpoint.optimizers,
        "schedulers": checkpoint.schedulers,
        "counters": {
            "iteration": int(checkpoint.counters["iteration"]),
            "env_steps": int(checkpoint.counters["env_steps"]),
        },
        "best_score": checkpoint.best_score,
    }
    reward = checkpoint.modules.get("reward_normalizer.rank0")
    if reward is not None:
        saved["return_stats"] = {
            key.removeprefix("return_stats."): value
            for key, value in reward.items()
            if key.startswith("return_stats.")
        }
    return saved


def _assert_restored(restored: dict[str, Any], saved: dict[str, Any], algo: str) -> None:
    assert restored["counters"] == saved["counters"], algo
    assert restored["best_score"] == saved["best_score"] is not None, algo
    assert_same(restored["modules"], saved["modules"], f"{algo} modules")
    assert restored["optimizers"].keys() == saved["optimizers"].keys()
    for name, optimizer in restored["optimizers"].items():
        # The learning rate follows the schedule of the resumed run's (longer) budget.
        assert_same(optimizer["state"], saved["optimizers"][name]["state"], f"{algo} {name}")
    assert restored["schedulers"].keys() == saved["schedulers"].keys()
    for name, scheduler in restored["schedulers"].items():
        assert scheduler["last_epoch"] == saved["schedulers"][name]["last_epoch"], name
    assert_same(restored.get("return_stats"), saved.get("return_stats"), f"{algo} return stats")


def _first_runs_worker(rank: int, port: int, run_root: str) -> None:
    fabric = launch_two_rank_fabric(rank, port)
    for algo in ALGORITHMS:
        build(algo, fabric, Path(run_root) / algo, _budget(algo, (2,))).fit()


def _resumes_worker(rank: int, port: int, run_root: str, out_root: str) -> None:
    fabric = launch_two_rank_fabric(rank, port)
    for algo in ALGORITHMS:
        trainer = build(algo, fabric, None, _budget(algo, (1, 2)))
        trainer.load(Path(run_root) / algo / "checkpoints" / "last.ckpt")
        restored = restored_state(trainer)
        result = trainer.fit()
        policy = trainer._state().modules["policy"].state_dict()
        torch.save(
            {
                "restored": restored,
                "env_steps": result.env_steps,
                "iterations": result.iterations,
                "weights": {key: value.detach().clone() for key, value in policy.items()},
            },
            Path(out_root) / f"{algo}.rank{rank}.pt",
        )


@pytest.fixture(scope="module")
def two_rank_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every algorithm trained on two ranks (one process pair for all of them)."""
    root = tmp_path_factory.mktemp("two_ranks")
    run_two_ranks(_first_runs_worker, str(root))
    return root


@pytest.fixture(scope="module")
def resumed_on_two_ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Every algorithm trained on one rank, then resumed on two: (run folders, results)."""
    root = tmp_path_factory.mktemp("one_rank")
    for algo in ALGORITHMS:
        build(algo, cpu_fabric(), root / algo, _budget(algo, (1,))).fit()
    out = tmp_path_factory.mktemp("resumed")
    run_two_ranks(_resumes_worker, str(root), str(out))
    return root, out


@pytest.mark.distributed
@pytest.mark.parametrize("algo", ALGORITHMS)
def test_a_two_rank_checkpoint_resumes_on_one_rank(
    algo: str, two_rank_runs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """2 -> 1: weights, optimizer, schedules, statistics, counters, best score; then the budget."""
    last = two_rank_runs / algo / "checkpoints" / "last.ckpt"
    capsys.readouterr()
    trainer = build(algo, cpu_fabric(), None, _budget(algo, (2, 1)))
    trainer.load(last)
    assert capsys.readouterr().err == (
        f"world size changed 2 -> 1 on resume from {last}: weights, optimizers, schedules, "
        "normaliser statistics, counters and best score restored; envs reset and per-rank "
        "random streams re-derived (a valid resume, not bit-exact)\n"
    )
    _assert_restored(restored_state(trainer), saved_state(last), algo)
    result = trainer.fit()
    assert result.iterations == FIRST + MORE
    assert result.env_steps == FIRST * 2 * STEPS * ROWS + MORE * STEPS * ROWS


@pytest.mark.distributed
@pytest.mark.parametrize("algo", ALGORITHMS)
def test_a_one_rank_checkpoint_resumes_on_two_ranks(
    algo: str, resumed_on_two_ranks: tuple[Path, Path]
) -> None:
    """1 -> 2: both ranks restore the same state exactly, train to the budget, end identical."""
    runs, out = resumed_on_two_ranks
    first, second = (
        torch.load(out / f"{algo}.rank{rank}.pt", weights_only=False) for rank in (0, 1)
    )
    saved = saved_state(runs / algo / "checkpoints" / "last.ckpt")
    for result in (first, second):
        _assert_restored(result["restored"], saved, algo)
        assert result["iterations"] == FIRST + MORE
        assert result["env_steps"] == FIRST * STEPS * ROWS + MORE * STEPS * ROWS * 2
    assert_same(first["weights"], second["weights"], f"{algo} final weights")
