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
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ...errors import ServerMismatch
from ...util.endpoints import ServerUnreachable, ServerURL
from ..base import EnvFamily, StepResult

#: seconds one GET of /metadata, /schema or /state may take, its whole answer included
FACTS_TIMEOUT = 10.0


@dataclass(frozen=True)
class ServerFacts:
    """What a server says of itself over plain HTTP: read once per run, by the controller,
    and handed to each worker (``KnownServers.handover``), so every process of a run uses
    one schema even if the server's changes while the run goes on."""

    #: ``GET /metadata`` (OpenEnv's ``EnvironmentMetadata``)
    metadata: dict[str, Any] | None = None
    #: ``GET /schema``: ``{action, observation, state, reset_observation?}`` JSON schemas
    schema: dict[str, Any] | None = None
    #: ``GET /list_environments``: the ``env_name`` its app was made with (the env's folder
    #: name in OpenEnv's repository, ``coding_env``), where the server serves it
    env_names: tuple[str, ...] = ()
    #: why ``GET /schema`` gave nothing ("" when it answered)
    schema_problem: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "metadata": self.metadata,
            "schema": self.schema,
            "env_names": self.env_names,
            "schema_problem": self.schema_problem,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ServerFacts:
        metadata, schema = data.get("metadata"), data.get("schema")
        return cls(
            metadata=metadata if isinstance(metadata, dict) else None,
            schema=schema if isinstance(schema, dict) else None,
            env_names=tuple(str(n) for n in data.get("env_names") or ()),
            schema_problem=str(data.get("schema_problem") or ""),
        )


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
    #: the env's state: the session's ``state`` frame (or, if no session could be opened
    #: before the run, ``GET /state``, which OpenEnv's servers answer from a fresh env)
    state: dict[str, Any] | None = None
    #: the answer to the episode's reset
    first: StepResult | None = None
    #: ``GET /list_environments``: the names the server's app was made with
    env_names: tuple[str, ...] = ()


def _properties(schema: Any) -> frozenset[str] | None:
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return None
    return frozenset(schema["properties"]) or None


def _get(server: ServerURL, path: str, timeout: float) -> Any:
    try:
        return server.get_json(path, timeout=timeout)
    except ServerUnreachable:
        return None


def read_facts(server: ServerURL, *, timeout: float = FACTS_TIMEOUT) -> ServerFacts:
    """``GET /metadata``, ``/schema`` and ``/list_environments``; what fails stays unknown."""
    metadata = _get(server, "/metadata", timeout)
    problem = ""
    try:
        schema = server.get_json("/schema", timeout=timeout)
    except ServerUnreachable as exc:
        schema, problem = None, str(exc)
    if schema is not None and not isinstance(schema, dict):
        schema, problem = None, f"GET {server.public}/schema answered no JSON object"
    names = _get(server, "/list_environments", timeout)
    return ServerFacts(
        metadata=metadata if isinstance(metadata, dict) else None,
        schema=schema,
        schema_problem=problem,
        env_names=tuple(str(n) for n in names if isinstance(n, str) and n)
        if isinstance(names, list)
        else (),
    )


def report_of(public: str, facts: ServerFacts, state: dict[str, Any] | None = None) -> ServerReport:
    """A server's report from its facts (and a state, if one was read)."""
    schema = facts.schema or {}
    observation_fields = [
        fields
        for fields in (
            _properties(schema.get("observation")),
            _properties(schema.get("reset_observation")),
        )
        if fields is not None
    ]
    name = (facts.metadata or {}).get("name")
    return ServerReport(
        server=public,
        name=str(name) if name else None,
        action_fields=_properties(schema.get("action")),
        observation_fields=frozenset().union(*observation_fields) if observation_fields else None,
        state=state,
        env_names=facts.env_names,
    )


def read_report(server: ServerURL, *, timeout: float = FACTS_TIMEOUT, state: bool) -> ServerReport:
    """``GET /metadata`` and ``/schema`` (and ``/state`` if asked); what fails stays unknown.

    Each GET within ``timeout``, and never longer than ``FACTS_TIMEOUT``."""
    timeout = min(timeout, FACTS_TIMEOUT)
    http_state = _get(server, "/state", timeout) if state else None
    return report_of(
        server.public,
        read_facts(server, timeout=timeout),
        http_state if isinstance(http_state, dict) else None,
    )


@dataclass(frozen=True)
class Survey:
    """What one session showed after a reset with a family's reset fields, before the run:
    the env's state, and an MCP-style env's tools (its ``list_tools`` action). None: unknown."""

    state: dict[str, Any] | None = None
    tools: list[Any] | None = None
    #: why the session could not be surveyed ("" when it was)
    problem: str = ""
    #: the reset's answer: its observation and its metadata
    observation: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    #: each env-config field: ``confirmed`` (the state or reset answer shows it taken) or
    #: ``not confirmed`` (nothing the server answered shows it)
    config_status: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "tools": self.tools,
            "problem": self.problem,
            "observation": self.observation,
            "metadata": self.metadata,
            "config_status": self.config_status,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Survey:
        state, tools = data.get("state"), data.get("tools")

        def mapping(key: str) -> dict[str, Any] | None:
            value = data.get(key)
            return value if isinstance(value, dict) else None

        return cls(
            state=state if isinstance(state, dict) else None,
            tools=tools if isinstance(tools, list) else None,
            problem=str(data.get("problem") or ""),
            observation=mapping("observation"),
            metadata=mapping("metadata"),
            config_status=mapping("config_status"),
        )


class KnownServers:
    """Each server's facts (metadata, schema) and surveys, read once per run.

    Part of the process's ``RemoteServers``. The controller reads them (the families it
    builds, its preflight); xdist hands them to each worker (``handover`` / ``learn``), so
    a worker never reads a schema of its own. A process that was handed nothing (a
    ``RemoteServers`` used on its own) reads them on first use.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._facts: dict[str, ServerFacts] = {}
        self._surveys: dict[tuple[str, str], Survey] = {}

    def facts(self, server: ServerURL) -> ServerFacts:
        with self._lock:
            known = self._facts.get(server.public)
        if known is None:
            known = read_facts(server)
            with self._lock:
                known = self._facts.setdefault(server.public, known)
        return known

    def report(self, server: ServerURL) -> ServerReport:
        return report_of(server.public, self.facts(server))

    def session_report(
        self, server: ServerURL, state: dict[str, Any] | None, first: StepResult
    ) -> ServerReport:
        """One episode's view: the server's schema and metadata, its session state, its reset."""
        return replace(self.report(server), state=state, first=first)

    def survey(self, server: ServerURL, key: str, read: Callable[[], Survey]) -> Survey:
        """The survey of ``server`` for reset fields ``key`` (canonical JSON): handed over, or
        made now with ``read`` (once per process)."""
        with self._lock:
            known = self._surveys.get((server.public, key))
        if known is None:
            known = read()
            with self._lock:
                known = self._surveys.setdefault((server.public, key), known)
        return known

    def handover(self) -> dict[str, Any]:
        """What this process read, as JSON for an xdist worker (``workerinput``)."""
        with self._lock:
            return {
                "facts": {url: facts.to_json() for url, facts in self._facts.items()},
                "surveys": [
                    [url, key, survey.to_json()] for (url, key), survey in self._surveys.items()
                ],
            }

    def learn(self, handed: dict[str, Any]) -> None:
        """What the controller read (``handover``): used instead of reading it again."""
        facts = handed.get("facts") if isinstance(handed, dict) else None
        surveys = handed.get("surveys") if isinstance(handed, dict) else None
        with self._lock:
            for url, data in (facts or {}).items():
                if isinstance(data, dict):
                    self._facts[str(url)] = ServerFacts.from_json(data)
            for entry in surveys or ():
                if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], dict):
                    self._surveys[(str(entry[0]), str(entry[1]))] = Survey.from_json(entry[2])


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
