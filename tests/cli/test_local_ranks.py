"""Tests for typedrl.cli._local_ranks: the ranks ``typedrl train --devices N`` starts itself."""

import subprocess
import sys
import textwrap
import time

import pytest

from typedrl.cli import _local_ranks
from typedrl.cli._local_ranks import LocalRanks, LocalRanksEnvironment
from typedrl.training._fabric import Launcher


def _children(*codes: str) -> list["subprocess.Popen[bytes]"]:
    """One child per Python snippet, as rank 0 would have started them."""
    return [subprocess.Popen([sys.executable, "-c", code]) for code in codes]


@pytest.mark.parametrize(
    ("processes", "launcher", "num_nodes"),
    [(1, "none", 1), (2, "torchrun", 1), (2, "srun", 1), (2, "none", 2)],
)
def test_nothing_is_started_alone_or_under_a_launcher(
    processes: int, launcher: Launcher, num_nodes: int
) -> None:
    """One process, a launcher's ranks or a refused multi-node launch start no process."""
    ranks = LocalRanks.start(processes, launcher=launcher, num_nodes=num_nodes)
    assert (ranks.children, ranks.environment) == ((), None)
    with ranks:
        assert ranks.wait() == 0


def test_a_started_rank_starts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank that rank 0 started (Lightning's LOCAL_RANK in its environment) starts none."""
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert LocalRanks.start(2, launcher="none", num_nodes=1).children == ()


def test_rank_zero_environment_says_the_ranks_exist() -> None:
    """Fabric is told that the processes exist, and where rank 0 listens."""
    environment = LocalRanksEnvironment(world_size=3, main_port=29_555)
    assert environment.creates_processes_externally
    assert (environment.main_address, environment.main_port) == ("127.0.0.1", 29_555)
    assert (environment.world_size(), environment.global_rank()) == (3, 0)
    assert (environment.local_rank(), environment.node_rank()) == (0, 0)
    assert not LocalRanksEnvironment.detect()


def test_rank_zero_waits_for_the_ranks_it_launched(capsys: pytest.CaptureFixture[str]) -> None:
    """A launched rank failing or hanging after the run makes the status 1, named on stderr."""
    with LocalRanks(_children("pass", "pass")) as ranks:
        assert ranks.wait() == 0
    assert capsys.readouterr().err == ""
    with LocalRanks(_children("pass", "raise SystemExit(3)")) as failed:
        assert failed.wait() == 1
    pid = failed.children[1].pid
    assert f"rank 2 (process {pid}) exited with status 3 after the run ended" in (
        capsys.readouterr().err
    )
    started = time.monotonic()
    with LocalRanks(_children("import time; time.sleep(60)")) as hung:
        assert hung.wait(timeout_s=0.5) == 1
    assert time.monotonic() - started < 30.0
    child = hung.children[0]
    assert child.returncode is not None  # stopped, not left behind
    assert f"rank 1 (process {child.pid}) had not exited 0.5 s after the run ended; stopped it" in (
        capsys.readouterr().err
    )


def test_an_error_in_the_run_stops_the_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    """When rank 0 fails, the ranks it started end with it (after a grace for their own exit)."""
    monkeypatch.setattr(_local_ranks, "EXIT_GRACE_S", 0.5)
    ranks = LocalRanks(_children("import time; time.sleep(60)"))
    with pytest.raises(RuntimeError, match="rank 0 failed"), ranks:
        raise RuntimeError("rank 0 failed")
    assert ranks.children[0].returncode is not None


_WATCHED = textwrap.dedent(
    """
    import subprocess, sys, time
    from typedrl.cli import _local_ranks
    _local_ranks.WATCH_PERIOD_S = 0.1
    _local_ranks.EXIT_GRACE_S = 0.5
    children = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]),
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5); exit(4)"]),
    ]
    print(children[0].pid, flush=True)
    with _local_ranks.LocalRanks(children):
        time.sleep(60)  # rank 0 waiting for a rank that is gone
    """
)


def test_a_rank_failing_during_the_run_ends_it() -> None:
    """The watcher names the failed rank, stops the others and ends a rank 0 stuck waiting."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _WATCHED], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert time.monotonic() - started < 30.0
    assert "rank 2 (process" in done.stderr
    assert "exited with status 4; stopping the run" in done.stderr
    sibling = int(done.stdout.split()[0])
    assert subprocess.run(["kill", "-0", str(sibling)], check=False).returncode != 0
