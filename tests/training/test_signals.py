"""Tests for typedrl.training._signals: StopRequest."""

import os
import signal
import threading
from types import FrameType

import pytest

from typedrl.training._signals import StopRequest


def _custom_handler(signum: int, frame: FrameType | None) -> None:
    del signum, frame


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_first_signal_requests_a_stop_and_handlers_are_restored(signum: signal.Signals) -> None:
    """The first signal sets requested; leaving the context restores the previous handlers."""
    previous_int = signal.signal(signal.SIGINT, _custom_handler)
    previous_term = signal.signal(signal.SIGTERM, _custom_handler)
    try:
        with StopRequest() as stop:
            assert signal.getsignal(signal.SIGINT) is not _custom_handler
            assert stop.requested is False
            os.kill(os.getpid(), signum)
            requested: bool = stop.requested
            assert requested
            assert stop.signal_name == signum.name
        assert signal.getsignal(signal.SIGINT) is _custom_handler
        assert signal.getsignal(signal.SIGTERM) is _custom_handler
    finally:
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous_term)


def test_second_signal_aborts() -> None:
    """A second signal raises KeyboardInterrupt at once; handlers are still restored."""
    previous = signal.getsignal(signal.SIGINT)
    with StopRequest() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested
        with pytest.raises(KeyboardInterrupt, match="second SIGINT"):
            os.kill(os.getpid(), signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is previous


def test_outside_the_main_thread_it_does_nothing() -> None:
    """Signal handlers cannot be installed off the main thread; the context is inert."""
    previous = signal.getsignal(signal.SIGINT)
    seen: list[bool] = []

    def body() -> None:
        with StopRequest() as stop:
            seen.append(stop.requested)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(10.0)
    assert seen == [False]
    assert signal.getsignal(signal.SIGINT) is previous


def test_the_first_signal_says_what_happens_next(capfd: pytest.CaptureFixture[str]) -> None:
    """With announce, the first signal prints at once that the iteration finishes first."""
    previous = signal.getsignal(signal.SIGTERM)
    with StopRequest(announce=True) as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested
    assert signal.getsignal(signal.SIGTERM) is previous
    assert capfd.readouterr().err == (
        "\ntypedrl: SIGTERM received: stopping after the current iteration, then saving "
        "last.ckpt; send SIGTERM or press Ctrl-C again to stop now without saving\n"
    )
    with StopRequest() as quiet:
        os.kill(os.getpid(), signal.SIGINT)
        assert quiet.requested
    assert capfd.readouterr().err == ""
