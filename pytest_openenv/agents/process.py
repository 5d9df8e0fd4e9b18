"""An agent program run in a process group of its own, its output kept bounded.

The program and everything it starts share one process group (``start_new_session``), so
ending the episode ends them all: SIGTERM to the group, then SIGKILL to what is left. Its
stdout and stderr are read on threads into a tail of ``TAIL_BYTES`` each; past
``FLOOD_BYTES`` in all the program is flooding and is stopped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

#: bytes of each stream kept for the failure report
TAIL_BYTES = 16 * 1024
#: bytes of output (both streams) past which the program is stopped as flooding
FLOOD_BYTES = 32 * 1024 * 1024
#: seconds a program has to end after SIGTERM before SIGKILL
TERM_GRACE = 2.0
#: most seconds between looks at the program and the episode: a look also comes at once
#: when the program exits or its episode wakes the wait (a model call, a tool call)
POLL = 0.5


class _Tail:
    """The last ``limit`` bytes of a stream, and how many were read in all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data += chunk
        if len(self.data) > self.limit:
            del self.data[: len(self.data) - self.limit]

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


class AgentProcess:
    """One run of an agent program (``start``, then ``wait_until``, then ``stop``)."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.argv, self.env, self.cwd = argv, env, cwd
        self.stdout = _Tail(TAIL_BYTES)
        self.stderr = _Tail(TAIL_BYTES)
        self.proc: subprocess.Popen[bytes] | None = None
        #: ``time.monotonic()`` just before the program was started
        self.started = 0.0
        self._readers: list[threading.Thread] = []

    @property
    def flooded(self) -> bool:
        return self.stdout.total + self.stderr.total > FLOOD_BYTES

    def start(self) -> None:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            self.argv,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        for stream, tail in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr)):
            reader = threading.Thread(
                target=self._read, args=(stream, tail), name="openenv-agent-output", daemon=True
            )
            reader.start()
            self._readers.append(reader)

    def _read(self, stream: IO[bytes] | None, tail: _Tail) -> None:
        if stream is None:
            return
        with contextlib.suppress(OSError, ValueError):
            while chunk := stream.read1(65536):  # type: ignore[attr-defined]
                tail.add(chunk)
                if self.flooded:
                    self.stop()  # a reader ends the flood at once, not at the next look
                    return

    def wait_until(
        self,
        stop: Callable[[], str | None],
        deadline: float | None,
        wake: threading.Event | None = None,
    ) -> str | None:
        """Wait for the program to exit, ``stop()`` to give a reason, or ``deadline``;
        ``stop()`` is asked again whenever ``wake`` is set, and at least every ``POLL``.

        Returns the reason it was stopped (``timeout``, ``flooded`` or ``stop()``'s), None
        when it exited by itself.
        """
        proc = self.proc
        assert proc is not None
        wake = wake or threading.Event()
        exited = threading.Event()

        def watch() -> None:
            with contextlib.suppress(ChildProcessError):
                proc.wait()
            exited.set()
            wake.set()

        threading.Thread(target=watch, name="openenv-agent-exit", daemon=True).start()
        while not exited.is_set():
            if self.flooded:
                return "flooded"
            reason = stop()
            if reason is not None:
                return reason
            now = time.monotonic()
            if deadline is not None and now > deadline:
                return "timeout"
            wake.wait(POLL if deadline is None else min(POLL, max(deadline - now, 0.0)))
            wake.clear()
        return "flooded" if self.flooded else None

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.returncode

    def stop(self, hard: bool = False) -> None:
        """End the program and every process of its group; wait until they are gone.

        ``hard``: SIGKILL at once (past its time limit an agent gets no grace: the item
        waiting on it gives up soon after)."""
        proc = self.proc
        if proc is None:
            return
        signals = ((signal.SIGTERM, TERM_GRACE), (signal.SIGKILL, TERM_GRACE))
        for sig, grace in signals[1:] if hard else signals:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            end = time.monotonic() + grace
            while time.monotonic() < end and group_alive(proc.pid):
                with contextlib.suppress(ChildProcessError):
                    proc.poll()  # reaps the leader, whose zombie would keep the group
                time.sleep(0.02)
            if not group_alive(proc.pid):
                break
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(TERM_GRACE)

    def close(self, hard: bool = False) -> None:
        self.stop(hard)
        for reader in self._readers:
            reader.join(TERM_GRACE)
        proc = self.proc
        if proc is not None:
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is still running.

    A zombie does not count: a child the agent left behind is reaped by init, which may
    take its time, and signalling the group "succeeds" while its zombie waits.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True  # no /proc to tell zombies by: the signal's answer stands
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue  # it ended while we looked
        # after the command's closing parenthesis: state, ppid, pgrp
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] != b"Z":
            return True
    return False
