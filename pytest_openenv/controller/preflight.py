"""Controller side: check the deployed servers once, before any episode runs.

A server that is down must be one clear usage error at start-up, not N episode
timeouts later. A server that ignores the reset seed is one warning, and its
records say so (``extra.seeded: false``). Runs in the process that configures the session (the xdist
controller, or the single process with ``-n 0``), never on workers.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from ..config.settings import Settings
from ..envs.base import Backend, EnvFamily
from ..envs.remote.servers import RemoteServers
from ..util.endpoints import ServerURL, check_health

if TYPE_CHECKING:
    from ..worker.service import EpisodeService


def check_deployed_servers(config: pytest.Config, service: EpisodeService) -> None:
    """Every ``--openenv-server`` is up, hosts the run's env, and (one warning) honours seeds.

    Health comes first: a down server would otherwise fail the env family's build
    (a generic family reads ``GET /schema``) with a less helpful message.
    """
    settings = service.settings
    if not settings.servers.urls:
        return
    check_servers(settings)
    family = service.run_family()
    if family is not None:
        remote = service.remote  # what the episodes of -n 0 will use, and xdist hands on
        check_hosting(config, settings, family, remote)  # hosting another env: usage error
        check_seeding(config, settings, family, remote)  # drops the seed: one warning


#: seconds one ``GET /health`` may take (an HF Space waking from sleep is slow to answer)
HEALTH_TIMEOUT = 10.0


def check_servers(settings: Settings) -> None:
    """``GET /health`` on every ``--openenv-server``; raise ``pytest.UsageError`` if any fails."""
    servers = [ServerURL.parse(url) for url in settings.servers.urls]
    timeout = HEALTH_TIMEOUT
    episode_timeout = settings.run.timeout
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


def check_hosting(
    config: pytest.Config, settings: Settings, family: EnvFamily, remote: RemoteServers
) -> None:
    """Ask every ``--openenv-server`` what it hosts (``GET /metadata``, ``/schema``, ``/state``).

    A server hosting another env than ``--openenv-env`` is one usage error naming
    both; servers that cannot say get one warning (their records say
    ``extra.server_reports: null``). Each episode checks again (``envs/hosting``);
    ``remote`` keeps what was read for the episodes of this process.
    """
    from concurrent.futures import ThreadPoolExecutor

    from ..envs.remote.hosting import ServerMismatch, check_report, read_report

    servers = [ServerURL.parse(url) for url in settings.servers.urls]
    timeout = HEALTH_TIMEOUT
    if settings.run.timeout:
        timeout = min(timeout, float(settings.run.timeout))
    with ThreadPoolExecutor(max_workers=min(16, len(servers))) as pool:
        reports = list(pool.map(lambda s: read_report(s, timeout=timeout, state=True), servers))
    problems, silent = [], []
    for server, report in zip(servers, reports, strict=True):
        remote.known.remember(server, report)
        try:
            if check_report(family, report) is None:
                silent.append(report.server)
        except ServerMismatch as exc:
            problems.append(str(exc))
    if problems:
        listed = "\n  ".join(problems)
        raise pytest.UsageError(
            f"--openenv-env={family.spec}: {len(problems)} of {len(servers)} --openenv-server(s) "
            f"host another env (asked before any episode ran):\n  {listed}\n"
            f"Point --openenv-server at a server that hosts {family.spec}, or set "
            "--openenv-env (and --openenv-env-config) to what the server hosts."
        )
    if silent:
        config.issue_config_time_warning(
            pytest.PytestWarning(
                f"--openenv-server {', '.join(silent)} does not say what it hosts (nothing in "
                f"GET /state or /metadata names it), so it cannot be checked against "
                f"{family.spec}; its records say extra.server_reports: null"
            ),
            stacklevel=2,
        )


#: resets with one seed, each played a few scripted moves: one difference proves the seed
#: is ignored. Several, because one chance draw or opponent move may agree by luck.
SEED_PROBE_RESETS = 6
SEED_PROBE_STEPS = 4
SEED_PROBE_TIMEOUT = 30.0


def probe_seeding(
    family: EnvFamily, server: str, seed: int, *, keep: bool, remote: RemoteServers
) -> bool | None:
    """Does ``server`` give the same episode for the same seed? None: could not tell.

    One session, reset ``SEED_PROBE_RESETS`` times with ``seed`` and stepped with the
    family's scripted (or first legal) move. ``keep``: hand the session to the next
    episode of this process (``remote``'s kept sessions) instead of closing it, so the
    probe costs no session.
    """
    from ..envs.base import ActionRejected, EnvConfigError, EnvUnavailable

    backend = family.remote_backend(server)
    attach = getattr(backend, "attach", None)
    if attach is not None:
        attach(remote)
    backend.limit_time(SEED_PROBE_TIMEOUT)
    traces: set[str] = set()
    try:
        for _ in range(SEED_PROBE_RESETS):
            traces.add(_trace(family, backend, seed))
            if len(traces) > 1:
                return False
    except (ActionRejected, EnvConfigError, EnvUnavailable):
        return None
    finally:
        with remote.sessions.enabled_while(keep):
            backend.close()
    return True


def _trace(family: EnvFamily, backend: Backend, seed: int) -> str:
    """One short scripted episode as text (observations, rewards, done; not metadata,
    which may carry clocks or ids that differ on every reset)."""
    episode_id = "seed-probe"
    current = backend.reset(
        seed=seed, episode_id=episode_id, **family.reset_options(seed=seed, episode_id=episode_id)
    )
    seen = [current]
    for _ in range(SEED_PROBE_STEPS):
        if current.done:
            break
        call = family.scripted_call(current)
        if call is None:
            legal = family.legal_calls(current)
            call = legal[0] if legal else None
        if call is None:
            break
        current = backend.step(family.to_action(call, current))
        seen.append(current)
    return json.dumps(
        [[s.observation, s.reward, s.done] for s in seen], sort_keys=True, default=str
    )


def check_seeding(
    config: pytest.Config, settings: Settings, family: EnvFamily, remote: RemoteServers
) -> None:
    """Probe every ``--openenv-server``; warn once per server that ignores the seed, and
    mark it in ``remote`` (xdist hands that to each worker)."""
    from ..util.endpoints import redact

    # with workers (-n, or --tx gateways) the controller runs no episode: a kept probe
    # session would sit idle on the server for the whole run
    workers = config.getoption("numprocesses", None) or config.getoption("tx", None)
    for server in settings.servers.urls:
        probed = probe_seeding(family, server, settings.run.seed, keep=not workers, remote=remote)
        if probed is not False:
            continue
        public = redact(server)
        remote.learn_unseeded([public])
        config.issue_config_time_warning(
            pytest.PytestWarning(
                f"--openenv-server {public} ignores the reset seed: {SEED_PROBE_RESETS} resets "
                f"with seed {settings.run.seed} gave different episodes, so a rerun will not "
                "repeat them; its records say extra.seeded=false"
            ),
            stacklevel=2,
        )
