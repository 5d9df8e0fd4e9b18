"""``http_client.ChatEndpoint`` against the loopback fake model: what the SDK path did, kept.

Retries and their waits, the wall-clock bound on a trickled answer, the answer size cap,
the base URL's path, keep-alive, Basic auth from the URL, https with the system's
certificate settings, proxies from the environment.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from servers.fake_model import Faults
from servers.openai_compat import OpenAICompatServer, serve_openai
from servers.scripted_http import ScriptedHTTP, raw

from pytest_openenv.errors import (
    AnswerTooLarge,
    EndpointStatus,
    EndpointTimeout,
    EndpointUnreachable,
)
from pytest_openenv.policies.llm import http_client
from pytest_openenv.policies.llm.http_client import ChatEndpoint, backoff

BODY = json.dumps(
    {"model": "m", "messages": [{"role": "user", "content": "Legal actions: 3, 4"}]}
).encode()


def endpoint(server: OpenAICompatServer, **kwargs: object) -> tuple[ChatEndpoint, list[int]]:
    attempts: list[int] = []
    options = {"max_retries": 2, **kwargs}
    chat = ChatEndpoint(
        server.base_url, "sk-test", on_attempt=lambda: attempts.append(1), **options
    )  # type: ignore[arg-type]
    return chat, attempts


def seconds_to_time_out(chat: ChatEndpoint, body: bytes, timeout: float) -> float:
    """How long ``chat.post`` took to give up with ``EndpointTimeout``."""
    started = time.monotonic()
    with pytest.raises(EndpointTimeout):
        chat.post(body, timeout)
    return time.monotonic() - started


def test_requests_go_to_the_base_urls_path_over_one_kept_alive_connection() -> None:
    with serve_openai() as server:
        chat, attempts = endpoint(server)
        answers = [chat.post(BODY, 5.0) for _ in range(5)]
        chat.close()
        assert [a.status_code for a in answers] == [200] * 5
        assert json.loads(answers[0].body)["choices"][0]["message"]["tool_calls"]
        assert server.paths_seen == ["/v1/chat/completions"] * 5
        assert server.connections == 1
        assert len(attempts) == 5
        assert server.authorizations[0] == "Bearer sk-test"
        assert "(http.client)" in server.user_agents[0]


def test_429s_are_retried_after_the_servers_retry_after() -> None:
    with serve_openai(statuses=[429, 429], retry_after=1.0) as server:
        chat, attempts = endpoint(server)
        assert chat.post(BODY, 5.0).status_code == 200
        assert server.statuses_sent[:3] == [429, 429, 200]
        gaps = [b - a for a, b in zip(server.arrivals, server.arrivals[1:], strict=False)]
        assert len(gaps) == 2 and all(gap >= 0.95 for gap in gaps), gaps
        assert len(attempts) == 3


def test_a_status_past_the_retries_is_raised_with_the_servers_body() -> None:
    with serve_openai(always_status=503, retry_after=0.01) as server:
        chat, attempts = endpoint(server, max_retries=1)
        with pytest.raises(EndpointStatus) as raised:
            chat.post(BODY, 5.0)
        assert raised.value.status_code == 503
        assert raised.value.body["error"]["message"] == "injected HTTP 503"  # type: ignore[index]
        assert server.requests == 2 and len(attempts) == 2


def test_statuses_that_are_no_transport_fault_are_not_retried() -> None:
    with serve_openai(always_status=400) as server:
        chat, _ = endpoint(server)
        with pytest.raises(EndpointStatus):
            chat.post(BODY, 5.0)
        assert server.requests == 1


def test_a_retry_after_longer_than_two_minutes_is_not_waited_for() -> None:
    with serve_openai(always_status=429, retry_after=600) as server:
        chat, _ = endpoint(server)
        started = time.monotonic()
        with pytest.raises(EndpointStatus):
            chat.post(BODY, 5.0)
        assert server.requests == 1 and time.monotonic() - started < 2


def test_backoff_follows_the_sdks_rules() -> None:
    assert backoff(0, {"retry-after": "3"}) == 3.0
    assert backoff(0, {"retry-after-ms": "250"}) == 0.25
    assert backoff(0, {"retry-after": "600"}) is None
    # no usable Retry-After: 0.5 s doubling to 8 s, less up to 25% jitter
    for retry, top in [(0, 0.5), (1, 1.0), (2, 2.0), (6, 8.0)]:
        assert 0.75 * top <= (backoff(retry, {}) or 0) <= top
    assert 0.75 * 0.5 <= (backoff(0, {"retry-after": "90"}) or 0) <= 0.5


def test_no_retry_waits_past_the_episodes_deadline() -> None:
    with serve_openai(always_status=429, retry_after=3) as server:
        chat, _ = endpoint(server)
        started = time.monotonic()
        with pytest.raises(EndpointStatus):
            chat.post(BODY, 5.0, deadline=started + 1.0)
        assert server.requests == 1 and time.monotonic() - started < 1.0


def test_a_trickled_answer_is_bounded_by_the_request_timeout_and_retried() -> None:
    server = OpenAICompatServer(Faults(trickle=0.2)).start()
    try:
        chat, attempts = endpoint(server, max_retries=1)
        took = seconds_to_time_out(chat, BODY, 1.0)
    finally:
        server.stop()
    # two attempts of 1 s (each read ends within a 0.2 s byte of the bound) and one backoff
    assert 2.0 <= took < 4.0, took
    assert server.requests == 2 and len(attempts) == 2


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "no-length"])
def test_an_answer_past_the_cap_stops_the_reading(length: bool) -> None:
    server = OpenAICompatServer(Faults(huge_answer=(64 * 2**20, length))).start()
    try:
        chat, _ = endpoint(server, max_bytes=2**20)
        with pytest.raises(AnswerTooLarge, match=r"over 1048576 bytes") as raised:
            chat.post(BODY, 30.0)
    finally:
        server.stop()
    assert ("Content-Length: " in str(raised.value)) == length
    assert server.requests == 1  # not retried: the next answer would be as large


def test_a_dropped_connection_is_unreachable_after_the_retries() -> None:
    with serve_openai(drop=True) as server:
        chat, attempts = endpoint(server, max_retries=1)
        with pytest.raises(EndpointUnreachable) as raised:
            chat.post(BODY, 5.0)
        assert raised.value.__cause__ is not None  # what the socket said, for the message
        assert server.requests == 2 and len(attempts) == 2


def test_a_pooled_connection_the_server_closed_is_replaced_without_a_retry() -> None:
    with serve_openai() as server:
        chat, attempts = endpoint(server, max_retries=0)
        chat.post(BODY, 5.0)
        for conn in chat._idle:  # as a server's keep-alive timeout does
            assert conn.sock is not None
            conn.sock.shutdown(2)
        assert chat.post(BODY, 5.0).status_code == 200
        assert len(attempts) == 2 and server.requests == 2


def test_credentials_in_the_base_url_go_as_basic_auth() -> None:
    with serve_openai() as server:
        url = server.base_url.replace("http://", "http://user:p%40ss@")
        ChatEndpoint(url, "EMPTY", max_retries=0).post(BODY, 5.0)
        assert server.authorizations == ["Basic dXNlcjpwQHNz"]  # user:p@ss


def test_a_proxy_from_the_environment_carries_a_remote_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with serve_openai() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.root_url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        chat = ChatEndpoint("http://model.example:8000/v1", "EMPTY", max_retries=0)
        assert chat.post(BODY, 5.0).status_code == 200
        assert proxy.paths_seen == ["http://model.example:8000/v1/chat/completions"]
        monkeypatch.setenv("NO_PROXY", "model.example")
        with pytest.raises(EndpointUnreachable):  # no proxy: the name does not resolve
            ChatEndpoint("http://model.example:8000/v1", "EMPTY", max_retries=0).post(BODY, 5.0)


def test_a_loopback_endpoint_never_goes_through_a_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve_openai() as server:
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # the discard port: nothing
        assert ChatEndpoint(server.base_url, "k", max_retries=0).post(BODY, 5.0).status_code == 200


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


def test_https_verifies_the_certificate_with_the_systems_settings(
    certificate: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = OpenAICompatServer(Faults()).start(tls=certificate)
    try:
        assert server.base_url.startswith("https://127.0.0.1:")
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        with pytest.raises(EndpointUnreachable, match="CERTIFICATE_VERIFY_FAILED"):
            ChatEndpoint(server.base_url, "k", max_retries=0).post(BODY, 5.0)
        monkeypatch.setenv("SSL_CERT_FILE", certificate[0])  # as OpenSSL reads it
        answer = ChatEndpoint(server.base_url, "k", max_retries=0).post(BODY, 5.0)
        assert answer.status_code == 200 and server.paths_seen == ["/v1/chat/completions"]
    finally:
        server.stop()


class Redirector:
    """A loopback server that answers chat completions with a redirect: ``/same`` to its
    own ``/v1`` (which it answers), ``/away`` to another server, ``/moved`` with a 301;
    ``/chunked`` answers a 100 Continue, then its body in chunks."""

    def __init__(self, away: str) -> None:
        import http.server
        import threading

        self.authorizations: list[str] = []
        self.paths: list[str] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.paths.append(self.path)
                owner.authorizations.append(self.headers.get("Authorization") or "")
                where = {
                    "/same/chat/completions": (308, "/v1/chat/completions"),
                    "/away/chat/completions": (307, f"{away}/chat/completions"),
                    "/moved/chat/completions": (301, "/v1/chat/completions"),
                }.get(self.path)
                if self.path == "/chunked/chat/completions":
                    self.wfile.write(
                        b"HTTP/1.1 100 Continue\r\n\r\n"
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        b"Transfer-Encoding: chunked\r\n\r\n"
                        b'7;ext=1\r\n{"choic\r\n'
                        b'1B\r\nes": [{"message": {}}], "x"\r\n'
                        b"4\r\n: 1}\r\n0\r\nTrailer: yes\r\n\r\n"
                    )
                    return
                if where is not None:
                    self.send_response(where[0])
                    self.send_header("Location", where[1])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_307_or_308_redirect_is_followed_with_the_body_and_the_key_only_to_its_origin() -> None:
    with serve_openai() as away:
        redirector = Redirector(away.base_url)
        try:
            chat = ChatEndpoint(f"{redirector.url}/same", "sk-test", max_retries=0)
            for _ in range(2):  # the second request goes the same way, over kept connections
                answer = chat.post(BODY, 5.0)
                assert answer.status_code == 200 and json.loads(answer.body)["choices"]
            assert redirector.paths == ["/same/chat/completions", "/v1/chat/completions"] * 2
            assert redirector.authorizations == ["Bearer sk-test"] * 4  # the same origin
            chat.close()
            answered = ChatEndpoint(f"{redirector.url}/away", "sk-test", max_retries=0).post(
                BODY, 5.0
            )
            assert answered.status_code == 200
            assert away.paths_seen == ["/v1/chat/completions"]
            assert away.bodies == [json.loads(BODY)]  # the body went along
            assert away.authorizations == [""]  # another origin: not the key
        finally:
            redirector.close()


def test_a_301_to_a_post_is_the_answer_not_followed() -> None:
    redirector = Redirector("http://127.0.0.1:9")
    try:
        chat = ChatEndpoint(f"{redirector.url}/moved", "sk-test", max_retries=2)
        with pytest.raises(EndpointStatus) as raised:
            chat.post(BODY, 5.0)
        assert raised.value.status_code == 301
        assert redirector.paths == ["/moved/chat/completions"]  # neither followed nor retried
    finally:
        redirector.close()


def test_a_chunked_answer_after_an_informational_one_is_read_whole_and_the_link_kept() -> None:
    redirector = Redirector("http://127.0.0.1:9")
    try:
        chat = ChatEndpoint(f"{redirector.url}/chunked", "sk-test", max_retries=0)
        answers = [chat.post(BODY, 5.0) for _ in range(2)]
        assert [json.loads(a.body) for a in answers] == [{"choices": [{"message": {}}], "x": 1}] * 2
        assert answers[0].headers["content-type"] == "application/json"
        assert len(chat._idle) == 1  # both over one kept-alive connection
    finally:
        redirector.close()


class SilentServer:
    """Accepts connections and never answers. It reads each request whole (``reads="all"``),
    a little at a time (``"slowly"``: 64 KiB each 0.1 s) or not at all (``"none"``: a large
    enough request fills the socket buffers and its sending blocks)."""

    def __init__(self, reads: str) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"
        self.reads = reads
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.listener.accept()
                self.accepted.append(conn)
                if self.reads != "none":
                    threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while conn.recv(65536):
                if self.reads == "slowly":
                    time.sleep(0.1)

    def close(self) -> None:
        self.listener.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture(params=[True, False], ids=["kernel-bounds", "settimeout"])
def socket_bounds(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both ways a read or write is bounded: in the kernel (Linux) and with settimeout."""
    monkeypatch.setattr(http_client, "KERNEL_TIMEOUTS", request.param)
    return request.param


@pytest.mark.parametrize("reads", ["all", "slowly", "none"])
def test_a_server_that_never_answers_or_reads_slowly_is_bounded_by_the_request_timeout(
    socket_bounds: bool, reads: str
) -> None:
    server = SilentServer(reads)
    # past any loopback socket buffer, so the sending itself waits on the server's reading
    body = BODY if reads == "all" else b"x" * (64 * 2**20)
    try:
        took = seconds_to_time_out(ChatEndpoint(server.url, "sk-test", max_retries=0), body, 0.5)
    finally:
        server.close()
    assert 0.45 <= took < 1.5, took


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kernel bounds are Linux's")
def test_a_plain_connection_waits_for_its_answer_in_a_blocking_read() -> None:
    with serve_openai() as server:
        chat, _ = endpoint(server, max_retries=0)
        assert chat.post(BODY, 5.0).status_code == 200
        (link,) = chat._idle
        # no timeout on the socket (a poll and an ioctl per read), a kernel bound instead
        assert link.sock.gettimeout() is None
        bound = link.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16)
        seconds, micros = http_client.TIMEVAL.unpack(bound)
        assert 0 < seconds + micros / 1e6 <= 5.0


class RefusesKernelBounds(socket.socket):
    """A socket whose kernel has no SO_RCVTIMEO / SO_SNDTIMEO (as some emulated ones)."""

    def setsockopt(self, level: int, option: int, value: object, *rest: object) -> None:
        if option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):
            raise OSError(92, "Protocol not available")
        super().setsockopt(level, option, value, *rest)  # type: ignore[arg-type]


def test_a_kernel_that_refuses_the_bounds_falls_back_to_the_sockets_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_client, "KERNEL_TIMEOUTS", True)
    ours, theirs = socket.socketpair()
    link = http_client.Link(RefusesKernelBounds(fileno=ours.detach()))
    try:
        started = time.monotonic()
        with pytest.raises(TimeoutError):  # nothing sent: the read still ends on time
            link.read_head(started + 0.3)
        assert 0.25 <= time.monotonic() - started < 1.5
        assert not link.kernel_timeouts and link.sock.gettimeout() is not None
        theirs.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        status, names, _ = link.read_head(time.monotonic() + 5)
        assert (
            status == 200
            and link.read_exactly(int(names["content-length"]), time.monotonic() + 5) == b"ok"
        )
    finally:
        link.close()
        theirs.close()


def test_a_chunk_size_past_the_cap_is_said_as_announced_not_as_bytes_read() -> None:
    """The message said "1152921504606846975 bytes read" of an answer that sent none."""
    huge_chunk = raw(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFF\r\n{}"
    )
    with ScriptedHTTP({"/v1/chat/completions": huge_chunk}) as server:
        chat = ChatEndpoint(f"{server.url}/v1", "sk-test", max_retries=0)
        with pytest.raises(AnswerTooLarge) as raised:
            chat.post(BODY, 5.0)
    message = str(raised.value)
    assert "(a chunk of 1152921504606846975 bytes announced after 0)" in message, message
    assert "bytes read" not in message


def test_a_json_completion_sent_as_text_plain_is_read_as_json() -> None:
    body = json.dumps({"choices": [{"message": {"content": "hi"}}]})
    answer = http_client.Answer(200, {"content-type": "text/plain"}, body.encode())
    assert answer.decoded() == {"choices": [{"message": {"content": "hi"}}]}
    assert http_client.Answer(200, {}, b"<html>").decoded() == "<html>"
