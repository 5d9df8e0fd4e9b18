"""How the proxy's upstream requests travel: the ``http.client`` transport (the default)
keeps connections alive, bounds the whole request, verifies TLS and caps the answer; every
transport answers and reports an unreachable endpoint alike."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest
from capture_helpers import (
    PLAY_MOVE,
    TASK,
    proxy_to,
    upstream_key_fixture,  # noqa: F401 - fixture
)
from servers.fake_model import Faults
from servers.openai_compat import OpenAICompatServer

from pytest_openenv.agents.capture import CaptureProxy, Upstream, UpstreamError
from pytest_openenv.agents.capture.stdlib_transport import HTTPClientTransport
from pytest_openenv.agents.capture.transport import DEFAULT_TRANSPORT
from pytest_openenv.agents.capture.upstream import TRANSPORTS, UpstreamClient
from pytest_openenv.errors import BadInput

COMPLETION = json.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
).encode()


class CannedServer:
    """A loopback HTTP/1.1 server answering every POST with ``COMPLETION``; it counts the
    connections it accepted. ``close_after``: it closes each connection after its answer
    without saying so (as a server does to an idle keep-alive connection)."""

    def __init__(self, close_after: bool = False, chunked: bool = False) -> None:
        self.close_after = close_after
        self.chunked = chunked
        self.connections = 0
        self.requests = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1/chat/completions"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _answer(self) -> bytes:
        if self.chunked:
            chunks = [COMPLETION[i : i + 40] for i in range(0, len(COMPLETION), 40)]
            body = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
            return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
        return head % len(COMPLETION) + COMPLETION

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.lower().split(b"\r\n")
                    if line.startswith(b"content-length:")
                )
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                buffer = buffer[length:]
                self.requests += 1
                conn.sendall(self._answer())
                if self.close_after:
                    return

    def stop(self) -> None:
        self._listener.close()


@pytest.fixture
def canned() -> CannedServer:
    server = CannedServer()
    yield server
    server.stop()


def transport(timeout: float = 5.0, max_bytes: int = 1 << 20) -> HTTPClientTransport:
    return HTTPClientTransport({"Content-Type": "application/json"}, timeout, max_bytes)


def test_the_default_transport_is_the_standard_library_s() -> None:
    assert DEFAULT_TRANSPORT == "http.client"
    client = UpstreamClient(Upstream("http://127.0.0.1:9/v1", "chat", None, "m"))
    try:
        assert isinstance(client._transport, HTTPClientTransport)
    finally:
        client.close()


def test_calls_one_after_another_share_one_kept_alive_connection(canned: CannedServer) -> None:
    http = transport()
    try:
        answers = [http.post(canned.url, b'{"n": %d}' % i) for i in range(5)]
    finally:
        http.close()
    assert answers == [(200, COMPLETION)] * 5
    assert canned.requests == 5 and canned.connections == 1


def test_a_chunked_answer_is_read_whole_and_its_connection_kept() -> None:
    server = CannedServer(chunked=True)
    http = transport()
    try:
        assert [http.post(server.url, b"{}") for _ in range(3)] == [(200, COMPLETION)] * 3
    finally:
        http.close()
        server.stop()
    assert server.connections == 1


def test_a_connection_the_server_closed_while_idle_is_replaced_without_an_error() -> None:
    server = CannedServer(close_after=True)
    http = transport()
    try:
        answers = [http.post(server.url, b"{}") for _ in range(3)]
    finally:
        http.close()
        server.stop()
    assert answers == [(200, COMPLETION)] * 3
    assert server.requests == 3 and server.connections == 3


def test_threads_sharing_the_transport_each_get_their_own_answer(canned: CannedServer) -> None:
    http = transport()
    try:
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda i: http.post(canned.url, b"{}"), range(40)))
    finally:
        http.close()
    assert answers == [(200, COMPLETION)] * 40
    assert canned.requests == 40 and 1 <= canned.connections <= 8


def test_an_answer_over_the_size_limit_is_a_502(canned: CannedServer) -> None:
    http = transport(max_bytes=len(COMPLETION) - 1)
    try:
        with pytest.raises(UpstreamError, match=f"over {len(COMPLETION) - 1} bytes") as refused:
            http.post(canned.url, b"{}")
    finally:
        http.close()
    assert refused.value.status == 502


def test_a_trickled_answer_is_cut_at_the_whole_request_deadline(upstream_key: str) -> None:
    # one byte every 0.2 s: each read is quick, only a bound on the whole request ends it
    with proxy_to("chat", Faults(trickle=0.2), timeout=1.5) as (proxy, _server):
        session = proxy.open_session()
        sdk = openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key=session.token, max_retries=0)
        started = time.monotonic()
        with pytest.raises(openai.InternalServerError, match=r"within 1\.5s"):
            sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": TASK}])
        assert time.monotonic() - started < 4
        assert session.calls[0].status == 504


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[str, str]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


def test_an_https_upstream_is_verified_with_the_system_s_certificates(
    certificate: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = OpenAICompatServer(Faults()).start(tls=certificate)
    url = f"{server.base_url}/chat/completions"
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": TASK}]}).encode()
    try:
        assert url.startswith("https://127.0.0.1:")
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        http = transport()
        with pytest.raises(UpstreamError, match="CERTIFICATE_VERIFY_FAILED") as refused:
            http.post(url, body)
        assert refused.value.status == 502
        http.close()
        monkeypatch.setenv("SSL_CERT_FILE", certificate[0])  # as OpenSSL reads it
        http = transport()
        status, answer = http.post(url, body)
        http.close()
        assert status == 200 and json.loads(answer)["choices"][0]["message"]["tool_calls"]
    finally:
        server.stop()


@pytest.mark.parametrize("name", sorted(TRANSPORTS))
def test_each_transport_answers_and_reports_an_unreachable_upstream(
    upstream_key: str, name: str
) -> None:
    messages = [{"role": "user", "content": TASK}]
    with proxy_to("chat", transport=name) as (proxy, server):
        session = proxy.open_session()
        sdk = openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key=session.token, max_retries=0)
        reply = sdk.chat.completions.create(model="m", messages=messages, tools=[PLAY_MOVE])
        assert reply.choices[0].message.tool_calls[0].function.name == "play_move"
        assert server.requests == 1
    with proxy_to("chat", transport=name) as (proxy, server):
        server.stop()  # before any connection to it is kept
        session = proxy.open_session()
        sdk = openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key=session.token, max_retries=0)
        with pytest.raises(openai.InternalServerError, match="unreachable"):
            sdk.chat.completions.create(model="m", messages=messages, tools=[PLAY_MOVE])
        assert [c.status for c in session.calls] == [502]


def test_an_unknown_transport_is_a_clear_error() -> None:
    proxy = CaptureProxy(Upstream("http://127.0.0.1:9/v1", "chat", None, "m", transport="curl"))
    with pytest.raises(BadInput, match=r"'curl' is not one the proxy has; use one of http.client"):
        proxy.start()
