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

import signal
import threading
from types import FrameType
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
