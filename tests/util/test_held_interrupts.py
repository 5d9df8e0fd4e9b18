"""A Ctrl-C inside a held section (an episode's count and its row) lands at the section's end."""

from __future__ import annotations

import signal

import pytest

from pytest_openenv.util.signals import InterruptsHeld


def test_a_ctrl_c_inside_a_held_section_interrupts_once_after_it() -> None:
    done: list[str] = []
    with pytest.raises(KeyboardInterrupt), InterruptsHeld():
        # raise_signal: taken by this thread before it returns. A signal sent to the process
        # may be taken by another thread (an xdist worker's), whose turn to note it can come
        # after the section has ended
        signal.raise_signal(signal.SIGINT)
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
