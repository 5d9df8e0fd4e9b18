"""``RemoteServers``: what one process knows of its ``--openenv-server`` URLs.

Every episode of a process that runs on deployed servers shares this view:

* ``rotation``: which server the next episode opens its session on, and which are
  out of rotation after a fault (``rotation.py``);
* ``sessions``: open sessions kept between episodes for the next one to reset, and
  ``session_states``: what each open session said it hosts (``sessions.py``);
* ``known``: each server's metadata and schema, read once (``hosting.py``);
* ``unseeded``: the servers the controller found to ignore the reset seed
  (``seeding.py``), which xdist hands from the controller to each worker;
* ``overload``: where a ``CAPACITY_REACHED`` refusal is told, for
  ``--openenv-concurrency auto`` (``util/overload.py``).

The worker side makes one per process (``EpisodeService``) and hands it to every
``EnvFactory`` it builds, which attaches it to each ``RemoteBackend`` it opens; the
controller's preflight fills it before any episode. An ``EnvFactory`` or a
``RemoteBackend`` made without one has its own, shared with nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ...util.overload import OverloadSignal
from .hosting import KnownServers
from .rotation import Lease, ServerRotation
from .seeding import UnseededServers
from .sessions import IdleSessions, SessionStates


class RemoteServers:
    """One process's view of its deployed servers (see the module docstring)."""

    def __init__(
        self, *, rotation: ServerRotation | None = None, overload: OverloadSignal | None = None
    ) -> None:
        self.rotation = rotation if rotation is not None else ServerRotation()
        self.overload = overload if overload is not None else OverloadSignal()
        self.sessions = IdleSessions()
        self.session_states = SessionStates()
        self.known = KnownServers()
        self.unseeded = UnseededServers()

    def lease(self, servers: Sequence[str], *, index: int) -> Lease:
        """Hold a server in rotation for episode number ``index``."""
        return self.rotation.lease(servers, index=index)

    def seeded(self, server: str | None) -> bool:
        """False for an episode on a server that ignores the seed (``server``: public URL)."""
        return self.unseeded.seeded(server)

    def learn_unseeded(self, servers: Iterable[str]) -> None:
        """What the controller found (an xdist worker is told in its ``workerinput``)."""
        self.unseeded.add(servers)

    def keep_sessions(self, keep: bool) -> None:
        """Keep finished episodes' sessions for the next episode (never in xdist workers)."""
        self.sessions.enabled = keep

    def close(self) -> None:
        """At the end of the run: give every kept session back to its server."""
        self.sessions.close_all()
