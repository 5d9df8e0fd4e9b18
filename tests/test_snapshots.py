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


# -- several workers updating one .ambr file --------------------------------------------

#: each worker's rewrite of the module's .ambr file waits a second between reading it and
#: writing it back: without a lock across workers, the later writer drops the earlier one's
#: updates (the race, forced). LOCKS picks which locks stay: syrupy's own (syrupy 7 under
#: xdist), the plugin's (where syrupy has none), both, or none.
RACE_CONFTEST = """
import os
import threading
import time

import syrupy.extensions.amber.serializer as amber

writing = threading.local()
_read = amber.AmberDataSerializer.read_file.__func__
_write = amber.AmberDataSerializer.write_file.__func__


def read_slowly(cls, *args, **kwargs):
    found = _read(cls, *args, **kwargs)
    if getattr(writing, "active", False):
        time.sleep(1.0)
    return found


def write_slowly(cls, *args, **kwargs):
    writing.active = True
    try:
        return _write(cls, *args, **kwargs)
    finally:
        writing.active = False


amber.AmberDataSerializer.read_file = classmethod(read_slowly)
amber.AmberDataSerializer.write_file = classmethod(write_slowly)

locks = os.environ["LOCKS"]
if locks in ("plugin", "none"):
    import importlib

    for name in ("syrupy.utils", "syrupy.session"):
        module = importlib.import_module(name)
        if hasattr(module, "should_use_snapshot_file_lock"):
            module.should_use_snapshot_file_lock = lambda config: False
    import pytest_openenv.worker.snapshot_writes as snapshot_writes

    if locks == "plugin":
        snapshot_writes.syrupy_locks_its_writes = lambda: False
    else:
        snapshot_writes.register_if_needed = lambda config: None
"""

VALUES = """
import pytest

VALUE = "{value}"


@pytest.mark.parametrize("i", range(8))
def test_value(snapshot, i):
    assert f"{{VALUE}}-{{i}}" == snapshot
"""


def update_on_two_workers(pytester, run_pytest, monkeypatch, locks: str) -> pytest.RunResult:
    """Snapshots made at v1, updated to v2 on 2 workers; the run that checks them, without."""
    monkeypatch.setenv("LOCKS", locks)
    pytester.makeconftest(RACE_CONFTEST)
    pytester.makepyfile(test_values=VALUES.format(value="v1"))
    assert run_pytest("--snapshot-update").ret == 0
    pytester.makepyfile(test_values=VALUES.format(value="v2"))
    updated = run_pytest("--snapshot-update", "-n", "2")
    assert updated.ret == 0, updated.stdout.str()[-3000:]
    updated.stdout.fnmatch_lines(["*8 snapshots updated*"])
    return run_pytest()


@pytest.mark.slow
@pytest.mark.parametrize("locks", ["installed", "plugin"])
def test_two_workers_updating_one_amber_file_keep_every_update(
    pytester, run_pytest, monkeypatch, locks: str
) -> None:
    """``installed``: whatever the installed syrupy does (syrupy 7 locks; older ones rely on
    the plugin); ``plugin``: the plugin's lock alone."""
    checked = update_on_two_workers(pytester, run_pytest, monkeypatch, locks)
    assert checked.ret == 0, checked.stdout.str()[-3000:]
    checked.stdout.fnmatch_lines(["*8 snapshots passed*"])


@pytest.mark.slow
def test_without_a_lock_the_forced_race_loses_updates(pytester, run_pytest, monkeypatch) -> None:
    """The race above is real: with no lock at all, one worker's updates are gone."""
    checked = update_on_two_workers(pytester, run_pytest, monkeypatch, "none")
    assert checked.ret == 1
    checked.stdout.fnmatch_lines(["*snapshots failed*"])
