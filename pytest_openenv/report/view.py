"""``python -m pytest_openenv view DIR``: the run report of a folder, served on loopback.

The same page as ``report.html`` (``page/html.py``), without embedded transcripts: the
page asks ``GET /api/episode/<row>`` for the one it opens, and the server reads that line
from ``results.jsonl`` or ``failures.jsonl`` by the byte offset it indexed at start
(``page/rows.py``). So a 100,000-episode folder costs the index and the page, never the
files in memory.

Safety: it binds 127.0.0.1 by default and refuses any address that is not loopback
unless ``--allow-remote`` is given (transcripts may hold private data); on loopback it
answers only requests whose ``Host`` names a loopback address, so a web page elsewhere
cannot read it through DNS rebinding. A torn or corrupt line is left out of the index and
shown on the page and in the terminal as what it is.
"""

from __future__ import annotations

import errno
import ipaddress
import json
import socket
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..dataset.folder import metadata_is_ours, read_metadata
from ..dataset.writer import METADATA, SUMMARY
from ..errors import ViewError
from ..util.secrets import KnownSecrets
from .page.html import render
from .page.rows import FolderRows, read_json, scan_folder

DEFAULT_PORT = 8765
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def output_folder_problem(folder: Path) -> str | None:
    if not folder.is_dir():
        return f"{folder} is not a folder; pass the output folder of a run, e.g. openenv-results"
    if not metadata_is_ours(read_metadata(folder)):
        return (
            f"{folder} is not a pytest-openenv output folder: it has no {METADATA} written by "
            "pytest-openenv (every run writes one when it starts); pass the folder a run "
            "wrote (--openenv-output, default openenv-results)"
        )
    return None


def is_loopback(host: str) -> bool:
    """``host`` resolves only to loopback addresses (a name is looked up)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


@dataclass
class Site:
    """What the server serves: the page (built once) and the index into the files."""

    found: FolderRows
    page: bytes
    secrets: KnownSecrets

    @classmethod
    def of(cls, folder: Path) -> Site:
        found = scan_folder(folder)
        summary = read_json(folder / SUMMARY)
        metadata = read_json(folder / METADATA) or {}
        secrets = KnownSecrets.collect()
        text = "".join(render(found, summary, metadata, served=True))
        return cls(found, secrets.scrub(text).encode("utf-8"), secrets)

    def episode(self, number: int) -> tuple[int, bytes]:
        """(status, body) for row ``number``: its line as written, or why not."""
        if not 0 <= number < len(self.found.rows):
            return 404, f"no episode row {number}".encode()
        row = self.found.rows[number]
        try:
            line = self.found.read_line(row)
            record = json.loads(line)
        except (OSError, ValueError) as exc:
            return 409, (
                f"{self.found.path(row).name} changed since the viewer started ({exc}); "
                "restart it to read the folder again"
            ).encode()
        if not isinstance(record, dict) or record.get("episode_id") != row.episode_id:
            return 409, (
                f"{self.found.path(row).name} changed since the viewer started (the line at "
                f"byte {row.offset} is no longer {row.episode_id}); restart it"
            ).encode()
        text = line.decode("utf-8", errors="replace")
        return 200, (self.secrets.scrub(text) if self.secrets.active else text).encode("utf-8")


#: more digits than any folder has rows: past int()'s digit limit, or not ASCII, is no row
_MAX_INDEX_DIGITS = 12


def episode_number(path: str) -> int | None:
    """The row ``/api/episode/<n>`` asks for; None for a path that is not one (404).

    Only ASCII digits, and few of them: ``str.isdigit`` accepts ``²`` and ``int`` refuses a
    5,000-digit number, either of which would end the request in a traceback.
    """
    prefix = "/api/episode/"
    if not path.startswith(prefix):
        return None
    digits = path[len(prefix) :]
    if not digits or len(digits) > _MAX_INDEX_DIGITS or not (digits.isascii() and digits.isdigit()):
        return -1  # an episode path, but no row: the episode answer's 404
    return int(digits)


def make_handler(site: Site, allowed_hosts: set[str] | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "pytest-openenv-view"
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the terminal shows where it serves and what went wrong, not every GET

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Referrer-Policy", "no-referrer")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_HEAD(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            host = (self.headers.get("Host") or "").lower()
            if allowed_hosts is not None and host not in allowed_hosts:
                self._send(403, b"this viewer answers loopback addresses only", "text/plain")
                return
            path = self.path.split("?", 1)[0]
            if path in ("/", "/index.html"):
                self._send(200, site.page, "text/html; charset=utf-8")
            elif (number := episode_number(path)) is not None:
                status, body = site.episode(number)
                kind = "application/json" if status == 200 else "text/plain; charset=utf-8"
                self._send(status, body, kind)
            elif path == "/favicon.ico":
                self._send(204, b"", "image/x-icon")
            else:
                self._send(404, b"not found", "text/plain")

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False  # a port in use is an error to report, not to share


def check_host(host: str, *, allow_remote: bool) -> bool:
    """Whether ``host`` is loopback; ViewError for another address without --allow-remote."""
    loopback = is_loopback(host)
    if not loopback and not allow_remote:
        raise ViewError(
            f"--host {host} is not a loopback address: the viewer serves transcripts, so it "
            "binds 127.0.0.1 (or another loopback address) unless you pass --allow-remote "
            "to serve it to your network on purpose"
        )
    return loopback


def bind(site: Site, host: str, port: int, *, allow_remote: bool) -> Server:
    """The listening server (not yet serving); ViewError for a bad host or a busy port."""
    loopback = check_host(host, allow_remote=allow_remote)
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    Server.address_family = family
    try:
        server = Server((host.strip("[]"), port), make_handler(site, None))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ViewError(
                f"port {port} on {host} is in use; pass another --port (or --port 0 for any "
                "free one)"
            ) from None
        raise ViewError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound = server.server_address[1]
    if loopback:
        names = {*LOOPBACK_NAMES, host.strip("[]").lower()}
        allowed = {f"{name}:{bound}" for name in names} | {f"[{name}]:{bound}" for name in names}
        server.RequestHandlerClass = make_handler(site, allowed)
    return server


def url_of(server: Server) -> str:
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in str(host) else str(host)
    return f"http://{shown}:{port}/"


def serve(folder: Path, host: str, port: int, *, allow_remote: bool = False) -> int:
    """Run the viewer until Ctrl-C; ViewError for a problem the user must fix."""
    problem = output_folder_problem(folder)
    if problem:
        raise ViewError(problem)
    check_host(host, allow_remote=allow_remote)  # before reading a big folder
    site = Site.of(folder)
    for found in site.found.problems:
        print(f"warning: {found.text()} (the page shows it)", file=sys.stderr, flush=True)
    server = bind(site, host, port, allow_remote=allow_remote)
    rows = len(site.found.rows)
    print(f"serving {folder} ({rows} episodes) at {url_of(server)}  (Ctrl-C to stop)", flush=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        thread.join()
    except KeyboardInterrupt:
        print("stopped", flush=True)
    finally:
        server.shutdown()
        server.server_close()
    return 0
