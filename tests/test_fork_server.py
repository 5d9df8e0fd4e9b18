"""The suite's forked child runs look like the processes ``subprocess.Popen`` would start.

Each probe run records what its process sees (folder, environment, ``sys.path``, arguments,
what the interpreter's end does) so a fork that kept the server's state fails here, not as an
odd result in some other test.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from fork_server import ForkedProcess, ForkServer

PROBE = """
import atexit
import json
import os
import sys
import threading
import time

import pytest


def test_probe(request):
    view = {
        "pid": os.getpid(),
        "parent": os.getppid(),
        "cwd": os.getcwd(),
        "path": sys.path,
        "argv": sys.argv,
        "probe_var": os.environ.get("PROBE_VAR"),
        "dont_write_bytecode": sys.dont_write_bytecode,
        "stdin": os.read(0, 100).decode(),  # fd 0, whatever pytest captures
    }
    with open("view.json", "w") as out:
        json.dump(view, out)
    print("to stdout")
    print("to stderr", file=sys.stderr)

    def late():
        time.sleep(0.3)
        open("thread-done", "w").close()

    threading.Thread(target=late).start()  # not a daemon: the interpreter's end waits for it
    atexit.register(lambda: open("atexit-done", "w").close())
    assert os.environ.get("PROBE_FAIL") != "1"
"""


@pytest.fixture
def probe(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_probe=PROBE)
    return pytester


def view(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "view.json").read_text())


def test_a_forked_run_sees_its_own_folder_environment_path_and_arguments(
    probe: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROBE_VAR", "forked")
    monkeypatch.setenv("PYTHONPATH", "/nonexistent/on-the-path")
    result = probe.runpytest_subprocess("-p", "no:cacheprovider", "-s", "test_probe.py")
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    seen = view(probe)
    assert seen["pid"] != os.getpid()
    assert seen["parent"] != os.getpid()  # the fork server's child, not this process's
    assert seen["cwd"] == str(probe.path)
    assert seen["probe_var"] == "forked"
    # the folder, then PYTHONPATH, then the interpreter's own entries; never the suite's tests/
    assert seen["path"][:3] == [str(probe.path), str(probe.path), "/nonexistent/on-the-path"]
    tests_folder = str(Path(__file__).resolve().parent)
    assert tests_folder not in seen["path"]
    assert any(entry.endswith("site-packages") for entry in seen["path"])
    assert seen["argv"][0].endswith(os.path.join("pytest", "__main__.py"))
    assert seen["argv"][1:] == [
        f"--basetemp={probe.path / 'runpytest-0'}",
        "-p",
        "no:cacheprovider",
        "-s",
        "test_probe.py",
    ]
    assert seen["stdin"] == ""  # closed, as pytester's own Popen leaves it
    result.stdout.fnmatch_lines(["*to stdout*", "*1 passed*"])
    result.stderr.fnmatch_lines(["*to stderr*"])
    # the interpreter's end: a running thread joined, then the atexit handlers
    assert (probe.path / "thread-done").exists()
    assert (probe.path / "atexit-done").exists()


def test_a_forked_run_returns_its_exit_code(
    probe: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROBE_FAIL", "1")
    assert probe.runpytest_subprocess("-p", "no:cacheprovider").ret == pytest.ExitCode.TESTS_FAILED
    assert probe.runpytest_subprocess("--no-such-option").ret == pytest.ExitCode.USAGE_ERROR


def test_two_forked_runs_are_two_processes(probe: pytest.Pytester) -> None:
    probe.runpytest_subprocess("-p", "no:cacheprovider")
    first = view(probe)["pid"]
    probe.runpytest_subprocess("-p", "no:cacheprovider")
    assert view(probe)["pid"] != first


def test_an_interpreter_setting_in_the_environment_gets_a_process_of_its_own(
    probe: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    probe.runpytest_subprocess("-p", "no:cacheprovider")
    assert view(probe)["dont_write_bytecode"] is True  # the fork applies this one itself
    server = ForkServer(probe.path / "unused.log")
    env = {**os.environ, "PYTHONHASHSEED": "123"}  # read as the interpreter starts: not forked
    assert not server.handles((sys.executable, "-mpytest"), env, object())
    del env["PYTHONHASHSEED"]
    assert server.handles((sys.executable, "-mpytest"), env, object())
    monkeypatch.setenv("PYTHONHASHSEED", "123")
    probe.runpytest_subprocess("-p", "no:cacheprovider")
    assert view(probe)["parent"] == os.getpid()
    assert not server.handles(("/bin/other", "-mpytest"), env, object())


@pytest.mark.child_process
def test_the_marker_gives_a_test_fresh_processes(probe: pytest.Pytester) -> None:
    result = probe.runpytest_subprocess("-p", "no:cacheprovider", "test_probe.py")
    assert result.ret == 0
    assert view(probe)["parent"] == os.getpid()
    assert not isinstance(probe.popen([sys.executable, "-c", "pass"]), ForkedProcess)


@pytest.mark.slow
def test_a_forked_run_past_its_timeout_is_killed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_slow="import time\n\ndef test_slow():\n    time.sleep(60)\n")
    with pytest.raises(pytester.TimeoutExpired):
        pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=3)
    # the server goes on forking for the next run
    pytester.makepyfile(test_slow="def test_quick():\n    pass\n")
    assert pytester.runpytest_subprocess("-p", "no:cacheprovider").ret == 0


def test_the_workers_of_a_forked_run_get_its_path(
    probe: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """xdist hands its workers the path its controller had as xdist was imported."""
    monkeypatch.setenv("PYTHONPATH", "/nonexistent/on-the-path")
    result = probe.runpytest_subprocess("-p", "no:cacheprovider", "-n", "1", "test_probe.py")
    assert result.ret == 0, result.stdout.str()
    seen = view(probe)
    assert seen["parent"] != os.getpid()
    assert str(probe.path) in seen["path"] and "/nonexistent/on-the-path" in seen["path"]
    assert str(Path(__file__).resolve().parent) not in seen["path"]
