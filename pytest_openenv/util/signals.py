"""SIGTERM handled as Ctrl-C: how CI runners, Kubernetes and ``docker stop`` cancel a job.

Python's default for SIGTERM is to die at once: no summary, no card, the output
folder's lock left behind, xdist workers dying mid-episode with tracebacks. As an
interrupt, the run stops as it does on Ctrl-C (pytest's exit code 2): the files are
finished, the lock released, the resume command printed. A second SIGTERM while
that happens is ignored, so the finishing is not cut short; the orchestrator's
SIGKILL after its grace period still ends the process.

Installed only by a process that plays or records episodes, only from the main
thread, and only over the default handler (a handler someone else set is theirs).
"""

from __future__ import annotations

# the C module under ``signal``: its getsignal/signal take and give plain ints, where
# ``signal``'s wrappers turn every number into an enum member and back, which was most of a
# held section's cost (the controller holds one per test report)
import _signal
import signal
import threading
from types import FrameType, TracebackType
from typing import Any


class TermAsInterrupt:
    """While installed, the first SIGTERM raises ``KeyboardInterrupt`` in the main thread."""

    def __init__(self) -> None:
        self._previous: Any = None
        self.installed = False
        #: a SIGTERM arrived (the run was cancelled from outside)
        self.received = False

    def install(self) -> None:
        if self.installed or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        self._previous = signal.signal(signal.SIGTERM, self._interrupt)
        self.installed = True

    def restore(self) -> None:
        if not self.installed or threading.current_thread() is not threading.main_thread():
            return
        signal.signal(signal.SIGTERM, self._previous)
        self.installed = False

    def _interrupt(self, signum: int, frame: FrameType | None) -> None:
        self.received = True
        # the files are being finished from here on: a second SIGTERM must not cut that short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt("SIGTERM: the run was cancelled (handled as Ctrl-C)")


def drop_entries_without_a_line(tb: TracebackType | None) -> None:
    """Unlink from ``tb`` the entries after its first whose line Python cannot name.

    A signal handler raises wherever the main thread is, and since Python 3.11 that can be
    an instruction with no line number (``tb_lineno`` is None). pytest's report of the
    interrupt subtracts from that number, fails with a TypeError, and the run prints a
    traceback where the interrupt's summary belongs. Such an entry tells a reader nothing;
    the frames around it stay.
    """
    while tb is not None:
        after = tb.tb_next
        while after is not None and after.tb_lineno is None:
            after = after.tb_next
        tb.tb_next = after
        tb = after


class InterruptsHeld:
    """A section a Ctrl-C (or SIGTERM) must not split: the signal is taken at its end.

    Counting an episode and appending its row are one step for the run's figures; an
    interrupt between them would leave a counted episode with no row (or a row the
    summary does not count). Inside the section a signal is only noted; leaving it calls
    the handler that was there, so the interrupt happens exactly as it would have, a few
    microseconds later. Main thread only (where Python runs signal handlers); elsewhere it
    holds nothing.
    """

    SIGNUMS = (int(signal.SIGINT), int(signal.SIGTERM))

    def __init__(self) -> None:
        self._previous: dict[int, Any] = {}
        self._pending: list[tuple[int, FrameType | None]] = []

    def __enter__(self) -> InterruptsHeld:
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum in self.SIGNUMS:
            current = _signal.getsignal(signum)
            if callable(current):  # a Python handler: ours to defer; SIG_DFL/SIG_IGN stay
                self._previous[signum] = _signal.signal(signum, self._note)
        return self

    def __exit__(self, *exc_info: object) -> None:
        previous, self._previous = self._previous, {}
        for signum, handler in previous.items():
            _signal.signal(signum, handler)
        pending, self._pending = self._pending, []
        for signum, frame in pending[:1]:  # one interrupt, as the first signal would have been
            previous[signum](signum, frame)

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self._pending.append((signum, frame))
