"""Graceful stopping on SIGINT/SIGTERM: finish the update, save, return; a second signal aborts."""

import signal
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

    Example:
        >>> with StopRequest() as stop:
        ...     stop.requested
        False
    """

    def __init__(self) -> None:
        self.requested = False
        self.signal_name: str | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        del frame
        if self.requested:
            raise KeyboardInterrupt(f"second {signal.Signals(signum).name}: aborting")
        self.requested = True
        self.signal_name = signal.Signals(signum).name

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
