"""Server URLs: parse ``--openenv-server`` values, hide credentials, speak plain HTTP.

A server URL may carry credentials (``https://user:pass@host``). They are used to
connect and never leave this module: every URL shown to people or written to a
file goes through ``redact``. A Hugging Face Space (``https://*.hf.space``) gets
``HF_TOKEN`` from the environment as a bearer token, so private Spaces work, but only
a Space of the token's own account or one of its organizations: any other Space's
owner would receive the token. Whose the token is, the Hub says (``/api/whoami-v2`` on
``HF_ENDPOINT``, the one place huggingface_hub sends it); a Space's host is
``{owner}-{space}.hf.space``.

Every plain HTTP request goes through ``fetch``: one wall-clock bound on the whole
request, credentials only to their own origin through redirects. Only the standard
library here: the WebSocket session lives in ``remote``.
"""

from __future__ import annotations

import base64
import functools
import os
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import JSONTooDeep, ServerUnreachable, ServerURLError
from .fetch import each_at_once, fetch
from .jsonlimits import MAX_JSON_BYTES, loads_bounded

HTTP_SCHEMES = {"http": "http", "https": "https", "ws": "http", "wss": "https"}
WS_SCHEMES = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


SPACE_DOMAIN = ".hf.space"
#: seconds the Hub may take to say whose HF_TOKEN is
WHOAMI_TIMEOUT = 10.0


def hub_endpoint() -> str:
    """Where huggingface_hub sends its token: ``HF_ENDPOINT``, else the Hub."""
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


@functools.lru_cache(maxsize=8)
def token_accounts(token: str, endpoint: str) -> frozenset[str]:
    """The account and organizations a Hub token belongs to; empty when the Hub cannot say.

    Asked once per process and token (cached: an external fact, not run state). Offline,
    or with a token the Hub refuses, nothing matches: the token is sent to no Space.
    """
    try:
        fetched = fetch(
            endpoint + "/api/whoami-v2",
            {"Authorization": f"Bearer {token}"},
            timeout=WHOAMI_TIMEOUT,
            max_bytes=MAX_JSON_BYTES,
        )
        answer = loads_bounded(fetched.body) if fetched.status == 200 else None
    except (ServerUnreachable, ValueError):
        return frozenset()
    if not isinstance(answer, dict):
        return frozenset()
    names = [answer.get("name")]
    orgs = answer.get("orgs")
    if isinstance(orgs, list):
        names += [org.get("name") for org in orgs if isinstance(org, dict)]
    return frozenset(name for name in names if isinstance(name, str) and name)


def space_of(host: str, accounts: Iterable[str]) -> bool:
    """Whether ``{owner}-{space}.hf.space`` belongs to one of ``accounts``.

    The Hub writes the owner in lower case with ``_`` and ``.`` as ``-``.
    """
    sub = host.lower().removesuffix(SPACE_DOMAIN)
    return any(
        sub.startswith(account.lower().replace("_", "-").replace(".", "-") + "-")
        for account in accounts
    )


@dataclass(frozen=True)
class ServerURL:
    """One deployed OpenEnv server, split into what is shown and what is secret."""

    scheme: str
    host: str
    port: int | None
    path: str
    username: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, raw: str) -> ServerURL:
        text = str(raw).strip()
        try:
            parts = urllib.parse.urlsplit(text)
        except ValueError as exc:  # e.g. "http://[::1": an unclosed IPv6 bracket
            raise ServerURLError(
                f"{_redact_text(text)!r} is not a valid URL ({exc}): expected e.g. "
                "http://127.0.0.1:8000 or http://[::1]:8000"
            ) from None
        scheme = parts.scheme.lower()
        if scheme not in HTTP_SCHEMES:
            raise ServerURLError(
                f"{_redact_text(text)!r} is not a server URL: expected http://, https://, "
                "ws:// or wss:// followed by a host, e.g. http://127.0.0.1:8000 or "
                "https://user-space.hf.space"
            )
        try:
            port = parts.port
        except ValueError:
            raise ServerURLError(f"{_redact_text(text)!r} has an invalid port") from None
        if not parts.hostname:
            raise ServerURLError(f"{_redact_text(text)!r} has no host")
        path = parts.path.rstrip("/")
        # A URL copied from a client config may already end in /ws; the session path is ours.
        if path.endswith("/ws"):
            path = path[: -len("/ws")]
        return cls(
            scheme=scheme,
            host=parts.hostname,
            port=port,
            path=path,
            username=urllib.parse.unquote(parts.username) if parts.username else None,
            password=urllib.parse.unquote(parts.password) if parts.password else None,
        )

    def _netloc(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"

    @property
    def public(self) -> str:
        """The URL as given, minus credentials: safe for records, logs and messages."""
        return f"{self.scheme}://{self._netloc()}{self.path}"

    @property
    def http_base(self) -> str:
        return f"{HTTP_SCHEMES[self.scheme]}://{self._netloc()}{self.path}"

    @property
    def ws_session_url(self) -> str:
        """Where one env session lives: ``ws(s)://host/ws`` (no credentials: see headers)."""
        return f"{WS_SCHEMES[self.scheme]}://{self._netloc()}{self.path}/ws"

    @property
    def is_loopback(self) -> bool:
        return self.host in LOOPBACK_HOSTS

    def headers(self) -> dict[str, str]:
        """Authorization for this server, from the URL's credentials or HF_TOKEN."""
        if self.username is not None:
            token = f"{self.username}:{self.password or ''}".encode()
            return {"Authorization": "Basic " + base64.b64encode(token).decode("ascii")}
        hf_token = os.environ.get("HF_TOKEN")
        if (
            hf_token
            and self.host.endswith(SPACE_DOMAIN)
            and self.scheme in ("https", "wss")
            and space_of(self.host, token_accounts(hf_token, hub_endpoint()))
        ):
            return {"Authorization": f"Bearer {hf_token}"}
        return {}

    def scrub(self, text: str) -> str:
        """Remove this server's credentials (and the environment's secrets) from an error
        text we did not write."""
        from .secrets import KnownSecrets, credential_values

        return KnownSecrets.collect(extra=credential_values(self.username, self.password)).scrub(
            text
        )

    def get_json(self, path: str, *, timeout: float, max_bytes: int = MAX_JSON_BYTES) -> Any:
        """``GET base/path`` and decode JSON; raises ``ServerUnreachable`` with a clean message.

        At most ``max_bytes`` are read and ``MAX_JSON_DEPTH`` levels parsed: a huge or
        deeply nested answer is refused, never loaded.
        """
        shown = f"GET {self.public}{path}"
        try:
            answer = fetch(
                self.http_base + path,
                {"Accept": "application/json", **self.headers()},
                timeout=timeout,
                max_bytes=max_bytes,
            )
        except ServerUnreachable as exc:
            raise ServerUnreachable(f"{shown} failed: {self.scrub(str(exc))}") from None
        if not 200 <= answer.status < 300:
            raise ServerUnreachable(
                self.scrub(f"{shown} answered HTTP {answer.status} {answer.reason}")
            )
        body = answer.body
        if len(body) > max_bytes:
            raise ServerUnreachable(
                f"{shown} answered more than {max_bytes} bytes (the most read from a server's "
                "JSON answer); is it an OpenEnv server?"
            )
        try:
            return loads_bounded(body)
        except JSONTooDeep as exc:
            raise ServerUnreachable(f"{shown} answered JSON {exc}; refused") from None
        except ValueError:
            raise ServerUnreachable(f"{shown} did not answer JSON: {body[:120]!r}") from None


def _redact_text(text: str) -> str:
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError:  # unparseable: hide whatever sits between "://" and the last "@"
        if "@" not in text:
            return text
        scheme, _, rest = text.rpartition("://")
        return f"{scheme}://***@{rest.rpartition('@')[2]}" if scheme else "***@" + rest
    if "@" not in parts.netloc:
        return text
    host = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"***@{host}"))


def redact(raw: str) -> str:
    """A server URL without credentials (for records, metadata and messages)."""
    try:
        return ServerURL.parse(raw).public
    except ServerURLError:
        return _redact_text(str(raw))


def health_problem(server: ServerURL, *, timeout: float) -> str | None:
    """Why this server cannot take episodes, or None when ``GET /health`` says healthy."""
    try:
        body = server.get_json("/health", timeout=timeout)
    except ServerUnreachable as exc:
        return str(exc)
    status = body.get("status") if isinstance(body, dict) else None
    if status not in (None, "healthy", "degraded"):
        return f"GET {server.public}/health reports status {status!r}"
    return None


def check_health(servers: Iterable[ServerURL], *, timeout: float) -> list[str]:
    """One ``GET /health`` per server, all at once; the problems found (empty when fine)."""
    servers = list(servers)
    results = each_at_once(lambda s: health_problem(s, timeout=timeout), servers)
    return [problem for problem in results if problem]
