"""Which deployed servers ignore the reset seed, as the controller found before the run.

OpenEnv's server passes ``seed`` to an env's ``reset`` only if its signature has
one; OpenEnv's own openspiel env has none, so the seed is silently dropped and
"the same seed, the same episode" is untrue there. ``preflight.probe_seeding``
fills this set on the controller; xdist hands it to each worker; every record
from such a server says ``extra.seeded: false``.
"""

from __future__ import annotations

#: public URLs (no credentials) of servers shown to ignore the seed
UNSEEDED_SERVERS: set[str] = set()


def seeded(server: str | None) -> bool:
    """False for an episode on a server that ignores the seed; embedded engines honour it."""
    return server is None or server not in UNSEEDED_SERVERS
