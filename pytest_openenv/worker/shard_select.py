"""``--openenv-shard`` at collection: the items of other shards are deselected.

Every process collects the same items in the same order, so each decides alone and alike
(``config/shard.py``: by the episode's index within its test). The deselected items are
reported through pytest's ``pytest_deselected`` here; an xdist worker's are carried to
the controller, whose summary line counts them (``controller/xdist.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from ..config.shard import SHARD_COLLECTION, SHARD_WIRE, Shard, ShardCollection
from .items import spec_of


def select_shard(config: pytest.Config, items: list[pytest.Item], shard: Shard) -> None:
    """Keep the items of ``shard`` (and every item that is not an episode)."""
    kept: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    tests: dict[str, dict[str, Any]] = {}
    for item in items:
        spec = spec_of(item)
        if spec is None:
            kept.append(item)
            continue
        function = item.nodeid.rpartition("[")[0]
        known = tests.setdefault(function, {"n": 0, "repeats": spec.repeats, "arms": []})
        known["n"] = max(known["n"], spec.index + 1)
        if spec.arm not in known["arms"]:
            # the order a run on one machine meets its models in: the order of its figures
            known["arms"].append(spec.arm)
        (kept if shard.holds(spec.index) else deselected).append(item)
    collection = ShardCollection(tests, [item.nodeid for item in deselected])
    config.stash[SHARD_COLLECTION] = collection
    workeroutput = getattr(config, "workeroutput", None)
    if isinstance(workeroutput, dict):
        workeroutput[SHARD_WIRE] = collection.to_wire()
    if deselected:
        items[:] = kept
        config.hook.pytest_deselected(items=deselected)
