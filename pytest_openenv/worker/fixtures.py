"""The public fixtures (docs/writing-tests.md): ``episode``, ``openenv_episode``, ``openenv_env``,
``openenv_policy``, ``openenv_snapshot``.

Registered by ``plugin.py`` (``pytest_plugins``) in every run, so importing this
module must stay cheap: the episode machinery loads when an episode first runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from .defaults import DEFAULT_ENV, DEFAULT_POLICY, SuiteDefault
from .items import PLAYS_DIRECTLY

if TYPE_CHECKING:
    from ..episode.result import Episode

#: the fixture episodes are parametrized on; ``episode`` is its short name for episode
#: tests, and a suite's own ``episode`` fixture (one not built on it) is left alone
EPISODE_FIXTURE = "openenv_episode"
#: the fixtures an episode item needs; an override of any of them may need other fixtures
OWN_FIXTURES = ("openenv_episode", "openenv_env", "openenv_policy")


def fixture_is_ours(node: pytest.Item, name: str) -> bool:
    """Whether ``node`` gets fixture ``name`` from this module, not from an override.

    pytest has no public way to ask which definition of a fixture a test will get
    before its setup (``request`` exists only then), and both the policy checks at
    collection and run-ahead must know it earlier. So this reads the item's
    ``_fixtureinfo``, here and in ``bundled.py``; ``tests/worker/test_fixtures.py`` fails
    if pytest renames it. Without it, nothing is treated as ours (no run-ahead).
    """
    info = getattr(node, "_fixtureinfo", None)
    defs = info.name2fixturedefs.get(name) if info is not None else None
    if not defs:
        return False
    return getattr(defs[-1].func, "__module__", None) == __name__


# Session-scoped and dependency-free: each episode resolves the default when it starts
# (``defaults.resolve``), which spares pytest two fixture setups and teardowns per item.
@pytest.fixture(scope="session")
def openenv_env() -> SuiteDefault:
    """The env factory: each episode gets the env its marker or ``--openenv-env`` names.

    Override with any object that has ``family`` and ``open(spec)`` (e.g. an
    ``EnvFactory``), or ``for_episode(spec)`` returning one (or this default).
    """
    return DEFAULT_ENV


@pytest.fixture(scope="session")
def openenv_policy() -> SuiteDefault:
    """The policy: each episode gets the one its marker or ``--openenv-policy`` names.

    Override with a ``Policy``, a callable ``policy(messages, tools)``, or an object
    with ``for_episode(spec)`` returning one of those (or this default).
    """
    return DEFAULT_POLICY


@pytest.fixture
def openenv_snapshot(snapshot: Any) -> Any:
    """syrupy's ``snapshot`` storing one readable JSON file per episode test."""
    from ..testing.snapshots import TrajectorySnapshotExtension

    return snapshot.use_extension(TrajectorySnapshotExtension)


@pytest.fixture
def episode(openenv_episode: Episode) -> Episode:
    """The finished episode (``openenv_episode`` by its short name).

    A suite whose conftest defines its own ``episode`` keeps it: tests using that one
    are not episode tests; its episode tests request ``openenv_episode``.
    """
    return openenv_episode


class EpisodeFixture:
    """``openenv_episode``: a fixture of the object ``plugin.py`` registers in every run.

    A fixture that asked for ``request`` to find its item would cost every episode
    pytest's ``request`` fixture, which pytest builds anew (inspecting a signature) each
    time it is resolved, four times per item. The item comes from the setup hook
    instead, and the player from the worker side, in a process that runs items.

    The bundled test's items, where nothing but the plugin's own three fixtures is set
    up (``bundled.plays_directly``), skip pytest's fixture lookups altogether: the setup
    hook plays the episode and puts the three values in ``item.funcargs``, where pytest
    finds them set. Its lookups (a request object, a cache check and a scope check per
    fixture per item) cost as much as a fifth of what such an item costs on the one
    thread that runs them all.
    """

    name = "openenv-episode-fixture"

    def __init__(self) -> None:
        #: plays an item's episode with the env and policy fixtures (``WorkerPlugin.play``);
        #: None where no items run (xdist's controller)
        self.player: Callable[[pytest.Item, Any, Any], Episode] | None = None
        self._item: pytest.Item | None = None

    @pytest.hookimpl(tryfirst=True, specname="pytest_runtest_setup")
    def pytest_runtest_setup_note_item(self, item: pytest.Item) -> None:
        # before any other plugin's setup, which might ask for a fixture of the item
        self._item = item

    # not tryfirst: the skipping plugin's tryfirst hook skips an item (a resumed episode,
    # a skip marker) before its episode is played; pytest's own setup, which sets up the
    # fixtures, is registered first and so runs after this one
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.player is not None and item.stash.get(PLAYS_DIRECTLY, False):
            played = self.player(item, DEFAULT_ENV, DEFAULT_POLICY)
            item.funcargs.update(  # type: ignore[attr-defined]
                openenv_env=DEFAULT_ENV, openenv_policy=DEFAULT_POLICY, openenv_episode=played
            )

    @pytest.fixture
    def openenv_episode(self, openenv_env: Any, openenv_policy: Any) -> Episode:
        """Run the episode during setup and return it finished."""
        if self.player is None or self._item is None:
            raise pytest.UsageError(
                "openenv_episode plays only in a process that runs tests, as a test sets up"
            )
        return self.player(self._item, openenv_env, openenv_policy)
