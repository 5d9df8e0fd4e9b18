"""A local stand-in for the Hugging Face Hub API, for the real ``huggingface_hub`` client.

Reached through ``HF_ENDPOINT`` (read by huggingface_hub at import, so set it in
the environment of the process that pushes). It implements just what
``HfApi.create_repo`` and ``HfApi.create_commit`` call in huggingface_hub 2.x:

- ``POST /api/repos/create`` (409 when the repo exists, which ``exist_ok`` accepts)
- ``POST /api/validate-yaml`` (the README front-matter check before a commit;
  a YAML error is a 400 like the Hub's)
- ``POST /api/datasets/{owner}/{name}/preupload/{rev}``: answers ``regular`` for
  every file, so contents come inline, base64, in the commit payload (no LFS/Xet)
- ``POST /api/datasets/{owner}/{name}/commit/{rev}``: the NDJSON commit
- ``GET /api/datasets/{owner}/{name}``: repo info
- ``GET /api/whoami-v2``: the token's ``account`` and ``orgs``

Every request is recorded (method, path, headers, body). Requests without
``Authorization: Bearer <token>`` get a 401. ``fail`` maps an endpoint kind
(``create``, ``validate``, ``preupload``, ``commit``) to an HTTP status to
answer instead, to simulate an outage. ``hang`` makes it accept every request
and never answer (until ``close`` or ``hang_for`` seconds: bounded by the test).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

REPO_PATH = re.compile(
    r"^/api/(?P<type>datasets|models|spaces)/(?P<repo>[^/]+/[^/]+)"
    r"(?:/(?P<action>preupload|commit)/(?P<rev>[^/?]+))?/?(?:\?.*)?$"
)
FRONT_MATTER = re.compile(r"^\s*---\r?\n(.*?)\r?\n---\r?\n", re.DOTALL)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: bytes


@dataclass
class Commit:
    summary: str
    description: str
    files: dict[str, bytes]
    oid: str


@dataclass
class Repo:
    repo_id: str
    repo_type: str
    visibility: str | None
    files: dict[str, bytes] = field(default_factory=dict)
    commits: list[Commit] = field(default_factory=list)


def as_visibility(payload: dict[str, Any]) -> dict[str, Any]:
    """A create-repo payload in the ``visibility`` form huggingface_hub >= 1.0 sends.

    huggingface_hub 0.x sends a boolean ``private`` instead, which the Hub takes too; any
    other ``private`` (0.26 and older send ``null`` for "the default") is left as sent.
    """
    private = payload.get("private")
    if not isinstance(private, bool):
        return payload
    rest = {key: value for key, value in payload.items() if key != "private"}
    return {**rest, "visibility": "private" if private else "public"}


class HubStandIn:
    def __init__(
        self, token: str, port: int = 0, *, account: str = "alice", orgs: tuple[str, ...] = ()
    ) -> None:
        self.token = token
        #: who the token belongs to (``GET /api/whoami-v2``), and its organizations
        self.account = account
        self.orgs = orgs
        self.requests: list[Recorded] = []
        self.create_payloads: list[dict[str, Any]] = []
        self.repos: dict[str, Repo] = {}
        self.fail: dict[str, int] = {}
        self.hang = False
        self.hang_for = 120.0
        self._release = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> HubStandIn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what tests read -------------------------------------------------------
    def commits(self, repo_id: str) -> list[Commit]:
        repo = self.repos.get(repo_id)
        return list(repo.commits) if repo else []

    # -- the API -------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _body(self) -> bytes:
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _handle(self, method: str) -> None:
                body = self._body() if method == "POST" else b""
                with hub._lock:
                    hub.requests.append(
                        Recorded(
                            method, self.path, {k.lower(): v for k, v in self.headers.items()}, body
                        )
                    )
                if hub.hang:  # accepted, never answered
                    hub._release.wait(hub.hang_for)
                    self.close_connection = True
                    return
                if self.headers.get("Authorization") != f"Bearer {hub.token}":
                    self._send(401, {"error": "Invalid credentials in Authorization header"})
                    return
                try:
                    status, payload, headers = hub._route(method, self.path, body)
                except Exception as exc:  # a bug here must show up, not hang the client
                    status, payload, headers = 500, {"error": f"stand-in bug: {exc!r}"}, {}
                self._send(status, payload, headers)

            def do_GET(self) -> None:
                self._handle("GET")

            def do_POST(self) -> None:
                self._handle("POST")

        return Handler

    def _route(self, method: str, path: str, body: bytes) -> tuple[int, Any, dict[str, str]]:
        if method == "GET" and path.startswith("/api/whoami-v2"):
            orgs = [{"type": "org", "name": name} for name in self.orgs]
            return 200, {"type": "user", "name": self.account, "orgs": orgs}, {}
        if method == "POST" and path.startswith("/api/repos/create"):
            return self._create(json.loads(body or b"{}"))
        if method == "POST" and path.startswith("/api/validate-yaml"):
            return self._validate(json.loads(body or b"{}"))
        match = REPO_PATH.match(path)
        if match is None:
            return 404, {"error": f"no route {method} {path}"}, {}
        repo_id, action = match["repo"], match["action"]
        repo = self.repos.get(repo_id)
        if repo is None or repo.repo_type != match["type"]:
            return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
        if method == "GET" and action is None:
            return 200, self._info(repo), {}
        if method == "POST" and action == "preupload":
            return self._preupload(json.loads(body or b"{}"))
        if method == "POST" and action == "commit":
            return self._commit(repo, body)
        return 404, {"error": f"no route {method} {path}"}, {}

    def _failure(self, kind: str) -> tuple[int, Any, dict[str, str]] | None:
        status = self.fail.get(kind)
        if status is None:
            return None
        return status, {"error": f"stand-in outage on {kind} (HTTP {status})"}, {}

    def _create(self, payload: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        failure = self._failure("create")
        if failure:
            return failure
        payload = as_visibility(payload)
        self.create_payloads.append(payload)
        repo_id = f"{payload.get('organization')}/{payload.get('name')}"
        repo_type = f"{payload.get('type') or 'model'}s"
        url = (
            f"{self.url}/{repo_type}/{repo_id}"
            if repo_type != "models"
            else f"{self.url}/{repo_id}"
        )
        with self._lock:
            if repo_id in self.repos:
                return 409, {"error": "You already created this dataset repo", "url": url}, {}
            self.repos[repo_id] = Repo(repo_id, repo_type, payload.get("visibility"))
        return 200, {"url": url, "name": repo_id}, {}

    def _validate(self, payload: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        failure = self._failure("validate")
        if failure:
            return failure
        import yaml

        match = FRONT_MATTER.match(payload.get("content") or "")
        if match is None:
            return (
                200,
                {"errors": [], "warnings": [{"message": "empty or missing yaml metadata"}]},
                {},
            )
        try:
            data = yaml.safe_load(match.group(1))
        except yaml.YAMLError as exc:
            return 400, {"errors": [{"message": f"invalid YAML: {exc}"}]}, {}
        if not isinstance(data, dict):
            return 400, {"errors": [{"message": "metadata must be a mapping"}]}, {}
        return 200, {"errors": [], "warnings": []}, {}

    def _preupload(self, payload: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        failure = self._failure("preupload")
        if failure:
            return failure
        files = [
            {"path": item["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None}
            for item in payload.get("files", [])
        ]
        return 200, {"files": files, "commitOid": "0" * 40}, {}

    def _commit(self, repo: Repo, body: bytes) -> tuple[int, Any, dict[str, str]]:
        failure = self._failure("commit")
        if failure:
            return failure
        header: dict[str, Any] = {}
        files: dict[str, bytes] = {}
        for line in body.splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            if item["key"] == "header":
                header = item["value"]
            elif item["key"] == "file" and item["value"].get("encoding") == "base64":
                files[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
            else:
                return 400, {"error": f"stand-in takes inline base64 files only, got {item}"}, {}
        oid = hashlib.sha1(body).hexdigest()
        with self._lock:
            repo.files.update(files)
            repo.commits.append(
                Commit(header.get("summary", ""), header.get("description", ""), files, oid)
            )
        url = f"{self.url}/{repo.repo_type}/{repo.repo_id}/commit/{oid}"
        return 200, {"success": True, "commitOid": oid, "commitUrl": url}, {}

    def _info(self, repo: Repo) -> dict[str, Any]:
        sha = repo.commits[-1].oid if repo.commits else "0" * 40
        return {
            "id": repo.repo_id,
            "sha": sha,
            "private": repo.visibility == "private",
            "siblings": [{"rfilename": name} for name in sorted(repo.files)],
        }


def closed_port() -> int:
    """A port nothing listens on (connections are refused), free to bind again later."""
    import socket

    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
