"""Controller side: check the deployed servers once, before any episode runs.

A server that is down must be one clear usage error at start-up, not N episode
timeouts later (``check_servers``). Then one session with each server, opened as an
episode opens it (``check_sessions``): one that hosts another env is one usage error;
one that ignores the reset seed is one warning, and its records say so
(``extra.seeded: false``, ``null`` where the probe could not tell). Runs in the
process that configures the session (the xdist controller, or the single process
with ``-n 0``), never on workers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from ..config.settings import Settings
from ..envs.base import Backend, EnvConfigError, EnvFamily, StepResult
from ..envs.registry import family_class, split_spec
from ..envs.remote.servers import RemoteServers
from ..util.endpoints import ServerURL, check_health, redact
from ..util.secrets import KnownSecrets

if TYPE_CHECKING:
    from ..episode.service import EpisodeService


def check_deployed_servers(config: pytest.Config, service: EpisodeService) -> None:
    """Every ``--openenv-server`` is up and hosts the run's env; one honouring no seed warns.

    Health comes first: a down server would otherwise fail the env family's build
    (a generic family reads ``GET /schema``) with a less helpful message.
    """
    settings = service.settings
    if not settings.servers.urls:
        return
    check_servers(settings, embedded=offers_embedded_engine(settings.run.env))
    family = service.run_family()
    if family is not None:
        # one session each, as an episode opens it; what it reads, xdist hands on
        check_sessions(config, settings, family, service.remote)
        secrets = KnownSecrets.from_settings(settings)
        # what the run cannot confirm: env-config fields the server may have dropped, a
        # verdict that is a threshold the plugin guessed
        for note in family.start_warnings():
            warn(config, secrets, note)
        guess = family.verdict_warning(settings.run.min_reward)
        if guess:
            warn(config, secrets, guess)


#: seconds one ``GET /health`` may take (an HF Space waking from sleep is slow to answer)
HEALTH_TIMEOUT = 10.0


def offers_embedded_engine(env: str | None) -> bool:
    """The family of ``env`` can run episodes without a server (the generic one cannot)."""
    if not env:
        return False
    try:
        return family_class(split_spec(env)[0]).has_embedded_engine
    except EnvConfigError:  # the family's own check says what is wrong with the name
        return False


def check_servers(settings: Settings, *, embedded: bool = False) -> None:
    """``GET /health`` on every ``--openenv-server``; raise ``pytest.UsageError`` if any fails.

    ``embedded``: the run's family has an embedded engine, the one way to run without a
    server (advice a family that has none must not get)."""
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
            + (
                "Start the server, fix the URL, or leave out --openenv-server to use the "
                "embedded engine."
                if embedded
                else "Start the server or fix the URL."
            )
        )


#: seconds the whole before-the-run session with one server may take (reset, state and the
#: seed probe's resets and moves); ``--openenv-timeout`` bounds it further
SESSION_TIMEOUT = 30.0
#: resets with one seed, each played a few scripted moves: one difference proves the seed
#: is ignored. Several, because one chance draw or opponent move may agree by luck.
SEED_PROBE_RESETS = 6
SEED_PROBE_STEPS = 4
#: the preflight episode's id (the server may log it)
PREFLIGHT_EPISODE = "preflight"


def session_timeout(settings: Settings) -> float:
    """``SESSION_TIMEOUT``, or ``--openenv-timeout`` when that is shorter."""
    if settings.run.timeout:
        return min(SESSION_TIMEOUT, float(settings.run.timeout))
    return SESSION_TIMEOUT


@dataclass
class ServerCheck:
    """What one server's session before the run showed."""

    server: str
    #: why it does not host the run's env (a usage error), or None
    mismatch: str | None = None
    #: it could not say what it hosts
    silent: bool = False
    #: honours the seed: True, False, or None (could not tell)
    seeded: bool | None = None
    #: how the seed probe went, for the warning
    seed_note: str = ""
    #: why no session could be used (the checks fell back to plain HTTP), or ""
    problem: str = ""


def check_sessions(
    config: pytest.Config, settings: Settings, family: EnvFamily, remote: RemoteServers
) -> None:
    """One session with every ``--openenv-server`` before any episode, as episodes open them.

    It resets with the run's seed and the family's reset fields and reads the session's
    ``state`` frame: a server hosting another env than ``--openenv-env`` (another game,
    game parameters, agent player or opponent) is one usage error naming both; one that
    cannot say gets one warning (its records say ``extra.server_reports: null``). The same
    session then probes the seed (``probe_seeding``): a server that ignores it, or whose
    seeding the probe cannot tell, gets one warning and its records say
    ``extra.seeded: false`` / ``null``. ``remote`` keeps what was learnt for this process's
    episodes, and xdist hands it to the workers. Each session is bounded by
    ``session_timeout`` (``--openenv-timeout`` when shorter).
    """
    from concurrent.futures import ThreadPoolExecutor

    # with workers (-n, or --tx gateways) the controller runs no episode: a kept session
    # would sit idle on the server for the whole run
    workers = config.getoption("numprocesses", None) or config.getoption("tx", None)
    urls = list(settings.servers.urls)
    timeout = session_timeout(settings)
    seed = settings.run.seed
    # what a server answered goes into the warnings (an error frame may quote credentials)
    secrets = KnownSecrets.from_settings(settings)

    def check(url: str) -> ServerCheck:
        return check_one(family, url, seed, timeout=timeout, keep=not workers, remote=remote)

    with ThreadPoolExecutor(max_workers=min(16, len(urls))) as pool:
        checks = list(pool.map(check, urls))
    problems = [c.mismatch for c in checks if c.mismatch]
    if problems:
        listed = "\n  ".join(problems)
        raise pytest.UsageError(
            f"--openenv-env={family.spec}: {len(problems)} of {len(urls)} --openenv-server(s) "
            f"host another env (asked before any episode ran):\n  {listed}\n"
            f"Point --openenv-server at a server that hosts {family.spec}, or set "
            "--openenv-env (and --openenv-env-config) to what the server hosts."
        )
    for found in checks:
        if found.problem:
            warn(
                config,
                secrets,
                f"--openenv-server {found.server}: no session could be used before the run "
                f"({found.problem}); what it hosts was asked over plain HTTP only, and whether "
                "it honours the seed is unknown (its records say extra.seeded: null)",
            )
    silent = [c.server for c in checks if c.silent]
    if silent:
        warn(
            config,
            secrets,
            f"--openenv-server {', '.join(silent)} does not say what it hosts (neither its "
            f"session's state and first observation nor GET /metadata name it), so it cannot "
            f"be checked against {family.spec}; its records say extra.server_reports: null",
        )
    for found in checks:
        if found.seeded is False:
            remote.learn_unseeded([found.server])
            warn(
                config,
                secrets,
                f"--openenv-server {found.server} ignores the reset seed: {found.seed_note}, so "
                "a rerun will not repeat its episodes; its records say extra.seeded=false",
            )
        elif found.seeded is None:
            remote.learn_seeding_unknown([found.server])
            if not found.problem:
                warn(
                    config,
                    secrets,
                    f"--openenv-server {found.server}: whether it honours the reset seed could "
                    f"not be told ({found.seed_note}); its records say extra.seeded: null",
                )


def warn(config: pytest.Config, secrets: KnownSecrets, message: str) -> None:
    config.issue_config_time_warning(pytest.PytestWarning(secrets.scrub(message)), stacklevel=3)


def check_one(
    family: EnvFamily,
    url: str,
    seed: int,
    *,
    timeout: float,
    keep: bool,
    remote: RemoteServers,
) -> ServerCheck:
    """The before-the-run session with one server (see ``check_sessions``). ``keep``: hand
    the session to the next episode of this process instead of closing it, so the check
    costs no session of its own."""
    from ..envs.base import ActionRejected, EnvUnavailable
    from ..envs.remote.hosting import ServerMismatch, check_backend, check_report, read_report

    public = redact(url)
    found = ServerCheck(public)
    backend = family.remote_backend(url)
    attach = getattr(backend, "attach", None)
    if attach is not None:
        attach(remote)
    backend.limit_time(timeout)
    try:
        try:
            first = _reset(family, backend, seed)
        except ActionRejected as exc:
            fields = family.reset_options(seed=seed, episode_id=PREFLIGHT_EPISODE)
            found.mismatch = (
                f"{public} refused the reset {family.spec} sends (seed {seed}, reset fields "
                f"{json.dumps(fields, sort_keys=True, default=str)}): {exc}"
            )
            return found
        except EnvUnavailable as exc:
            return _over_http(found, family, url, timeout, str(exc))
        try:
            hosted = check_backend(family, backend, first)
            if hosted is None and getattr(backend, "server_report", None) is None:
                # a backend that cannot ask its session: what plain HTTP says
                report = read_report(ServerURL.parse(url), timeout=timeout, state=True)
                hosted = check_report(family, report)
        except ServerMismatch as mismatch:
            found.mismatch = str(mismatch)
            return found
        except EnvUnavailable as exc:  # the session broke while asked for its state
            return _over_http(found, family, url, timeout, str(exc))
        found.silent = hosted is None
        found.seeded, found.seed_note = probe_seeding(family, backend, seed, first)
        return found
    finally:
        with remote.sessions.enabled_while(keep and not found.mismatch):
            backend.close()


def _over_http(
    found: ServerCheck, family: EnvFamily, url: str, timeout: float, problem: str
) -> ServerCheck:
    """No session could be used: what the server hosts as plain HTTP says, seeding unknown."""
    from ..envs.remote.hosting import ServerMismatch, check_report, read_report

    found.problem, found.seed_note = problem, "no session"
    report = read_report(ServerURL.parse(url), timeout=timeout, state=True)
    try:
        found.silent = check_report(family, report) is None
    except ServerMismatch as mismatch:
        found.mismatch = str(mismatch)
    return found


def _reset(family: EnvFamily, backend: Backend, seed: int) -> StepResult:
    options = family.reset_options(seed=seed, episode_id=PREFLIGHT_EPISODE)
    return backend.reset(seed=seed, episode_id=PREFLIGHT_EPISODE, **options)


#: state fields that differ between any two episodes, seeded or not
STATE_PLUMBING = ("episode_id", "step_count")


def probe_seeding(
    family: EnvFamily, backend: Backend, seed: int, first: StepResult
) -> tuple[bool | None, str]:
    """Does the server give the same episode for the same seed? (True/False/None: could
    not tell, and how the probe went.)

    ``first`` is the session's reset with ``seed``; the probe plays it and
    ``SEED_PROBE_RESETS - 1`` more resets with the same seed a few moves each, with the
    family's scripted (or first legal) move, and reads the session's state after each
    reset: a secret the env keeps only there (TextArena's number to guess) differs too when
    the seed is ignored. State fields that change between two reads of one reset (a clock)
    and the episode's id and step count are left out. Resets that all look alike prove
    nothing when no move could be played: the env's randomness may only show later (an
    unseeded opponent's reply), so the answer is then None.
    """
    from ..envs.base import ActionRejected, EnvConfigError, EnvUnavailable

    traces: set[str] = set()
    states: list[dict[str, object]] = []
    volatile = set(STATE_PLUMBING)
    played = finished = False
    try:
        current: StepResult | None = first
        for _ in range(SEED_PROBE_RESETS):
            if current is None:
                current = _reset(family, backend, seed)
            state = _state_of(backend)
            if state is not None and not states:
                volatile |= changed_fields(state, _state_of(backend) or {})
            trace, moved, done = _trace(family, backend, current)
            current = None
            traces.add(trace)
            played, finished = played or moved, finished or done
            if len(traces) > 1:
                return False, (
                    f"{SEED_PROBE_RESETS} resets with seed {seed} gave different episodes"
                )
            if state is None:
                continue
            states.append(state)
            differ = sorted(changed_fields(states[0], state) - volatile)
            if differ:
                return False, (
                    f"resets with seed {seed} left different states (state field(s) "
                    f"{', '.join(differ)} differ)"
                )
    except (ActionRejected, EnvConfigError, EnvUnavailable) as exc:
        return None, f"the probe stopped: {exc}"
    if not played and not finished:
        return None, (
            f"{SEED_PROBE_RESETS} resets with seed {seed} looked alike, but {family.spec} "
            "has no scripted move to play on, and what follows a reset may still differ"
        )
    return True, f"{SEED_PROBE_RESETS} resets with seed {seed} played alike"


def _state_of(backend: Backend) -> dict[str, object] | None:
    """The session's state (None: the backend cannot ask it, or the server does not say)."""
    read = getattr(backend, "state_or_none", None)
    return read() if read is not None else None


def changed_fields(one: dict[str, object], other: dict[str, object]) -> set[str]:
    """Fields whose values differ between two states (one missing in either counts)."""

    def text(value: object) -> str:
        return json.dumps(value, sort_keys=True, default=str)

    return {k for k in one.keys() | other.keys() if text(one.get(k)) != text(other.get(k))}


def _trace(family: EnvFamily, backend: Backend, current: StepResult) -> tuple[str, bool, bool]:
    """One short scripted episode from ``current`` as text (observations, rewards, done; not
    metadata, which may carry clocks or ids that differ on every reset), whether a move was
    played, and whether it reached the end."""
    seen = [current]
    moved = False
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
        moved = True
        seen.append(current)
    text = json.dumps(
        [[s.observation, s.reward, s.done] for s in seen], sort_keys=True, default=str
    )
    return text, moved, current.done
