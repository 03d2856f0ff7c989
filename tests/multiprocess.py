"""Helpers for tests that run code in other processes: two real gloo ranks, or one fresh one."""

import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import pytest
import torch

__all__ = ["JOIN_TIMEOUT_S", "free_port", "run_in_fresh_process", "run_two_ranks"]

JOIN_TIMEOUT_S = 120.0


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _run_and_tear_down(target: Any, rank: int, port: int, *args: Any) -> None:
    """Run ``target`` on this rank, tear the process group down and leave at once.

    The workers report through files written by ``target``. Leaving with
    ``os._exit`` skips the interpreter's shutdown, during which gloo's
    background threads can abort the process ("terminate called without an
    active exception") after the work is done and reported.
    """
    code = 0
    try:
        target(rank, port, *args)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


_FRESH = multiprocessing.get_context("forkserver")
"""The processes fork from one server per test worker, a fresh interpreter that has imported
torch, Fabric and typedrl's trainers once and done nothing else: a spawned process would
spend several seconds importing them again. Like a spawned one, it has neither the test
process's state nor its runtime shape-check hook, and it inherits the environment variables
and working directory the server started with, not the test's at the time of the call."""
_FRESH.set_forkserver_preload(["torch", "lightning_fabric", "typedrl.ppo", "typedrl.apg"])


def run_two_ranks(target: Any, *args: Any) -> None:
    """Run ``target(rank, port, *args)`` on two processes; fail on error or timeout."""
    context = _FRESH
    port = free_port()
    processes = [
        context.Process(target=_run_and_tear_down, args=(target, rank, port, *args), daemon=True)
        for rank in (0, 1)
    ]
    for process in processes:
        process.start()
    try:
        for process in processes:
            process.join(JOIN_TIMEOUT_S)
        hung = [rank for rank, process in enumerate(processes) if process.is_alive()]
        if hung:
            pytest.fail(f"ranks {hung} did not finish within {JOIN_TIMEOUT_S} s")
        codes = [process.exitcode for process in processes]
        if codes != [0, 0]:
            pytest.fail(f"ranks exited with codes {codes}")
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
            process.join(5.0)
            process.close()


def run_in_fresh_process(target: Any, *args: Any) -> None:
    """Run ``target(*args)`` in one fresh process; fail on error or timeout.

    For code that must run without what the test process has loaded (the
    test suite's runtime shape-check hook, which torch.compile cannot trace;
    a fresh interpreter for a resume). ``target`` reports through files.
    """
    process = _FRESH.Process(target=target, args=args)
    process.start()
    try:
        process.join(JOIN_TIMEOUT_S)
        if process.is_alive():
            pytest.fail(f"{target.__name__} did not finish within {JOIN_TIMEOUT_S} s")
        if process.exitcode != 0:
            pytest.fail(f"{target.__name__} exited with code {process.exitcode}")
    finally:
        if process.is_alive():
            process.kill()
        process.join(5.0)
        process.close()


def wait_until(
    process: "subprocess.Popen[str]", ready: Callable[[], bool], *, timeout_s: float = 240.0
) -> None:
    """Poll ``ready`` until it holds; fail with the output if ``process`` ends or time runs out.

    ``process`` must lead its own process group (``start_new_session=True``),
    which a timeout kills whole.
    """
    deadline = time.monotonic() + timeout_s
    while not ready():
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"the command ended early ({process.returncode}):\n{out}\n{err[-3000:]}")
        if time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            pytest.fail(f"the command did not get there within {timeout_s:.0f} s")
        time.sleep(0.2)
