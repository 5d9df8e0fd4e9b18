"""A Ctrl-C inside a held section (an episode's count and its row) lands at the section's end."""

from __future__ import annotations

import os
import signal

import pytest

from pytest_openenv.util.signals import InterruptsHeld


def test_a_ctrl_c_inside_a_held_section_interrupts_once_after_it() -> None:
    done: list[str] = []
    with pytest.raises(KeyboardInterrupt), InterruptsHeld():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # a second press: still one interrupt
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
            os.kill(os.getpid(), signal.SIGTERM)  # ignored as before: nothing is raised
    finally:
        signal.signal(signal.SIGTERM, previous)
