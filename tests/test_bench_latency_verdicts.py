"""What ``bench/latency.py`` says of a row's CPU beside its share of the latency bound."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[1] / "bench"))  # after tests/ (servers)

import latency

#: 2,000 episodes, 6,900 completions of 50 ms on 128 slots: a latency bound of 2.7 s
BASE = latency.Run("C=64", 128, 3.9, 4.2, 6900, 2000, 2.7, cpu_s=4.0, server_cpu_s=0.8)


def row(label: str, *, cpu: float | None, processes: int, server_cpu: float = 0.8) -> latency.Run:
    return dataclasses.replace(
        BASE, label=label, session_cpu_s=cpu, cpu_processes=processes, server_cpu_s=server_cpu
    )


def test_one_process_needs_its_cpu_under_one_interpreter_lock() -> None:
    runs = [row("C=128", cpu=cpu, processes=1) for cpu in (3.5, 3.66, 3.9)]
    # the median run's 3.66 s against 2.7 / 0.75 = 3.6 s: the server's CPU is elsewhere
    assert latency.cpu_need(runs, 0.75) == (
        "; CPU 3.66 s on one interpreter lock, of the 3.60 s the target allows (102%)"
    )


def test_an_xdist_run_shares_the_cores_with_the_model_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(latency.os, "cpu_count", lambda: 2)
    runs = [row("-n 2, C=64", cpu=4.64, processes=3, server_cpu=0.84)]
    # (4.64 + 0.84) / 2 cores = 2.74 s, against 2.7 / 0.8 = 3.375 s
    assert latency.cpu_need(runs, 0.8) == (
        "; CPU 2.74 s on 2 cores, of the 3.38 s the target allows (81%)"
    )


def test_a_row_without_cpu_figures_says_nothing_of_them() -> None:
    assert latency.cpu_need([row("C=64", cpu=None, processes=0)], 0.9) == ""
