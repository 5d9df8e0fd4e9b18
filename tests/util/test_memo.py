"""``BoundedMemo``: the one shape of the caches kept across episodes."""

from __future__ import annotations

import threading

import pytest

from pytest_openenv.util.memo import BoundedMemo


def test_a_memo_keeps_values_up_to_its_limit_then_only_returns_them() -> None:
    memo: BoundedMemo[str, int] = BoundedMemo(2)
    assert memo.get("a") is None
    assert memo.keep("a", 1) == 1 and memo.keep("b", 2) == 2
    assert memo.keep("c", 3) == 3  # full: used, not kept
    assert (memo.get("a"), memo.get("b"), memo.get("c")) == (1, 2, None)
    assert len(memo) == 2


def test_a_memo_answers_the_first_value_kept_for_a_key() -> None:
    memo: BoundedMemo[str, list[int]] = BoundedMemo(8)
    first = memo.keep("k", [1])
    assert memo.keep("k", [2]) is first  # two threads computed it: every caller gets one


def test_a_memo_refuses_a_negative_limit_by_name() -> None:
    with pytest.raises(ValueError, match="a memo's limit is a count of entries, got -1"):
        BoundedMemo(-1)


def test_a_memo_filled_by_many_threads_never_passes_its_limit() -> None:
    memo: BoundedMemo[int, int] = BoundedMemo(100)

    def fill(start: int) -> None:
        for key in range(start, start + 1000):
            memo.keep(key, key)

    threads = [threading.Thread(target=fill, args=(n * 1000,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(memo) == 100
