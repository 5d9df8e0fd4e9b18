"""Shared helpers for the suite: most tests drive pytest itself through pytester."""

from __future__ import annotations

# numpy's extension modules load once per process: one first imported inside an in-process
# pytester run is dropped from sys.modules at its teardown, and the next import of it fails
# ("cannot load module more than once per process", seen for numpy.fft under transformers).
# Imported here, they are in every pytester snapshot.
import contextlib
import os
import subprocess
from collections.abc import Iterator

import numpy
import numpy.fft
import numpy.linalg
import numpy.random
import pytest
from fork_server import ForkServer
from helpers import CHILD_RUN_IDLE_PLUGINS, XDIST_WORKER_VARS, assert_clean

pytest_plugins = ["pytester"]

del numpy

# torch registers operator libraries in modules it imports lazily (TRL and transformers reach
# them during a run); one first imported inside an in-process pytester run is re-imported
# after its teardown and registers twice ("Only a single TORCH_LIBRARY ..."), so they are
# imported here, where the [transformers] extra is installed
try:
    import torch._inductor.test_operators
    import torch.distributed._functional_collectives  # noqa: F401
except ImportError:
    pass
# transformers loads the optional ``kernels`` package when it loads a model and keeps its
# ``Mode`` flag: re-imported after a pytester teardown, the new ``Mode`` is another class
# and loading fails ("unsupported operand type(s) for 'in': 'Mode' and 'Mode'")
with contextlib.suppress(ImportError):
    import kernels  # noqa: F401

#: printed in the header, so a CI log says what each run was tested against
HEADER_PACKAGES = ("huggingface_hub", "websockets", "open-spiel", "openai", "anthropic", "openenv")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        compile_for_child_runs()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests first: under xdist a minute-long test collected last (the examples',
    the agent CLIs') would run alone at the end while the other workers sit idle. Every
    worker sorts the same collection the same way, as xdist requires."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def compile_for_child_runs() -> None:
    """Write the bytecode of the package and of the suite's helpers, once per run.

    Most tests start child pytest processes, a few thousand per run, and each imports the
    package. Where PYTHONDONTWRITEBYTECODE is set, as in many containers and CI images, no
    process writes the bytecode it compiles, so every child compiled the package's modules
    from source again: about a fifth of a child run's CPU. Compiled here, they are read from
    ``__pycache__`` (timestamped as usual, so an edit still invalidates its file).
    """
    import compileall
    from pathlib import Path

    import pytest_openenv

    for folder in (Path(pytest_openenv.__file__).parent, Path(__file__).parent):
        compileall.compile_dir(folder, quiet=1, workers=1)


def pytest_report_header() -> str:
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "absent"

    return "dependencies: " + ", ".join(f"{n}-{installed(n)}" for n in HEADER_PACKAGES)


@pytest.fixture(scope="session")
def fork_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    server = ForkServer(tmp_path_factory.getbasetemp() / "fork-server.log")
    yield server
    server.stop()


@pytest.fixture
def pytester(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
    fork_server: ForkServer,
) -> pytest.Pytester:
    """pytest's own, with ``CHILD_RUN_IDLE_PLUGINS`` left out of its child runs (in-process too),
    and its ``python -m pytest`` processes forked from a warm interpreter (``fork_server.py``)
    unless the test is marked ``child_process``."""
    if request.node.get_closest_marker("every_plugin") is None:
        monkeypatch.setenv("PYTEST_ADDOPTS", CHILD_RUN_IDLE_PLUGINS)
    forks = os.environ.get("SUITE_CHILD_RUNS", "forked") == "forked"  # "fresh": Popen for all
    if forks and request.node.get_closest_marker("child_process") is None:
        monkeypatch.setattr(pytester, "popen", forking_popen(pytester, fork_server))
    return pytester


def forking_popen(pytester: pytest.Pytester, server: ForkServer):
    started = pytester.popen

    def popen(cmdargs, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=None, **kw):
        if stdin is None:
            stdin = pytester.CLOSE_STDIN
        cmdargs = tuple(os.fspath(arg) for arg in cmdargs)
        # what pytester.popen gives its process: the folder it runs in on PYTHONPATH
        env = os.environ.copy()
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH", "")]))
        if (
            kw
            or stdin is not pytester.CLOSE_STDIN
            or not (hasattr(stdout, "fileno") and hasattr(stderr, "fileno"))
            or not server.handles(cmdargs, env, stdin)
        ):
            return started(cmdargs, stdout=stdout, stderr=stderr, stdin=stdin, **kw)
        return server.popen(cmdargs, env, stdout, stderr)

    return popen


@pytest.fixture
def run_pytest(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    """Run pytest in a subprocess in the pytester folder; returns the RunResult."""
    for name in XDIST_WORKER_VARS:
        monkeypatch.delenv(name, raising=False)

    def run(*args: str, timeout: float = 300) -> pytest.RunResult:
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=timeout)
        assert_clean(result)
        return result

    return run
