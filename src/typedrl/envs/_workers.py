"""Async vector envs whose workers leave SIGINT and SIGTERM to the main process.

A Ctrl-C in a terminal, or a SIGTERM sent to the whole process group (what
schedulers send), reaches Gymnasium's worker processes as well as the trainer.
Left to their default handlers they die mid-step (``KeyboardInterrupt`` in a
worker, ``EOFError`` in the main process), and the run loses its last
checkpoint. :func:`signal_safe_async_env` builds each worker's env through
:class:`SignalSafeEnvFn`, which first sets the worker process to ignore SIGINT,
and SIGTERM unless the main process itself sends it (``Process.terminate()``
when Gymnasium force-closes its workers, or when ``multiprocessing`` ends
daemonic workers at exit): the main process then finishes its iteration,
saves and closes the workers as a sync run does.

Only Gymnasium's public API is used: the env function is what
``AsyncVectorEnv`` calls first in each worker, before its command loop, and
Gymnasium's own worker runs unchanged. The main process is never changed:
where Gymnasium calls the env function there (to read the spaces), it only
builds the env.
"""

import os
import signal
import threading
from collections.abc import Callable
from typing import Any, final

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, AutoresetMode

__all__ = ["SignalSafeEnvFn", "signal_safe_async_env"]


def _end_on_sigterm_from(parent: int) -> None:
    """Wait for SIGTERMs; end this worker when the main process sent one, ignore others."""
    while True:
        info = signal.sigwaitinfo({signal.SIGTERM})
        if info.si_pid == parent:
            os._exit(128 + signal.SIGTERM)


def _shield_worker(parent: int) -> None:
    """Set this worker process to leave SIGINT, and SIGTERM from others than ``parent``, alone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "sigwaitinfo"):
        # SIGTERM is blocked in every thread (threads the env starts inherit the mask) and
        # collected by one that knows its sender.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        threading.Thread(
            target=_end_on_sigterm_from, args=(parent,), name="typedrl-sigterm", daemon=True
        ).start()
    else:  # no sender information on this platform: the main process closes the worker
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


@final
class SignalSafeEnvFn:
    """An env function for ``AsyncVectorEnv`` that shields its worker from group signals.

    Called in a worker process (any process but the one that made it), it sets
    that process to ignore SIGINT, and SIGTERM from any sender but the main
    process, then returns ``env_fn()``. Called in the main process, it only
    returns ``env_fn()``. Picklable when ``env_fn`` is (Gymnasium pickles env
    functions with cloudpickle).

    Args:
        env_fn: Builds one env.
    """

    def __init__(self, env_fn: Callable[[], gym.Env[Any, Any]]) -> None:
        self.env_fn = env_fn
        self.main_pid = os.getpid()

    def __call__(self) -> gym.Env[Any, Any]:
        if os.getpid() != self.main_pid:
            _shield_worker(self.main_pid)
        return self.env_fn()


def signal_safe_async_env(
    env_fn: Callable[[], gym.Env[Any, Any]], num_envs: int
) -> AsyncVectorEnv[Any, Any]:
    """A same-step-autoreset ``AsyncVectorEnv`` of ``num_envs`` envs built by ``env_fn``.

    Each worker builds its env through :class:`SignalSafeEnvFn`.
    """
    return AsyncVectorEnv(
        [SignalSafeEnvFn(env_fn)] * num_envs, autoreset_mode=AutoresetMode.SAME_STEP
    )
