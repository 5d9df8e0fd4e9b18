"""The bundled episode test: what runs when ``--openenv-env`` is given and no paths are.

The test itself is ``bundled_test.py``; this module decides whether a run is one of
those and puts the test's items in front of the collection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..config.settings import Settings

#: plugins the bundled episode test never uses, each with what it would cost at the end of
#: a run: syrupy's unused-snapshot search sends every collected item from each xdist worker
#: and rebuilds them all on the controller (about 1.3 KB per episode: 130 MB for 100,000);
#: hypothesis' terminal summary walks every report and imports all of hypothesis, in each
#: worker too (a fifth of a second of CPU per process)
IDLE_IN_BUNDLED_RUNS = ("syrupy", "hypothesispytest")


def take_over(config: pytest.Config, settings: Settings) -> bool:
    """For a run of the bundled test only: collect nothing else, load no idle plugin.

    Returns whether this run is one.
    """
    no_paths = config.args_source != pytest.Config.ArgsSource.ARGS
    if not (settings.run.env and no_paths):
        return False
    leave_out_idle_plugins(config)
    config.args[:] = []
    return True


def leave_out_idle_plugins(config: pytest.Config) -> None:
    """As ``-p no:NAME`` would, for a run of the bundled test only (their options still parse)."""
    for name in IDLE_IN_BUNDLED_RUNS:
        if config.pluginmanager.has_plugin(name):
            config.pluginmanager.unregister(name=name)


class _BundledModule(pytest.Module):
    def _getobj(self) -> Any:
        from . import bundled_test

        return bundled_test


def bundled_items(session: pytest.Session) -> list[pytest.Item]:
    """The bundled test's items, under the node id ``openenv``."""
    from . import bundled_test

    module = _BundledModule.from_parent(session, path=Path(bundled_test.__file__), nodeid="openenv")
    items = list(session.genitems(module))
    share_location(items)
    return items


def share_location(items: list[pytest.Item]) -> None:
    """Give every item the file and line pytest found for the first one.

    pytest works out each item's ``location`` (the test function's file, resolved
    against the root, and its line) anew for every item, from the same function here:
    a few stat calls and path operations per episode on the thread that runs them all.
    The name part is each item's own (its ``getmodpath``, the item's name for a
    module-level test function, checked on the first).
    """
    if not items:
        return
    first = items[0]
    path, line, name = first.location
    if name != first.name:  # not a module-level function: leave pytest to it
        return
    for item in items[1:]:
        # ``location`` is a functools.cached_property: its value lives in the item's __dict__
        item.__dict__["location"] = (path, line, item.name)
