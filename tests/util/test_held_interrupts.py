"""A Ctrl-C inside a held section (an episode's count and its row) lands at the section's end."""

from __future__ import annotations

import signal

import pytest

from pytest_openenv.util.signals import InterruptsHeld


@pytest.fixture
def python_handles_ctrl_c():
    """Python's own Ctrl-C handler, whatever this process started with: a suite started in
    the background from a shell (``cmd &``, ``nohup``) inherits SIGINT ignored, and a held
    section leaves an ignored signal ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_inside_a_held_section_interrupts_once_after_it(python_handles_ctrl_c) -> None:
    done: list[str] = []
    with pytest.raises(KeyboardInterrupt), InterruptsHeld():
        signal.raise_signal(signal.SIGINT)  # taken by this thread before the call returns
        signal.raise_signal(signal.SIGINT)  # a second press: still one interrupt
        done.append("counted")
        done.append("written")
    assert done == ["counted", "written"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_section_without_a_signal_leaves_the_handlers_as_they_were() -> None:
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with InterruptsHeld():
        pass
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_an_ignored_signal_stays_ignored_inside_a_held_section() -> None:
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with InterruptsHeld():
            assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
            signal.raise_signal(signal.SIGTERM)  # ignored as before: nothing is raised
    finally:
        signal.signal(signal.SIGTERM, previous)
