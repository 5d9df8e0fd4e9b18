"""``OverloadSignal``: endpoints' pushback, from the policies and backends to the listeners."""

from __future__ import annotations

import pytest

from pytest_openenv.util.overload import OverloadSignal


def test_the_overload_signal_reaches_each_listener_once_per_pushback() -> None:
    signal = OverloadSignal()
    heard: list[str] = []
    signal.fire()  # nobody listens yet: counted, heard by no one
    signal.listen(lambda: heard.append("limit"))
    signal.listen(lambda: heard.append("summary"))
    signal.fire()
    assert heard == ["limit", "summary"] and signal.fired == 2


@pytest.mark.parametrize(("status", "pushback"), [(429, True), (503, True), (500, False)])
def test_only_rate_limit_and_overload_answers_are_pushback(status: int, pushback: bool) -> None:
    signal = OverloadSignal()
    heard: list[int] = []
    signal.listen(lambda: heard.append(status))
    signal.observe_response(type("Response", (), {"status_code": status})())
    assert bool(heard) is pushback
