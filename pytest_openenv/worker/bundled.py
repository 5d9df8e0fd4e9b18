"""The bundled episode test: what runs when ``--openenv-env`` is given and no paths are.

The test itself is ``bundled_test.py``; this module decides whether a run is one of
those and puts the test's items in front of the collection.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..config.settings import Settings
from .fixtures import OWN_FIXTURES, fixture_is_ours
from .items import PLAYS_DIRECTLY

#: plugins the bundled episode test never uses, each with what it would cost at the end of
#: a run: syrupy's unused-snapshot search sends every collected item from each xdist worker
#: and rebuilds them all on the controller (about 1.3 KB per episode: 130 MB for 100,000);
#: hypothesis' terminal summary walks every report and imports all of hypothesis, in each
#: worker too (a fifth of a second of CPU per process)
IDLE_IN_BUNDLED_RUNS = ("syrupy", "hypothesispytest")


@dataclass(frozen=True)
class BundledRun:
    """A run of the bundled test, and what it left out."""

    #: the modules of the idle plugins it unregistered (their fixtures are dropped too)
    left_out: tuple[str, ...] = ()


def take_over(config: pytest.Config, settings: Settings) -> BundledRun | None:
    """For a run of the bundled test only: collect nothing else, load no idle plugin.

    Returns None if this run is not one.
    """
    no_paths = config.args_source != pytest.Config.ArgsSource.ARGS
    if not (settings.run.env and no_paths):
        return None
    left_out = leave_out_idle_plugins(config)
    config.args[:] = []
    return BundledRun(left_out)


def leave_out_idle_plugins(config: pytest.Config) -> tuple[str, ...]:
    """As ``-p no:NAME`` would, for a run of the bundled test only (their options still
    parse); the modules the plugins came from."""
    modules = []
    for name in IDLE_IN_BUNDLED_RUNS:
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(name=name)
            modules.append(getattr(plugin, "__name__", None) or type(plugin).__module__)
    return tuple(modules)


class _BundledModule(pytest.Module):
    def _getobj(self) -> Any:
        from . import bundled_test

        return bundled_test


def bundled_items(session: pytest.Session, run: BundledRun) -> list[pytest.Item]:
    """The bundled test's items, under the node id ``openenv``."""
    from . import bundled_test

    module = _BundledModule.from_parent(session, path=Path(bundled_test.__file__), nodeid="openenv")
    items = list(session.genitems(module))
    share_location(items)
    if items and run.left_out:
        drop_left_out_fixtures(items[0], run.left_out)
    if items and plays_directly(items[0]):
        for item in items:
            item.stash[PLAYS_DIRECTLY] = True
    return items


def plays_directly(item: pytest.Item) -> bool:
    """Whether the bundled test's items can skip pytest's fixture lookups (see
    ``fixtures.EpisodeFixture``): nothing but the plugin's own three fixtures is set up
    for them (no override, no autouse fixture of a conftest or plugin, no
    ``usefixtures``), and no option asks to see fixtures being set up. Every item of
    the test shares one closure, so the first one answers for all."""
    config = item.config
    if any(config.getoption(name, False) for name in ("setupshow", "setuponly", "setupplan")):
        return False
    info = getattr(item, "_fixtureinfo", None)
    if info is None or not isinstance(getattr(item, "funcargs", None), dict):
        return False
    closure = set(info.names_closure)
    return closure == set(OWN_FIXTURES) and all(fixture_is_ours(item, n) for n in OWN_FIXTURES)


def drop_left_out_fixtures(item: pytest.Item, modules: tuple[str, ...]) -> None:
    """Set up none of the fixtures of the plugins the run left out, nor what only they need.

    pytest learns a plugin's fixtures from a record of every plugin ever registered, so
    one unregistered at configure time still has its fixtures parsed, and its autouse
    ones set up for every item: syrupy's ``_syrupy_apply_ide_patches`` asks for
    ``request``, which pytest builds anew each time, twice per item. Only ``-p no:NAME``
    on the command line keeps them out, and the bundled test needs none of them. Every
    item of the test shares one fixture closure (``_fixtureinfo``, as in
    ``fixtures.fixture_is_ours``), so it is pruned once.
    """
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return
    defs = info.name2fixturedefs

    def left_out(name: str) -> bool:
        found = defs.get(name)
        module = getattr(found[-1].func, "__module__", None) if found else None
        return isinstance(module, str) and any(
            module == left or module.startswith(f"{left}.") for left in modules
        )

    needed: set[str] = set()
    wanted = [name for name in info.initialnames if not left_out(name)]
    while wanted:
        name = wanted.pop()
        if name in needed:
            continue
        needed.add(name)
        # every definition of the name: an override may ask for the one it overrides
        for fixturedef in defs.get(name, ()):
            wanted.extend(arg for arg in fixturedef.argnames if not left_out(arg))
    info.names_closure[:] = [name for name in info.names_closure if name in needed]


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
