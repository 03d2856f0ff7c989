"""APG and SHAC through the MuJoCo cart-pole swing-up (physics differentiated by autograd).

The reward of ``typedrl/MujocoCartPoleSwingUp-v0`` is at most 1 per step (upright and
centred); the pole starts hanging down, where an untrained policy scores about 0.
"""

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.loggers import RecordingLogger
from typedrl.apg import APGConfig, DifferentiableTrainer, DifferentiableTrainerConfig
from typedrl.cli import main
from typedrl.envs import make
from typedrl.training import RunOptions

ENV_ID = "typedrl/MujocoCartPoleSwingUp-v0"


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Train on one thread (the scores below were measured so), then restore the count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_apg_gradient_is_finite_and_raises_the_short_horizon_return() -> None:
    """APG, 16 envs, 6 updates of 20 steps on 40-step episodes: finite gradients, higher return."""
    env = make(ENV_ID, num_envs=16, seed=0, env_kwargs={"max_episode_steps": 40})
    eval_env = make(ENV_ID, num_envs=16, seed=100, env_kwargs={"max_episode_steps": 40})
    logger = RecordingLogger()
    config = DifferentiableTrainerConfig(
        total_updates=6,
        segment_length=20,
        algorithm=APGConfig(learning_rate=1e-2),
        seed=0,
    )
    trainer = DifferentiableTrainer(
        env=env,
        config=config,
        eval_env=eval_env,
        options=RunOptions(eval_episodes=16, progress=False, loggers=[logger]),
    )
    before = trainer.evaluate()["eval/score"]
    result = trainer.train()
    norms = [r["train/grad_norm"] for r in logger.records if "train/grad_norm" in r]
    assert len(norms) == 6
    assert all(math.isfinite(norm) and norm > 0 for norm in norms)
    assert result.metrics["train/applied_updates"] == 6.0
    after = result.metrics["eval/score"]
    assert after > before


@pytest.mark.slow
def test_shac_swings_up_and_balances(tmp_path: Path) -> None:
    """`typedrl train typedrl/MujocoCartPoleSwingUp-v0 --algo shac`: the shipped file learns it.

    The tuned file: 16 envs, windows of 32 steps, 4 critic passes, actor learning rate
    5e-3, 800 windows (409,600 env steps), evaluated over 16 deterministic episodes.
    """
    run_dir = tmp_path / "run"
    argv = ["train", ENV_ID, "--algo", "shac", "--run-dir", str(run_dir), "--no-progress"]
    assert main(argv) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["global_step"], summary["num_updates"]) == (409_600, 800)
    # Measured 446.7 +- 2.1 (seed 0; 12.5 minutes on one CPU thread); the maximum is 500,
    # an untrained policy scores about 0.
    assert summary["final_eval_return_mean"] >= 400.0
