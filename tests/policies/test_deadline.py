"""The bound of the next model call: the request timeout, or what the episode has left."""

from __future__ import annotations

import time

import pytest

from pytest_openenv.errors import PolicyUnavailable
from pytest_openenv.policies.base import Turn
from pytest_openenv.policies.llm.deadline import seconds_left


def turn(deadline: float | None) -> Turn:
    return Turn(messages=[], tools=[], episode_id="ep-000000", seed=0, turn=1, deadline=deadline)


def test_without_an_episode_timeout_the_request_timeout_bounds_the_call() -> None:
    assert seconds_left(turn(None), 120.0, None) == 120.0


def test_an_episode_with_less_left_bounds_the_call_by_that() -> None:
    left = seconds_left(turn(time.monotonic() + 5.0), 120.0, 30.0)
    assert 4.0 < left <= 5.0
    assert seconds_left(turn(time.monotonic() + 500.0), 120.0, 600.0) == 120.0


def test_an_episode_out_of_time_asks_no_model() -> None:
    with pytest.raises(PolicyUnavailable, match=r"--openenv-timeout=30s ran out before the model"):
        seconds_left(turn(time.monotonic() - 1.0), 120.0, 30.0)
