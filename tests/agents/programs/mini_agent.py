"""A tiny agent program for ``agent:command``: the openai SDK for its model, the mcp SDK for
the env's tools, one tool call per model turn until the model answers in text.

    python mini_agent.py PROMPT_FILE MCP_URL MODEL [SEEN_FILE]

It reads its model's base URL and key from OPENAI_BASE_URL / OPENAI_API_KEY, as the SDK
does. With SEEN_FILE it writes there what it was given (argv, environment, the files of its
working directory), so a test can look for a key in it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import openai
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


async def play(task: str, mcp_url: str, model: str) -> None:
    sdk = openai.OpenAI(max_retries=0)
    async with (
        streamablehttp_client(mcp_url) as (read, write, _),
        ClientSession(read, write) as env,
    ):
        await env.initialize()
        listed = (await env.list_tools()).tools
        tools = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description or "",
                    "parameters": t.inputSchema,
                },
            }
            for t in listed
        ]
        messages = [
            {"role": "system", "content": "You are a mini agent."},
            {"role": "user", "content": task},
        ]
        for _ in range(20):
            reply = sdk.chat.completions.create(model=model, messages=messages, tools=tools)
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return
            for call in message.tool_calls:
                result = await env.call_tool(
                    call.function.name, json.loads(call.function.arguments or "{}")
                )
                text = "".join(getattr(part, "text", "") for part in result.content)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": text})


def main() -> None:
    prompt_file, mcp_url, model = sys.argv[1:4]
    if len(sys.argv) > 4:
        seen = {
            "argv": sys.argv,
            "env": dict(os.environ),
            "files": {
                str(p): p.read_text(errors="replace") for p in Path.cwd().rglob("*") if p.is_file()
            },
        }
        Path(sys.argv[4]).write_text(json.dumps(seen))
    asyncio.run(play(Path(prompt_file).read_text(), mcp_url, model))


if __name__ == "__main__":
    main()
