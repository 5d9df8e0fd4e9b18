"""Controller side: check the deployed servers once, before any episode runs.

A server that is down must be one clear usage error at start-up, not N episode
timeouts later. Runs in the process that configures the session (the xdist
controller, or the single process with ``-n 0``), never on workers.
"""

from __future__ import annotations

import pytest

from .envs.endpoints import ServerURL, check_health
from .options import Settings

#: seconds one ``GET /health`` may take (an HF Space waking from sleep is slow to answer)
HEALTH_TIMEOUT = 10.0


def check_servers(settings: Settings) -> None:
    """``GET /health`` on every ``--openenv-server``; raise ``pytest.UsageError`` if any fails."""
    servers = [ServerURL.parse(url) for url in settings.extra.get("server") or ()]
    timeout = HEALTH_TIMEOUT
    episode_timeout = settings.extra.get("timeout")
    if episode_timeout:
        timeout = min(timeout, float(episode_timeout))
    problems = check_health(servers, timeout=timeout)
    if problems:
        listed = "\n  ".join(problems)
        raise pytest.UsageError(
            f"--openenv-server: {len(problems)} of {len(servers)} server(s) cannot take "
            f"episodes (checked with GET /health before any episode ran):\n  {listed}\n"
            "Start the server, fix the URL, or leave out --openenv-server to use the "
            "embedded engine."
        )
