"""The schedule bound: when a runner with no overhead of its own would finish a run.

The latency bound (completions x delay / slots) assumes the slots stay full to the last
instant. No runner that starts episodes in order, each the moment a slot frees, can
reach it: the last episodes end at different times, and their slots idle meanwhile. At
400 tic-tac-toe episodes of 3-6 turns on 64 slots that tail alone is 10-15% of the run.
The schedule bound replays the run's own episodes (each one's turns x delay) through such
a runner on the same slots: the time a runner with zero CPU per episode would need.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from pathlib import Path

from pytest_openenv.report.row_facts import read_rows


def in_order_makespan(turns: Iterable[int], delay: float, slots: int) -> float:
    """Seconds until the last episode ends, each started in order as soon as a slot frees."""
    if slots < 1:
        raise ValueError(f"slots must be at least 1, not {slots}")
    free_at = [0.0] * slots
    for count in turns:
        heapq.heapreplace(free_at, free_at[0] + count * delay)
    return max(free_at)


def episode_turns(output: Path) -> list[int]:
    """Each episode's model turns, in episode order, from a run's output folder."""
    rows = sorted(read_rows(output), key=lambda row: str(row["episode_id"]))
    return [int(row["metrics"]["turns"]) for row in rows]
