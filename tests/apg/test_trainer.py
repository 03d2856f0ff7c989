"""Tests for typedrl.apg._trainer: DifferentiableTrainer end to end, on tiny runs."""

import copy
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import torch
from lightning_fabric import Fabric
from lightning_fabric.loggers.logger import Logger
from torch import Tensor

from tests.loggers import RecordingLogger
from tests.multiprocess import run_in_fresh_process
from typedrl._results import StepResult
from typedrl.apg import (
    APGConfig,
    DifferentiableAlgorithm,
    DifferentiableTrainer,
    DifferentiableTrainerConfig,
)
from typedrl.checkpoint import load_checkpoint
from typedrl.envs import make
from typedrl.errors import CheckpointError, ConfigError, EnvError, NonFiniteError
from typedrl.normalization import RunningMeanStd
from typedrl.protocols import DifferentiableVecEnv
from typedrl.testing import (
    CountingVecEnv,
    DifferentiableVecEnvWrapper,
    LinearDifferentiablePolicy,
    QuadraticEnv,
    ScheduledQuadraticEnv,
)
from typedrl.training import RunOptions
from typedrl.types import Action

SMALL: dict[str, Any] = {"hidden": (8,)}


class Faulty(DifferentiableVecEnvWrapper):
    """Delegates to a differentiable env; a NaN reward or an exception at chosen global steps."""

    def __init__(
        self,
        env: DifferentiableVecEnv,
        *,
        nan_at: Iterable[int] = (),
        raise_at: Iterable[int] = (),
    ) -> None:
        super().__init__(env)
        self.nan_at = set(nan_at)
        self.raise_at = set(raise_at)
        self.steps_taken = 0

    def step(self, action: Action) -> StepResult:
        """The wrapped env's step, with row 0's reward NaN or an exception where chosen."""
        step = self.steps_taken
        self.steps_taken += 1
        if step in self.raise_at:
            message = f"simulator diverged at global step {step}"
            raise RuntimeError(message)
        result = self.env.step(action)
        if step not in self.nan_at:
            return result
        poison = torch.ones_like(result.reward)
        poison[0] = torch.nan
        return StepResult(
            result.obs,
            result.reward * poison,
            result.terminated,
            result.truncated,
            {},
            final_obs=result.final_obs,
            valid=result.valid,
        )


def point_mass(num_envs: int = 4, seed: int = 0, max_episode_steps: int = 6) -> Any:
    """The built-in PointMass with short episodes."""
    return make(
        "typedrl/PointMass-v0",
        num_envs=num_envs,
        seed=seed,
        env_kwargs={"max_episode_steps": max_episode_steps},
    )


def cpu_fabric() -> Fabric:
    """A launched single-process CPU Fabric (the default one picks a GPU where there is one)."""
    fabric = Fabric(accelerator="cpu", devices=1)
    fabric.launch()
    return fabric


def trainer_for(
    env: Any,
    *,
    run_dir: Path | None = None,
    eval_env: Any = None,
    loggers: list[Logger] | None = None,
    options: dict[str, Any] | None = None,
    fabric: Fabric | None = None,
    algorithm: dict[str, Any] | None = None,
    **config: Any,
) -> DifferentiableTrainer:
    fields: dict[str, Any] = {**SMALL, **config}
    fields.setdefault("total_updates", 3)
    if algorithm is not None:
        fields["algorithm"] = APGConfig(**algorithm)
    return DifferentiableTrainer(
        env=env,
        config=DifferentiableTrainerConfig(**fields),
        eval_env=eval_env,
        fabric=fabric if fabric is not None else cpu_fabric(),
        options=RunOptions(
            run_dir=run_dir,
            loggers=loggers if loggers is not None else [],
            progress=False,
            **(options or {}),
        ),
    )


def model_state(trainer: DifferentiableTrainer) -> dict[str, Tensor]:
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


def assert_same(a: Any, b: Any, where: str = "state") -> None:
    """Deep, bit-exact equality of nested dicts, lists and tensors."""
    if isinstance(a, Tensor):
        assert isinstance(b, Tensor), where
        assert a.dtype == b.dtype, where
        assert torch.equal(a, b), f"{where} differs"
    elif isinstance(a, dict):
        assert isinstance(b, dict), where
        assert a.keys() == b.keys(), f"{where}: keys {sorted(a)} vs {sorted(b)}"
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple), where
        assert len(a) == len(b), where
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{index}]")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def full_state(trainer: DifferentiableTrainer) -> dict[str, Any]:
    """Model, optimizer, scheduler and counters, deep-copied."""
    algorithm = trainer.algorithm
    return {
        "model": model_state(trainer),
        "optimizer": copy.deepcopy(algorithm.optimizer.state_dict()),
        "scheduler": copy.deepcopy(algorithm.scheduler.state_dict()),
        "counters": algorithm.counters.state_dict(),
    }


def obs_normalizer(trainer: DifferentiableTrainer) -> RunningMeanStd:
    normalizers = getattr(trainer.model, "obs_normalizers", None)
    assert normalizers is not None
    normalizer = normalizers["obs"]
    assert isinstance(normalizer, RunningMeanStd)
    return normalizer


TRAIN_KEYS = {
    "loss/policy",
    "train/objective",
    "train/entropy",
    "train/grad_norm",
    "train/skipped_nonfinite",
    "train/skipped_large",
    "train/learning_rate",
    "train/applied_updates",
    "time/sps",
    "time/iteration_seconds",
    "time/env_steps",
    "time/iteration",
}
ADJOINT_KEYS = {
    "adjoint/rows",
    "adjoint/clipped_fraction",
    "adjoint/nonfinite_rows",
    "adjoint/norm_mean",
    "adjoint/norm_max",
}
EPISODE_KEYS = {"episode/return_mean", "episode/length_mean"}


# ---------------------------------------------------------------- training runs


def test_segmented_training_on_point_mass() -> None:
    """3 updates of 2 segments of 4 steps on 4 rows: counters, env steps, metrics per update."""
    logger = RecordingLogger()
    trainer = trainer_for(point_mass(), loggers=[logger], segment_length=4, update_horizon=8)
    trainer.setup()
    start = model_state(trainer)
    result = trainer.train()
    assert (result.iterations, result.env_steps) == (3, 3 * 8 * 4)
    assert trainer.algorithm.counters.state_dict() == {"applied": 3, "skipped": 0}
    assert len(logger.records) == 3
    for index, record in enumerate(logger.records):
        assert set(record) >= TRAIN_KEYS | ADJOINT_KEYS | EPISODE_KEYS, sorted(record)
        assert record["time/iteration"] == index + 1
        assert record["time/env_steps"] == (index + 1) * 32
        assert record["train/applied_updates"] == index + 1
        # Every action row of both segments passes the adjoint clipper.
        assert record["adjoint/rows"] == 8 * 4
        assert record["episode/length_mean"] == 6.0
    assert any(not torch.equal(start[k], v) for k, v in model_state(trainer).items())


def test_a_timestep_budget_plans_its_updates() -> None:
    """total_timesteps rounds up to whole updates; linear decay is bound to that plan."""
    trainer = trainer_for(
        point_mass(),
        total_updates=None,
        total_timesteps=100,
        segment_length=4,
        update_horizon=8,
        algorithm={"learning_rate_schedule": "linear", "learning_rate": 1e-2},
    )
    result = trainer.train()
    assert trainer.planned_updates == 4  # ceil(100 / 32)
    assert (result.iterations, result.env_steps) == (4, 128)
    assert trainer.algorithm.optimizer.param_groups[0]["lr"] == 0.0


def test_complete_training_on_point_mass() -> None:
    """2 updates of 2 complete rollouts of 5 steps: every rollout is counted and reset."""
    logger = RecordingLogger()
    trainer = trainer_for(
        point_mass(max_episode_steps=3),
        loggers=[logger],
        total_updates=2,
        rollout_mode="complete",
        update_horizon=5,
        gradient_accumulation_steps=2,
    )
    result = trainer.train()
    assert (result.iterations, result.env_steps) == (2, 2 * 2 * 5 * 4)
    assert trainer.algorithm.counters.state_dict() == {"applied": 2, "skipped": 0}
    assert trainer.progress_counters["rollouts"] == 4
    for record in logger.records:
        assert set(record) >= TRAIN_KEYS | ADJOINT_KEYS | EPISODE_KEYS
        assert not any(key.startswith("schedule/") for key in record)
        assert record["adjoint/rows"] == 2 * 5 * 4


def test_train_takes_a_budget_until_the_trainer_is_built() -> None:
    """train(total_updates=...) replaces the budget; once built the budget is fixed."""
    trainer = trainer_for(point_mass(), total_updates=5, segment_length=4)
    result = trainer.train(total_updates=2)
    assert result.iterations == 2
    assert trainer.config.total_updates == 2
    with pytest.raises(ConfigError, match="the budget is fixed once the trainer is built"):
        trainer.train(total_updates=3)
    with pytest.raises(ConfigError, match="exactly one budget"):
        trainer_for(point_mass()).train(total_updates=2, total_timesteps=10)


def test_a_given_policy_is_trained() -> None:
    """A DifferentiablePolicy module passed in is the one trained and checkpointed."""
    env = QuadraticEnv(num_envs=3, horizon=4)
    policy = LinearDifferentiablePolicy(obs_dim=1, act_dim=1)
    before = policy.linear.weight.detach().clone()
    trainer = trainer_for(env, segment_length=4, total_updates=2)
    trainer = DifferentiableTrainer(
        env=env,
        config=trainer.config,
        policy=policy,
        fabric=cpu_fabric(),
        options=RunOptions(progress=False, loggers=[]),
    )
    trainer.train()
    assert trainer.model is policy
    assert not torch.equal(policy.linear.weight.detach(), before)


def test_scheduled_env_in_complete_mode_logs_its_schedule() -> None:
    """The scheduled env sets each rollout's horizon; its metadata is averaged into schedule/*."""
    logger = RecordingLogger()
    trainer = trainer_for(
        ScheduledQuadraticEnv(num_envs=3, horizons=[3, 5]),
        loggers=[logger],
        total_updates=2,
        rollout_mode="complete",
        gradient_accumulation_steps=2,
        algorithm={"learning_rate_schedule": "cosine"},
    )
    result = trainer.train()
    assert result.env_steps == 2 * (3 + 5) * 3
    assert [record["schedule/horizon"] for record in logger.records] == [4.0, 4.0]
    assert [record["schedule/stage"] for record in logger.records] == [0.5, 2.5]
    assert trainer.progress_counters["rollouts"] == 4


def test_scheduled_env_with_a_timestep_budget() -> None:
    """A timestep budget trains a scheduled env at a constant rate and refuses a decaying one."""
    trainer = trainer_for(
        ScheduledQuadraticEnv(num_envs=2, horizons=[2, 4]),
        total_updates=None,
        total_timesteps=20,
        rollout_mode="complete",
    )
    assert trainer.planned_updates is None
    result = trainer.train()
    # Rollouts of 2, 4, 2, 4 steps on 2 rows: 4, 8, 4, 8 env steps, until 20 are spent.
    assert (result.iterations, result.env_steps) == (4, 24)
    for schedule in ("linear", "cosine"):
        with pytest.raises(
            ConfigError, match=rf"{schedule!r} learning-rate schedule cannot be planned"
        ):
            trainer_for(
                ScheduledQuadraticEnv(num_envs=2, horizons=[2, 4]),
                total_updates=None,
                total_timesteps=20,
                rollout_mode="complete",
                algorithm={"learning_rate_schedule": schedule},
            )


# ---------------------------------------------------------------- refusals


def test_a_non_differentiable_env_is_refused() -> None:
    """An env without a differentiable step and detach_state is a ConfigError naming it."""
    with pytest.raises(ConfigError, match=r"needs a DifferentiableVecEnv .* got CountingVecEnv"):
        trainer_for(CountingVecEnv(num_envs=2, truncate_after=3))


@pytest.mark.parametrize("precision", ["bf16-mixed", "bf16-true", "16-true"])
def test_reduced_precision_is_refused(precision: str) -> None:
    """Mixed and half precision are refused: the env is differentiated in its own dtype."""
    fabric = Fabric(accelerator="cpu", devices=1, precision=precision)  # type: ignore[arg-type]
    fabric.launch()
    with pytest.raises(ConfigError, match="32-true and 64-true precision only"):
        trainer_for(point_mass(), fabric=fabric)


def test_double_precision_trains_a_float64_policy() -> None:
    """Under 64-true precision the default policy's parameters are float64."""
    fabric = Fabric(accelerator="cpu", devices=1, precision="64-true")
    fabric.launch()
    trainer = trainer_for(QuadraticEnv(num_envs=2, horizon=4, dtype="float64"), fabric=fabric)
    trainer.train()
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float64}


def test_bad_policy_is_refused() -> None:
    """A policy module that is no DifferentiablePolicy is a ConfigError."""
    with pytest.raises(
        ConfigError, match=r"takes a torch\.nn\.Module implementing .*DifferentiablePolicy"
    ):
        DifferentiableTrainer(
            env=point_mass(),
            config=DifferentiableTrainerConfig(total_updates=1),
            policy=torch.nn.Linear(6, 2),
            fabric=cpu_fabric(),
        )


# ---------------------------------------------------------------- observation normalisation


def test_normalizer_updates_after_applied_updates_only() -> None:
    """Counts grow by the update's samples after each applied update, not after a skipped one."""
    counts: list[int] = []
    env = Faulty(point_mass(), nan_at=[8 + 5])  # inside the second update
    logger = RecordingLogger(on_log=lambda _: counts.append(int(obs_normalizer(trainer).count)))
    trainer = trainer_for(
        env, loggers=[logger], segment_length=4, update_horizon=8, normalize_observations=True
    )
    trainer.train()
    assert trainer.algorithm.counters.state_dict() == {"applied": 2, "skipped": 1}
    assert [record["train/skipped_nonfinite"] for record in logger.records] == [0.0, 1.0, 0.0]
    assert counts == [32, 32, 64]


def test_normalizer_is_frozen_during_an_update() -> None:
    """Every step of an update is normalised with the statistics of the update's start."""
    env = point_mass()
    trainer = trainer_for(env, segment_length=2, update_horizon=6, normalize_observations=True)
    trainer.setup()
    normalizer = obs_normalizer(trainer)
    seen: list[Tensor] = []
    normalize = normalizer.normalize

    def recording(value: Tensor) -> Tensor:
        seen.append(torch.cat((normalizer.mean.detach().clone(), normalizer.var.detach().clone())))
        return normalize(value)

    normalizer.normalize = recording  # type: ignore[method-assign,assignment]
    trainer.train()
    assert len(seen) == 3 * 6
    for update in range(3):
        within = seen[update * 6 : update * 6 + 6]
        assert all(torch.equal(s, within[0]) for s in within)
    assert not torch.equal(seen[0], seen[6])


def test_complete_mode_normalizes_from_alive_rows_only() -> None:
    """In complete mode the steps after a row's first done are left out of the statistics."""
    trainer = trainer_for(
        point_mass(max_episode_steps=3),
        total_updates=2,
        rollout_mode="complete",
        update_horizon=5,
        normalize_observations=True,
    )
    trainer.train()
    # 3 alive steps of the 5 on each of 4 rows, in each of 2 updates.
    assert int(obs_normalizer(trainer).count) == 2 * 3 * 4


def test_masked_features_are_never_normalized() -> None:
    """Pendulum's cos and sin pass through unnormalised; its angular velocity is normalised."""
    env = make("typedrl/Pendulum-v0", num_envs=4, seed=0)
    trainer = trainer_for(env, segment_length=8, normalize_observations=True)
    trainer.train()
    normalizer = obs_normalizer(trainer)
    assert int(normalizer.count) == 3 * 8 * 4
    obs, _ = make("typedrl/Pendulum-v0", num_envs=5, seed=3).reset(seed=3)
    features_of = getattr(trainer.model, "features")  # noqa: B009
    features: Tensor = features_of(obs)
    raw = obs["obs"]
    torch.testing.assert_close(features[:, :2], raw[:, :2], rtol=0, atol=0)
    torch.testing.assert_close(
        features[:, 2], normalizer.normalize(raw)[:, 2].to(features.dtype), rtol=1e-6, atol=1e-6
    )
    assert not torch.allclose(features[:, 2], raw[:, 2])


# ---------------------------------------------------------------- checkpoints


def test_checkpoint_files_and_load(tmp_path: Path) -> None:
    """last, best, periodic files; load restores policy, optimizer, scheduler and counters."""
    config: dict[str, Any] = {
        "segment_length": 4,
        "normalize_observations": True,
        "algorithm": {"learning_rate_schedule": "linear"},
    }
    trainer = trainer_for(
        point_mass(),
        run_dir=tmp_path,
        eval_env=point_mass(seed=9),
        options={"checkpoint_every_iterations": 2, "eval_episodes": 2},
        **config,
    )
    trainer.train()
    folder = tmp_path / "checkpoints"
    assert sorted(path.name for path in folder.iterdir()) == [
        "best.ckpt",
        "epoch_00000002.ckpt",
        "last.ckpt",
    ]
    checkpoint = load_checkpoint(folder / "last.ckpt", expected_kind="apg")
    assert checkpoint.counters == {"iteration": 3, "env_steps": 48}
    assert checkpoint.config == trainer.config.to_dict()
    assert checkpoint.modules["algorithm"] == {"applied": 3, "skipped": 0}
    assert checkpoint.modules["progress"] == {"rollouts": 0}
    assert "env" in checkpoint.modules["collector.rank0"]
    periodic = load_checkpoint(folder / "epoch_00000002.ckpt", expected_kind="apg")
    assert periodic.counters == {"iteration": 2, "env_steps": 32}

    fresh = trainer_for(point_mass(seed=5), **config)
    fresh.load(folder / "last.ckpt")
    assert (fresh.iteration, fresh.env_steps, fresh.best_score) == (3, 48, trainer.best_score)
    assert_same(full_state(fresh), full_state(trainer))
    assert fresh.collector._obs is not None
    assert trainer.collector._obs is not None
    assert torch.equal(fresh.collector._obs["obs"], trainer.collector._obs["obs"])


def test_load_refuses_a_checkpoint_of_another_config(tmp_path: Path) -> None:
    """A changed hyper-parameter is refused; the budget may change."""
    trainer_for(point_mass(), run_dir=tmp_path, total_updates=1, segment_length=4).train()
    checkpoint = tmp_path / "checkpoints" / "last.ckpt"
    other = trainer_for(point_mass(), total_updates=1, segment_length=8)
    with pytest.raises(CheckpointError, match=r"segment_length: saved 4, now 8"):
        other.load(checkpoint)
    longer = trainer_for(point_mass(), total_updates=2, segment_length=4)
    longer.load(checkpoint)
    assert longer.train().iterations == 2


RESUME: dict[str, Any] = {
    "segment_length": 4,
    "update_horizon": 8,
    "normalize_observations": True,
    "adjoint_max_norm": 5.0,
    "log_std_init": -0.5,
    "algorithm": {"entropy_coef": 0.01, "learning_rate": 3e-3},
}
RESUME_COMPLETE: dict[str, Any] = {
    "rollout_mode": "complete",
    "update_horizon": 5,
    "gradient_accumulation_steps": 2,
    "normalize_observations": True,
    "algorithm": {"optimizer": "adamw", "weight_decay": 0.01},
}


def _resume_in_fresh_process(checkpoint: str, fields: dict[str, Any], out: str) -> None:
    trainer = trainer_for(point_mass(seed=11), **fields)
    trainer.load(checkpoint)
    trainer.train()
    torch.save(full_state(trainer), out)


@pytest.mark.parametrize("fields", [RESUME, RESUME_COMPLETE], ids=["segmented", "complete"])
def test_resume_is_bit_exact_in_a_fresh_process(tmp_path: Path, fields: dict[str, Any]) -> None:
    """Train 2+2 updates vs. 2, save, load in a new process, train 2: identical state."""
    uninterrupted = trainer_for(point_mass(seed=11), total_updates=4, **fields)
    uninterrupted.train()
    half = trainer_for(point_mass(seed=11), run_dir=tmp_path, total_updates=2, **fields)
    half.train()
    expected = full_state(uninterrupted)
    assert any(not torch.equal(v, expected["model"][k]) for k, v in model_state(half).items())
    out = tmp_path / "resumed.pt"
    run_in_fresh_process(
        _resume_in_fresh_process,
        str(tmp_path / "checkpoints" / "last.ckpt"),
        {**fields, "total_updates": 4},
        str(out),
    )
    resumed = torch.load(out, weights_only=False)
    assert resumed["counters"] == {"applied": 4, "skipped": 0}
    assert_same(resumed, expected)


def test_resume_from_a_periodic_checkpoint_follows_the_schedule(tmp_path: Path) -> None:
    """A run resumed from epoch_2 of its own 4-update plan ends as the uninterrupted run."""
    fields: dict[str, Any] = {
        **RESUME,
        "total_updates": 4,
        "algorithm": {"learning_rate_schedule": "cosine", "min_learning_rate": 1e-4},
    }
    uninterrupted = trainer_for(
        point_mass(seed=11),
        run_dir=tmp_path,
        options={"checkpoint_every_iterations": 2},
        **fields,
    )
    uninterrupted.train()
    resumed = trainer_for(point_mass(seed=11), **fields)
    resumed.load(tmp_path / "checkpoints" / "epoch_00000002.ckpt")
    assert resumed.iteration == 2
    resumed.train()
    assert_same(full_state(resumed), full_state(uninterrupted))


def test_restart_schedule_on_load(tmp_path: Path) -> None:
    """restart_schedule=True starts the rate again from its initial value; moments are kept."""
    lr = 1e-2
    fields: dict[str, Any] = {
        "segment_length": 4,
        "algorithm": {"learning_rate_schedule": "linear", "learning_rate": lr},
    }
    finished = trainer_for(point_mass(), run_dir=tmp_path, total_updates=2, **fields)
    finished.train()
    assert finished.algorithm.optimizer.param_groups[0]["lr"] == 0.0
    checkpoint = tmp_path / "checkpoints" / "last.ckpt"
    saved_moments = copy.deepcopy(finished.algorithm.optimizer.state_dict()["state"])

    kept = trainer_for(point_mass(), total_updates=4, **fields)
    kept.load(checkpoint)
    # Without a restart the rate continues on the new plan's curve: 2 of 4 updates done.
    assert kept.algorithm.optimizer.param_groups[0]["lr"] == pytest.approx(lr * 0.5)

    logger = RecordingLogger()
    restarted = trainer_for(point_mass(), total_updates=4, loggers=[logger], **fields)
    restarted.load(checkpoint, restart_schedule=True)
    assert restarted.algorithm.optimizer.param_groups[0]["lr"] == lr
    assert restarted.algorithm.scheduler.last_epoch == 0
    assert_same(restarted.algorithm.optimizer.state_dict()["state"], saved_moments)
    restarted.train()
    # The curve of the new 4-update plan, from its start.
    assert [record["train/learning_rate"] for record in logger.records] == pytest.approx(
        [lr, lr * 0.75]
    )


def test_an_env_exception_mid_update_cancels_it(tmp_path: Path) -> None:
    """The env raising in update 2's second segment: EnvError with its step, nothing applied."""
    snapshots: list[dict[str, Any]] = []
    logger = RecordingLogger(on_log=lambda _: snapshots.append(full_state(trainer)))
    # Global step 13: update 2 (iteration 1), second segment, its step 1.
    env = Faulty(point_mass(), raise_at=[13])
    trainer = trainer_for(
        env,
        run_dir=tmp_path,
        loggers=[logger],
        options={"last_checkpoint_every_iterations": 1},
        segment_length=4,
        update_horizon=8,
        normalize_observations=True,
        algorithm={"learning_rate_schedule": "linear"},
    )
    with pytest.raises(
        EnvError, match=r"raised RuntimeError at step 1 of iteration 1: simulator diverged"
    ) as info:
        trainer.train()
    assert isinstance(info.value.__cause__, RuntimeError)
    assert len(snapshots) == 1
    assert isinstance(trainer.algorithm, DifferentiableAlgorithm)
    assert not trainer.algorithm.updating
    assert all(p.grad is None for p in trainer.model.parameters())
    assert_same(full_state(trainer), snapshots[0])
    assert int(obs_normalizer(trainer).count) == 32
    # Only the checkpoint of the finished update, whole and loadable.
    folder = tmp_path / "checkpoints"
    assert sorted(path.name for path in folder.iterdir()) == ["last.ckpt"]
    checkpoint = load_checkpoint(folder / "last.ckpt", expected_kind="apg")
    assert checkpoint.counters == {"iteration": 1, "env_steps": 32}
    assert checkpoint.modules["algorithm"] == {"applied": 1, "skipped": 0}
    assert_same(checkpoint.modules["policy"], snapshots[0]["model"])


def test_nonfinite_raise_stops_training_with_the_last_update_intact() -> None:
    """nonfinite='raise': a NaN reward in update 2 raises NonFiniteError; update 1 stands."""
    snapshots: list[dict[str, Any]] = []
    logger = RecordingLogger(on_log=lambda _: snapshots.append(full_state(trainer)))
    trainer = trainer_for(
        Faulty(point_mass(), nan_at=[10]),
        loggers=[logger],
        segment_length=4,
        update_horizon=8,
        normalize_observations=True,
        algorithm={"nonfinite": "raise"},
    )
    with pytest.raises(NonFiniteError, match=r"non-finite gradient norm \(nan\) at update 1"):
        trainer.train()
    assert trainer.iteration == 1
    assert isinstance(trainer.algorithm, DifferentiableAlgorithm)
    assert not trainer.algorithm.updating
    assert_same(full_state(trainer), snapshots[0])
    assert int(obs_normalizer(trainer).count) == 32


# ---------------------------------------------------------------- evaluation


def test_evaluation_with_an_eval_env_leaves_training_alone(tmp_path: Path) -> None:
    """eval/* metrics on schedule and at the end, best.ckpt, and the same weights as without."""
    logger = RecordingLogger()
    evaluated = trainer_for(
        point_mass(),
        run_dir=tmp_path,
        loggers=[logger],
        eval_env=point_mass(num_envs=2, seed=7),
        options={"eval_every_steps": 32, "eval_episodes": 3},
        total_updates=4,
        segment_length=4,
        normalize_observations=True,
    )
    result = evaluated.train()
    plain = trainer_for(
        point_mass(), total_updates=4, segment_length=4, normalize_observations=True
    )
    plain.train()
    assert_same(model_state(evaluated), model_state(plain))
    # Every 32 steps of 16 per update: after updates 2 and 4 (the last one is not repeated).
    scored = [record for record in logger.records if "eval/score" in record]
    assert [record["time/iteration"] for record in scored] == [2.0, 4.0]
    assert scored[0]["eval/episodes"] == 3.0
    assert result.best_score == max(record["eval/score"] for record in scored)
    assert (tmp_path / "checkpoints" / "best.ckpt").is_file()


# ---------------------------------------------------------------- CUDA


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("mode", ["segmented", "complete"])
def test_trains_on_cuda(mode: str) -> None:
    """A PointMass run on one GPU: policy, normaliser and metrics stay on the device, finite."""
    fabric = Fabric(accelerator="cuda", devices=1)
    fabric.launch()
    env = make(
        "typedrl/PointMass-v0",
        num_envs=8,
        seed=0,
        device=fabric.device,
        env_kwargs={"max_episode_steps": 6},
    )
    trainer = trainer_for(
        env,
        fabric=fabric,
        total_updates=2,
        rollout_mode=mode,
        segment_length=4,
        normalize_observations=True,
        adjoint_max_norm=5.0,
    )
    result = trainer.train()
    assert trainer.algorithm.counters.state_dict() == {"applied": 2, "skipped": 0}
    assert result.env_steps == 2 * 4 * 8
    assert {p.device.type for p in trainer.model.parameters()} == {"cuda"}
    assert int(obs_normalizer(trainer).count) > 0
    for key in ("loss/policy", "train/grad_norm", "adjoint/norm_mean"):
        assert math.isfinite(result.metrics[key]), key
