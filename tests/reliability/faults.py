"""Fault injection helpers: pytest runs we can kill, interrupt and starve mid-flight.

``pytester.runpytest_subprocess`` waits for the run to end, so these tests start
pytest with ``subprocess.Popen`` in a fresh folder, in a new process group (so a
kill reaches xdist workers too and nothing outlives the test), with stdout and
stderr in files (a full pipe must never stall the run).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import CHILD_RUN_IDLE_PLUGINS

ENV = "openspiel:tic_tac_toe"

#: An episode test whose policy can be slowed down or made to kill its own process,
#: steered by environment variables so one file serves every fault test.
EPISODE_TEST = '''
import os
import time

import pytest

from pytest_openenv.policies.scripted import ScriptedPolicy


class FaultyScripted(ScriptedPolicy):
    """The scripted teacher, slowed down, and dying on the episode seeds it is told to."""

    def act(self, turn):
        time.sleep(float(os.environ.get("FAULT_DELAY", "0")))
        if str(turn.seed) in os.environ.get("FAULT_EXIT_SEEDS", "").split(","):
            os._exit(13)
        if str(turn.seed) in os.environ.get("FAULT_SEGV_SEEDS", "").split(","):
            import ctypes

            ctypes.string_at(0)  # a real segmentation fault inside the policy
        return super().act(turn)


@pytest.fixture
def openenv_policy():
    return FaultyScripted()


def test_ep(episode):
    assert episode.passed, episode.explain()
'''


#: Beside it: a pause at session end (before the controller's final rewrite), marked by a
#: file ``finishing`` in the run folder, so a kill can land after every row is appended.
FAULT_CONFTEST = """
import os
import time

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    delay = os.environ.get("FAULT_FINISH_DELAY")
    if delay and not hasattr(session.config, "workerinput"):
        open("finishing", "w").close()
        time.sleep(float(delay))
"""


@dataclass
class Finished:
    returncode: int
    stdout: str
    stderr: str

    @property
    def text(self) -> str:
        return self.stdout + self.stderr

    def assert_clean(self) -> None:
        assert "INTERNALERROR" not in self.text, self.text[-4000:]
        assert "Traceback (most recent call last)" not in self.stderr, self.stderr[-4000:]


@dataclass
class Run:
    proc: subprocess.Popen[bytes]
    folder: Path
    output: Path
    logs: tuple[Path, Path]
    drains: list[threading.Thread] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def rows(self) -> int:
        return count_rows(self.output)

    def wait_rows(self, count: int, timeout: float = 60) -> bool:
        """Until ``count`` rows are on disk; False if the run ended first."""
        deadline = time.monotonic() + timeout
        while self.rows() < count:
            if self.proc.poll() is not None:
                return False
            assert time.monotonic() < deadline, f"no {count} rows after {timeout}s"
            time.sleep(0.002)
        return True

    def signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def signal_controller(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, sig)

    def wait(self, timeout: float = 120) -> Finished:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal_group(signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(
                f"pytest did not end within {timeout}s: {self.read()[0][-3000:]}"
            ) from None
        for drain in self.drains:
            drain.join(30)
        stdout, stderr = self.read()
        return Finished(self.proc.returncode, stdout, stderr)

    def read(self) -> tuple[str, str]:
        return tuple(p.read_text(errors="replace") for p in self.logs)  # type: ignore[return-value]


def default_sigint() -> None:
    """``preexec_fn`` for a run that a test interrupts: SIGINT back to its default action.

    A shell starts background jobs (``cmd &``, ``nohup``) with SIGINT ignored and children
    inherit that; Python then installs no KeyboardInterrupt handler, so a Ctrl-C test would
    measure how the suite was started instead of how the run handles Ctrl-C.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Launcher:
    """Starts pytest runs in one folder; kills whatever is left at teardown."""

    def __init__(self, folder: Path, addopts: str = CHILD_RUN_IDLE_PLUGINS) -> None:
        self.folder = folder
        self.addopts = addopts  # PYTEST_ADDOPTS of every run (the outer shell's never)
        self.output = folder / "out"
        self.runs: list[Run] = []

    def write_episode_test(self) -> None:
        (self.folder / "test_eps.py").write_text(EPISODE_TEST)
        (self.folder / "conftest.py").write_text(FAULT_CONFTEST)

    def start(self, *args: str, env: dict[str, str] | None = None) -> Run:
        number = len(self.runs)
        logs = (self.folder.parent / f"run{number}.out", self.folder.parent / f"run{number}.err")
        full_env = {
            key: value
            for key, value in os.environ.items()
            # isolation: no xdist worker identity, no keys or endpoints of the outer shell
            if not key.startswith(
                ("PYTEST_", "FAULT_", "GITHUB_STEP_SUMMARY", "OPENAI_", "ANTHROPIC_", "HF_")
            )
        }
        if self.addopts:
            full_env["PYTEST_ADDOPTS"] = self.addopts
        full_env.update(env or {})
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            f"--openenv-output={self.output}",
            *args,
        ]
        # Pipes drained by this process, not files owned by the run: a file-size limit
        # put on the controller must hit its output folder, not its terminal.
        proc = subprocess.Popen(
            command,
            cwd=self.folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=full_env,
            start_new_session=True,
            preexec_fn=default_sigint,
        )
        drains = [
            threading.Thread(target=_drain, args=(pipe, log), daemon=True)
            for pipe, log in ((proc.stdout, logs[0]), (proc.stderr, logs[1]))
        ]
        for drain in drains:
            drain.start()
        run = Run(proc, self.folder, self.output, logs, drains)
        self.runs.append(run)
        return run

    def run(self, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Finished:
        finished = self.start(*args, env=env).wait(timeout)
        finished.assert_clean()
        return finished

    def close(self) -> None:
        for run in self.runs:
            if run.proc.poll() is None:
                run.signal_group(signal.SIGKILL)
                run.proc.wait()
            # xdist workers of a killed controller: same process group, gone with it
            run.signal_group(signal.SIGKILL)


def count_rows(output: Path) -> int:
    """Whole lines in results.jsonl plus failures.jsonl (0 for a missing file)."""
    total = 0
    for name in ("results.jsonl", "failures.jsonl"):
        with contextlib.suppress(OSError):
            total += (output / name).read_bytes().count(b"\n")
    return total


def _drain(pipe: Any, log: Path) -> None:
    with log.open("wb") as sink:
        for chunk in iter(lambda: pipe.read1(65536), b""):
            sink.write(chunk)
            sink.flush()
    pipe.close()


def read_rows(path: Path) -> list[dict[str, Any]]:
    """Every line whole and a JSON object; a torn line fails the test."""
    if not path.exists():
        return []
    raw = path.read_bytes()
    assert raw == b"" or raw.endswith(b"\n"), f"{path} ends in a torn line: {raw[-200:]!r}"
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


def episode_ids(rows: list[dict[str, Any]]) -> list[str]:
    return [row["episode_id"] for row in rows]
