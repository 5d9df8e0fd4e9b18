"""Which ``--openenv-server`` the next episode of this process opens its session on.

Servers differ (one GPU box, one laptop; a Space waking up), so round-robin is not
enough: an episode goes to the server with the fewest episodes of this process in
flight. Ties go to the server round-robin would have picked (episode *i* prefers
server *i mod k*, then the ones after it), so one episode at a time still spreads
*i mod k*, run after run.

A server whose session cannot be opened (connection refused, handshake failed or
timed out) or whose open session drops is taken out of rotation for a cool-down
(``COOL_DOWN`` seconds, doubled on each failure in a row, at most ``MAX_COOL_DOWN``);
episodes go to the others meanwhile. When its cool-down is over, one ``GET /health``
in the background decides: healthy, it is back; not, it sits out a longer cool-down.
A server that completes an episode is forgiven its earlier failures.

What the episode that met the fault gets (``Lease``):

* its session could not be opened at all: nothing was sent, the episode has not
  begun, so it moves to another server in rotation, once;
* its session dropped after the reset was sent: the episode had begun on that
  server, so it is an *error* (``EnvUnavailable``), as before.

With every server out of rotation an episode errors at once, naming each server,
why it is out and for how long: nothing waits for a server to come back, except
for the verdict of a health check already under way (``PROBE_TIMEOUT`` at most).

The state is per process (one ``ServerRotation`` in the process's ``RemoteServers``,
like the kept sessions in ``sessions``): each xdist worker balances its own episodes
and benches a server on its own first failure.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from ...errors import NoServerInRotation
from ...util.endpoints import ServerURL, health_problem, redact

#: seconds a server sits out after its first failure in a row
COOL_DOWN = 30.0
#: the longest cool-down, however often a server failed in a row
MAX_COOL_DOWN = 300.0
#: seconds the health check of a benched server may take
PROBE_TIMEOUT = 5.0


@dataclass
class _Standing:
    """One server, as this process sees it."""

    in_flight: int = 0
    #: failures since it last completed an episode (sets the next cool-down)
    failures: int = 0
    #: out of rotation until a health check after ``until`` lets it back
    benched: bool = False
    until: float = 0.0
    reason: str = ""
    probing: bool = False


def health_probe(server: str) -> str | None:
    """Why ``server`` cannot take episodes, or None: ``GET /health`` says healthy."""
    return health_problem(ServerURL.parse(server), timeout=PROBE_TIMEOUT)


class ServerRotation:
    """Thread-safe choice of a server per episode; see the module docstring."""

    def __init__(
        self,
        *,
        cool_down: float = COOL_DOWN,
        max_cool_down: float = MAX_COOL_DOWN,
        probe: Callable[[str], str | None] = health_probe,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cool_down = cool_down
        self.max_cool_down = max_cool_down
        self._probe = probe
        self._clock = clock
        self._lock = threading.Lock()
        #: notified when a health check ends (an episode may be waiting for its verdict)
        self._changed = threading.Condition(self._lock)
        self._standings: dict[str, _Standing] = {}

    def lease(self, servers: Sequence[str], *, index: int) -> Lease:
        """Hold a server for episode number ``index``; ``Lease.close`` gives it back."""
        return Lease(self, tuple(servers), index)

    def take(self, servers: Sequence[str], *, index: int, avoid: Collection[str] = ()) -> str:
        """The server in rotation with the fewest episodes in flight, now counted as one more.

        Raises ``NoServerInRotation`` when none is left (``avoid`` left out too).
        """
        if not servers:
            raise NoServerInRotation("no --openenv-server to run the episode on")
        start = index % len(servers)
        preference = [servers[(start + step) % len(servers)] for step in range(len(servers))]
        give_up = self._clock() + PROBE_TIMEOUT + 1.0
        with self._changed:
            while True:
                now = self._clock()
                best: str | None = None
                checking = False
                for server in preference:
                    standing = self._standings.setdefault(server, _Standing())
                    if standing.benched and not standing.probing and now >= standing.until:
                        self._start_probe(server, standing)
                    checking = checking or (standing.probing and server not in avoid)
                    if server in avoid or standing.benched:
                        continue
                    if best is None or standing.in_flight < self._standings[best].in_flight:
                        best = server
                if best is not None:
                    self._standings[best].in_flight += 1
                    return best
                if not checking or now >= give_up:
                    raise NoServerInRotation(self._why_none(preference, avoid, now))
                # nothing else to run on: a health check under way decides (bounded wait)
                self._changed.wait(give_up - now)

    def release(self, server: str, *, completed: bool) -> None:
        """An episode let go of ``server``; ``completed``: it met no fault there."""
        with self._lock:
            standing = self._standings.setdefault(server, _Standing())
            standing.in_flight = max(0, standing.in_flight - 1)
            if completed and not standing.benched:
                standing.failures = 0

    def fault(self, server: str, why: str) -> None:
        """``server`` refused or dropped a session: out of rotation for a cool-down.

        Faults met while it is already out (the other episodes that were on it when it
        died) are the same outage and do not lengthen it.
        """
        with self._lock:
            standing = self._standings.setdefault(server, _Standing())
            if not standing.benched:
                self._bench(standing, why)

    def out_of_rotation(self) -> dict[str, str]:
        """Each benched server (credentials removed) and why it is out."""
        with self._lock:
            return {
                redact(server): standing.reason
                for server, standing in self._standings.items()
                if standing.benched
            }

    def in_flight(self, server: str) -> int:
        with self._lock:
            standing = self._standings.get(server)
            return standing.in_flight if standing else 0

    # -- inside the lock -------------------------------------------------------------------
    def _bench(self, standing: _Standing, why: str) -> None:
        standing.failures += 1
        pause = min(self.max_cool_down, self.cool_down * 2 ** (standing.failures - 1))
        standing.benched = True
        standing.until = self._clock() + pause
        standing.reason = why

    def _start_probe(self, server: str, standing: _Standing) -> None:
        """Ask the benched ``server`` for its health in the background (never in the way)."""
        standing.probing = True
        threading.Thread(
            target=self._finish_probe, args=(server,), name="openenv-health-probe", daemon=True
        ).start()

    def _why_none(self, servers: Sequence[str], avoid: Collection[str], now: float) -> str:
        parts = []
        for server in servers:
            standing = self._standings[server]
            if standing.benched:
                wait = max(0.0, standing.until - now)
                when = "being checked now" if standing.probing else f"back in {wait:.0f}s at most"
                parts.append(f"{redact(server)} ({when}; out after: {standing.reason})")
            elif server in avoid:
                parts.append(f"{redact(server)} (just failed for this episode)")
        return f"no --openenv-server is in rotation: {'; '.join(parts)}"

    # -- background ------------------------------------------------------------------------
    def _finish_probe(self, server: str) -> None:
        try:
            problem = self._probe(server)
        except Exception as exc:  # a probe that breaks must not keep the server out for good
            problem = f"health check failed: {type(exc).__name__}: {exc}"
        with self._lock:
            standing = self._standings[server]
            standing.probing = False
            if problem is None:
                standing.benched = False
            else:
                self._bench(standing, problem)
            self._changed.notify_all()


class Lease:
    """One episode's hold on a server: counted in flight until ``close``."""

    def __init__(self, rotation: ServerRotation, servers: tuple[str, ...], index: int) -> None:
        self._rotation = rotation
        self._servers = servers
        self._index = index
        self.server = rotation.take(servers, index=index)
        self._faulted = False
        self._moved = False
        self._closed = False

    def fault(self, why: str) -> None:
        """The session on ``server`` dropped: bench it; the episode errors."""
        self._faulted = True
        self._rotation.fault(self.server, why)

    def move(self, why: str) -> str | None:
        """No session could be opened on ``server``: bench it and hold another, once.

        Returns the new server, or None (moved before, or none left in rotation): then
        the episode errors.
        """
        self._rotation.fault(self.server, why)
        if self._moved or len(self._servers) < 2:
            self._faulted = True
            return None
        try:
            other = self._rotation.take(self._servers, index=self._index, avoid=(self.server,))
        except NoServerInRotation:
            self._faulted = True
            return None
        self._rotation.release(self.server, completed=False)
        self.server, self._moved = other, True
        return other

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._rotation.release(self.server, completed=not self._faulted)
