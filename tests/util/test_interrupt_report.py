"""An interrupt that lands on an instruction with no line number still gets its report.

Python 3.11+ gives such a traceback entry ``tb_lineno = None``; pytest's report of a
KeyboardInterrupt subtracts from it and dies with a TypeError. A SIGTERM (handled as
Ctrl-C) raises wherever the main thread is, so a cancelled run hit it now and then.
"""

from __future__ import annotations

import sys
import types

import pytest

from pytest_openenv.util.signals import drop_entries_without_a_line

needs_none_lines = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="before 3.11 every traceback entry has a line"
)


def forged_interrupt() -> KeyboardInterrupt:
    """A KeyboardInterrupt whose traceback has a line-less entry between two real ones."""
    frame = sys._getframe()
    inner = types.TracebackType(None, frame, 0, frame.f_lineno)
    lineless = types.TracebackType(inner, frame, 10**6, -1)
    outer = types.TracebackType(lineless, frame, 0, frame.f_lineno)
    assert lineless.tb_lineno is None and outer.tb_lineno is not None
    return KeyboardInterrupt("cancelled").with_traceback(outer)


@needs_none_lines
def test_dropping_the_lineless_entry_lets_pytest_report_the_interrupt() -> None:
    error = forged_interrupt()
    drop_entries_without_a_line(error.__traceback__)
    entries = []
    tb = error.__traceback__
    while tb is not None:
        entries.append(tb.tb_lineno)
        tb = tb.tb_next
    assert len(entries) == 2 and None not in entries
    assert "KeyboardInterrupt" in str(pytest.ExceptionInfo.from_exception(error).getrepr())


@needs_none_lines
def test_a_run_interrupted_on_a_lineless_instruction_ends_with_its_summary(
    pytester: pytest.Pytester,
) -> None:
    """Without the plugin (``-p no:openenv``), pytest 9.2 exits 1 here with no summary."""
    pytester.makepyfile(
        test_cancelled="""
        import sys, types

        def test_cancelled():
            frame = sys._getframe()
            inner = types.TracebackType(None, frame, 0, frame.f_lineno)
            lineless = types.TracebackType(inner, frame, 10**6, -1)
            raise KeyboardInterrupt("cancelled").with_traceback(lineless)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    text = result.stdout.str() + result.stderr.str()
    assert "KeyboardInterrupt" in text and "cancelled" in text
    assert "TypeError" not in text and "Traceback (most recent call last)" not in text


def test_both_sides_trim_the_traceback_before_the_terminal_reporter(
    pytestconfig: pytest.Config,
) -> None:
    """pluggy keeps only the outer of two stacked hookimpl markers: the worker's hook had a
    ``trylast`` over the ``tryfirst`` it meant, and ran after the terminal reporter's (an
    xdist worker has no controller plugin whose own hook trims first)."""
    from pytest_openenv.controller.plugin import ControllerPlugin
    from pytest_openenv.worker.plugin import WorkerPlugin

    for side in (WorkerPlugin, ControllerPlugin):
        opts = pytestconfig.pluginmanager.parse_hookimpl_opts(side, "pytest_keyboard_interrupt")
        assert opts is not None, side
        assert opts.get("tryfirst") and not opts.get("trylast"), (side, opts)
