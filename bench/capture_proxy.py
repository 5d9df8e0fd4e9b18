"""What the capture proxy adds to an agent's model call, per upstream transport, in one run.

    python bench/capture_proxy.py [--calls 300] [--rounds 3] [--tools 20] [--history 12]

An upstream of the bench's own answers every request with the same canned chat completion (a
tool call), parsing nothing but the request's length: it runs in a child process, so its CPU
is neither the proxy's nor the client's, and it is no bottleneck. An agent-sized request (a
~20 KB system prompt, ``--tools`` tool definitions, ``--history`` earlier turns with tool
calls and results) is sent to it directly, then through the capture proxy in each dialect,
whole and streamed. One proxy per transport (``TRANSPORTS``: ``http.client`` and ``httpx``)
runs in a child process of its own, so its CPU time is read apart from everything else;
both proxies get the same requests from the same client, rows interleaved, ``--rounds``
times (the figure is the median round).

Per row and transport: the wall ms per call (median) and the proxy's CPU ms per call (its
process's CPU over the row / calls); then httpx's CPU over http.client's. Target: at most
2 ms of CPU per call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

#: the upstream's one answer: a tool call with usage, as a chat server sends it
CANNED = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": "bench-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "I will read the file first.",
                    "tool_calls": [
                        {
                            "id": "call_bench",
                            "type": "function",
                            "function": {"name": "tool_1", "arguments": '{"path": "a.py"}'},
                        }
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 9000, "completion_tokens": 30, "total_tokens": 9030},
    }
).encode()
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
    len(CANNED),
    CANNED,
)


def upstream() -> None:
    """The child: the canned upstream on 127.0.0.1; prints its base URL."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.lower().split(b"\r\n"):
                    if line.startswith(b"content-length:"):
                        length = int(line[15:])
                await reader.readexactly(length)
                writer.write(ANSWER)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(answer, "127.0.0.1", 0, backlog=1024)
        port = server.sockets[0].getsockname()[1]
        print(f"http://127.0.0.1:{port}/v1", flush=True)
        await server.serve_forever()

    asyncio.run(main())


def serve(upstream_url: str, transport: str) -> None:
    """The child: a proxy to ``upstream_url`` over ``transport``; prints its URL and a
    token, then answers ``cpu`` on stdin with its process CPU seconds."""
    from pytest_openenv.agents.capture import CaptureProxy, Upstream

    settings = Upstream(upstream_url, "chat", None, "bench-model", transport=transport)
    with CaptureProxy(settings) as proxy:
        session = proxy.open_session()
        print(proxy.base_url, session.token, flush=True)
        for line in sys.stdin:
            if line.strip() == "cpu":
                session.calls.clear()  # the records are the runner's to keep, not the bench's
                print(time.process_time(), flush=True)


def tools(n: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": "A tool an agent is offered. " * 8,
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}, "n": {"type": "integer"}},
                    "required": ["path"],
                },
            },
        }
        for i in range(n)
    ]


def chat_body(n_tools: int, history: int) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. " * 800},
        {"role": "user", "content": "Legal actions: 0, 1, 2"},
    ]
    for turn in range(history):
        call_id = f"call_{turn}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "tool_1", "arguments": '{"path": "a.py"}'},
                    }
                ],
            }
        )
        messages.append(
            {"role": "tool", "tool_call_id": call_id, "content": "line of output\n" * 40}
        )
    return {"model": "m", "messages": messages, "tools": tools(n_tools)}


def responses_body(chat: dict[str, Any]) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for m in chat["messages"][1:]:
        if m["role"] == "assistant":
            for c in m["tool_calls"]:
                items.append(
                    {
                        "type": "function_call",
                        "call_id": c["id"],
                        "name": c["function"]["name"],
                        "arguments": c["function"]["arguments"],
                    }
                )
        elif m["role"] == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": m["tool_call_id"],
                    "output": m["content"],
                }
            )
        else:
            items.append({"role": m["role"], "content": m["content"]})
    fns = [{"type": "function", **t["function"]} for t in chat["tools"]]
    return {
        "model": "m",
        "instructions": chat["messages"][0]["content"],
        "input": items,
        "tools": fns,
    }


def anthropic_body(chat: dict[str, Any]) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for m in chat["messages"][1:]:
        if m["role"] == "assistant":
            blocks = [
                {
                    "type": "tool_use",
                    "id": c["id"],
                    "name": c["function"]["name"],
                    "input": json.loads(c["function"]["arguments"]),
                }
                for c in m["tool_calls"]
            ]
            messages.append({"role": "assistant", "content": blocks})
        elif m["role"] == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": m["tool_call_id"],
                "content": m["content"],
            }
            messages.append({"role": "user", "content": [block]})
        else:
            messages.append({"role": "user", "content": m["content"]})
    fns = [
        {
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "input_schema": t["function"]["parameters"],
        }
        for t in chat["tools"]
    ]
    return {
        "model": "m",
        "max_tokens": 1024,
        "system": chat["messages"][0]["content"],
        "messages": messages,
        "tools": fns,
    }


def timed(client: httpx.Client, url: str, body: dict[str, Any], calls: int) -> list[float]:
    data = json.dumps(body).encode()
    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        response = client.post(url, content=data, headers={"Content-Type": "application/json"})
        response.read()
        assert response.status_code == 200, response.text[:500]
        seconds.append(time.perf_counter() - started)
    return seconds


class ProxyChild:
    """A proxy in its own process, and its CPU seconds so far."""

    def __init__(self, upstream_url: str, transport: str) -> None:
        self.transport = transport
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", upstream_url, "--transport", transport],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.base, token = self.proc.stdout.readline().split()
        self.client = httpx.Client(
            timeout=60, headers={"Authorization": f"Bearer {token}", "x-api-key": token}
        )

    def cpu(self) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("cpu\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        self.client.close()
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def main() -> None:
    from pytest_openenv.agents.capture.upstream import TRANSPORTS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tools", type=int, default=20)
    parser.add_argument("--history", type=int, default=12)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--transport", help=argparse.SUPPRESS)
    parser.add_argument("--upstream", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.upstream:
        upstream()
        return
    if args.serve:
        serve(args.serve, args.transport)
        return

    server = subprocess.Popen(
        [sys.executable, __file__, "--upstream"], stdout=subprocess.PIPE, text=True
    )
    assert server.stdout is not None
    upstream_url = server.stdout.readline().strip()
    names = sorted(TRANSPORTS)  # http.client, httpx
    proxies = [ProxyChild(upstream_url, name) for name in names]

    chat = chat_body(args.tools, args.history)
    rows = [
        ("chat", "/v1/chat/completions", chat),
        ("responses", "/v1/responses", responses_body(chat)),
        ("anthropic", "/v1/messages", anthropic_body(chat)),
    ]
    cases = [
        (f"{name} {'streamed' if stream else 'whole'}", path, {**body, "stream": stream})
        for name, path, body in rows
        for stream in (False, True)
    ]
    print(
        f"request: {len(json.dumps(chat)) // 1024} KB of chat JSON, {args.calls} calls a row, "
        f"median of {args.rounds} rounds"
    )
    #: (case, transport) -> per round: (median wall seconds per call, CPU seconds per call)
    figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with httpx.Client(timeout=60) as direct:
        timed(direct, f"{upstream_url}/chat/completions", chat, 20)  # warm every path
        for proxy in proxies:
            for _, path, body in cases:
                timed(proxy.client, f"{proxy.base}{path}", body, 5)
        base = statistics.median(
            timed(direct, f"{upstream_url}/chat/completions", chat, args.calls)
        )
        for round_ in range(args.rounds):
            for label, path, body in cases:
                # each round flips the order, so neither transport always runs first
                for proxy in proxies if round_ % 2 == 0 else proxies[::-1]:
                    before = proxy.cpu()
                    wall = statistics.median(
                        timed(proxy.client, f"{proxy.base}{path}", body, args.calls)
                    )
                    cpu = (proxy.cpu() - before) / args.calls
                    figures.setdefault((label, proxy.transport), []).append((wall, cpu))
    for proxy in proxies:
        proxy.close()
    server.terminate()
    server.wait(timeout=10)

    groups = "".join(f"{name:>24}" for name in names)
    print(f"{'':<20}{groups}")
    columns = "".join(f"{'ms/call':>12}{'CPU ms/call':>12}" for _ in names)
    print(f"{'row':<20}{columns}{'CPU httpx/http.client':>24}")
    direct = "".join(f"{base * 1000:>12.2f}{'-':>12}" for _ in names)
    print(f"{'direct (no proxy)':<20}{direct}")
    totals: dict[str, list[float]] = {n: [] for n in names}
    for label, _, _ in cases:
        line = f"{label:<20}"
        cpus: dict[str, float] = {}
        for name in names:
            rounds = figures[(label, name)]
            wall = statistics.median(w for w, _ in rounds)
            cpus[name] = statistics.median(c for _, c in rounds)
            totals[name].append(cpus[name])
            line += f"{wall * 1000:>12.2f}{cpus[name] * 1000:>12.2f}"
        print(f"{line}{cpus['httpx'] / cpus['http.client']:>24.2f}")
    means = {n: statistics.mean(totals[n]) for n in names}
    print(
        "mean proxy CPU ms/call: "
        + ", ".join(f"{n} {means[n] * 1000:.2f}" for n in names)
        + f"; httpx/http.client {means['httpx'] / means['http.client']:.2f}"
        + " (target: at most 2 ms)"
    )


if __name__ == "__main__":
    main()
