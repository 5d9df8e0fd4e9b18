"""Process-level care of a run: the GC freeze is undone at the end; end-of-run imports warm up.

``heap``: a run that plays episodes freezes what it imported and collected (so
GC passes skip it) and unfreezes after pytest's last collection, leaving the
process as it found it. ``warmup``: the imports the end of a run needs are
loaded in the background once episodes are in flight.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

from pytest_openenv.util import warmup

FREEZE_PROBE = """
import gc
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=2)
def test_game(episode):
    assert gc.get_freeze_count() > 0, "episodes ran with nothing frozen"
"""


def test_episodes_run_frozen_and_the_process_is_thawed_after(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_probe=FREEZE_PROBE)
    assert gc.get_freeze_count() == 0
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert gc.get_freeze_count() == 0, "the run left objects frozen"


GC_THRESHOLD_PROBE = """
import gc
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=2)
def test_game(episode):
    assert gc.get_threshold()[0] == 10_000, gc.get_threshold()
"""


def test_episodes_run_with_fewer_young_collections_and_the_threshold_is_put_back(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_probe=GC_THRESHOLD_PROBE)
    before = gc.get_threshold()
    assert before[0] < 10_000
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
    assert gc.get_threshold() == before


def test_a_run_without_episodes_freezes_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_plain="""
        import gc

        def test_plain():
            assert gc.get_freeze_count() == 0
        """
    )
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_warmup_imports_what_the_end_of_the_run_needs(
    pytestconfig: pytest.Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp_path.joinpath("end_of_run_probe.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(
        warmup,
        "END_OF_RUN_IMPORTS",
        (("end_of_run_probe", None), ("never_imported_probe", "no-such-plugin")),
    )
    monkeypatch.delitem(sys.modules, "end_of_run_probe", raising=False)
    thread = warmup.start(pytestconfig)
    assert thread is not None
    thread.join(timeout=30)
    assert sys.modules["end_of_run_probe"].LOADED
    # a module for a plugin that is not active is left alone
    assert "never_imported_probe" not in sys.modules
    monkeypatch.delitem(sys.modules, "end_of_run_probe")


def test_warmup_does_nothing_when_all_is_loaded(
    pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(warmup, "END_OF_RUN_IMPORTS", (("json", None),))
    assert warmup.start(pytestconfig) is None


@pytest.mark.slow
def test_only_a_process_that_goes_on_after_the_run_is_thawed(pytester: pytest.Pytester) -> None:
    from pytest_openenv.util import heap

    inline = pytester.parseconfigure("-p", "no:cacheprovider", "--collect-only")
    assert not heap.process_ends_with_run(inline), "an in-process run was taken for the command"

    class WorkerConfig:
        workerinput: dict[str, object] = {}

    assert heap.process_ends_with_run(WorkerConfig())  # type: ignore[arg-type]


#: the controller's view just before the end of session: did the warm-up load the renderer?
CONTROLLER_PROBE = """
import sys
import threading

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        return
    for thread in threading.enumerate():
        if thread.name == "openenv-warmup":
            thread.join(timeout=60)
    with open("controller-warm.txt", "w") as out:
        out.write(str("pytest_openenv.report.page" in sys.modules))
"""


@pytest.mark.slow
@pytest.mark.child_process  # a fork of the suite's warm interpreter has loaded the renderer
def test_an_xdist_controller_loads_the_end_of_session_imports_while_episodes_run(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(controller_probe=CONTROLLER_PROBE)
    pytester.syspathinsert()
    result = run_pytest(
        "-p", "controller_probe", "--openenv-env=openspiel:tic_tac_toe", "--openenv-n=4", "-n", "2"
    )
    assert result.ret in (0, 1), result.stdout.str()
    # report.html's renderer was loaded before the end of session needed it
    assert (pytester.path / "controller-warm.txt").read_text() == "True"


#: how many objects are frozen at the last episode report and at the last unconfigure
EXIT_PROBE = """
import gc
import pytest

seen = {}

def pytest_runtest_logreport(report):
    seen["last_report"] = gc.get_freeze_count()

@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    with open("frozen.txt", "w") as out:
        out.write(f"{seen['last_report']} {gc.get_freeze_count()}")
"""


def test_the_pytest_command_freezes_what_is_alive_as_it_ends(run_pytest, pytester) -> None:
    """Every report of the session lives until exit: the last collections need not scan it."""
    pytester.makepyfile(exit_probe=EXIT_PROBE)
    pytester.syspathinsert()
    result = run_pytest("--openenv-env=openspiel:tic_tac_toe", "--openenv-n=30", "-p", "exit_probe")
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    at_last_report, at_unconfigure = map(int, (pytester.path / "frozen.txt").read_text().split())
    assert at_last_report > 0 and at_unconfigure > at_last_report
