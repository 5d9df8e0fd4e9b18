"""The suite's own child pytest runs: which installed plugins they load (tests/conftest.py)."""

from __future__ import annotations

import pytest

IDLE = (
    "hypothesispytest",
    "anyio",
    "html",
    "html_fixtures",
    "metadata",
    "rerunfailures",
    "platformdirs",
)


def loaded(pytester: pytest.Pytester) -> dict[str, bool]:
    config = pytester.parseconfigure("-p", "no:cacheprovider")
    return {name: config.pluginmanager.has_plugin(name) for name in IDLE}


@pytest.mark.slow
def test_a_child_run_leaves_the_idle_plugins_out(pytester: pytest.Pytester) -> None:
    assert loaded(pytester) == dict.fromkeys(IDLE, False)


@pytest.mark.every_plugin
def test_a_child_run_of_a_marked_test_loads_every_plugin(pytester: pytest.Pytester) -> None:
    assert loaded(pytester) == dict.fromkeys(IDLE, True)


CONTROLLER, WORKER = "pytest_openenv.controller.plugin", "pytest_openenv.worker.plugin"


def test_a_child_process_reads_the_package_from_bytecode_even_if_told_not_to_write_it() -> None:
    """Under PYTHONDONTWRITEBYTECODE no child writes what it compiles; the session's compile
    (tests/conftest.py) means none of them compiles the package from source either."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-v", "-c", f"import {CONTROLLER}, {WORKER}"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    # python -v names the file each code object came from: a .pyc, or the source it compiled
    loaded = [line for line in done.stderr.splitlines() if line.startswith("# code object from")]
    from_package = [line for line in loaded if "pytest_openenv" in line]
    assert len(from_package) > 20
    assert [line for line in from_package if not line.rstrip("'").endswith(".pyc")] == []
