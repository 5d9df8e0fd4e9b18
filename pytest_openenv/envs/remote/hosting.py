"""What a deployed server says it hosts, and whether that is the env a run names.

``--openenv-env=openspiel:connect_four`` against a server that hosts tic-tac-toe
would otherwise run to the end and label tic-tac-toe episodes ``connect_four``.
So every server is asked what it hosts: once before the first episode (the
controller's preflight, over plain HTTP) and again in every episode (the
session's ``state`` frame and the first observation). The family adapter reads
the answer in its own terms (``EnvFamily.hosted_by``) and says whether it
matches (``EnvFamily.hosting_mismatch``); two checks hold for every family:

- the server's action schema must take the fields the adapter sends (an echo
  server cannot play ``action_id``);
- the first observation may only have fields the server's schema lists (a server
  swapped for another kind mid-run answers in another shape).

A server that cannot say is allowed: its records carry ``server_reports: null``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any

from ...errors import ServerMismatch
from ...util.endpoints import ServerUnreachable, ServerURL
from ..base import EnvFamily, StepResult

#: seconds one GET of /metadata, /schema or /state may take
FACTS_TIMEOUT = 10.0


@dataclass(frozen=True)
class ServerReport:
    """Everything a server has said about itself; any part may be unknown (None)."""

    server: str
    #: ``GET /metadata`` ``name`` (OpenEnv's ``EnvironmentMetadata``)
    name: str | None = None
    #: property names of ``GET /schema``'s ``action``
    action_fields: frozenset[str] | None = None
    #: property names of ``GET /schema``'s ``observation`` and ``reset_observation``
    observation_fields: frozenset[str] | None = None
    #: the env's state: the session's ``state`` frame, or ``GET /state``
    state: dict[str, Any] | None = None
    #: the answer to the episode's reset
    first: StepResult | None = None


def _properties(schema: Any) -> frozenset[str] | None:
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return None
    return frozenset(schema["properties"]) or None


def _get(server: ServerURL, path: str, timeout: float) -> Any:
    try:
        return server.get_json(path, timeout=timeout)
    except ServerUnreachable:
        return None


def read_report(server: ServerURL, *, timeout: float = FACTS_TIMEOUT, state: bool) -> ServerReport:
    """``GET /metadata`` and ``/schema`` (and ``/state`` if asked); what fails stays unknown."""
    metadata = _get(server, "/metadata", timeout)
    schema = _get(server, "/schema", timeout)
    schema = schema if isinstance(schema, dict) else {}
    observation_fields = [
        fields
        for fields in (
            _properties(schema.get("observation")),
            _properties(schema.get("reset_observation")),
        )
        if fields is not None
    ]
    http_state = _get(server, "/state", timeout) if state else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return ServerReport(
        server=server.public,
        name=str(name) if name else None,
        action_fields=_properties(schema.get("action")),
        observation_fields=frozenset().union(*observation_fields) if observation_fields else None,
        state=http_state if isinstance(http_state, dict) else None,
    )


class KnownServers:
    """Each server's metadata and schema, read once per process (they do not change).

    Part of the process's ``RemoteServers``; the preflight fills it on the controller.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reports: dict[ServerURL, ServerReport] = {}

    def report(self, server: ServerURL) -> ServerReport:
        with self._lock:
            known = self._reports.get(server)
        if known is None:
            known = read_report(server, state=False)
            with self._lock:
                known = self._reports.setdefault(server, known)
        return known

    def remember(self, server: ServerURL, report: ServerReport) -> None:
        """What the preflight read: episodes in this process need not read it again."""
        with self._lock:
            self._reports.setdefault(server, replace(report, state=None))

    def session_report(
        self, server: ServerURL, state: dict[str, Any] | None, first: StepResult
    ) -> ServerReport:
        """One episode's view: the server's schema and metadata, its session state, its reset."""
        return replace(self.report(server), state=state, first=first)


def kind_mismatch(family: EnvFamily, report: ServerReport) -> str | None:
    """Why the server is another kind of env altogether, whatever the family."""
    needed = set(family.action_fields)
    if report.action_fields is not None and needed - report.action_fields:
        return (
            f"its actions take {sorted(report.action_fields)}, but {family.spec} sends "
            f"{sorted(needed)}" + (f" (server name {report.name!r})" if report.name else "")
        )
    if report.first is not None and report.observation_fields is not None:
        unknown = set(report.first.observation) - report.observation_fields
        if unknown:
            return (
                f"it answered reset with observation fields {sorted(unknown)} that its own "
                f"schema does not list (another env now serves this URL?)"
            )
    return None


def check_report(family: EnvFamily, report: ServerReport) -> dict[str, Any] | None:
    """What the server hosts in the family's terms (None: it cannot say).

    Raises ``ServerMismatch`` naming the server, what it hosts and the env.
    """
    why = kind_mismatch(family, report)
    hosted = None
    if why is None:
        hosted = family.hosted_by(report)
        if hosted is not None:
            why = family.hosting_mismatch(hosted)
    if why is not None:
        raise ServerMismatch(f"{report.server} does not host {family.spec}: {why}")
    return hosted


def check_backend(family: EnvFamily, backend: Any, first: StepResult) -> dict[str, Any] | None:
    """The per-episode check, for backends that can say where they run (remote ones)."""
    server_report = getattr(backend, "server_report", None)
    if server_report is None:
        return None
    return check_report(family, server_report(first))
