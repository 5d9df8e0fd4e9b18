"""What each process of a run loads, for what it costs at scale.

``import openai`` costs most of a second of CPU: an xdist controller only needs to know the SDK
is installed, so it must not pay that while its workers start on the same cores. syrupy's
unused-snapshot search ships every collected item from each worker to the controller at the end
of a run (about 1.3 KB per episode), and hypothesis' summary imports all of hypothesis in every
process: the bundled episode test uses neither, so it runs without them; a user's suite keeps both.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from llm_helpers import (
    ENV,
    MODEL,
    clean_sdk_env_fixture,  # noqa: F401 - fixture
)
from servers.openai_compat import serve_openai

#: what each process loads is measured against every plugin a user's venv would load, in a
#: process started as a user's is (a fork of the suite's warm interpreter has loaded more)
pytestmark = [pytest.mark.every_plugin, pytest.mark.child_process]


def ahead_of_pythonpath(folder: Path) -> str:
    """``folder`` first on the path, the PYTHONPATH the suite runs with after it."""
    return os.pathsep.join(path for path in (str(folder), os.environ.get("PYTHONPATH", "")) if path)


#: a plugin of the test's own that writes, per process, whether the SDK was imported
SDK_PROBE = """
import sys

def pytest_sessionfinish(session):
    config = session.config
    side = config.workerinput["workerid"] if hasattr(config, "workerinput") else "controller"
    with open(f"imports-{side}.txt", "w") as out:
        out.write(str("openai" in sys.modules))
"""


@pytest.mark.parametrize(
    ("workers", "client", "imported"),
    [
        # --openenv-llm-endpoint: the standard library carries the requests, no process
        # pays for the SDK
        ("0", "auto", {"controller": False}),
        ("2", "auto", {"controller": False, "gw0": False, "gw1": False}),
        # the SDK path: only where episodes run, never in an xdist controller
        ("0", "sdk", {"controller": True}),
        ("2", "sdk", {"controller": False, "gw0": True, "gw1": True}),
    ],
)
@pytest.mark.slow
def test_the_sdk_is_imported_only_where_episodes_run_and_need_it(
    run_pytest, pytester: pytest.Pytester, workers: str, client: str, imported: dict[str, bool]
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
            f"--openenv-llm-client={client}",
            "-n",
            workers,
        )
        agents = set(server.user_agents)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    # the episodes did call the model, through the client named
    assert len(agents) == 1 and ("(http.client)" in agents.pop()) == (client == "auto")
    seen = {
        path.stem.removeprefix("imports-"): path.read_text() == "True"
        for path in pytester.path.glob("imports-*.txt")
    }
    assert seen == imported


def test_an_sdk_that_fails_to_import_behind_the_response_cache_is_a_usage_error(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache wraps the model policy: the SDK is still imported, and checked, at start."""
    blocked = pytester.mkdir("blocked")
    (blocked / "openai").mkdir()
    (blocked / "openai" / "__init__.py").write_text("raise ImportError('not installed here')\n")
    monkeypatch.setenv("PYTHONPATH", ahead_of_pythonpath(blocked))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000")
    with serve_openai() as server:  # answers the model check; the SDK carries requests
        result = run_pytest(
            ENV,
            f"--openenv-llm-endpoint={server.base_url}",
            "--openenv-llm-client=sdk",
            f"--openenv-model={MODEL}",
            f"--openenv-cache={pytester.path / 'cache'}",
        )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*needs the openai SDK: pip install 'pytest-openenv[[]openai[]]'*"]
    )


@pytest.mark.slow
def test_an_sdk_that_fails_to_import_under_xdist_errors_each_episode_saying_why(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Present but broken: the controller cannot tell without importing it, and a worker
    cannot raise a usage error cleanly, so every episode errors naming the extra to install."""
    blocked = pytester.mkdir("blocked")
    (blocked / "openai").mkdir()
    (blocked / "openai" / "__init__.py").write_text("raise ImportError('not installed here')\n")
    monkeypatch.setenv("PYTHONPATH", ahead_of_pythonpath(blocked))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000")
    with serve_openai() as server:  # answers the model check; the SDK carries requests
        result = run_pytest(
            ENV,
            "--openenv-n=2",
            f"--openenv-llm-endpoint={server.base_url}",
            "--openenv-llm-client=sdk",
            f"--openenv-model={MODEL}",
            "-n",
            "2",
        )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        ["*needs the openai SDK: pip install 'pytest-openenv[[]openai[]]'*"]
    )
    assert "node down" not in result.stdout.str() + result.stderr.str()


#: a plugin of the test's own that writes, per process, which of the idle plugins took part
PLUGIN_PROBE = """
import sys

def pytest_sessionfinish(session):
    config = session.config
    side = config.workerinput["workerid"] if hasattr(config, "workerinput") else "controller"
    with open(f"plugins-{side}.txt", "w") as out:
        out.write(repr((
            config.pluginmanager.has_plugin("syrupy") and hasattr(config, "_syrupy"),
            config.pluginmanager.has_plugin("hypothesispytest"),
        )))
"""

USER_SUITE = """
import pytest
from hypothesis import given, strategies as st

@pytest.mark.openenv("openspiel:tic_tac_toe", n=2, policy="random", seed=5)
def test_play(episode, snapshot):
    assert episode.trajectory == snapshot

@given(st.integers())
def test_a_property(value):
    assert value == value
"""


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_the_bundled_run_leaves_idle_plugins_out_and_a_user_suite_keeps_them(
    run_pytest, pytester: pytest.Pytester, workers: str
) -> None:
    """syrupy and hypothesis: nothing of theirs runs in a bundled run, in any process."""
    pytester.makepyfile(plugin_probe=PLUGIN_PROBE)
    pytester.syspathinsert()
    bundled = run_pytest(ENV, "-p", "plugin_probe", "--openenv-n=4", "-n", workers)
    assert bundled.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    assert "snapshot report summary" not in bundled.stdout.str()
    sides = sorted(pytester.path.glob("plugins-*.txt"))
    assert len(sides) == (1 if workers == "0" else 3)
    assert {path.read_text() for path in sides} == {"(False, False)"}
    for path in sides:
        path.unlink()

    pytester.makepyfile(test_user_suite=USER_SUITE)
    suite = run_pytest(
        "-p", "plugin_probe", "test_user_suite.py", "--snapshot-update", "-n", workers
    )
    suite.assert_outcomes(passed=3)
    suite.stdout.fnmatch_lines(["*snapshot report summary*", "*2 snapshots generated*"])
    assert {path.read_text() for path in pytester.path.glob("plugins-*.txt")} == {"(True, True)"}


#: a plugin of the test's own that writes, per process, which idle plugins' modules it loaded
MODULE_PROBE = """
import sys

WATCHED = ("anyio.pytest_plugin", "pytest_html.plugin", "syrupy", "_hypothesis_pytestplugin")

def pytest_sessionfinish(session):
    config = session.config
    side = config.workerinput["workerid"] if hasattr(config, "workerinput") else "controller"
    with open(f"modules-{side}.txt", "w") as out:
        out.write(" ".join(name for name in WATCHED if name in sys.modules))
"""


@pytest.mark.parametrize(
    ("extra", "ini", "in_workers"),
    [
        # nothing of theirs asked for: a worker loads none of them
        ([], "", ""),
        # an option or an ini key of one of them must still parse: that one stays
        (["--html=page.html"], "", "pytest_html.plugin"),
        ([], "[pytest]\nanyio_mode = auto\n", "anyio.pytest_plugin"),
    ],
)
def test_the_bundled_runs_workers_start_without_the_plugins_it_never_calls(
    run_pytest, pytester: pytest.Pytester, extra: list[str], ini: str, in_workers: str
) -> None:
    """anyio's plugin imports all of trio, pytest-html jinja2: most of a worker's start."""
    pytester.makepyfile(module_probe=MODULE_PROBE)
    pytester.syspathinsert()
    if ini:
        pytester.makefile(".ini", pytest=ini)
    result = run_pytest(ENV, "-p", "module_probe", "--openenv-n=4", "-n", "2", *extra)
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    assert "Unknown config option" not in result.stdout.str() + result.stderr.str()
    seen = {
        path.stem.removeprefix("modules-"): path.read_text()
        for path in pytester.path.glob("modules-*.txt")
    }
    assert seen.pop("gw0") == seen.pop("gw1") == in_workers
    # the controller keeps its plugins as they were loaded
    assert "anyio.pytest_plugin" in seen["controller"].split()
