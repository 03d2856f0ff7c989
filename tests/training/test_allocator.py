"""Tests for typedrl.training._allocator: glibc's malloc thresholds, and fit's use of them."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.training.test_trainer import TinyTrainer, _options
from typedrl.training import AllocatorTuning, Budget, _allocator, _trainer, retain_freed_memory

_GLIBC = sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION") is not None

# Ten 2 MiB tensors alive at once, then freed, over and over: the pattern of a
# minibatch's activations. Minor page faults per round tell whether freed memory
# came back from the kernel (about 5,000 per round) or from the heap (none).
_FAULTS_PER_ROUND = textwrap.dedent(
    """
    import json, resource, sys
    import torch
    from typedrl.training import retain_freed_memory
    outcome = retain_freed_memory().value if sys.argv[1] == "tune" else "untouched"
    def one_round():
        blocks = [torch.ones(512 * 1024) for _ in range(10)]
        return sum(float(block[-1]) for block in blocks)
    for _ in range(3):
        one_round()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        one_round()
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 20
    print(json.dumps({"outcome": outcome, "faults": faults}))
    """
)


def _faults_per_round(mode: str, **env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    clean.pop("GLIBC_TUNABLES", None)
    done = subprocess.run(
        [sys.executable, "-c", _FAULTS_PER_ROUND, mode],
        env={**clean, **env},
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.skipif(not _GLIBC, reason="glibc's malloc is what this tunes")
def test_tuned_malloc_reuses_freed_tensor_memory_instead_of_faulting_it_back() -> None:
    """Without the tuning each round faults its 20 MiB back in; with it, almost nothing."""
    # A fixed default threshold: glibc's own adjustment of it would otherwise decide,
    # run by run, whether the untuned baseline faults.
    untuned = _faults_per_round("leave", MALLOC_MMAP_THRESHOLD_="131072")
    tuned = _faults_per_round("tune")
    assert tuned["outcome"] == AllocatorTuning.APPLIED.value
    assert isinstance(untuned["faults"], float)
    assert isinstance(tuned["faults"], float)
    assert untuned["faults"] > 2_000  # 20 MiB in 4 KiB pages is 5,120
    assert tuned["faults"] < 100


@pytest.mark.skipif(not _GLIBC, reason="glibc's malloc is what this tunes")
def test_a_user_malloc_setting_is_left_alone() -> None:
    """MALLOC_TRIM_THRESHOLD_ in the environment: nothing is changed, and it says so."""
    result = _faults_per_round("tune", MALLOC_TRIM_THRESHOLD_="131072")
    assert result["outcome"] == AllocatorTuning.USER_CONFIGURED.value


def test_the_decision_is_taken_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def tune() -> AllocatorTuning:
        calls.append(1)
        return AllocatorTuning.APPLIED

    monkeypatch.setattr(_allocator, "_outcome", None)
    monkeypatch.setattr(_allocator, "_tune", tune)
    assert retain_freed_memory() is AllocatorTuning.APPLIED
    assert retain_freed_memory() is AllocatorTuning.APPLIED
    assert calls == [1]


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("MALLOC_MMAP_THRESHOLD_", "65536"),
        ("MALLOC_ARENA_MAX", "2"),
        ("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0"),
    ],
)
def test_each_kind_of_user_setting_counts_as_configured(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    assert _allocator._tune() is AllocatorTuning.USER_CONFIGURED


def test_outside_linux_nothing_is_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("MALLOC_")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.setattr(sys, "platform", "darwin")
    assert _allocator._tune() is AllocatorTuning.UNSUPPORTED


@pytest.mark.parametrize("tune", [True, False])
def test_fit_tunes_the_allocator_unless_the_options_say_not_to(
    monkeypatch: pytest.MonkeyPatch, tune: bool
) -> None:
    calls: list[int] = []

    def record() -> AllocatorTuning:
        calls.append(1)
        return AllocatorTuning.APPLIED

    monkeypatch.setattr(_trainer, "retain_freed_memory", record)
    TinyTrainer(budget=Budget(iterations=1), options=_options(tune_allocator=tune)).fit()
    assert calls == ([1] if tune else [])
