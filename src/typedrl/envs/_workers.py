"""Async vector-env workers that leave SIGINT and SIGTERM to the main process.

A Ctrl-C in a terminal, or a SIGTERM sent to the whole process group (what
schedulers send), reaches Gymnasium's worker processes as well as the trainer.
Left to their default handlers they die mid-step (``KeyboardInterrupt`` in a
worker, ``EOFError`` in the main process), and the run loses its last
checkpoint. :func:`signal_safe_worker` runs Gymnasium's own worker loop with
SIGINT ignored and SIGTERM ignored unless the main process itself sends it
(``Process.terminate()`` when Gymnasium force-closes its workers, or when
``multiprocessing`` ends daemonic workers at exit): the main process then
finishes its iteration, saves and closes the workers as a sync run does.
"""

import os
import signal
import threading
from typing import Any

from gymnasium.vector import async_vector_env

__all__ = ["signal_safe_worker"]


def _end_on_sigterm_from_parent(parent: int) -> None:
    """Wait for SIGTERMs; end this worker when the main process sent one, ignore others."""
    while True:
        info = signal.sigwaitinfo({signal.SIGTERM})
        if info.si_pid == parent:
            os._exit(128 + signal.SIGTERM)


def signal_safe_worker(*args: Any) -> None:
    """Gymnasium's async worker, shielded from the signals meant for the main process.

    Pass it as ``AsyncVectorEnv(..., worker=signal_safe_worker)``; the
    arguments are Gymnasium's worker arguments, forwarded unchanged.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "sigwaitinfo"):
        # SIGTERM is blocked in every thread and collected by one that knows its sender.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        threading.Thread(
            target=_end_on_sigterm_from_parent,
            args=(os.getppid(),),
            name="typedrl-sigterm",
            daemon=True,
        ).start()
    else:  # no sender information on this platform: the main process closes the worker
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    async_vector_env._async_worker(*args)
