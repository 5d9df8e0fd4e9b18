"""Trajectory snapshots with syrupy: readable files, readable diffs, --snapshot-update -n 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_openenv.testing.snapshots import TrajectorySnapshotExtension, readable

SUITE = """
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=3, policy="random", seed=5)
def test_moves(episode, openenv_snapshot):
    assert episode.trajectory == openenv_snapshot

@pytest.mark.openenv("openspiel:tic_tac_toe", n=2, policy="random", seed=5)
def test_moves_default_extension(episode, snapshot):
    assert episode.trajectory == snapshot
"""

# plays the last legal move instead of a random one: a deliberately changed policy
CHANGED_POLICY = """
import pytest
from pytest_openenv.policies.base import Policy, Reply, ToolCall


class LastLegal(Policy):
    name = "random"
    wants_legal = True

    def act(self, turn):
        return Reply(tool_calls=(ToolCall.from_proposed(turn.legal[-1], f"c{turn.turn}"),))


@pytest.fixture
def openenv_policy():
    return LastLegal()
"""


def snapshot_files(root: Path) -> dict[str, str]:
    folder = root / "__snapshots__"
    return {
        str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.mark.slow
def test_snapshot_lifecycle(pytester, run_pytest):
    pytester.makepyfile(test_snaps=SUITE)
    created = run_pytest("--snapshot-update")
    assert created.ret == 0, created.stdout.str()[-3000:]
    files = snapshot_files(Path(pytester.path))
    assert sorted(files) == [
        "test_snaps.ambr",
        "test_snaps/test_moves[ep-000000].json",
        "test_snaps/test_moves[ep-000001].json",
        "test_snaps/test_moves[ep-000002].json",
    ]
    stored = json.loads(files["test_snaps/test_moves[ep-000000].json"])
    assert list(stored) == ["env", "seed", "steps", "reward", "outcome", "done"]
    assert stored["seed"] == 5
    first = stored["steps"][0]
    assert first["turn"] == 0 and " 0 | 1 | 2" in first["observation"]  # board rows as lines
    assert all("latency" not in json.dumps(step) for step in stored["steps"])

    green = run_pytest("-n", "2")
    assert green.ret == 0
    assert "5 snapshots passed" in green.stdout.str()

    pytester.makeconftest(CHANGED_POLICY)
    red = run_pytest()
    assert red.ret == 1
    out = red.stdout.str()
    assert "snapshots failed" in out
    # the diff names the move that changed, one line for what was stored, one for what came
    assert '-       "action": "play_move({\\"action_id\\": ' in out, out[-4000:]
    assert '+       "action": "play_move({\\"action_id\\": 8})",' in out, out[-4000:]

    updated = run_pytest("--snapshot-update", "-n", "2")
    assert updated.ret == 0, updated.stdout.str()[-3000:]
    assert "snapshots updated" in updated.stdout.str()
    rewritten = snapshot_files(Path(pytester.path))
    assert sorted(rewritten) == sorted(files)
    changed = json.loads(rewritten["test_snaps/test_moves[ep-000000].json"])
    assert changed["steps"][1]["action"] == 'play_move({"action_id": 8})'
    assert rewritten["test_snaps.ambr"] != files["test_snaps.ambr"]
    assert run_pytest().ret == 0  # green against the rewritten files


@pytest.mark.slow
def test_snapshots_are_stable_across_runs_and_worker_counts(pytester, run_pytest):
    pytester.makepyfile(test_snaps=SUITE)
    assert run_pytest("--snapshot-update", "-n", "2").ret == 0
    first = snapshot_files(Path(pytester.path))
    assert run_pytest("--snapshot-update").ret == 0
    assert snapshot_files(Path(pytester.path)) == first


def test_extension_serializes_an_episode_or_its_trajectory_readably():
    trajectory = {
        "env": "e:v",
        "steps": [{"turn": 1, "observation": "a\nb", "action": "m()"}],
        "seed": 3,
    }
    text = TrajectorySnapshotExtension().serialize(trajectory)
    parsed = json.loads(text)
    assert list(parsed) == ["env", "steps", "seed"]  # natural order, not sorted
    assert list(parsed["steps"][0]) == ["turn", "observation", "action"]
    assert parsed["steps"][0]["observation"] == ["a", "b"]

    class Holder:
        def __init__(self, value):
            self.trajectory = value

    assert TrajectorySnapshotExtension().serialize(Holder(trajectory)) == text
    assert readable(("x\ny", 1)) == [["x", "y"], 1]


@pytest.mark.parametrize("workers", [(), ("-n", "2")])
@pytest.mark.slow
def test_openenv_snapshot_fixture_outside_an_episode_test_needs_syrupy_only(
    pytester, run_pytest, workers
):
    pytester.makepyfile(
        test_plain="""
        def test_plain(openenv_snapshot):
            assert {"b": 1, "a": "x\\ny"} == openenv_snapshot
        """
    )
    assert run_pytest("--snapshot-update", *workers).ret == 0
    stored = (Path(pytester.path) / "__snapshots__" / "test_plain" / "test_plain.json").read_text()
    assert json.loads(stored) == {"b": 1, "a": ["x", "y"]}
