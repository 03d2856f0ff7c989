"""Tests for typedrl.training._trainer: the trainer core alone, on a tiny concrete trainer."""

import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, final

import pytest
import torch

from tests.loggers import RecordingLogger
from tests.multiprocess import run_two_ranks
from tests.training.test_fabric import launch_two_rank_fabric
from typedrl import EvaluationResult
from typedrl.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from typedrl.episodes import EpochEpisodes
from typedrl.errors import CheckpointError, ConfigError
from typedrl.evaluation import EpisodeEvaluator
from typedrl.protocols import Policy, VecEnv
from typedrl.seeding import derive_seed
from typedrl.testing import ConstantPolicy, CounterState, CountingVecEnv
from typedrl.training import (
    AbstractTrainer,
    Budget,
    IterationResult,
    RunOptions,
    TrainerState,
    _trainer,
)

ITERATION_METRICS = {"train/constant": 1.5, "loss/total": -2.0}


class _KindlessTrainer(AbstractTrainer):
    """Every member of a trainer but its kind: one env step per iteration, fixed metrics."""

    def __init__(
        self,
        *,
        budget: Budget,
        env: VecEnv | None = None,
        on_iteration: Callable[["_KindlessTrainer"], None] | None = None,
        extra_modules: Sequence[str] = (),
        rank_local: Sequence[str] = (),
        config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(env=env if env is not None else CountingVecEnv(num_envs=3), **kwargs)
        self._budget = budget
        self.on_iteration = on_iteration
        self.extra_modules = tuple(extra_modules)
        self.rank_local_names = tuple(rank_local)
        self.config = config if config is not None else {"name": "tiny", "width": 1}
        self.builds = 0
        self.prepares = 0

    @property
    def policy(self) -> Policy:
        return self._policy

    @property
    def budget(self) -> Budget:
        return self._budget

    def _build(self) -> None:
        self.builds += 1
        self._policy = ConstantPolicy(torch.zeros(1))
        self.counter = CounterState()
        self.extras = {name: CounterState() for name in self.extra_modules}
        self.locals = {name: CounterState() for name in self.rank_local_names}

    def _prepare(self) -> None:
        self.prepares += 1
        self._obs, _ = self.env.reset(seed=0)

    def _train_iteration(self) -> IterationResult:
        if self.on_iteration is not None:
            self.on_iteration(self)
        result = self.env.step(self._policy.act(self._obs)["action"])
        self._obs = result.obs
        self.counter.steps += 1
        return IterationResult(
            metrics=dict(ITERATION_METRICS),
            env_steps=self.env.num_envs * self.dist.world_size,
        )

    def _state(self) -> TrainerState:
        return TrainerState(
            modules={"policy": self._policy, "counter": self.counter, **self.extras},
            rank_local=self.locals,
        )

    def _config_dict(self) -> dict[str, Any]:
        return dict(self.config)


@final
class TinyTrainer(_KindlessTrainer):
    """The tiny trainer, writing checkpoints of kind "apg"."""

    kind = "apg"


@final
class ScriptedEvaluator:
    """An Evaluator returning one fixed result and recording the policies it scored."""

    def __init__(self, result: EvaluationResult) -> None:
        self.result = result
        self.policies: list[Policy] = []
        self.env_steps: list[int] = []
        self.trainer: AbstractTrainer | None = None

    def evaluate(self, policy: Policy) -> EvaluationResult:
        self.policies.append(policy)
        if self.trainer is not None:
            self.env_steps.append(self.trainer.env_steps)
        return self.result


def _options(**kwargs: Any) -> RunOptions:
    kwargs.setdefault("progress", False)
    kwargs.setdefault("loggers", [])
    return RunOptions(**kwargs)


def _result(
    returns: Sequence[float], *, success: Sequence[float] | None = None
) -> EvaluationResult:
    """The result an EpisodeEvaluator gives for these episode returns (lengths = returns)."""
    values = torch.tensor(returns, dtype=torch.float64)
    metrics = {
        "return_mean": float(values.mean()),
        "return_std": float(values.std(unbiased=False)),
        "return_min": float(values.min()),
        "return_max": float(values.max()),
        "length_mean": float(values.mean()),
    }
    if success is not None:
        metrics["success_rate"] = float(torch.tensor(success, dtype=torch.float64).mean())
    return EvaluationResult(metrics=metrics, score=metrics["return_mean"], num_items=len(returns))


def _last(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / "last.ckpt"


# ---------------------------------------------------------------- counters and budgets


def test_counters_advance_from_iteration_results() -> None:
    """iteration and env_steps grow by one and by IterationResult.env_steps per iteration."""
    logger = RecordingLogger()
    trainer = TinyTrainer(budget=Budget(iterations=4), options=_options(loggers=[logger]))
    result = trainer.fit()
    assert (result.iterations, result.env_steps) == (4, 12)
    assert (trainer.iteration, trainer.env_steps) == (4, 12)
    assert trainer.counter.steps == 4
    assert [record["time/iteration"] for record in logger.records] == [1.0, 2.0, 3.0, 4.0]
    assert [record["time/env_steps"] for record in logger.records] == [3.0, 6.0, 9.0, 12.0]
    for record in logger.records:
        assert record.items() >= ITERATION_METRICS.items()
        assert record["time/iteration_seconds"] >= 0.0
    assert result.metrics.items() >= ITERATION_METRICS.items()
    assert result.best_score is None
    assert not result.stopped_by_signal
    assert result.run_dir is None
    assert (trainer.builds, trainer.prepares) == (1, 1)


@pytest.mark.parametrize(("timesteps", "iterations"), [(12, 4), (10, 4), (13, 5), (1, 1), (3, 1)])
def test_timestep_budget_stops_once_spent(timesteps: int, iterations: int) -> None:
    """Budget(timesteps=n) stops at the first iteration reaching n env steps (3 per iteration)."""
    trainer = TinyTrainer(budget=Budget(timesteps=timesteps), options=_options())
    result = trainer.fit()
    assert (result.iterations, result.env_steps) == (iterations, 3 * iterations)


@pytest.mark.parametrize("iterations", [1, 2, 7])
def test_iteration_budget_stops_exactly(iterations: int) -> None:
    """Budget(iterations=n) runs exactly n iterations whatever the env steps."""
    trainer = TinyTrainer(
        budget=Budget(iterations=iterations),
        env=CountingVecEnv(num_envs=5),
        options=_options(),
    )
    result = trainer.fit()
    assert (result.iterations, result.env_steps) == (iterations, 5 * iterations)


def test_a_second_fit_trains_nothing_once_the_budget_is_spent() -> None:
    """fit again after the budget is spent runs no iteration and builds nothing twice."""
    trainer = TinyTrainer(budget=Budget(iterations=2), options=_options())
    trainer.fit()
    again = trainer.fit()
    assert (again.iterations, again.env_steps) == (2, 6)
    assert trainer.counter.steps == 2
    assert (trainer.builds, trainer.prepares) == (1, 2)


# ---------------------------------------------------------------- construction


def test_a_concrete_trainer_without_kind_raises_type_error() -> None:
    """A trainer class that sets no kind cannot be constructed."""
    with pytest.raises(TypeError, match=r"_KindlessTrainer\.kind must be an identifier-like str"):
        _KindlessTrainer(budget=Budget(iterations=1))


def test_a_trainer_of_a_malformed_kind_raises_type_error() -> None:
    """A kind that is not identifier-like is refused at construction, naming it."""

    @final
    class SacTrainer(_KindlessTrainer):
        kind = "soft actor-critic"

    with pytest.raises(TypeError, match=r"SacTrainer\.kind must be .*got 'soft actor-critic'"):
        SacTrainer(budget=Budget(iterations=1))


def test_eval_env_and_evaluator_together_raise_config_error() -> None:
    """Passing both an eval env and an evaluator is ambiguous and refused."""
    evaluator = ScriptedEvaluator(_result([1.0]))
    with pytest.raises(ConfigError, match=r"eval_env \(.*\) or evaluator, not both"):
        TinyTrainer(
            budget=Budget(iterations=1),
            eval_env=CountingVecEnv(num_envs=2, truncate_after=2),
            evaluator=evaluator,
        )


@pytest.mark.usefixtures("without_runtime_checks")
def test_construction_refuses_bad_arguments() -> None:
    """A user's object that is no VecEnv or no Evaluator raises ConfigError (production path)."""
    with pytest.raises(ConfigError, match="env must be a typedrl VecEnv, got int"):
        TinyTrainer(budget=Budget(iterations=1), env=3)  # type: ignore[arg-type]
    with pytest.raises(
        ConfigError, match=r"evaluator must implement typedrl\.protocols\.Evaluator"
    ):
        TinyTrainer(budget=Budget(iterations=1), evaluator=object())


def test_the_default_evaluator_scores_the_eval_env_with_the_derived_seed() -> None:
    """eval_env alone gives an EpisodeEvaluator with eval_episodes episodes, seeded by stream."""
    eval_env = CountingVecEnv(num_envs=2, truncate_after=3)
    trainer = TinyTrainer(
        budget=Budget(iterations=1), eval_env=eval_env, seed=5, options=_options(eval_episodes=4)
    )
    assert isinstance(trainer.evaluator, EpisodeEvaluator)
    assert trainer.evaluator.env is eval_env
    assert trainer.evaluator.num_episodes == 4
    assert trainer.evaluator.seed == derive_seed(5, "eval_env", rank=0)
    metrics = trainer.evaluate()
    # Every episode is truncated at t = 3: return 1 + 2 + 3.
    assert metrics["eval/return_mean"] == metrics["eval/score"] == 6.0
    assert metrics["eval/episodes"] == 4.0


def test_without_an_evaluator_nothing_is_evaluated() -> None:
    """No eval env and no evaluator: no eval/* metric, no best score."""
    logger = RecordingLogger()
    trainer = TinyTrainer(
        budget=Budget(iterations=2), options=_options(loggers=[logger], eval_every_steps=1)
    )
    result = trainer.fit()
    assert trainer.evaluator is None
    assert trainer.evaluate() == {}
    assert not [key for record in logger.records for key in record if key.startswith("eval/")]
    assert result.best_score is None


# ---------------------------------------------------------------- evaluation


def test_an_injected_evaluator_is_used_and_its_metrics_are_logged() -> None:
    """A custom Evaluator scores the trainer's policy; eval/*, eval/score, eval/episodes logged."""
    evaluator = ScriptedEvaluator(
        EvaluationResult(metrics={"return_mean": 5.0, "custom": 2.5}, score=4.0, num_items=7)
    )
    logger = RecordingLogger()
    trainer = TinyTrainer(
        budget=Budget(iterations=2), evaluator=evaluator, options=_options(loggers=[logger])
    )
    assert trainer.evaluator is evaluator
    result = trainer.fit()
    assert len(evaluator.policies) == 1  # the final policy only (no schedule)
    assert evaluator.policies[0] is trainer.policy
    expected = {
        "eval/return_mean": 5.0,
        "eval/custom": 2.5,
        "eval/score": 4.0,
        "eval/episodes": 7.0,
    }
    assert logger.records[-1].items() >= expected.items()
    assert result.metrics.items() >= expected.items()
    assert result.best_score == 4.0


class _SequenceEvaluator:
    """An Evaluator whose n-th evaluation reports ``values[n]`` as ``eval/cost``."""

    def __init__(self, values: Sequence[float]) -> None:
        self.values = list(values)
        self.calls = 0

    def evaluate(self, policy: Policy) -> EvaluationResult:
        del policy
        value = self.values[self.calls]
        self.calls += 1
        return EvaluationResult(metrics={"cost": value}, score=-value, num_items=1)


def test_best_checkpoint_follows_a_configured_metric_to_minimise(tmp_path: Path) -> None:
    """best_metric="eval/cost", best_mode="min": best.ckpt tracks the smallest cost."""
    evaluator = _SequenceEvaluator([3.0, 1.0, 2.0, 1.0])
    options = _options(
        run_dir=tmp_path, eval_every_steps=3, best_metric="eval/cost", best_mode="min"
    )
    trainer = TinyTrainer(budget=Budget(iterations=4), evaluator=evaluator, options=options)
    result = trainer.fit()
    assert evaluator.calls == 4
    assert result.best_score == 1.0
    best = load_checkpoint(tmp_path / "checkpoints" / "best.ckpt")
    assert best.best_score == 1.0
    # Written at the second evaluation (cost 1.0); the equal fourth is not strictly better.
    assert best.counters["iteration"] == 2


def test_an_unknown_best_metric_is_named() -> None:
    """A best_metric the evaluation does not report raises ConfigError listing what it has."""
    trainer = TinyTrainer(
        budget=Budget(iterations=1),
        evaluator=_SequenceEvaluator([1.0]),
        options=_options(best_metric="eval/missing"),
    )
    with pytest.raises(ConfigError, match=r"'eval/missing'.*eval/cost"):
        trainer.fit()


def test_evaluation_runs_on_the_env_step_schedule() -> None:
    """eval_every_steps=5 with 3 steps per iteration evaluates at 6, 12 and 15 steps, no more."""
    evaluator = ScriptedEvaluator(_result([1.0, 2.0]))
    logger = RecordingLogger()
    trainer = TinyTrainer(
        budget=Budget(iterations=5),
        evaluator=evaluator,
        options=_options(loggers=[logger], eval_every_steps=5),
    )
    evaluator.trainer = trainer
    trainer.fit()
    # 6 >= 5 (next 10), 12 >= 10 (next 15), 15 >= 15 (next 20); the final policy was
    # evaluated at 15, so fit does not evaluate it again.
    assert evaluator.env_steps == [6, 12, 15]
    assert [("eval/score" in record) for record in logger.records] == [
        False,
        True,
        False,
        True,
        True,
    ]


def test_the_final_policy_is_evaluated_when_the_schedule_missed_it() -> None:
    """When the last iteration did not evaluate, fit evaluates the final policy once."""
    evaluator = ScriptedEvaluator(_result([1.0]))
    logger = RecordingLogger()
    trainer = TinyTrainer(
        budget=Budget(iterations=3),
        evaluator=evaluator,
        options=_options(loggers=[logger], eval_every_steps=6),
    )
    evaluator.trainer = trainer
    trainer.fit()
    assert evaluator.env_steps == [6, 9]
    assert len(logger.records) == 4  # three iterations and the final evaluation
    assert logger.records[-1]["time/env_steps"] == 9.0


# ---------------------------------------------------------------- loggers


def _raise_at(iteration: int) -> Callable[[_KindlessTrainer], None]:
    def hook(trainer: _KindlessTrainer) -> None:
        if trainer.iteration == iteration:
            raise RuntimeError(f"boom at iteration {iteration}")

    return hook


def test_an_exception_inside_an_iteration_finalizes_every_logger_as_failed() -> None:
    """Regression: a failing iteration propagates and every logger is finalised "failed"."""
    loggers = [RecordingLogger(), RecordingLogger()]
    trainer = TinyTrainer(
        budget=Budget(iterations=5),
        on_iteration=_raise_at(2),
        options=_options(loggers=loggers),
    )
    with pytest.raises(RuntimeError, match="boom at iteration 2"):
        trainer.fit()
    for logger in loggers:
        assert logger.finalized == ["failed"]
        assert len(logger.records) == 2


def test_a_keyboard_interrupt_inside_an_iteration_finalizes_loggers_as_failed() -> None:
    """A BaseException (a second Ctrl-C) also leaves every logger finalised "failed"."""
    logger = RecordingLogger()

    def interrupt(trainer: _KindlessTrainer) -> None:
        del trainer
        raise KeyboardInterrupt

    trainer = TinyTrainer(
        budget=Budget(iterations=2), on_iteration=interrupt, options=_options(loggers=[logger])
    )
    with pytest.raises(KeyboardInterrupt):
        trainer.fit()
    assert logger.finalized == ["failed"]


def test_a_normal_run_finalizes_every_logger_as_success() -> None:
    """A run that spends its budget finalises every logger once, with "success"."""
    loggers = [RecordingLogger(), RecordingLogger()]
    trainer = TinyTrainer(budget=Budget(iterations=2), options=_options(loggers=loggers))
    trainer.fit()
    for logger in loggers:
        assert logger.finalized == ["success"]


# ---------------------------------------------------------------- rolling last.ckpt


def _checkpoint_files(run_dir: Path) -> list[str]:
    folder = run_dir / "checkpoints"
    return sorted(path.name for path in folder.iterdir()) if folder.exists() else []


def _counters_seen(
    seen: dict[int, dict[str, int | float] | None], run_dir: Path
) -> Callable[[_KindlessTrainer], None]:
    """An iteration hook recording last.ckpt's counters (None: no file) before each iteration."""

    def hook(trainer: _KindlessTrainer) -> None:
        path = _last(run_dir)
        seen[trainer.iteration] = load_checkpoint(path).counters if path.exists() else None
        assert _checkpoint_files(run_dir) in ([], ["last.ckpt"])  # no temporary file left

    return hook


def test_last_checkpoint_is_refreshed_every_n_iterations_while_training(tmp_path: Path) -> None:
    """With every 3 iterations (no clock), last.ckpt holds iteration 3 from the 4th iteration on."""
    seen: dict[int, dict[str, int | float] | None] = {}
    trainer = TinyTrainer(
        budget=Budget(iterations=7),
        on_iteration=_counters_seen(seen, tmp_path),
        options=_options(
            run_dir=tmp_path,
            last_checkpoint_every_iterations=3,
            last_checkpoint_every_seconds=None,
        ),
    )
    trainer.fit()
    at_three = {"iteration": 3, "env_steps": 9}
    at_six = {"iteration": 6, "env_steps": 18}
    assert seen == {0: None, 1: None, 2: None, 3: at_three, 4: at_three, 5: at_three, 6: at_six}
    final = load_checkpoint(_last(tmp_path), expected_kind="apg")
    assert final.counters == {"iteration": 7, "env_steps": 21}
    assert final.modules["counter"] == {"steps": 7}
    assert final.config == {"name": "tiny", "width": 1}
    assert _checkpoint_files(tmp_path) == ["last.ckpt"]


@final
class _Clock:
    """A fake monotonic clock that only moves when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_last_checkpoint_is_refreshed_by_wall_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With every 10 s (no count) and 4 s per iteration, saves follow iterations 3 and 6."""
    clock = _Clock()
    fake_time = SimpleNamespace(monotonic=clock.monotonic, perf_counter=time.perf_counter)
    monkeypatch.setattr(_trainer, "time", fake_time)
    seen: dict[int, dict[str, int | float] | None] = {}
    record = _counters_seen(seen, tmp_path)

    def tick(trainer: _KindlessTrainer) -> None:
        record(trainer)
        clock.now += 4.0

    trainer = TinyTrainer(
        budget=Budget(iterations=7),
        on_iteration=tick,
        options=_options(
            run_dir=tmp_path,
            last_checkpoint_every_iterations=None,
            last_checkpoint_every_seconds=10.0,
        ),
    )
    trainer.fit()
    # Clock after iteration k: 4k s since the start; saved at 12 s (k=3), then 24 s (k=6).
    at_three = {"iteration": 3, "env_steps": 9}
    assert seen == {
        0: None,
        1: None,
        2: None,
        3: at_three,
        4: at_three,
        5: at_three,
        6: {"iteration": 6, "env_steps": 18},
    }


def test_the_earlier_of_count_and_time_triggers_a_save(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every 4 iterations or 10 s: saved at k=4 (count and time), then at k=6 (time only)."""
    clock = _Clock()
    fake_time = SimpleNamespace(monotonic=clock.monotonic, perf_counter=time.perf_counter)
    monkeypatch.setattr(_trainer, "time", fake_time)
    seen: dict[int, dict[str, int | float] | None] = {}
    record = _counters_seen(seen, tmp_path)

    def tick(trainer: _KindlessTrainer) -> None:
        record(trainer)
        clock.now += 3.0 if trainer.iteration < 4 else 5.0

    trainer = TinyTrainer(
        budget=Budget(iterations=7),
        on_iteration=tick,
        options=_options(
            run_dir=tmp_path, last_checkpoint_every_iterations=4, last_checkpoint_every_seconds=10.0
        ),
    )
    trainer.fit()
    # k=1..4 at 3 s each: 12 s > 10 s only at k=4, where the count also triggers.
    # From k=5 on 5 s each: 10 s after the save at k=6 (time), before the count (k=8).
    iterations = {key: None if value is None else value["iteration"] for key, value in seen.items()}
    assert iterations == {0: None, 1: None, 2: None, 3: None, 4: 4, 5: 4, 6: 6}


def test_no_rolling_save_without_count_or_time(tmp_path: Path) -> None:
    """Both cadences None: last.ckpt is written once, at the end of fit."""
    seen: dict[int, dict[str, int | float] | None] = {}
    trainer = TinyTrainer(
        budget=Budget(iterations=4),
        on_iteration=_counters_seen(seen, tmp_path),
        options=_options(
            run_dir=tmp_path,
            last_checkpoint_every_iterations=None,
            last_checkpoint_every_seconds=None,
        ),
    )
    trainer.fit()
    assert seen == {0: None, 1: None, 2: None, 3: None}
    assert load_checkpoint(_last(tmp_path)).counters == {"iteration": 4, "env_steps": 12}


def test_a_failure_after_a_rolling_save_leaves_a_loadable_last_checkpoint(tmp_path: Path) -> None:
    """A raise after the save at 2 leaves last.ckpt at 2, and a new trainer resumes it."""
    trainer = TinyTrainer(
        budget=Budget(iterations=5),
        on_iteration=_raise_at(3),
        options=_options(
            run_dir=tmp_path,
            last_checkpoint_every_iterations=2,
            last_checkpoint_every_seconds=None,
        ),
    )
    with pytest.raises(RuntimeError, match="boom at iteration 3"):
        trainer.fit()
    assert (trainer.iteration, trainer.env_steps) == (3, 9)
    assert _checkpoint_files(tmp_path) == ["last.ckpt"]
    checkpoint = load_checkpoint(_last(tmp_path), expected_kind="apg")
    assert checkpoint.counters == {"iteration": 2, "env_steps": 6}
    assert checkpoint.modules["counter"] == {"steps": 2}

    resumed = TinyTrainer(budget=Budget(iterations=5), options=_options(run_dir=tmp_path))
    resumed.load(_last(tmp_path))
    assert (resumed.iteration, resumed.env_steps, resumed.counter.steps) == (2, 6, 2)
    result = resumed.fit()
    assert (result.iterations, result.env_steps, resumed.counter.steps) == (5, 15, 5)


# ---------------------------------------------------------------- resume


def _saved_run(run_dir: Path, **kwargs: Any) -> Path:
    TinyTrainer(budget=Budget(iterations=2), options=_options(run_dir=run_dir), **kwargs).fit()
    return _last(run_dir)


def test_resume_with_a_module_missing_from_the_checkpoint_raises_naming_it(
    tmp_path: Path,
) -> None:
    """A TrainerState name the checkpoint lacks raises CheckpointError naming it and the file."""
    path = _saved_run(tmp_path)
    trainer = TinyTrainer(budget=Budget(iterations=4), extra_modules=("critic",))
    with pytest.raises(CheckpointError, match=r"no modules state for \['critic'\]") as error:
        trainer.load(path)
    assert str(path) in str(error.value)
    assert trainer.iteration == 0


def test_resume_with_rank_local_state_missing_from_the_checkpoint_raises(tmp_path: Path) -> None:
    """A rank-local name the checkpoint lacks raises CheckpointError naming it."""
    path = _saved_run(tmp_path)
    trainer = TinyTrainer(budget=Budget(iterations=4), rank_local=("sampler",))
    with pytest.raises(CheckpointError, match=r"no rank_local state for \['sampler'\]"):
        trainer.load(path)


def test_rank_local_state_is_saved_per_rank_and_restored(tmp_path: Path) -> None:
    """rank_local objects are saved as <name>.rank0 and loaded back into the same name."""
    trainer = TinyTrainer(
        budget=Budget(iterations=1), rank_local=("sampler",), options=_options(run_dir=tmp_path)
    )
    trainer.setup()
    trainer.locals["sampler"].steps = 41
    trainer.fit()
    checkpoint = load_checkpoint(_last(tmp_path))
    assert checkpoint.modules["sampler.rank0"] == {"steps": 41}
    assert "sampler" not in checkpoint.modules
    resumed = TinyTrainer(budget=Budget(iterations=2), rank_local=("sampler",))
    resumed.load(_last(tmp_path))
    assert resumed.locals["sampler"].steps == 41


def test_resume_refuses_another_config_unless_asked(tmp_path: Path) -> None:
    """A changed config field raises CheckpointError naming it; strict_config=False resumes."""
    path = _saved_run(tmp_path)
    trainer = TinyTrainer(budget=Budget(iterations=4), config={"name": "tiny", "width": 2})
    with pytest.raises(CheckpointError, match="width: saved 1, now 2"):
        trainer.load(path)
    assert trainer.iteration == 0
    trainer.load(path, strict_config=False)
    assert (trainer.iteration, trainer.env_steps) == (2, 6)


def test_resume_restores_counters_best_score_and_the_evaluation_schedule(tmp_path: Path) -> None:
    """After a resume at 6 env steps with eval every 4, the next evaluation is at 8 steps."""
    evaluator = ScriptedEvaluator(_result([2.0]))
    _saved_run(tmp_path, evaluator=evaluator)
    second = ScriptedEvaluator(_result([1.0]))
    trainer = TinyTrainer(
        budget=Budget(iterations=4), evaluator=second, options=_options(eval_every_steps=4)
    )
    second.trainer = trainer
    trainer.load(_last(tmp_path))
    assert (trainer.iteration, trainer.env_steps, trainer.best_score) == (2, 6, 2.0)
    result = trainer.fit()
    assert second.env_steps == [9, 12]
    assert result.best_score == 2.0  # 1.0 is not better than the restored 2.0


def test_a_checkpoint_of_another_kind_is_refused(tmp_path: Path) -> None:
    """A checkpoint of kind "ppo" cannot resume an "apg" trainer."""
    path = tmp_path / "ppo.ckpt"
    _saved_run(tmp_path)
    saved = load_checkpoint(_last(tmp_path))

    save_checkpoint(
        path,
        Checkpoint(
            kind="ppo",
            modules=saved.modules,
            counters=saved.counters,
            config=saved.config,
            rng=saved.rng,
            metadata=saved.metadata,
        ),
    )
    with pytest.raises(CheckpointError, match="ppo"):
        TinyTrainer(budget=Budget(iterations=4)).load(path)


# ---------------------------------------------------------------- distributed

_RANK_RETURNS: tuple[list[float], list[float]] = ([0.0, 2.0], [3.0, 5.0, 4.0, 4.0, 6.0, 2.0])
_RANK_SUCCESS: tuple[list[float], list[float]] = ([1.0, 1.0], [1.0, 0.0, 0.0, 1.0, 0.0, 0.0])


def _ddp_evaluation_worker(rank: int, port: int, out_dir: str) -> None:
    fabric = launch_two_rank_fabric(rank, port)
    outcome: dict[str, Any]
    try:
        logger = RecordingLogger()
        evaluator = ScriptedEvaluator(_result(_RANK_RETURNS[rank], success=_RANK_SUCCESS[rank]))
        trainer = TinyTrainer(
            budget=Budget(iterations=2),
            env=CountingVecEnv(num_envs=2),
            fabric=fabric,
            evaluator=evaluator,
            options=_options(loggers=[logger], eval_every_steps=4),
        )
        result = trainer.fit()
        outcome = {
            "metrics": result.metrics,
            "records": logger.records,
            "best_score": result.best_score,
            "env_steps": result.env_steps,
            "evaluations": len(evaluator.policies),
        }
    except Exception as error:
        outcome = {"error": f"{type(error).__name__}: {error}"}
    torch.save(outcome, Path(out_dir) / f"rank{rank}.pt")


def _eval_metrics(metrics: dict[str, float]) -> dict[str, float]:
    return {key: value for key, value in metrics.items() if key.startswith("eval/")}


def _outcomes(out_dir: Path) -> Iterator[dict[str, Any]]:
    for rank in (0, 1):
        yield torch.load(out_dir / f"rank{rank}.pt", weights_only=False)


@pytest.mark.distributed
def test_ddp_evaluation_metrics_are_pooled_over_ranks(tmp_path: Path) -> None:
    """Two gloo ranks with different evaluations log one pooled eval/* set, identical on both."""
    run_two_ranks(_ddp_evaluation_worker, str(tmp_path))
    first, second = _outcomes(tmp_path)
    assert "error" not in first, first.get("error")
    assert "error" not in second, second.get("error")
    episodes = [*_RANK_RETURNS[0], *_RANK_RETURNS[1]]
    successes = [*_RANK_SUCCESS[0], *_RANK_SUCCESS[1]]
    # By hand: 8 episodes, returns sum 26; min 0 (rank 0), max 6 (rank 1).
    expected = {
        "eval/return_mean": 26.0 / 8.0,
        "eval/return_std": statistics.pstdev(episodes),
        "eval/return_min": 0.0,
        "eval/return_max": 6.0,
        "eval/length_mean": 26.0 / 8.0,
        "eval/success_rate": sum(successes) / 8.0,
        "eval/score": 26.0 / 8.0,
        "eval/episodes": 8.0,
    }
    assert expected["eval/return_std"] == pytest.approx(math.sqrt(25.5 / 8.0))
    assert expected["eval/success_rate"] == 0.5
    for outcome in (first, second):
        assert _eval_metrics(outcome["metrics"]) == pytest.approx(expected, rel=1e-12)
        assert outcome["best_score"] == pytest.approx(26.0 / 8.0)
        # 2 env rows per rank and iteration: 4 and 8 steps, both evaluated, nothing more.
        assert outcome["env_steps"] == 8
        assert outcome["evaluations"] == 2
    assert _eval_metrics(first["metrics"]) == _eval_metrics(second["metrics"])
    # Rank 0 writes the loggers: both evaluations are logged with the pooled values.
    logged = [record for record in first["records"] if "eval/score" in record]
    assert len(logged) == 2
    for record in logged:
        assert {key: record[key] for key in expected} == pytest.approx(expected, rel=1e-12)
    assert second["records"] == []


def test_setup_seeds_the_init_stream_before_build() -> None:
    """setup() seeds torch from the run seed's init stream of the rank before _build."""
    trainer = TinyTrainer(budget=Budget(iterations=1), seed=7)
    trainer.setup()
    drawn = torch.rand(3)
    torch.manual_seed(derive_seed(7, "init", rank=0))
    torch.testing.assert_close(drawn, torch.rand(3))


def test_recorded_episodes_are_logged_as_their_means() -> None:
    """Only the ended rows count; the means clear the record, and without episodes none."""
    trainer = TinyTrainer(budget=Budget(iterations=1))
    trainer._record_episodes(
        EpochEpisodes(
            returns=torch.tensor([[1.0, 100.0, 3.0]]),
            lengths=torch.tensor([[4, 100, 6]]),
            ended=torch.tensor([[True, False, True]]),
            return_so_far=torch.zeros(3),
            length_so_far=torch.zeros(3, dtype=torch.int64),
        )
    )
    assert trainer._episode_means() == {"episode/return_mean": 2.0, "episode/length_mean": 5.0}
    assert trainer._episode_means() == {}
