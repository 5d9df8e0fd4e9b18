"""Client CPU per chat-completion request at C threads: the SDK, httpx, http.client, ours.

    python bench/http_clients.py [--concurrency 64] [--requests 2000] [--delay 0.05] [--repeat 3]

The OpenAI-compatible test server runs in a child process (its CPU is not counted), with
``--delay`` seconds per completion, so C requests are in flight as in an episode run. In
this process C threads send ``--requests`` requests in all, the same tic-tac-toe turn
(system prompt, board, tools), through each client in turn, rounds interleaved:

  sdk       ``OpenAIPolicy.act`` (``--openenv-llm-client=sdk``): the openai SDK, its httpx
            client with the plugin's event hooks (request bound, size cap, overload)
  httpx     one shared ``httpx.Client``, ``post(json=...)`` and ``response.json()``: no
            retries, bounds or parsing into a reply (a floor for any httpx-based path)
  stdlib    bare ``http.client``, a keep-alive connection per thread: no retries, bounds
            or parsing into a reply (the floor of a path that frames with it)
  http      ``OpenAIHTTPPolicy.act`` (``--openenv-llm-client=http``): connections from
            ``http.client``, pooled and kept alive, requests framed by the plugin, with
            retries, bounds and the reply parsed

It prints each round's CPU ms per request (this process's CPU over the round / requests)
and wall time. Target: http <= 0.2 ms per request at C=64.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pytest_openenv.policies.base import Turn  # noqa: E402
from pytest_openenv.policies.llm.common import LLMConfig  # noqa: E402
from pytest_openenv.policies.llm.openai_chat import (  # noqa: E402
    OpenAIHTTPPolicy,
    OpenAIPolicy,
    request_body,
)

SYSTEM = (
    "You are playing tic-tac-toe as player 0 (x). Call play_move with the action id of one "
    "of the legal actions. Cells are numbered 0-8, left to right, top to bottom."
)
BOARD = "Board:\n...\n.x.\n..o\nLegal actions: 0, 1, 2, 3, 5, 6, 7"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "play_move",
            "description": "Play one legal action.",
            "parameters": {
                "type": "object",
                "properties": {"action_id": {"type": "integer", "description": "the action"}},
                "required": ["action_id"],
            },
        },
    }
]


def a_turn(i: int) -> Turn:
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": BOARD}]
    return Turn(messages=messages, tools=TOOLS, episode_id=f"ep-{i:06d}", seed=i, turn=1)


def start_server(delay: float) -> tuple[subprocess.Popen[str], str]:
    script = ROOT / "tests" / "servers" / "openai_compat.py"
    proc = subprocess.Popen(
        [sys.executable, str(script), "--delay", str(delay)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def sdk_sender(base_url: str) -> tuple[Callable[[int], Any], Callable[[], None]]:
    policy = OpenAIPolicy(LLMConfig(model="bench-model", base_url=base_url), "EMPTY")
    return (lambda i: policy.act(a_turn(i))), policy.close


def http_sender(base_url: str) -> tuple[Callable[[int], Any], Callable[[], None]]:
    policy = OpenAIHTTPPolicy(LLMConfig(model="bench-model", base_url=base_url), "EMPTY")
    return (lambda i: policy.act(a_turn(i))), policy.close


def httpx_sender(base_url: str) -> tuple[Callable[[int], Any], Callable[[], None]]:
    import httpx

    client = httpx.Client(
        base_url=base_url, limits=httpx.Limits(max_connections=None, max_keepalive_connections=256)
    )

    def send(i: int) -> Any:
        body = request_body(
            "bench-model", a_turn(i), temperature=0.2, max_tokens=256, official=False
        )
        response = client.post(
            "/chat/completions", json=body, headers={"Authorization": "Bearer EMPTY"}
        )
        response.raise_for_status()
        return response.json()

    return send, client.close


def stdlib_sender(base_url: str) -> tuple[Callable[[int], Any], Callable[[], None]]:
    """Bare ``http.client``, one keep-alive connection per thread, the body and the answer
    (de)coded: no retries, bounds or reply (what the http path framed its requests with)."""
    import http.client
    import json
    import urllib.parse

    parts = urllib.parse.urlsplit(base_url)
    local = threading.local()
    made: list[http.client.HTTPConnection] = []
    headers = {"Content-Type": "application/json", "Authorization": "Bearer EMPTY"}

    def send(i: int) -> Any:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(parts.hostname or "", parts.port)
            made.append(conn)
        body = request_body(
            "bench-model", a_turn(i), temperature=0.2, max_tokens=256, official=False
        )
        conn.request("POST", f"{parts.path}/chat/completions", json.dumps(body), headers)
        return json.loads(conn.getresponse().read())

    def close() -> None:
        for conn in made:
            conn.close()

    return send, close


SENDERS = {"sdk": sdk_sender, "httpx": httpx_sender, "stdlib": stdlib_sender, "http": http_sender}


def one_round(kind: str, base_url: str, concurrency: int, requests: int) -> tuple[float, float]:
    """(CPU ms per request, wall s) for ``requests`` sent from ``concurrency`` threads."""
    send, close = SENDERS[kind](base_url)
    send(0)  # imports, first connection: not what a steady run pays per request
    per_thread = requests // concurrency
    barrier = threading.Barrier(concurrency + 1)
    failures: list[BaseException] = []

    def worker(t: int) -> None:
        barrier.wait()
        try:
            for k in range(per_thread):
                send(t * per_thread + k)
        except BaseException as exc:  # reported after the round
            failures.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(concurrency)]
    for thread in threads:
        thread.start()
    barrier.wait()
    cpu, wall = time.process_time(), time.perf_counter()
    for thread in threads:
        thread.join()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    close()
    if failures:
        raise SystemExit(f"{kind}: {len(failures)} threads failed, first: {failures[0]!r}")
    return 1000 * cpu / (per_thread * concurrency), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--clients", default="sdk,httpx,stdlib,http")
    args = parser.parse_args()
    kinds = args.clients.split(",")
    server, base_url = start_server(args.delay)
    results: dict[str, list[tuple[float, float]]] = {kind: [] for kind in kinds}
    try:
        for _ in range(args.repeat):
            for kind in kinds:  # interleaved: a busy moment of the machine hits every client
                results[kind].append(one_round(kind, base_url, args.concurrency, args.requests))
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(
        f"{args.requests} requests from {args.concurrency} threads, {args.delay * 1000:g} ms per "
        f"completion (server in its own process), {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(f"{'client':<7} {'CPU ms/request, every round':<36} {'wall s, every round'}")
    for kind, rounds in results.items():
        cpu = " ".join(f"{c:.3f}" for c, _ in rounds)
        wall = " ".join(f"{w:.2f}" for _, w in rounds)
        print(f"{kind:<7} {cpu:<36} {wall}")
    if "http" in results:
        best = sorted(c for c, _ in results["http"])[len(results["http"]) // 2]
        print(
            f"http: median {best:.3f} ms of client CPU per request at C={args.concurrency} "
            f"(target <= 0.2): {'ok' if best <= 0.2 else 'MISSED'}"
        )


if __name__ == "__main__":
    main()
