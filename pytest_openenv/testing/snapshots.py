"""Snapshots of agent behaviour: one readable JSON file per episode test (syrupy).

Use the ``openenv_snapshot`` fixture, or pick the extension yourself::

    def test_moves(episode, openenv_snapshot):
        assert episode.trajectory == openenv_snapshot

    def test_moves_too(episode, snapshot):
        from pytest_openenv.snapshots import TrajectorySnapshotExtension
        assert episode.trajectory == snapshot.use_extension(TrajectorySnapshotExtension)

Each item gets ``__snapshots__/<test file>/<test name>[ep-000000].json`` next to the
suite. The trajectory keeps its natural key order (env, seed, steps, reward,
outcome) and multi-line observations (boards) are stored as lists of lines, so a
changed move shows up in the diff as the turn and the board rows that differ.
``pytest --snapshot-update`` (also with ``-n``) rewrites the files.

This module imports syrupy; the plugin imports it only inside the fixture.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from syrupy.extensions.json import JSONSnapshotExtension


def readable(data: Any) -> Any:
    """Key order kept (OrderedDict: syrupy's JSON writer would sort plain dicts);
    multi-line strings split into lines so a diff points at the row that changed."""
    if isinstance(data, dict):
        return OrderedDict((str(key), readable(value)) for key, value in data.items())
    if isinstance(data, (list, tuple)):
        return [readable(value) for value in data]
    if isinstance(data, str) and "\n" in data:
        return data.split("\n")
    return data


class TrajectorySnapshotExtension(JSONSnapshotExtension):
    """Stores ``episode.trajectory`` (or a whole ``Episode``, reduced to its trajectory)."""

    def serialize(
        self,
        data: Any,
        *,
        exclude: Any = None,
        include: Any = None,
        matcher: Any = None,
    ) -> Any:
        trajectory = getattr(data, "trajectory", None)
        if isinstance(trajectory, dict):
            data = trajectory
        return super().serialize(readable(data), exclude=exclude, include=include, matcher=matcher)
