"""``WorkerQueue``: the one reader of xdist's worker internals, checked on a real worker."""

from __future__ import annotations

import pytest

#: with ``--dist each`` the worker is handed every item at once: all are in its queue
QUEUE_TEST = """
import warnings

import pytest

from pytest_openenv.worker.xdist_queue import WorkerQueue


@pytest.mark.parametrize("i", range(5))
def test_queue(request, i):
    queue = WorkerQueue(request.config)
    expected = [f"test_queue[{j}]" for j in range(i + 1, 5)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # xdist's internals as expected: no warning
        following = queue.following(request.node, limit=10, queued=True)
        next_only = queue.following(request.node, limit=10, queued=False)
        later = queue.following(request.node, limit=3, queued=True, start=1)
        not_next = queue.following(request.node, limit=10, queued=False, start=1)
    assert [item.name for item in following] == expected
    assert [item.name for item in next_only] == expected[:1]
    assert [item.name for item in later] == expected[1:3]
    assert not_next == []
"""

#: without xdist there is no worker loop to read: nothing, and one warning naming the cost
NO_WORKER_TEST = """
import pytest

from pytest_openenv.worker.xdist_queue import WorkerQueue


def test_alone(request):
    queue = WorkerQueue(request.config)
    with pytest.warns(pytest.PytestWarning, match="runs no episode ahead on xdist workers"):
        assert queue.following(request.node, limit=4, queued=True) == []
    assert queue.following(request.node, limit=4, queued=True) == []  # once, then quiet


def test_after():
    pass
"""


@pytest.mark.slow
def test_a_worker_sees_the_items_it_was_handed(run_pytest, pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_queue=QUEUE_TEST)
    result = run_pytest("-n", "1", "--dist", "each")
    result.assert_outcomes(passed=5)


def test_where_xdist_s_loop_is_not_found_nothing_runs_ahead(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(test_alone=NO_WORKER_TEST)
    result = run_pytest("-p", "no:xdist")
    result.assert_outcomes(passed=2)
