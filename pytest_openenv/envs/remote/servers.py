"""``RemoteServers``: what one process knows of its ``--openenv-server`` URLs.

Every episode of a process that runs on deployed servers shares this view:

* ``rotation``: which server the next episode opens its session on, and which are
  out of rotation after a fault (``rotation.py``);
* ``sessions``: open sessions kept between episodes for the next one to reset, and
  ``session_states``: what each open session said it hosts (``sessions.py``);
* ``known``: each server's metadata and schema, and what a session showed before the run
  (``hosting.py``), read once per run;
* ``unseeded``: the servers the controller found to ignore the reset seed, or could not
  tell about (``seeding.py``);
* ``overload``: where a ``CAPACITY_REACHED`` refusal is told, for
  ``--openenv-concurrency auto`` (``util/overload.py``).

The worker side makes one per process (``EpisodeService``) and hands it to every
``EnvFactory`` it builds, which attaches it to each ``RemoteBackend`` it opens; the
controller's preflight fills it before any episode, and xdist hands what the controller
learnt to each worker (``handover`` / ``learn``). An ``EnvFactory`` or a
``RemoteBackend`` made without one has its own, shared with nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

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

    def seeded(self, server: str | None) -> bool | None:
        """False for an episode on a server that ignores the seed, None where that could not
        be told (``server``: public URL)."""
        return self.unseeded.seeded(server)

    def learn_unseeded(self, servers: Iterable[str]) -> None:
        """Servers the controller found to ignore the seed."""
        self.unseeded.add(servers)

    def learn_seeding_unknown(self, servers: Iterable[str]) -> None:
        """Servers whose seeding the controller's probe could not tell."""
        self.unseeded.add_unknown(servers)

    def handover(self) -> dict[str, Any]:
        """What the controller learnt of its servers, as JSON for an xdist worker."""
        return {
            "unseeded": self.unseeded.listed(),
            "seeding_unknown": self.unseeded.unknown_listed(),
            "known": self.known.handover(),
        }

    def learn(self, handed: dict[str, Any]) -> None:
        """What the controller learnt (``handover``, from a worker's ``workerinput``)."""
        if not isinstance(handed, dict):
            return
        self.learn_unseeded(handed.get("unseeded") or ())
        self.learn_seeding_unknown(handed.get("seeding_unknown") or ())
        self.known.learn(handed.get("known") or {})

    def keep_sessions(self, keep: bool) -> None:
        """Keep finished episodes' sessions for the next episode (never in xdist workers)."""
        self.sessions.enabled = keep

    def close(self) -> None:
        """At the end of the run: give every kept session back to its server."""
        self.sessions.close_all()
