"""Regression tests of defects the trainer-algorithm seam fixed.

C1: a resumed SHAC run put only the actor's rate on the new curve; the critic kept the old one.
C2: SHAC's critic metrics were rank-local; they are pooled and identical on every rank.
S1: complete rollouts of scheduled envs with different horizons on two ranks hung.
S3: SHAC's entropy term counted the entropy of a row at the step it was cut.
"""

from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import TensorDict

from tests.multiprocess import run_two_ranks
from tests.shac.windows import FixedWindow
from tests.training.test_fabric import launch_two_rank_fabric
from typedrl.apg import (
    APGConfig,
    DifferentiableRollout,
    DifferentiableTrainer,
    DifferentiableTrainerConfig,
)
from typedrl.distributed import SingleProcess
from typedrl.envs import make
from typedrl.episodes import EpochEpisodes
from typedrl.errors import DistributedError
from typedrl.shac import SHAC, SHACConfig
from typedrl.testing import ScheduledQuadraticEnv
from typedrl.training import IterationResult, RunOptions

_ENV = "typedrl/CartPoleSwingUp-v0"


def _shac_trainer(total_updates: int, run_dir: Path | None = None) -> DifferentiableTrainer:
    config = DifferentiableTrainerConfig(
        total_updates=total_updates,
        segment_length=4,
        hidden=(8,),
        algorithm=SHACConfig(
            critic_hidden=(8,),
            critic_iterations=1,
            critic_minibatches=2,
            critic_learning_rate=1e-3,
            critic_learning_rate_schedule="linear",
            actor=APGConfig(learning_rate=2e-3, learning_rate_schedule="linear"),
        ),
    )
    return DifferentiableTrainer(
        env=make(_ENV, num_envs=4, seed=0),
        config=config,
        options=RunOptions(run_dir=run_dir, progress=False, loggers=[]),
    )


def _rates(trainer: DifferentiableTrainer) -> tuple[float, float]:
    shac = trainer.algorithm
    assert isinstance(shac, SHAC)
    return (
        float(shac.optimizer.param_groups[0]["lr"]),
        float(shac.critic_optimizer.param_groups[0]["lr"]),
    )


def test_resume_puts_actor_and_critic_on_the_new_curve(tmp_path: Path) -> None:
    """C1: a longer budget resyncs both rates; restart_schedule restarts both."""
    finished = _shac_trainer(2, tmp_path)
    finished.train()
    assert _rates(finished) == (0.0, 0.0)
    checkpoint = tmp_path / "checkpoints" / "last.ckpt"

    longer = _shac_trainer(4)
    longer.load(checkpoint)
    # 2 of 4 planned updates done: half of each initial rate.
    assert _rates(longer) == pytest.approx((1e-3, 5e-4))

    restarted = _shac_trainer(4)
    restarted.load(checkpoint, restart_schedule=True)
    assert _rates(restarted) == pytest.approx((2e-3, 1e-3))
    shac = restarted.algorithm
    assert isinstance(shac, SHAC)
    assert shac.scheduler.last_epoch == shac.critic_scheduler.last_epoch == 0


def _window(entropies: torch.Tensor, exploded_row: int) -> DifferentiableRollout:
    """A 2-step, 2-row window whose row ``exploded_row`` has an exploded observation at step 0."""
    steps, rows = entropies.shape
    observations = TensorDict({"obs": torch.zeros(steps, rows, 1)}, batch_size=[steps, rows])
    terminal = observations.clone()
    terminal["obs"][0, exploded_row] = float("inf")
    flags = torch.zeros(steps, rows, dtype=torch.bool)
    first = TensorDict({"obs": torch.zeros(rows, 1)}, batch_size=[rows])
    return DifferentiableRollout(
        initial_observation=first,
        observations=observations,
        actions=torch.zeros(steps, rows, 1),
        rewards=torch.zeros(steps, rows),
        entropies=entropies,
        terminated=flags,
        truncated=flags.clone(),
        valid=~flags,
        alive_mask=~flags,
        terminal_observations=terminal,
        final_observation=first.clone(),
        episodes=EpochEpisodes(
            returns=torch.zeros(steps, rows),
            lengths=torch.zeros(steps, rows, dtype=torch.int64),
            ended=flags.clone(),
            return_so_far=torch.zeros(rows),
            length_so_far=torch.zeros(rows, dtype=torch.int64),
        ),
        adjoint=None,
    )


def test_shac_entropy_skips_the_step_a_row_is_cut() -> None:
    """S3: the entropy of a row's cut step counts no more than its reward does."""
    policy = torch.nn.Module()
    policy.register_parameter("w", torch.nn.Parameter(torch.zeros(1)))
    policy.features = lambda obs: obs["obs"]  # type: ignore[assignment]
    shac = SHAC(
        policy,
        SHACConfig(critic_hidden=(4,)),
        dist=SingleProcess(),
        planned_updates=10,
        seed=0,
        feature_width=1,
    )
    # Leaves that require grad, so that the actor's backward has something to reach.
    entropies = torch.tensor([[1.0, 10.0], [100.0, 1000.0]], requires_grad=True)
    outcome, _ = shac.update(FixedWindow(_window(entropies, exploded_row=1)), num_steps=2)
    # Row 1 is cut at step 0: its 10.0 does not count; everything else does (per row and step).
    assert outcome.metrics["train/entropy"] == pytest.approx((1.0 + 100.0 + 1000.0) / 2 / 2)


def _metrics_worker(rank: int, port: int, out_dir: str) -> None:
    fabric = launch_two_rank_fabric(rank, port)
    config = DifferentiableTrainerConfig(
        total_updates=2,
        segment_length=4,
        hidden=(8,),
        algorithm=SHACConfig(critic_hidden=(8,), critic_iterations=2, critic_minibatches=2),
    )
    # Different rows and streams per rank: rank-local critic metrics would differ.
    env = make(_ENV, num_envs=(2, 4)[rank], seed=10 + rank, device=fabric.device)
    trainer = DifferentiableTrainer(
        env=env, config=config, fabric=fabric, options=RunOptions(progress=False, loggers=[])
    )
    results: list[dict[str, float]] = []
    iterate = trainer._train_iteration

    def recording() -> IterationResult:
        result = iterate()
        results.append(dict(result.metrics))
        return result

    trainer._train_iteration = recording  # type: ignore[method-assign]
    trainer.train()
    torch.save(results, Path(out_dir) / f"rank{rank}.pt")


@pytest.mark.distributed
def test_shac_metrics_are_identical_on_every_rank(tmp_path: Path) -> None:
    """C2: loss/critic, critic/* and train/cut_rows are pooled over the ranks."""
    run_two_ranks(_metrics_worker, str(tmp_path))
    first, second = (torch.load(tmp_path / f"rank{rank}.pt", weights_only=False) for rank in (0, 1))
    pooled = ("loss/critic", "critic/", "train/cut_rows", "train/critic_grad_norm")
    for left, right in zip(first, second, strict=True):
        shared = {k: v for k, v in left.items() if k.startswith(pooled)}
        assert {"loss/critic", "critic/explained_variance", "train/cut_rows"} <= set(shared)
        assert shared == {k: right[k] for k in shared}


def _horizon_worker(rank: int, port: int, out_dir: str) -> None:
    fabric = launch_two_rank_fabric(rank, port)
    message = ""
    try:
        # Each rank's env plans its own horizon for the first rollout: 4 and 6 steps.
        env = ScheduledQuadraticEnv(num_envs=2, horizons=[(4, 6)[rank]])
        config = DifferentiableTrainerConfig(
            total_updates=1, rollout_mode="complete", segment_length=4, hidden=(4,)
        )
        DifferentiableTrainer(
            env=env, config=config, fabric=fabric, options=RunOptions(progress=False, loggers=[])
        ).train()
    except DistributedError as error:
        message = str(error)
    torch.save({"message": message}, Path(out_dir) / f"rank{rank}.pt")


@pytest.mark.distributed
def test_ranks_planning_different_horizons_stop_with_both_values(tmp_path: Path) -> None:
    """S1: scheduled horizons 4 and 6 on two ranks end both with one error naming them."""
    run_two_ranks(_horizon_worker, str(tmp_path))
    messages: list[Any] = [
        torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)["message"] for rank in (0, 1)
    ]
    assert messages[0] == messages[1]
    assert "rank 0: 4, rank 1: 6" in messages[0]
    assert "prepare_differentiable_rollout" in messages[0]
