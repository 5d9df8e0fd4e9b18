"""What the capture proxy adds to an agent's model call, measured in one run.

    python bench/capture_proxy.py [--calls 300] [--tools 20] [--history 12]

An OpenAI-compatible test server (``tests/servers/openai_compat.py``, no delay) answers an
agent-sized request (a ~20 KB system prompt, ``--tools`` tool definitions, ``--history``
earlier turns with tool calls and results), first sent to it directly, then through the
capture proxy in each dialect, whole and streamed. The proxy runs in a child process of its
own, so its CPU time is read apart from the client's and the server's.

Per row: the wall ms per call (median), its ratio to the direct call, and the proxy's CPU ms
per call (its process's CPU over the row / calls). Target: at most 2 ms of CPU per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import httpx  # noqa: E402


def serve(upstream_url: str) -> None:
    """The child: a proxy to ``upstream_url``; prints its URL and a token, then answers
    ``cpu`` on stdin with its process CPU seconds."""
    from pytest_openenv.agents.capture import CaptureProxy, Upstream

    with CaptureProxy(Upstream(upstream_url, "chat", None, "bench-model")) as proxy:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--tools", type=int, default=20)
    parser.add_argument("--history", type=int, default=12)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return

    from servers.openai_compat import OpenAICompatServer

    server = OpenAICompatServer().start()
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", server.base_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    base, token = child.stdout.readline().split()

    def proxy_cpu() -> float:
        child.stdin.write("cpu\n")
        child.stdin.flush()
        return float(child.stdout.readline())

    chat = chat_body(args.tools, args.history)
    print(f"request: {len(json.dumps(chat)) // 1024} KB of chat JSON, {args.calls} calls a row")
    print(f"{'row':<22}{'ms/call':>9}{'x direct':>10}{'proxy CPU ms/call':>19}")
    auth = {"Authorization": f"Bearer {token}", "x-api-key": token}
    with httpx.Client(timeout=60) as direct, httpx.Client(timeout=60, headers=auth) as agent:
        timed(direct, f"{server.base_url}/chat/completions", chat, 20)  # warm both paths
        timed(agent, f"{base}/v1/chat/completions", chat, 20)
        base_ms = statistics.median(
            timed(direct, f"{server.base_url}/chat/completions", chat, args.calls)
        )
        print(f"{'direct (chat)':<22}{base_ms * 1000:>9.2f}{1.0:>10.2f}{'-':>19}")
        rows = [
            ("chat", "/v1/chat/completions", chat),
            ("responses", "/v1/responses", responses_body(chat)),
            ("anthropic", "/v1/messages", anthropic_body(chat)),
        ]
        for name, path, body in rows:
            for stream in (False, True):
                sent = {**body, "stream": stream}
                before = proxy_cpu()
                wall = statistics.median(timed(agent, f"{base}{path}", sent, args.calls))
                cpu = (proxy_cpu() - before) / args.calls
                label = f"{name} {'streamed' if stream else 'whole'}"
                print(f"{label:<22}{wall * 1000:>9.2f}{wall / base_ms:>10.2f}{cpu * 1000:>19.2f}")
    child.stdin.close()
    child.wait(timeout=10)
    server.stop()


if __name__ == "__main__":
    main()
