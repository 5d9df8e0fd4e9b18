"""What each process of a run loads, for what it costs at scale.

``import openai`` costs most of a second of CPU: an xdist controller only needs to know the SDK
is installed, so it must not pay that while its workers start on the same cores. syrupy's
unused-snapshot search ships every collected item from each worker to the controller at the end
of a run (about 1.3 KB per episode): the bundled episode test takes no snapshots, so it runs
without syrupy, while a suite of the user's keeps it.
"""

from __future__ import annotations

import pytest
from llm_helpers import (
    ENV,
    MODEL,
    clean_sdk_env_fixture,  # noqa: F401 - fixture
)
from servers.openai_compat import serve_openai

#: a plugin of the test's own that writes, from the controller, whether the SDK was imported
SDK_PROBE = """
import sys

def pytest_sessionfinish(session):
    if not hasattr(session.config, "workerinput"):
        with open("controller-imports.txt", "w") as out:
            out.write(str("openai" in sys.modules))
"""


@pytest.mark.parametrize(("workers", "controller_imports"), [("0", True), ("2", False)])
def test_the_sdk_is_imported_only_where_episodes_run(
    run_pytest, pytester: pytest.Pytester, workers: str, controller_imports: bool
) -> None:
    pytester.makepyfile(sdk_probe=SDK_PROBE)
    pytester.syspathinsert()
    with serve_openai() as server:
        result = run_pytest(
            ENV,
            "-p",
            "sdk_probe",
            "--openenv-n=2",
            "--openenv-policy=openai",
            f"--openenv-model={MODEL}",
            f"--openenv-llm-endpoint={server.base_url}",
            "-n",
            workers,
        )
        requests = server.requests
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    assert requests > 0  # the episodes did call the model, through the SDK
    imported = (pytester.path / "controller-imports.txt").read_text()
    assert imported == str(controller_imports)


def test_an_sdk_that_fails_to_import_under_xdist_errors_each_episode_saying_why(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Present but broken: the controller cannot tell without importing it, and a worker
    cannot raise a usage error cleanly, so every episode errors naming the extra to install."""
    blocked = pytester.mkdir("blocked")
    (blocked / "openai").mkdir()
    (blocked / "openai" / "__init__.py").write_text("raise ImportError('not installed here')\n")
    monkeypatch.setenv("PYTHONPATH", str(blocked))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000")
    result = run_pytest(
        ENV, "--openenv-n=2", "--openenv-policy=openai", f"--openenv-model={MODEL}", "-n", "2"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        ["*needs the openai SDK: pip install 'pytest-openenv[[]openai[]]'*"]
    )
    assert "node down" not in result.stdout.str() + result.stderr.str()


#: a plugin of the test's own that writes, per process, whether syrupy took part in the run
SYRUPY_PROBE = """
import os

def pytest_sessionfinish(session):
    config = session.config
    side = config.workerinput["workerid"] if hasattr(config, "workerinput") else "controller"
    with open(f"syrupy-{side}.txt", "w") as out:
        out.write(str(config.pluginmanager.has_plugin("syrupy") and hasattr(config, "_syrupy")))
"""

SNAPSHOT_SUITE = """
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=2, policy="random", seed=5)
def test_play(episode, snapshot):
    assert episode.trajectory == snapshot
"""


@pytest.mark.parametrize("workers", ["0", "2"])
def test_the_bundled_run_leaves_syrupy_out_and_a_snapshot_suite_keeps_it(
    run_pytest, pytester: pytest.Pytester, workers: str
) -> None:
    pytester.makepyfile(syrupy_probe=SYRUPY_PROBE)
    pytester.syspathinsert()
    bundled = run_pytest(ENV, "-p", "syrupy_probe", "--openenv-n=4", "-n", workers)
    assert bundled.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    assert "snapshot report summary" not in bundled.stdout.str()
    sides = sorted(pytester.path.glob("syrupy-*.txt"))
    assert len(sides) == (1 if workers == "0" else 3)
    assert {path.read_text() for path in sides} == {"False"}
    for path in sides:
        path.unlink()

    pytester.makepyfile(test_snapshots=SNAPSHOT_SUITE)
    suite = run_pytest(
        "-p", "syrupy_probe", "test_snapshots.py", "--snapshot-update", "-n", workers
    )
    suite.assert_outcomes(passed=2)
    suite.stdout.fnmatch_lines(["*snapshot report summary*", "*2 snapshots generated*"])
    assert {path.read_text() for path in pytester.path.glob("syrupy-*.txt")} == {"True"}
