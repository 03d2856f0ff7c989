"""``typedrl train --devices N`` without a launcher: rank 0 starts and watches the other ranks.

Rank 0 runs the command line that started it again for ranks 1..N-1, each
with the variables of Lightning's launch protocol (``MASTER_ADDR``,
``MASTER_PORT``, ``NODE_RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``) in its own
environment, so that Fabric's ``LightningEnvironment`` in each of them joins
the group as its launcher's children would. Rank 0 itself joins through
:class:`LocalRanksEnvironment`, a Lightning ``ClusterEnvironment`` that says
the processes exist already, so Fabric starts none. Nothing in rank 0's own
environment changes.

Rank 0 keeps the processes it started: a watcher stops the run when one of
them fails while it trains, and :meth:`LocalRanks.wait` waits for them after
it (a rank that fails or hangs then is named, and the status is 1). No rank
outlives the command.
"""

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Final, final

from lightning_fabric.plugins.environments.cluster_environment import ClusterEnvironment
from lightning_fabric.plugins.environments.lightning import LightningEnvironment

from typedrl.training._fabric import Launcher

__all__ = [
    "EXIT_GRACE_S",
    "LAUNCHED_RANKS_EXIT_S",
    "WATCH_PERIOD_S",
    "LocalRanks",
    "LocalRanksEnvironment",
]

LAUNCHED_RANKS_EXIT_S: Final = 60.0
"""How long rank 0 waits for the processes it launched to exit after a finished run."""
WATCH_PERIOD_S: Final = 1.0
"""How often rank 0's watcher looks at the processes it launched during the run."""
EXIT_GRACE_S: Final = 10.0
"""How long rank 0 has, once a launched rank failed or the command is failing, before the
remaining processes are stopped."""

_MAIN_ADDRESS: Final = "127.0.0.1"


@final
class LocalRanksEnvironment(ClusterEnvironment):
    """Rank 0 of ``world_size`` processes on this machine that rank 0 started itself.

    Args:
        world_size: The processes in the group, this one included.
        main_port: The free port rank 0 listens on for the group's rendezvous.
    """

    def __init__(self, *, world_size: int, main_port: int) -> None:
        self._world_size = world_size
        self._global_rank = 0
        self._main_port = main_port

    @property
    def creates_processes_externally(self) -> bool:
        """The other ranks exist already: Fabric starts none."""
        return True

    @property
    def main_address(self) -> str:
        """The loopback address: every rank runs on this machine."""
        return _MAIN_ADDRESS

    @property
    def main_port(self) -> int:
        """The port the ranks meet on."""
        return self._main_port

    @staticmethod
    def detect() -> bool:
        """Never detected: ``typedrl train`` passes this environment explicitly."""
        return False

    def world_size(self) -> int:
        """The processes in the group."""
        return self._world_size

    def set_world_size(self, size: int) -> None:
        """Record the world size Fabric computed (the same)."""
        self._world_size = size

    def global_rank(self) -> int:
        """Rank 0."""
        return self._global_rank

    def set_global_rank(self, rank: int) -> None:
        """Record the rank Fabric computed (0)."""
        self._global_rank = rank

    def local_rank(self) -> int:
        """Local rank 0."""
        return 0

    def node_rank(self) -> int:
        """Node 0, the only one."""
        return 0


def _free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_MAIN_ADDRESS, 0))
        port: int = sock.getsockname()[1]
        return port


def _this_command() -> list[str]:
    """The command line that started this process (a script, or ``python -m module``)."""
    import __main__  # noqa: PLC0415 - the running program, read when the ranks start

    spec = getattr(__main__, "__spec__", None)
    if spec is None:
        return [sys.executable, str(Path(sys.argv[0]).resolve()), *sys.argv[1:]]
    return [sys.executable, "-m", spec.name, *sys.argv[1:]]


def _report(local_rank: int, child: "subprocess.Popen[bytes]", what: str) -> None:
    print(f"typedrl train: rank {local_rank} (process {child.pid}) {what}", file=sys.stderr)


def _stop(children: Sequence["subprocess.Popen[bytes]"]) -> None:
    """Kill every child still running and reap them all."""
    for child in children:
        if child.poll() is None:
            child.kill()
    for child in children:
        child.wait()


@final
class LocalRanks:
    """The ranks 1..N-1 that rank 0 started, as a context manager around the run.

    Use :meth:`start`; with no children (a launched rank, or one process)
    everything is a no-op. Inside the context a watcher thread looks at the
    children every :data:`WATCH_PERIOD_S`: when one exits with another
    status than 0, it is named on stderr, the others are stopped, and if
    rank 0 has not left the context :data:`EXIT_GRACE_S` later (a rank that
    waits for a dead peer outside a collective that would fail), rank 0
    exits with status 1. Leaving the context on an error gives the children
    :data:`EXIT_GRACE_S` to end on their own, then stops them.

    Args:
        children: The started processes, ``children[i]`` being local rank ``i + 1``.
        environment: Rank 0's cluster environment; ``None`` without children.
    """

    def __init__(
        self,
        children: Sequence["subprocess.Popen[bytes]"] = (),
        environment: LocalRanksEnvironment | None = None,
    ) -> None:
        self.children = tuple(children)
        self.environment = environment
        self._finished = threading.Event()
        self._watcher: threading.Thread | None = None

    @classmethod
    def start(cls, processes: int, *, launcher: Launcher, num_nodes: int) -> "LocalRanks":
        """Start ranks 1..``processes - 1`` when this is rank 0 of a run without a launcher.

        Args:
            processes: The ranks on this machine (``--devices``).
            launcher: How this process was started (:func:`~typedrl.training.read_launch`):
                under ``"torchrun"`` or ``"srun"`` every rank exists already.
            num_nodes: The run's nodes; more than one needs a launcher (refused
                later, with nothing started here).
        """
        if (
            launcher != "none"
            or num_nodes != 1
            or processes < 2
            or LightningEnvironment().creates_processes_externally
        ):
            # Alone, under a launcher, or one of the ranks started here: nothing to start.
            return cls()
        port = _free_port()
        shared = {
            **os.environ,
            "MASTER_ADDR": _MAIN_ADDRESS,
            "MASTER_PORT": str(port),
            "NODE_RANK": "0",
            "WORLD_SIZE": str(processes),
        }
        command = _this_command()
        children: list[subprocess.Popen[bytes]] = []
        try:
            for local_rank in range(1, processes):
                environment = {**shared, "LOCAL_RANK": str(local_rank)}
                children.append(subprocess.Popen(command, env=environment))
        except BaseException:
            _stop(children)
            raise
        return cls(children, LocalRanksEnvironment(world_size=processes, main_port=port))

    def __enter__(self) -> "LocalRanks":
        if self.children:
            self._watcher = threading.Thread(
                target=self._watch, name="typedrl-local-ranks", daemon=True
            )
            self._watcher.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._finished.set()
        if self._watcher is not None:
            self._watcher.join()
        if error is not None and self.children:
            deadline = time.monotonic() + EXIT_GRACE_S
            for child in self.children:
                try:
                    child.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    break
        _stop(self.children)

    def _watch(self) -> None:
        """Stop the run when a child fails before rank 0 is done with the run."""
        while not self._finished.wait(WATCH_PERIOD_S):
            failed = [
                (local_rank, child)
                for local_rank, child in enumerate(self.children, start=1)
                if child.poll() not in (None, 0)
            ]
            if not failed:
                continue
            local_rank, child = failed[0]
            _report(local_rank, child, f"exited with status {child.returncode}; stopping the run")
            _stop(self.children)
            if not self._finished.wait(EXIT_GRACE_S):
                # Rank 0 is still inside the run: it waits for a rank that is gone.
                sys.stderr.flush()
                os._exit(1)
            return

    def wait(self, timeout_s: float = LAUNCHED_RANKS_EXIT_S) -> int:
        """After a finished run: wait for every child (``timeout_s`` in all); the status.

        The watcher stops first. A child that exits with another status than
        0, or does not exit in time (it is then killed), is named on stderr
        and makes the status 1; 0 otherwise (and without children).
        """
        self._finished.set()
        if self._watcher is not None:
            self._watcher.join()
        deadline = time.monotonic() + timeout_s
        status = 0
        for local_rank, child in enumerate(self.children, start=1):
            try:
                code = child.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                _report(
                    local_rank,
                    child,
                    f"had not exited {timeout_s:g} s after the run ended; stopped it",
                )
                status = 1
                continue
            if code != 0:
                _report(local_rank, child, f"exited with status {code} after the run ended")
                status = 1
        return status
