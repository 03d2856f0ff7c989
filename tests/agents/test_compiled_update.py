"""Tests for typedrl.agents._compiled_update: when compile_update="auto" compiles."""

import dataclasses
import json
import os
import platform
import re
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch._inductor.config
from lightning_fabric import Fabric
from tensordict import TensorDict
from torch._inductor import cpu_vec_isa

from typedrl.agents import AUTO_COMPILE_MIN_UPDATES, PPOAgent, PPOConfig
from typedrl.agents import _compiled_update as compiled_update_module
from typedrl.agents import _ppo as ppo_module
from typedrl.agents._compiled_update import (
    AUTO_BACKGROUND_MIN_UPDATES,
    AUTO_COMPILE_MIN_UPDATES_WARM,
    PRECOMPILED_LOAD_SECONDS,
    CompiledUpdate,
    CompileRecord,
    UpdateTiming,
    decide_compile,
    find_cpp_compiler,
    precompile_supported,
    runtime_checks_active,
    trust_checked_vector_isa,
    vector_isa_machine,
)
from typedrl.agents._loss import EpochData
from typedrl.envs import make
from typedrl.errors import ConfigError
from typedrl.policies import MLPActorCritic
from typedrl.training import RunOptions

SMALL: dict[str, Any] = {"actor_hidden": (8,), "critic_hidden": (8,)}
GOOD: dict[str, Any] = {
    "world_size": 1,
    "plain_precision": True,
    "planned_updates": AUTO_COMPILE_MIN_UPDATES,
    "compiler": "/usr/bin/g++",
    "runtime_checks": False,
}


@pytest.fixture(autouse=True)
def _own_compile_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test records its compilations in a cache folder of its own."""
    folder = tmp_path / "inductor"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(folder))
    return folder


def test_auto_compiles_when_every_condition_holds() -> None:
    """A single process, plain precision, a compiler and a large plan compile."""
    decision = decide_compile("auto", **GOOD)
    assert decision.enabled
    assert decision.reason.startswith(f"compiled: {AUTO_COMPILE_MIN_UPDATES} planned")


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"world_size": 2}, "2 ranks (compiled updates are single-process)"),
        ({"plain_precision": False}, "a precision other than 32-true or 64-true"),
        ({"compiler": None}, "no C++ compiler found"),
        ({"runtime_checks": True}, "runtime shape checking is on"),
        (
            {"planned_updates": AUTO_COMPILE_MIN_UPDATES - 1},
            f"{AUTO_COMPILE_MIN_UPDATES - 1} planned minibatch updates do not amortise",
        ),
    ],
)
def test_auto_runs_eagerly_when_a_condition_fails(change: dict[str, Any], reason: str) -> None:
    """Each failing condition alone makes "auto" eager, and the reason says which."""
    decision = decide_compile("auto", **{**GOOD, **change})
    assert not decision.enabled
    assert decision.reason.startswith("eager: ")
    assert reason in decision.reason


def test_auto_lists_every_failing_condition() -> None:
    """Several failing conditions are all named."""
    decision = decide_compile(
        "auto", **{**GOOD, "world_size": 4, "compiler": None, "planned_updates": 10}
    )
    assert not decision.enabled
    assert decision.reason.count(";") == 2


@pytest.mark.parametrize("setting", [True, False])
def test_explicit_settings_are_taken_as_they_are(setting: bool) -> None:
    """True and False ignore the conditions (True is checked, and raises, elsewhere)."""
    bad = {**GOOD, "world_size": 2, "compiler": None, "planned_updates": 1}
    assert decide_compile(setting, **bad).enabled is setting
    assert decide_compile(setting, **GOOD).enabled is setting


def test_min_updates_sets_the_break_even() -> None:
    """The threshold is inclusive and can be given."""
    assert decide_compile("auto", **{**GOOD, "planned_updates": 100}, min_updates=100).enabled
    assert not decide_compile("auto", **{**GOOD, "planned_updates": 99}, min_updates=100).enabled


def test_find_cpp_compiler_follows_inductors_search() -> None:
    """The first existing name wins; None entries are skipped; inductor's list by default."""
    assert find_cpp_compiler((None, "no-such-compiler-x")) is None
    assert find_cpp_compiler((None, "no-such-compiler-x", sys.executable)) == sys.executable
    assert find_cpp_compiler(sys.executable) == sys.executable
    assert find_cpp_compiler() == find_cpp_compiler(torch._inductor.config.cpp.cxx)


def test_runtime_checks_are_seen_in_the_test_suite() -> None:
    """The suite's jaxtyping hook is detected (the compiler cannot trace its wrappers)."""
    assert runtime_checks_active()


def _agent(
    monkeypatch: pytest.MonkeyPatch,
    *,
    total_timesteps: int,
    compiler: str | None = "/usr/bin/g++",
    fabric: Fabric | None = None,
    compile_update: bool | str = "auto",
    progress: bool = False,
) -> PPOAgent:
    """An agent whose decision sees no runtime checks and the given compiler."""
    monkeypatch.setattr(ppo_module, "runtime_checks_active", lambda: False)
    monkeypatch.setattr(ppo_module, "find_cpp_compiler", lambda: compiler)
    config = PPOConfig(
        total_timesteps=total_timesteps,
        num_steps=16,
        batch_size=32,
        num_mini_epochs=2,
        compile_update=compile_update,  # type: ignore[arg-type]
        **SMALL,
    )
    return PPOAgent(
        env=make("CartPole-v1", num_envs=4, seed=0),
        config=config,
        fabric=fabric,
        options=RunOptions(progress=progress, loggers=[]),
    )


def test_planned_updates_count_every_epoch_of_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """ceil(total / (num_steps * envs)) epochs times the minibatches of one epoch."""
    agent = _agent(monkeypatch, total_timesteps=100)
    # 4 envs x 16 steps = 64 per epoch -> 2 epochs; 64 * 2 passes / 32 = 4 minibatches each.
    assert agent.planned_updates == 8


def test_auto_agent_decides_from_its_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """A small plan runs eagerly; a large one compiles; no compiler means eager."""
    small = _agent(monkeypatch, total_timesteps=640)
    assert not small.compile_decision.enabled
    assert "do not amortise" in small.compile_decision.reason
    # 16 * AUTO_COMPILE_MIN_UPDATES env steps: 4 updates per 64 steps -> exactly the threshold.
    large_budget = 16 * AUTO_COMPILE_MIN_UPDATES
    large = _agent(monkeypatch, total_timesteps=large_budget)
    assert large.planned_updates == AUTO_COMPILE_MIN_UPDATES
    assert large.compile_decision.enabled
    _uncompiled(large, monkeypatch)  # built with a CompiledUpdate
    small.setup()
    assert small.algorithm.compiled is None
    no_compiler = _agent(monkeypatch, total_timesteps=large_budget, compiler=None)
    assert not no_compiler.compile_decision.enabled
    assert "no C++ compiler found" in no_compiler.compile_decision.reason


def test_auto_falls_back_silently_where_true_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """With mixed precision "auto" runs eagerly while True keeps raising."""
    large_budget = 16 * AUTO_COMPILE_MIN_UPDATES
    mixed = Fabric(accelerator="cpu", devices=1, precision="bf16-mixed")
    agent = _agent(monkeypatch, total_timesteps=large_budget, fabric=mixed)
    assert not agent.compile_decision.enabled
    assert "precision other than 32-true or 64-true" in agent.compile_decision.reason
    with pytest.raises(ConfigError, match="32-true and 64-true precision only"):
        _agent(monkeypatch, total_timesteps=64, fabric=mixed, compile_update=True)


def test_auto_falls_back_under_ddp() -> None:
    """Several ranks make "auto" eager; True raises (checked before any update)."""
    decision = decide_compile("auto", **{**GOOD, "world_size": 2})
    assert not decision.enabled
    plain = Fabric(accelerator="cpu", devices=1)
    config = PPOConfig(compile_update=True)
    with pytest.raises(ConfigError, match="compile_update is single-process only"):
        ppo_module._require_single_process_compile(config, plain, 2)
    # "auto" and False pass the explicit check whatever the world size.
    for setting in ("auto", False):
        ppo_module._require_single_process_compile(PPOConfig(compile_update=setting), plain, 2)


_FRESH_PROCESS_CHECK = """
from typedrl.agents import AUTO_COMPILE_MIN_UPDATES, PPOAgent, PPOConfig
from typedrl.agents._compiled_update import runtime_checks_active
from typedrl.envs import make
from typedrl.training import RunOptions

config = PPOConfig(
    total_timesteps=64 * AUTO_COMPILE_MIN_UPDATES,
    num_steps=16,
    batch_size=64,
    num_mini_epochs=1,
    actor_hidden=(8,),
    critic_hidden=(8,),
)
agent = PPOAgent(
    env=make("CartPole-v1", num_envs=4, seed=0),
    config=config,
    options=RunOptions(progress=False, loggers=[]),
)
print(runtime_checks_active(), agent.planned_updates, agent.compile_decision.enabled)
"""


def test_auto_compiles_a_large_plan_without_runtime_checks() -> None:
    """In a plain interpreter (no shape-check hook), "auto" compiles a large plan."""
    completed = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS_CHECK],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    runtime_checks, planned, enabled = completed.stdout.split()
    assert runtime_checks == "False"
    assert int(planned) == AUTO_COMPILE_MIN_UPDATES
    assert enabled == str(find_cpp_compiler() is not None)


def _uncompiled(agent: PPOAgent, monkeypatch: pytest.MonkeyPatch) -> CompiledUpdate:
    """The agent's compiled update, built with torch.compile as the identity.

    The same update body then runs eagerly: the suite's runtime checks wrap it,
    which the compiler could not trace, and inductor's import warns.
    """
    monkeypatch.setattr(torch, "compile", lambda function, **_: function)
    agent.setup()
    update = agent.algorithm.compiled
    assert isinstance(update, CompiledUpdate)
    return update


def _first_epoch(agent: PPOAgent) -> EpochData:
    """The agent's first epoch of experience, flat, with its advantages and returns."""
    agent._prepare()
    policy = agent.model_unwrapped
    assert isinstance(policy, MLPActorCritic)
    rollout = agent.collector.collect(policy, num_steps=agent.config.num_steps)
    advantages, returns = agent.algorithm._advantages(rollout)
    flat = rollout.data.reshape(-1)
    return EpochData(
        obs=flat["obs"],
        action=flat["action"],
        log_prob=flat["log_prob"],
        value=flat["value"],
        valid=None,
        advantage=advantages.reshape(-1),
        returns=returns.reshape(-1),
    )


def test_compile_seconds_count_the_first_update_of_each_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only an update with a minibatch shape not seen before counts as compiling."""
    agent = _agent(monkeypatch, total_timesteps=64, compile_update=True)
    update = _uncompiled(agent, monkeypatch)
    assert update.compile_seconds == 0.0
    epoch = _first_epoch(agent)
    clock = iter([0.0, 2.0, 10.0, 10.5])
    fake_time = types.SimpleNamespace(perf_counter=lambda: next(clock))
    monkeypatch.setattr(compiled_update_module, "time", fake_time)
    update(epoch.select(torch.arange(32)))
    assert update.compile_seconds == 2.0
    update(epoch.select(torch.arange(32, 64)))  # the same shape: not timed
    assert update.compile_seconds == 2.0
    update(epoch.select(torch.arange(16)))  # a new shape: timed
    assert update.compile_seconds == 2.5


def test_fit_reports_compile_seconds_only_when_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    """time/compile_seconds is in a compiled run's metrics and absent from an eager one's."""
    compiled = _agent(monkeypatch, total_timesteps=128, compile_update=True)
    _uncompiled(compiled, monkeypatch)
    seconds = compiled.fit().metrics["time/compile_seconds"]
    assert seconds > 0.0
    assert seconds == compiled.algorithm.compile_seconds
    eager = _agent(monkeypatch, total_timesteps=128, compile_update=False)
    assert "time/compile_seconds" not in eager.fit().metrics


def test_compiling_is_announced_and_left_out_of_the_training_speed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a progress display the console names the compile; time/sps excludes its time."""
    pause = 1.0

    def compile_slowly(function: Callable[..., Any]) -> Callable[..., Any]:
        calls: list[None] = []

        def first_call_waits(**kwargs: Any) -> Any:
            if not calls:
                time.sleep(pause)  # stands in for inductor's compile
            calls.append(None)
            return function(**kwargs)

        return first_call_waits

    agent = _agent(monkeypatch, total_timesteps=64, compile_update=True, progress=True)
    monkeypatch.setattr(torch, "compile", compile_slowly)
    metrics = agent.fit().metrics  # one iteration: 4 envs x 16 steps
    out = capsys.readouterr().out
    assert "compiling the update for minibatches of 32 rows (once; 50-60 s on one CPU" in out
    assert re.search(r"^compiled the update in \d+\.\d s$", out, re.MULTILINE)
    assert metrics["time/compile_seconds"] >= pause
    training_seconds = 64 / metrics["time/sps"]
    assert training_seconds <= metrics["time/iteration_seconds"] - pause


def test_compiling_is_silent_without_a_progress_display(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run without a progress display (a library call) prints nothing about compiling."""
    agent = _agent(monkeypatch, total_timesteps=64, compile_update=True)
    _uncompiled(agent, monkeypatch)
    agent.fit()
    assert "compil" not in capsys.readouterr().out


def _config(**changes: Any) -> PPOConfig:
    return PPOConfig(**{"num_steps": 16, "batch_size": 32, **SMALL, **changes})


_SPACES: Final = (make("CartPole-v1", num_envs=1).single_observation_space, "Discrete(2)")


def test_compile_record_keys_name_the_traced_update(tmp_path: Path) -> None:
    """The key follows the network, the loss and the minibatch, not the run's budget or lr."""
    key = CompileRecord.key(_config(), _SPACES, 32)
    assert CompileRecord.key(_config(), _SPACES, 32) == key
    for same in ({"total_timesteps": 7}, {"seed": 3}, {"learning_rate": 1e-2}):
        assert CompileRecord.key(_config(**same), _SPACES, 32) == key, same
    assert CompileRecord.key(_config(), _SPACES, 16) != key
    assert CompileRecord.key(_config(actor_hidden=(16,)), _SPACES, 32) != key
    assert CompileRecord.key(_config(clip_range=0.1), _SPACES, 32) != key
    assert CompileRecord.key(_config(), (_SPACES[0], "Discrete(3)"), 32) != key


def test_compile_record_remembers_and_ignores_what_it_cannot_read(tmp_path: Path) -> None:
    """add -> compiled_before; a broken or unwritable record is no error."""
    record = CompileRecord(tmp_path)
    key = CompileRecord.key(_config(), _SPACES, 32)
    assert not record.compiled_before(key)
    record.add(key, 3.25)
    assert record.compiled_before(key)
    assert not record.compiled_before(CompileRecord.key(_config(), _SPACES, 16))
    record.path.write_text("{not json")
    assert not record.compiled_before(key)
    record.add(key, 1.0)  # rewrites the broken file
    assert record.compiled_before(key)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    CompileRecord(blocked).add(key, 1.0)  # its folder is a file: nothing recorded, no error
    assert not CompileRecord(blocked).compiled_before(key)


@pytest.fixture
def inductor_isa_settings() -> Iterator[None]:
    """Inductor's vector-ISA settings and its cached ISA list, restored after the test."""
    cpp = torch._inductor.config.cpp
    saved = (cpp.vec_isa_ok, cpp.simdlen)
    cpp.vec_isa_ok, cpp.simdlen = None, None
    try:
        yield
    finally:
        cpp.vec_isa_ok, cpp.simdlen = saved
        cpu_vec_isa.valid_vec_isa_list.cache_clear()


@pytest.mark.usefixtures("inductor_isa_settings")
def test_the_first_check_of_the_vector_isa_is_recorded_and_trusted_after(tmp_path: Path) -> None:
    """The first call runs inductor's checks and records their ISA; a later one reads it."""
    record = CompileRecord(tmp_path)
    checked = str(cpu_vec_isa.pick_vec_isa())  # inductor's own checks, untouched
    assert trust_checked_vector_isa(record)
    assert record.vector_isa(vector_isa_machine()) == checked
    assert torch._inductor.config.cpp.vec_isa_ok is True
    assert str(cpu_vec_isa.pick_vec_isa()) == checked
    torch._inductor.config.cpp.vec_isa_ok = None
    assert trust_checked_vector_isa(record)  # from the record
    assert torch._inductor.config.cpp.vec_isa_ok is True


@pytest.mark.usefixtures("inductor_isa_settings")
def test_a_recorded_isa_the_cpu_flags_do_not_choose_leaves_the_checks_on(tmp_path: Path) -> None:
    """Another machine's ISA under this key (a shared cache): inductor keeps checking."""
    record = CompileRecord(tmp_path)
    record.add_vector_isa(vector_isa_machine(), "no such isa")
    assert not trust_checked_vector_isa(record)
    assert torch._inductor.config.cpp.vec_isa_ok is None


@pytest.mark.usefixtures("inductor_isa_settings")
@pytest.mark.parametrize(("name", "value"), [("vec_isa_ok", False), ("simdlen", 256)])
def test_a_user_isa_setting_is_left_alone(tmp_path: Path, name: str, value: object) -> None:
    setattr(torch._inductor.config.cpp, name, value)
    record = CompileRecord(tmp_path)
    assert not trust_checked_vector_isa(record)
    assert getattr(torch._inductor.config.cpp, name) == value
    assert record.vector_isa(vector_isa_machine()) is None


def test_the_record_keeps_compiled_updates_and_isa_checks_apart(tmp_path: Path) -> None:
    record = CompileRecord(tmp_path)
    key = CompileRecord.key(_config(), _SPACES, 32)
    record.add(key, 2.0)
    record.add_vector_isa("machine", "avx2")
    assert record.compiled_before(key)
    assert record.vector_isa("machine") == "avx2"
    assert not record.compiled_before("vector-isa/machine")
    assert record.vector_isa(key) is None


def test_a_warm_cache_lowers_the_break_even() -> None:
    """Between the warm and the cold threshold, only a warm cache compiles."""
    planned = (AUTO_COMPILE_MIN_UPDATES_WARM + AUTO_COMPILE_MIN_UPDATES) // 2
    cold = decide_compile("auto", **{**GOOD, "planned_updates": planned})
    warm = decide_compile("auto", **{**GOOD, "planned_updates": planned}, warm_cache=True)
    assert not cold.enabled
    assert f"(needs {AUTO_COMPILE_MIN_UPDATES})" in cold.reason
    assert warm.enabled
    assert "(a warm compile cache)" in warm.reason
    short = decide_compile(
        "auto", **{**GOOD, "planned_updates": AUTO_COMPILE_MIN_UPDATES_WARM - 1}, warm_cache=True
    )
    assert not short.enabled
    assert f"(a warm compile cache) (needs {AUTO_COMPILE_MIN_UPDATES_WARM})" in short.reason


def test_a_measured_timing_sets_the_warm_break_even() -> None:
    """ceil(load seconds / seconds saved per update); never when compiling saves nothing."""
    timing = UpdateTiming(eager_ms=10.0, compiled_ms=6.0, load_seconds=1.2)
    assert timing.break_even() == 300
    assert UpdateTiming(eager_ms=10.0, compiled_ms=6.0, load_seconds=1.201).break_even() == 301
    unmeasured_load = UpdateTiming(eager_ms=1.0, compiled_ms=0.5)
    assert unmeasured_load.break_even() == round(PRECOMPILED_LOAD_SECONDS / 0.5e-3)
    assert UpdateTiming(eager_ms=1.0, compiled_ms=1.0).break_even() is None
    assert UpdateTiming(eager_ms=1.0, compiled_ms=1.5).break_even() is None
    for load in (float("nan"), float("inf"), -1.0, 0.0):  # a bad load: the default
        assert UpdateTiming(eager_ms=1.0, compiled_ms=0.5, load_seconds=load).break_even() == (
            unmeasured_load.break_even()
        ), load


def test_a_warm_cache_decides_from_the_measured_timing() -> None:
    """On a warm cache the timing replaces the fixed threshold; a cold cache ignores it."""
    timing = UpdateTiming(eager_ms=10.0, compiled_ms=6.0, load_seconds=1.2)
    at = {**GOOD, "planned_updates": 300}
    below = {**GOOD, "planned_updates": 299}
    decision = decide_compile("auto", **at, warm_cache=True, timing=timing)
    assert decision.enabled
    assert "measured 6.00 ms compiled against 10.00 ms eager" in decision.reason
    short = decide_compile("auto", **below, warm_cache=True, timing=timing)
    assert not short.enabled
    assert short.reason.endswith("(needs 300)")
    assert not decide_compile("auto", **at, warm_cache=False, timing=timing).enabled
    # Measured no faster: only a plan that pays for a cold compile compiles.
    slower = UpdateTiming(eager_ms=1.0, compiled_ms=1.2)
    below_cold = {**GOOD, "planned_updates": AUTO_COMPILE_MIN_UPDATES - 1}
    eager = decide_compile("auto", **below_cold, warm_cache=True, timing=slower)
    assert not eager.enabled
    assert eager.reason.endswith(
        "(a warm compile cache; measured 1.20 ms compiled against 1.00 ms eager) "
        f"(needs {AUTO_COMPILE_MIN_UPDATES})"
    )
    at_cold = {**GOOD, "planned_updates": AUTO_COMPILE_MIN_UPDATES}
    assert decide_compile("auto", **at_cold, warm_cache=True, timing=slower).enabled
    # An explicit threshold wins over the measurement.
    assert decide_compile("auto", **below, warm_cache=True, timing=timing, min_updates=1).enabled


def test_the_record_keeps_timings_and_loads_and_drops_broken_ones(tmp_path: Path) -> None:
    """add_timing + add_load -> timing(); malformed entries read as no timing."""
    record = CompileRecord(tmp_path)
    key = CompileRecord.key(_config(), _SPACES, 32)
    assert record.timing(key) is None
    record.add(key, 20.0)
    record.add_timing(key, eager_ms=2.5, compiled_ms=1.25)
    assert record.timing(key) == UpdateTiming(eager_ms=2.5, compiled_ms=1.25)
    record.add_load(key, 1.1)
    assert record.timing(key) == UpdateTiming(eager_ms=2.5, compiled_ms=1.25, load_seconds=1.1)
    assert record.compiled_before(key)
    other = CompileRecord.key(_config(), _SPACES, 16)
    assert record.timing(other) is None
    for load in (float("nan"), float("inf"), -1.0, "1.0", True):  # dropped on reading
        entries = json.loads(record.path.read_text())
        entries[f"load/{key}"] = load
        record.path.write_text(json.dumps(entries))
        assert record.timing(key) == UpdateTiming(eager_ms=2.5, compiled_ms=1.25), load
    for broken in (
        {"eager_ms": 2.5},
        {"eager_ms": True, "compiled_ms": 1.0},
        {"eager_ms": -1.0, "compiled_ms": 1.0},
        {"eager_ms": "2", "compiled_ms": 1.0},
        [2.5, 1.25],
    ):
        entries = json.loads(record.path.read_text())
        entries[f"timing/{key}"] = broken
        record.path.write_text(json.dumps(entries))
        assert record.timing(key) is None, broken
        assert record.compiled_before(key)


def test_an_auto_agent_decides_from_the_recorded_timing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A short plan compiles where the measured saving pays for a load, not otherwise."""
    budget = 16 * AUTO_BACKGROUND_MIN_UPDATES  # 200 planned updates
    agent = _agent(monkeypatch, total_timesteps=budget)
    assert not agent.compile_decision.enabled
    spaces = (agent.env.single_observation_space, agent.env.single_action_space)
    key = CompileRecord.key(agent.config, spaces, 32)
    record = CompileRecord()
    record.add(key, 18.0)
    record.add_timing(key, eager_ms=1.3, compiled_ms=0.3)
    record.add_load(key, 0.19)  # pays after 190 updates
    warm = _agent(monkeypatch, total_timesteps=budget)
    assert warm.compile_decision.enabled
    assert "measured 0.30 ms compiled against 1.30 ms eager" in warm.compile_decision.reason
    assert not warm.background_precompile
    record.add_load(key, 0.21)  # pays after 210
    short = _agent(monkeypatch, total_timesteps=budget)
    assert not short.compile_decision.enabled
    assert not short.background_precompile  # warm: the child ran before


def test_the_record_key_names_the_thread_count() -> None:
    """Compiled CPU kernels and measured timings hold for one torch thread count."""
    threads = torch.get_num_threads()
    key = CompileRecord.key(_config(), _SPACES, 32)
    try:
        torch.set_num_threads(threads + 1)
        assert CompileRecord.key(_config(), _SPACES, 32) != key
    finally:
        torch.set_num_threads(threads)
    assert CompileRecord.key(_config(), _SPACES, 32) == key


def test_measure_update_times_both_updates_in_turn() -> None:
    """The compiled side is the given callable; the eager side steps the policy."""
    policy = _policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    batch = dataclasses.replace(
        _epoch(),
        obs=TensorDict({"obs": torch.randn(32, 4, generator=generator)}, batch_size=[32]),
        advantage=torch.randn(32, generator=generator),
        returns=torch.randn(32, generator=generator),
    )
    before = [p.detach().clone() for p in policy.parameters()]
    calls: list[int] = []

    def slow_update(minibatch: EpochData) -> None:
        assert minibatch is batch
        calls.append(1)
        time.sleep(0.01)

    timing = compiled_update_module.measure_update(
        slow_update, policy, optimizer, _config(), batch, blocks=2, block_seconds=0.02
    )
    assert timing.compiled_ms >= 10.0
    assert timing.eager_ms > 0.0
    assert timing.load_seconds is None
    # a warm-up call and a sizing call, then 2 blocks of max(5, ceil(0.02 / 0.01)) calls
    assert len(calls) == 12
    after = list(policy.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


def test_waiting_for_a_background_compile_ends_with_its_process(tmp_path: Path) -> None:
    """No lock, or one whose process is gone: no wait; a live one: until the timeout."""
    record = CompileRecord(tmp_path)
    assert compiled_update_module.wait_for_background_precompile(record) < 1.0
    lock = record.precompiled_path("any").parent / ".background.lock"
    lock.parent.mkdir(parents=True)
    finished = subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert finished.returncode == 0
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    lock.write_text(str(gone.pid))
    assert compiled_update_module.wait_for_background_precompile(record) < 1.0
    lock.write_text(str(os.getpid()))  # alive
    with pytest.raises(TimeoutError, match="did not finish in 0 s"):
        compiled_update_module.wait_for_background_precompile(record, timeout_s=0.3)


def test_a_compiled_run_makes_the_next_auto_run_warm(monkeypatch: pytest.MonkeyPatch) -> None:
    """compile_update=True records its minibatch shapes; "auto" then counts a warm cache."""
    budget = 16 * (AUTO_COMPILE_MIN_UPDATES_WARM + 1)  # 4 updates per 64 env steps
    before = _agent(monkeypatch, total_timesteps=budget)
    assert not before.compile_decision.enabled
    compiled = _agent(monkeypatch, total_timesteps=64, compile_update=True)
    update = _uncompiled(compiled, monkeypatch)
    update(_first_epoch(compiled).select(torch.arange(32)))
    spaces = (compiled.env.single_observation_space, compiled.env.single_action_space)
    assert CompileRecord().compiled_before(CompileRecord.key(compiled.config, spaces, 32))
    after = _agent(monkeypatch, total_timesteps=budget)
    assert after.compile_decision.enabled
    assert "(a warm compile cache)" in after.compile_decision.reason


def _compiled_update(policy: MLPActorCritic, record: CompileRecord | None) -> CompiledUpdate:
    """A CompiledUpdate over ``policy`` with a fresh Adam, recording into ``record``."""
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    key = (record, lambda rows: f"rows {rows}") if record is not None else None
    return CompiledUpdate(policy, optimizer, _config(), record=key)


def _policy(hidden: tuple[int, ...] = (8,), **options: Any) -> MLPActorCritic:
    return MLPActorCritic(
        gym.spaces.Box(-1.0, 1.0, (4,)),
        gym.spaces.Discrete(2),
        actor_hidden=hidden,
        critic_hidden=hidden,
        **options,
    )


def _inputs(obs_dtype: torch.dtype = torch.float32, rows: int = 32) -> dict[str, object]:
    """Update inputs of the shapes a 4-float observation, 2-action policy takes."""
    return {
        "values": {"policy.w": torch.zeros(8, 4)},
        "states": [(torch.zeros(()), torch.zeros(8, 4), torch.zeros(8, 4))],
        "batch": EpochData(
            obs=TensorDict({"obs": torch.zeros(rows, 4, dtype=obs_dtype)}, batch_size=[rows]),
            action=torch.zeros(rows, dtype=torch.int64),
            log_prob=torch.zeros(rows),
            value=torch.zeros(rows),
            valid=None,
            advantage=torch.zeros(rows),
            returns=torch.zeros(rows),
        ),
        "learning_rate": torch.zeros(1, dtype=torch.float64),
    }


def test_precompiled_files_are_named_by_what_the_update_traces(tmp_path: Path) -> None:
    """The name changes with the shape, Adam's constants, the network and every input tensor."""
    record = CompileRecord()
    update = _compiled_update(_policy(), record)
    constants = (0.9, 0.999, 1e-8)
    inputs = _inputs()
    key = update._precompiled_key("record", (32, True), constants, inputs)
    same = _compiled_update(_policy(), record)
    assert same._precompiled_key("record", (32, True), constants, _inputs()) == key
    transposed = {**inputs, "values": {"policy.w": torch.zeros(4, 8).t()}}
    others = [
        update._precompiled_key("other record", (32, True), constants, inputs),
        update._precompiled_key("record", (16, True), constants, inputs),
        update._precompiled_key("record", (32, False), constants, inputs),
        update._precompiled_key("record", (32, True), (0.8, 0.999, 1e-8), inputs),
        update._precompiled_key("record", (32, True), (0.9, 0.999, 1e-5), inputs),
        update._precompiled_key("record", (32, True), constants, _inputs(torch.float64)),
        update._precompiled_key("record", (32, True), constants, transposed),
        _compiled_update(_policy((16,)), record)._precompiled_key(
            "record", (32, True), constants, inputs
        ),
        _compiled_update(_policy(normalize_observations=True), record)._precompiled_key(
            "record", (32, True), constants, inputs
        ),
    ]
    assert key not in others
    assert len(set(others)) == len(others)
    path = record.precompiled_path(key)
    assert path.parent.parent == tmp_path / "inductor"  # the test's TORCHINDUCTOR_CACHE_DIR
    assert path.name == f"{key}.pt2"


def test_the_tensor_layout_names_every_leaf_in_order() -> None:
    """Observation leaves, fields, list items and dict keys each give one line."""
    lines = compiled_update_module._tensor_layout(_inputs(), "inputs")
    assert lines[0] == "inputs.batch.obs.obs: (32, 4) (4, 1) torch.float32 cpu"
    assert "inputs.batch.valid: NoneType" in lines
    assert "inputs.states.[0].[1]: (8, 4) (4, 1) torch.float32 cpu" in lines
    assert lines[-1] == "inputs.values.policy.w: (8, 4) (4, 1) torch.float32 cpu"


def test_only_typedrls_own_policy_with_a_record_is_precompiled() -> None:
    """A subclass's code is not in the file's name, and without a record there is no folder."""

    class Subclass(MLPActorCritic):  # type: ignore[misc]  # final for typing, not at run time
        pass

    record = CompileRecord()
    assert _compiled_update(_policy(), record)._precompile == precompile_supported()
    assert not _compiled_update(_policy(), None)._precompile
    subclass = Subclass(gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2))
    assert not _compiled_update(subclass, record)._precompile


def test_a_missing_or_unreadable_precompiled_file_is_compiled_again(tmp_path: Path) -> None:
    """Loading answers None for an absent or corrupt file; the caller then compiles."""

    def update() -> None:
        """A stand-in: its globals are passed to the loader."""

    path = tmp_path / "update.pt2"
    assert compiled_update_module._load_precompiled(path, update) is None  # type: ignore[arg-type]
    path.write_bytes(b"not a compiled function")
    assert compiled_update_module._load_precompiled(path, update) is None  # type: ignore[arg-type]


def test_a_refused_precompile_saves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When torch cannot precompile (here: no aot_compile), nothing is saved and None returned."""
    monkeypatch.setattr(torch, "compile", lambda function, **_: function)
    path = tmp_path / "folder" / "update.pt2"
    result = compiled_update_module._precompile(lambda **_: None, {}, path)  # type: ignore[arg-type]
    assert result is None
    assert not path.parent.exists()


def test_the_background_lock_is_held_by_a_live_process_only(tmp_path: Path) -> None:
    """One background compile per folder: a live holder keeps it, a dead one frees it."""
    lock = tmp_path / "folder" / ".background.lock"
    take = compiled_update_module._take_background_lock
    assert take(lock)
    assert not take(lock)  # being taken (no id yet), recently
    lock.write_text(str(os.getpid()))
    assert not take(lock)  # this process is alive
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()
    lock.write_text(str(finished.pid))
    assert take(lock)  # its process ended without removing it
    lock.write_text("")
    old = time.time() - 2 * compiled_update_module._LOCK_GRACE_S
    os.utime(lock, (old, old))
    assert take(lock)  # left empty long ago


def test_auto_precompiles_in_the_background_only_where_the_cache_is_cold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A plan between the background and the cold threshold, on a cold cache: in the background."""
    monkeypatch.delenv("TYPEDRL_BACKGROUND_COMPILE")
    for updates in (AUTO_BACKGROUND_MIN_UPDATES, AUTO_COMPILE_MIN_UPDATES_WARM + 1):
        cold = _agent(monkeypatch, total_timesteps=16 * updates)  # 4 updates per 64 env steps
        assert not cold.compile_decision.enabled
        assert cold.background_precompile == precompile_supported()
    short = 16 * (AUTO_BACKGROUND_MIN_UPDATES - 4)
    assert not _agent(monkeypatch, total_timesteps=short).background_precompile
    between = 16 * (AUTO_COMPILE_MIN_UPDATES_WARM + 1)
    assert not _agent(monkeypatch, total_timesteps=between, compiler=None).background_precompile
    large = _agent(monkeypatch, total_timesteps=16 * AUTO_COMPILE_MIN_UPDATES)
    assert not large.background_precompile  # it compiles in the run itself
    explicit = _agent(monkeypatch, total_timesteps=between, compile_update=False)
    assert not explicit.background_precompile
    monkeypatch.setenv("TYPEDRL_BACKGROUND_COMPILE", "0")
    assert not _agent(monkeypatch, total_timesteps=between).background_precompile


def test_a_failed_background_compile_is_not_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker writes <key>.failed with the traceback; the next start declines."""
    from typedrl.agents import _precompile_worker

    # The worker lowers its priority and sets its threads: not this test process's.
    monkeypatch.setattr(os, "nice", lambda _: 0)
    monkeypatch.setattr(torch, "set_num_threads", lambda _: None)

    folder = tmp_path / "inductor" / "typedrl-precompiled-updates"
    folder.mkdir(parents=True)
    lock = folder / ".background.lock"
    lock.write_text(str(os.getpid()))
    spec = tmp_path / "spec.pt"
    torch.save({"key": "abc", "batch": "not a batch"}, spec)
    assert _precompile_worker.main([str(spec), str(lock), "abc"]) == 1
    assert "KeyError" in (folder / "abc.failed").read_text()
    assert not spec.exists()
    assert not lock.exists()  # it named this process
    policy = _policy()
    record = CompileRecord()
    config = _config()
    epoch = EpochData(
        obs=TensorDict({"obs": torch.zeros(32, 4)}, batch_size=[32]),
        action=torch.zeros(32, dtype=torch.int64),
        log_prob=torch.zeros(32),
        value=torch.zeros(32),
        valid=None,
        advantage=torch.zeros(32),
        returns=torch.zeros(32),
    )
    spaces = (gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2))
    key = CompileRecord.key(config, spaces, 32)
    (folder / f"{key}.failed").write_text("earlier failure")
    optimizer = torch.optim.Adam(policy.parameters())
    started = compiled_update_module.start_background_precompile(
        policy, optimizer, config, spaces, epoch, record=record
    )
    assert started is None


def _train(run_dir: Path, cache: Path, total_timesteps: int = 1664) -> str:
    """``typedrl train`` in a fresh process (no runtime checks), 80 updates per 64 steps."""
    command = [
        sys.executable, "-m", "typedrl", "train", "CartPole-v1", "--num-envs", "4",
        "--total-timesteps", str(total_timesteps), "--run-dir", str(run_dir),
        "--set", "num_steps=16",
        "--set", "batch_size=8", "--set", "num_mini_epochs=10", "--set", "actor_hidden=[8]",
        "--set", "critic_hidden=[8]", "--eval-episodes", "1",
    ]  # fmt: skip
    environment = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(cache),
        "TYPEDRL_BACKGROUND_COMPILE": "1",
        "OMP_NUM_THREADS": "1",
    }
    done = subprocess.run(
        command, env=environment, capture_output=True, text=True, check=True, timeout=240
    )
    return done.stdout


def test_a_cold_auto_run_precompiles_for_the_next_one(tmp_path: Path) -> None:
    """The first run stays eager and compiles in the background; the second one loads it."""
    cache = tmp_path / "cache"
    first = _train(tmp_path / "first", cache)
    if not precompile_supported():
        assert "background" not in first
        return
    assert "precompiling the update in the background (process" in first
    assert "compile time" not in first  # eager
    lock = cache / "typedrl-precompiled-updates" / ".background.lock"
    pid = int(re.findall(r"background \(process (\d+)\)", first)[0])
    deadline = time.monotonic() + 600.0
    while lock.exists() and time.monotonic() < deadline:
        time.sleep(0.5)
    if lock.exists():
        os.kill(pid, 9)
        pytest.fail("the background compile did not finish within 600 s")
    folder = cache / "typedrl-precompiled-updates"
    assert [p.suffix for p in folder.iterdir()] == [".pt2"], sorted(folder.iterdir())
    # The child measured what the compiled update saves, for the next run's break-even.
    entries = json.loads((cache / "typedrl-compiled-updates.json").read_text())
    (timing,) = [value for name, value in entries.items() if name.startswith("timing/")]
    assert 0.0 < timing["compiled_ms"] < timing["eager_ms"], timing
    # 6,240 planned updates: past the break-even of any saving above 0.24 ms per
    # update (this network's is about 1 ms).
    second = _train(tmp_path / "second", cache, total_timesteps=3 * 1664)
    assert "loaded the precompiled update in" in second
    assert "background" not in second
    entries = json.loads((cache / "typedrl-compiled-updates.json").read_text())
    assert [name for name in entries if name.startswith("load/")]


def _epoch(rows: int = 32) -> EpochData:
    batch = _inputs(rows=rows)["batch"]
    assert isinstance(batch, EpochData)
    return batch


def test_a_background_compile_that_cannot_start_is_skipped_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unusable cache folder, or a platform other than POSIX: None, nothing raised."""
    policy = _policy()
    optimizer = torch.optim.Adam(policy.parameters())
    spaces = (gym.spaces.Box(-1.0, 1.0, (4,)), gym.spaces.Discrete(2))
    record = CompileRecord()
    start = compiled_update_module.start_background_precompile
    blocked = record.precompiled_path("x").parent
    blocked.parent.mkdir(parents=True)
    blocked.write_text("a file where the folder should be")
    assert start(policy, optimizer, _config(), spaces, _epoch(), record=record) is None
    blocked.unlink()
    monkeypatch.setattr(os, "name", "nt")
    assert start(policy, optimizer, _config(), spaces, _epoch(), record=record) is None
    assert not blocked.exists()


def test_the_build_target_names_the_isa_machine_and_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The compiled C++ depends on them, so the precompiled file's name does too."""
    target = compiled_update_module._build_target()
    assert target == compiled_update_module._build_target()
    threads = torch.get_num_threads()
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads + 1)
    assert compiled_update_module._build_target() != target
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    monkeypatch.setattr(platform, "machine", lambda: "another")
    assert compiled_update_module._build_target() != target


def test_the_record_key_names_the_policy_dtype() -> None:
    """A 64-true run's update is another one than a 32-true run's."""
    key = CompileRecord.key(_config(), _SPACES, 32)
    assert CompileRecord.key(_config(), _SPACES, 32, dtype=torch.float32) == key
    assert CompileRecord.key(_config(), _SPACES, 32, dtype=torch.float64) != key


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Box(-np.inf, np.inf, (4,), dtype=np.float32),
        gym.spaces.Box(np.zeros((2, 3)), np.ones((2, 3)), dtype=np.float64),
        gym.spaces.Discrete(5, start=-2),
        gym.spaces.MultiDiscrete([3, 4], start=[1, 0]),
        gym.spaces.MultiBinary(6),
        gym.spaces.Dict(
            {"policy": gym.spaces.Box(-1.0, 1.0, (3,)), "critic": gym.spaces.Box(-1.0, 1.0, (5,))}
        ),
    ],
    ids=repr,
)
def test_the_worker_rebuilds_the_spaces_from_plain_values(space: gym.Space[Any]) -> None:
    """Spaces travel to the worker as tensors and plain values and come back equal."""
    from typedrl.agents._precompile_worker import decode_space, encode_space

    encoded = encode_space(space)
    assert encoded is not None
    assert decode_space(encoded) == space
    assert repr(decode_space(encoded)) == repr(space)


def test_a_space_the_worker_cannot_rebuild_starts_nothing(tmp_path: Path) -> None:
    """A Tuple observation space: no spec, no child, no lock left behind."""
    from typedrl.agents._precompile_worker import encode_space

    tuple_space = gym.spaces.Tuple((gym.spaces.Discrete(2),))
    assert encode_space(tuple_space) is None
    policy = _policy()
    record = CompileRecord()
    started = compiled_update_module.start_background_precompile(
        policy,
        torch.optim.Adam(policy.parameters()),
        _config(),
        (tuple_space, gym.spaces.Discrete(2)),
        _epoch(),
        record=record,
    )
    assert started is None
    folder = record.precompiled_path("x").parent
    assert not (folder / ".background.lock").exists()
