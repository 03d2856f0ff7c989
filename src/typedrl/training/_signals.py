"""Graceful stopping on SIGINT/SIGTERM: finish the iteration, save, return; a second aborts."""

import contextlib
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any, final

__all__ = ["StopRequest"]


@final
class StopRequest:
    """A context manager that turns the first SIGINT/SIGTERM into a stop request.

    Inside the context, the first signal sets :attr:`requested` (the training
    loop checks it between updates, saves ``last.ckpt`` and returns normally);
    a second signal raises :class:`KeyboardInterrupt` at once. Outside the
    main thread signal handlers cannot be installed, and the context does
    nothing.

    With ``announce`` (the rank that talks to the user), the first signal is
    answered on standard error at once with what happens next, since the
    current iteration may run for minutes: :meth:`announcement`.

    Args:
        announce: Say on standard error what the first signal does.

    Example:
        >>> with StopRequest() as stop:
        ...     stop.requested
        False
    """

    def __init__(self, *, announce: bool = False) -> None:
        self.requested = False
        self.signal_name: str | None = None
        self._announce = announce
        self._previous: dict[int, Any] = {}

    @staticmethod
    def announcement(signal_name: str) -> str:
        """The line the first signal prints: what happens now, and what a second signal does.

        Example:
            >>> print(StopRequest.announcement("SIGINT"))
            typedrl: SIGINT received: stopping after the current iteration, then saving
            last.ckpt; press Ctrl-C again to stop now without saving
        """
        again = "press Ctrl-C" if signal_name == "SIGINT" else f"send {signal_name} or press Ctrl-C"
        return (
            f"typedrl: {signal_name} received: stopping after the current iteration, then "
            f"saving last.ckpt; {again} again to stop now without saving"
        )

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        del frame
        if self.requested:
            raise KeyboardInterrupt(f"second {signal.Signals(signum).name}: aborting")
        self.requested = True
        self.signal_name = signal.Signals(signum).name
        if self._announce:
            # One unbuffered write: a handler may run while the main thread is inside a
            # buffered write to the same stream, which a print here would re-enter.
            line = f"\n{self.announcement(self.signal_name)}\n".encode()
            with contextlib.suppress(OSError, ValueError):
                os.write(sys.stderr.fileno(), line)

    def __enter__(self) -> "StopRequest":
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            # None: the previous handler was not installed from Python; restore the default.
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        self._previous.clear()
