"""The loopback model servers benchmarks drive at C=64 and more: they must take every
connection, and the lean one must answer as the suite's threaded one does.

A listen queue of 5 (socketserver's default) dropped SYNs under a burst of 64 clients, each a
1 s client-side retry that the benchmark then counted as the plugin's latency.
"""

from __future__ import annotations

import shutil
import socket
import struct
import time

import pytest
from llm_helpers import all_rows, llm_args, output
from servers.fake_model import BacklogHTTPServer, listen_drops
from servers.lean_openai import BACKLOG, serve_lean
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


def test_a_run_gets_the_same_answers_from_the_lean_server_as_from_the_threaded_one(
    run_pytest, pytester: pytest.Pytester
) -> None:
    played = {}
    for name, serve in (("threaded", serve_openai), ("lean", serve_lean)):
        with serve(delay=0.02) as server:
            result = run_pytest(*llm_args(server, "--openenv-concurrency=4", n=12))
        assert result.ret in (0, 1), result.stdout.str()
        rows = all_rows(pytester)
        played[name] = {
            episode_id: (row["messages"], row["reward"], row["metrics"]["prompt_tokens"])
            for episode_id, row in rows.items()
        }
        turns = sum(
            sum(1 for m in row["messages"] if m["role"] == "assistant") for row in rows.values()
        )
        assert server.requests == turns, name
        assert 2 <= server.max_in_flight <= 4, (name, server.max_in_flight)
        shutil.rmtree(output(pytester))
    assert sorted(played["lean"]) == [f"ep-{i:06d}" for i in range(12)]
    assert played["lean"] == played["threaded"]
    # some games were lost: the comparison covers both kinds of row
    assert {reward for _, reward, _ in played["lean"].values()} != {1.0}


@pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="TCP_INFO is Linux's")
def test_the_lean_server_listens_with_a_queue_for_a_burst_of_clients() -> None:
    with serve_lean() as server:
        sockets = server._server.sockets if server._server is not None else ()
        assert len(sockets) == 1
        _, length = listen_queue(sockets[0])  # type: ignore[arg-type]
        with open("/proc/sys/net/core/somaxconn") as limit:
            assert length == min(BACKLOG, int(limit.read()))


def test_the_lean_server_records_how_late_each_answer_went_out() -> None:
    import http.client
    import json

    with serve_lean(delay=0.05) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        started = time.monotonic()
        for _ in range(3):  # kept alive: three requests on one connection
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
            conn.request("POST", "/v1/chat/completions", body=body)
            answer = conn.getresponse()
            assert answer.status == 200
            assert json.loads(answer.read())["object"] == "chat.completion"
        elapsed = time.monotonic() - started
        conn.request("GET", "/v1/models/m")
        assert json.loads(conn.getresponse().read())["id"] == "m"
        conn.close()
    assert elapsed >= 3 * 0.05
    assert server.requests == 3 and server.connections == 1 and server.model_checks == 1
    assert len(server.lags) == 3 and all(0 <= lag < 0.05 for lag in server.lags)


def bench_module(name: str):  # type: ignore[no-untyped-def]
    """A script of ``bench/`` as a module (the folder is not a package)."""
    import importlib
    import sys
    from pathlib import Path

    folder = str(Path(__file__).resolve().parents[1] / "bench")
    if folder not in sys.path:
        sys.path.append(folder)  # after tests/: bench/servers.py must not shadow servers/
    return importlib.import_module(name)


def test_the_lean_server_s_thread_runs_at_the_niceness_the_bench_asks() -> None:
    import os

    serve_first = bench_module("benchenv").serve_first
    nicer = min(19, os.getpriority(os.PRIO_PROCESS, 0) + 3)  # raising it needs no privilege
    with serve_lean() as server:
        assert server.thread_id is not None
        serve_first(server, nicer)
        assert os.getpriority(os.PRIO_PROCESS, server.thread_id) == nicer
        assert os.getpriority(os.PRIO_PROCESS, 0) != nicer  # the thread alone, not the process


@pytest.mark.slow
def test_the_latency_bench_counts_the_cpu_of_every_xdist_worker() -> None:
    latency = bench_module("latency")
    alone = latency.run("C=4", ["--openenv-concurrency=4"], 4, n=16, delay=0.0)
    xdist = latency.run("-n 2", ["-n", "2", "--openenv-concurrency=4"], 8, n=16, delay=0.0)
    assert alone.session_cpu_s is not None and alone.main_thread_cpu_s is not None
    assert xdist.main_thread_cpu_s is None  # the controller's main thread runs no item
    # the controller and both workers, each a process that played or reported episodes
    assert (alone.cpu_processes, xdist.cpu_processes) == (1, 3)
    assert xdist.session_cpu_s is not None and xdist.session_cpu_s > 0
    assert xdist.episodes == alone.episodes == 16
