"""Child pytest runs forked from a warm interpreter instead of started from scratch.

Most of the suite's tests run ``python -m pytest`` in a child process, a few thousand per
run, and each child used to spend a third to a half of its CPU starting the interpreter and
importing pytest, xdist, syrupy, the plugin and pyspiel before its first test. A fork server
imports those once, per xdist worker of the suite, and forks a child for each run; the child
then looks like the process ``subprocess.Popen`` would have started: its own working folder,
environment, ``sys.path`` (the folder, then ``PYTHONPATH``, then the interpreter's own),
arguments, standard streams and exit code, and the interpreter's shutdown (threads joined,
atexit handlers run, streams flushed) at its end.

What a fork cannot give is an interpreter started with different settings, so a run whose
environment changes how the interpreter starts (a ``PYTHON*`` variable other than
``PYTHONPATH`` and ``PYTHONDONTWRITEBYTECODE``, ``LD_*``) gets a real process, as does a test
marked ``child_process`` (one that looks at what its child imported, or at its memory).

``ForkServer.popen`` stands in for ``pytester.popen``: pytester's ``run`` (and so
``runpytest_subprocess``) writes the same files, applies the same timeout and builds the same
``RunResult``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: what nearly every child run imports; an import here is shared by every fork. Not xdist:
#: its plugin module keeps ``sys.path`` as it was at its import and hands that to the
#: workers, so it must be imported by the run whose path it is.
WARM_MODULES = (
    "pytest",
    "_pytest.pytester",
    "execnet",
    "syrupy",
    "pytest_openenv.plugin",
    "pytest_openenv.controller.plugin",
    "pytest_openenv.worker.plugin",
    "pyspiel",
)

#: variables the interpreter reads once, as it starts: a fork would run with the server's
STARTUP_PREFIXES = ("PYTHON", "LD_")
STARTUP_ALLOWED = {"PYTHONPATH", "PYTHONDONTWRITEBYTECODE"}


def startup_settings(env: dict[str, str]) -> dict[str, str]:
    return {
        name: value
        for name, value in env.items()
        if name.startswith(STARTUP_PREFIXES) and name not in STARTUP_ALLOWED
    }


class ForkedProcess:
    """The part of ``subprocess.Popen`` that pytester's ``run`` uses."""

    stdin = None

    def __init__(self, server: ForkServer, pid: int, args: list[str]) -> None:
        self._server = server
        self.pid = pid
        self.args = args
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._server.exit_code(self.pid, timeout, self.args)
        return self.returncode

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = self._server.exit_code(self.pid, 0, self.args)
            except subprocess.TimeoutExpired:
                return None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class ForkServer:
    """One warm interpreter, started on first use, that forks ``python -m pytest`` runs."""

    def __init__(self, log: Path) -> None:
        self._log = log
        self._process: subprocess.Popen | None = None
        self._socket: socket.socket | None = None
        # the environment the server starts with, taken now (at the session's start), not in
        # the first test that uses it, whose own settings would last for every later fork
        self._env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
        self._settings = startup_settings(self._env)
        self._buffer = b""

    def handles(self, cmdargs: tuple[str, ...], env: dict[str, str], stdin: Any) -> bool:
        return (
            len(cmdargs) >= 2
            and cmdargs[0] == sys.executable
            and cmdargs[1] in ("-mpytest", "-m pytest")
            and stdin is not None
            and startup_settings(env) == self._settings
        )

    def start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with self._log.open("ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, __file__, str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=self._env,
                cwd="/",
            )
        theirs.close()
        self._socket = ours
        ready = self._line(timeout=120)
        if ready != "ready":
            raise RuntimeError(f"the fork server did not start ({ready!r}); see {self._log}")

    def popen(
        self, cmdargs: tuple[str, ...], env: dict[str, str], stdout: Any, stderr: Any
    ) -> ForkedProcess:
        if self._socket is None:
            self.start()
        assert self._socket is not None
        request = {"argv": list(cmdargs[2:]), "cwd": os.getcwd(), "env": env}
        socket.send_fds(
            self._socket, [json.dumps(request).encode() + b"\n"], [stdout.fileno(), stderr.fileno()]
        )
        answer = self._line(timeout=60)
        kind, _, pid = answer.partition(" ")
        if kind != "pid":
            raise RuntimeError(f"the fork server answered {answer!r}; see {self._log}")
        return ForkedProcess(self, int(pid), list(cmdargs))

    def exit_code(self, pid: int, timeout: float | None, args: list[str]) -> int:
        try:
            answer = self._line(timeout=timeout)
        except TimeoutError:
            raise subprocess.TimeoutExpired(args, timeout or 0) from None
        kind, _, rest = answer.partition(" ")
        child, _, code = rest.partition(" ")
        if kind != "exit" or int(child) != pid:
            raise RuntimeError(f"the fork server answered {answer!r} for {pid}; see {self._log}")
        return int(code)

    def _line(self, timeout: float | None) -> str:
        assert self._socket is not None
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            self._socket.settimeout(left)
            try:
                chunk = self._socket.recv(4096)
            except TimeoutError:
                raise TimeoutError from None
            if not chunk:
                raise RuntimeError(f"the fork server went away; see {self._log}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def stop(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._process is not None:
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None


# -- the server process ---------------------------------------------------------------------


def serve(channel: socket.socket) -> None:
    # what sys.path holds besides the script's own folder (started without PYTHONPATH): the
    # interpreter's entries, which every child's path ends with
    own_path = sys.path[1:]
    sys.path[:] = own_path
    warm_up()
    if "xdist" in sys.modules:
        raise RuntimeError("xdist was imported before any child's sys.path was set")
    channel.sendall(b"ready\n")
    buffer = b""
    while True:
        while b"\n" not in buffer:
            data, fds, _flags, _address = socket.recv_fds(channel, 1 << 20, 2)
            if not data:
                return
            buffer += data
            if fds:
                out_fd, err_fd = fds
        line, _, buffer = buffer.partition(b"\n")
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            channel.close()
            run_child(request, out_fd, err_fd, own_path)  # never returns
        os.close(out_fd)
        os.close(err_fd)
        channel.sendall(f"pid {pid}\n".encode())
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        channel.sendall(f"exit {pid} {code}\n".encode())


def warm_up() -> None:
    """Import ``WARM_MODULES`` as a pytest run would: through pytest's assertion rewriting.

    pytest rewrites the asserts of its plugins' modules as it imports them, and warns about
    one that was imported before it could; imported through its import hook here, the
    modules are what a run would have made of them, and no run warns.
    """
    import importlib

    from _pytest.assertion import AssertionState
    from _pytest.assertion.rewrite import AssertionRewritingHook, assertstate_key
    from _pytest.config import get_config

    config = get_config()
    config.stash[assertstate_key] = AssertionState(config, "rewrite")
    hook = AssertionRewritingHook(config)
    hook.mark_rewrite("syrupy", "pytest_openenv")
    sys.meta_path.insert(0, hook)
    try:
        for name in WARM_MODULES:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)
    finally:
        sys.meta_path.remove(hook)


def run_child(request: dict[str, Any], out_fd: int, err_fd: int, own_path: list[str]) -> None:
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        for fd in (null, out_fd, err_fd):
            os.close(fd)
        env = request["env"]
        cwd = request["cwd"]
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
        extra = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
        sys.path[:] = [cwd, *extra, *own_path]
        import importlib

        importlib.invalidate_caches()
        import runpy

        # as ``python -m pytest`` does: pytest's __main__ as the __main__ module, whose file
        # is sys.argv[0] (the plugin tells the pytest command from pytest.main() by it)
        sys.argv = ["-m", *request["argv"]]
        try:
            runpy.run_module("pytest", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
            if not isinstance(stop.code, int) and stop.code is not None:
                print(stop.code, file=sys.stderr)
        finally:
            shut_down()
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def shut_down() -> None:
    """What the interpreter does at its end before the process exits."""
    import atexit
    import threading

    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
