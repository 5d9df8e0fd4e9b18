"""A worker dies mid-episode (os._exit, a real segfault in the policy): the run goes on.

xdist replaces the worker; the episode it was running becomes an errored row in
failures.jsonl with the reason; every other episode completes; files stay whole.
"""

from __future__ import annotations

import json

import pytest
from faults import ENV, Launcher, read_rows

N = 12
EXIT_SEED, SEGV_SEED = 3, 8


@pytest.mark.slow
def test_dead_workers_are_replaced_and_their_episodes_recorded_as_errors(
    launcher: Launcher,
) -> None:
    launcher.write_episode_test()
    finished = launcher.run(
        "-n",
        "2",
        f"--openenv-env={ENV}",
        f"--openenv-n={N}",
        "test_eps.py",
        env={"FAULT_EXIT_SEEDS": str(EXIT_SEED), "FAULT_SEGV_SEEDS": str(SEGV_SEED)},
    )
    assert finished.returncode == 1, finished.stdout[-3000:]
    assert finished.stdout.count("replacing crashed worker") == 2
    assert "2 errored" in finished.stdout

    results = read_rows(launcher.output / "results.jsonl")
    failures = read_rows(launcher.output / "failures.jsonl")
    ids = sorted(row["episode_id"] for row in results + failures)
    assert ids == [f"ep-{i:06d}" for i in range(N)]  # every episode exactly once
    crashed = {row["episode_id"]: row for row in failures if row["failure"]["outcome"] == "error"}
    assert sorted(crashed) == [f"ep-{EXIT_SEED:06d}", f"ep-{SEGV_SEED:06d}"]
    for episode_id, row in crashed.items():
        assert "crashed while running" in row["failure"]["message"]
        assert row["test"] == f"test_eps.py::test_ep[{episode_id}]"
        assert row["seed"] == int(episode_id[3:])  # rebuilt from a sibling episode's row
        assert row["env"] == ENV and row["policy"] == "scripted" and row["passed"] is False
        assert set(row) == set(results[0]) | {"failure"}  # same schema as every other row
    summary = json.loads((launcher.output / "summary.json").read_text())
    assert summary["figures"]["errored"] == 2
    assert summary["figures"]["ran"] == N
