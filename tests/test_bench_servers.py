"""The loopback model server benchmarks drive at C=64 and more: it must take every connection.

A listen queue of 5 (socketserver's default) dropped SYNs under a burst of 64 clients, each a
1 s client-side retry that the benchmark then counted as the plugin's latency.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from servers.fake_model import BacklogHTTPServer, listen_drops
from servers.openai_compat import serve_openai

#: ``struct tcp_info``: for a listening socket Linux reports its queue there (tcpi_unacked:
#: connections waiting to be accepted, tcpi_sacked: the queue's length)
TCP_INFO_QUEUE = struct.Struct("8x4x4x4x4xII")


def listen_queue(sock: socket.socket) -> tuple[int, int]:
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 64)
    waiting, length = TCP_INFO_QUEUE.unpack_from(info)
    return waiting, length


@pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="TCP_INFO is Linux's")
def test_the_model_server_listens_with_a_queue_for_a_burst_of_clients() -> None:
    with serve_openai() as server:
        httpd = server._httpd
        assert isinstance(httpd, BacklogHTTPServer)
        _, length = listen_queue(httpd.socket)
        with open("/proc/sys/net/core/somaxconn") as limit:
            expected = min(1024, int(limit.read()))
        assert length == expected
        assert httpd.socket.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR)


def test_listen_drops_counts_connections_an_overflowing_queue_refused() -> None:
    before = listen_drops()
    if before is None:
        pytest.skip("/proc/net/netstat is not readable here")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)  # nobody accepts: the queue is full after one connection
        clients = []
        try:
            for _ in range(8):
                client = socket.socket()
                client.setblocking(False)
                client.connect_ex(listener.getsockname())
                clients.append(client)
            deadline = time.monotonic() + 5
            while listen_drops() == before and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            for client in clients:
                client.close()
    assert (listen_drops() or 0) > before
