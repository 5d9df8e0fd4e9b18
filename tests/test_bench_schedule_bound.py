"""The schedule bound ``bench/latency.py`` prints beside the latency bound."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from schedule_bound import episode_turns, in_order_makespan


def test_full_slots_to_the_end_meet_the_latency_bound() -> None:
    assert in_order_makespan([2, 2, 2, 2], delay=0.5, slots=2) == pytest.approx(2.0)


def test_the_last_long_episode_leaves_the_other_slots_idle() -> None:
    # latency bound: 8 turns x 1 s / 2 slots = 4 s; in order, the 5-turn episode starts at 1 s
    assert in_order_makespan([1, 1, 1, 5], delay=1.0, slots=2) == pytest.approx(6.0)


def test_episodes_start_in_order_as_slots_free() -> None:
    # slot A: 3; slot B: 1 then 1 then 1 (the second and third start at 1 s and 2 s)
    assert in_order_makespan([3, 1, 1, 1], delay=1.0, slots=2) == pytest.approx(3.0)
    assert in_order_makespan([1, 1, 1, 3], delay=1.0, slots=2) == pytest.approx(4.0)


def test_no_slots_is_an_error_naming_the_count() -> None:
    with pytest.raises(ValueError, match="slots must be at least 1, not 0"):
        in_order_makespan([1], delay=1.0, slots=0)


def test_turns_come_from_passed_and_failed_rows_in_episode_order(tmp_path: Path) -> None:
    def write(name: str, rows: list[tuple[str, int]]) -> None:
        lines = [json.dumps({"episode_id": e, "metrics": {"turns": t}}) for e, t in rows]
        (tmp_path / name).write_text("".join(line + "\n" for line in lines))

    write("results.jsonl", [("ep-000002", 5), ("ep-000000", 3)])
    write("failures.jsonl", [("ep-000001", 4)])
    assert episode_turns(tmp_path) == [3, 4, 5]
