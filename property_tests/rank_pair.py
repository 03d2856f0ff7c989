"""Two spawned gloo ranks that run many hypothesis examples, started once per session.

A job is any picklable object with a ``run(rank, dist)`` method, defined at
module level in a test module; both ranks run it and their results come back
to the test in rank order. A rank that raises returns the exception's text,
and a rank that does not answer in time fails the test instead of hanging it.
"""

import multiprocessing
import queue
import socket
from datetime import timedelta
from typing import Any, Protocol

import pytest
import torch.distributed as torch_dist

from typedrl.distributed import Distributed, TorchDistributed

__all__ = ["RankJob", "RankPair"]

REPLY_TIMEOUT_S = 120.0


class RankJob(Protocol):
    """What a rank pair runs: called once on each rank with that rank's collectives."""

    def run(self, rank: int, dist: Distributed) -> Any:
        """Return a picklable result for this rank."""
        ...


def _pair_worker(rank: int, port: int, jobs: Any, replies: Any) -> None:
    """Serve jobs on one rank of a 2-rank gloo group until a ``None`` job arrives."""
    torch_dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=2,
        timeout=timedelta(seconds=60),
    )
    try:
        dist = TorchDistributed()
        replies.put((rank, "ready"))
        while (job := jobs.get()) is not None:
            try:
                replies.put((rank, job.run(rank, dist)))
            except Exception as error:  # reported to the parent, which decides
                replies.put((rank, f"error: {type(error).__name__}: {error}"))
    finally:
        torch_dist.destroy_process_group()


class RankPair:
    """Two spawned gloo ranks serving :class:`RankJob` objects."""

    def __init__(self) -> None:
        context = multiprocessing.get_context("spawn")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self._jobs = [context.Queue(), context.Queue()]
        self._replies = context.Queue()
        self._processes = [
            context.Process(
                target=_pair_worker, args=(rank, port, self._jobs[rank], self._replies), daemon=True
            )
            for rank in (0, 1)
        ]
        for process in self._processes:
            process.start()
        if self._collect() != ["ready", "ready"]:
            pytest.fail("the gloo ranks did not start")

    def _collect(self) -> list[Any]:
        replies: list[Any] = [None, None]
        for _ in range(2):
            try:
                rank, reply = self._replies.get(timeout=REPLY_TIMEOUT_S)
            except queue.Empty:
                pytest.fail(f"a rank did not answer within {REPLY_TIMEOUT_S} s")
            replies[rank] = reply
        return replies

    def run(self, job: RankJob) -> list[Any]:
        """Run ``job`` on both ranks; return ``[result of rank 0, result of rank 1]``."""
        for jobs in self._jobs:
            jobs.put(job)
        return self._collect()

    def close(self) -> None:
        """Stop both ranks (killing them if they do not stop) and release the queues."""
        for jobs in self._jobs:
            jobs.put(None)
        for process in self._processes:
            process.join(30.0)
            if process.is_alive():
                process.kill()
                process.join(5.0)
            process.close()
        for q in (*self._jobs, self._replies):
            q.close()
            q.join_thread()
