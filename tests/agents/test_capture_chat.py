"""The capture proxy speaking Chat Completions (opencode's dialect) to a chat upstream,
through the real ``openai`` SDK: answers, streams, records, tokens and limits."""

from __future__ import annotations

import json
import logging

import openai
import pytest
from capture_helpers import (
    KEY,
    PLAY_MOVE,
    TASK,
    UPSTREAM_MODEL,
    proxy_to,
    upstream_key_fixture,  # noqa: F401 - fixture
)
from servers.fake_model import Faults

from pytest_openenv.agents.capture import UpstreamError, conversation


def client(proxy, token: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key=token, max_retries=0)


def ask(sdk: openai.OpenAI, messages: list[dict], **kwargs):
    return sdk.chat.completions.create(
        model="agent-picked-model", messages=messages, tools=[PLAY_MOVE], **kwargs
    )


def test_a_chat_call_is_answered_by_the_upstream_and_recorded(upstream_key: str) -> None:
    with proxy_to("chat") as (proxy, server):
        session = proxy.open_session()
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": TASK}]
        reply = ask(client(proxy, session.token), messages)

        call = reply.choices[0].message.tool_calls[0]
        assert call.function.name == "play_move"
        assert json.loads(call.function.arguments) == {"action_id": 3}
        assert reply.choices[0].finish_reason == "tool_calls"
        # the upstream got the run's model and the real key, never the agent's token
        assert server.bodies[0]["model"] == UPSTREAM_MODEL
        assert server.authorizations == [f"Bearer {KEY}"]
        [captured] = session.calls
        assert captured.dialect == "chat"
        assert captured.request_messages == messages
        assert captured.tools == [PLAY_MOVE]
        assert captured.response_message["tool_calls"][0]["function"]["arguments"] == (
            call.function.arguments
        )
        assert captured.agent_model == "agent-picked-model"
        assert session.usage == server.served[0]
        assert reply.usage.prompt_tokens == server.served[0][0]


def test_a_streamed_chat_call_gives_the_same_answer_as_a_whole_one(upstream_key: str) -> None:
    with proxy_to("chat") as (proxy, server):
        session = proxy.open_session()
        sdk = client(proxy, session.token)
        messages = [{"role": "user", "content": TASK}]
        whole = ask(sdk, messages)
        chunks = list(ask(sdk, messages, stream=True, stream_options={"include_usage": True}))

        assert chunks[0].choices[0].delta.role == "assistant"
        calls = [
            c.choices[0].delta.tool_calls
            for c in chunks
            if c.choices and c.choices[0].delta.tool_calls
        ]
        name = calls[0][0].function.name
        arguments = "".join(d[0].function.arguments or "" for d in calls)
        assert (name, arguments) == (
            whole.choices[0].message.tool_calls[0].function.name,
            whole.choices[0].message.tool_calls[0].function.arguments,
        )
        finish = [
            c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
        ]
        assert finish == ["tool_calls"]
        assert chunks[-1].usage.completion_tokens == server.served[1][1]
        assert [c.stream for c in session.calls] == [False, True]
        assert session.calls[1].response_message == session.calls[0].response_message
        # the upstream is always asked for the whole answer
        assert [b["stream"] for b in server.bodies] == [False, False]


def test_a_request_without_a_live_token_is_refused_401(upstream_key: str) -> None:
    with proxy_to("chat") as (proxy, server):
        session = proxy.open_session()
        other = proxy.open_session()
        for token in ("", "not-a-token", KEY):
            with pytest.raises(openai.AuthenticationError):
                ask(client(proxy, token or "x"), [{"role": "user", "content": TASK}])
        ask(client(proxy, session.token), [{"role": "user", "content": TASK}])
        session.close()
        with pytest.raises(openai.AuthenticationError):
            ask(client(proxy, session.token), [{"role": "user", "content": TASK}])
        with pytest.raises(openai.AuthenticationError):
            client(proxy, session.token).models.list()
        assert [m.id for m in client(proxy, other.token).models.list()] == [UPSTREAM_MODEL]
        assert server.requests == 1  # refused calls never reach the upstream
        assert len(session.calls) == 1 and other.calls == []


def test_the_turn_limit_refuses_the_next_call_and_marks_the_session(upstream_key: str) -> None:
    with proxy_to("chat") as (proxy, server):
        session = proxy.open_session(max_calls=2)
        sdk = client(proxy, session.token)
        for _ in range(2):
            ask(sdk, [{"role": "user", "content": TASK}])
        assert not session.over_limit
        with pytest.raises(openai.BadRequestError, match="turn limit of 2 model calls"):
            ask(sdk, [{"role": "user", "content": TASK}])
        assert session.over_limit and session.limit_hit.is_set()
        assert server.requests == 2
        assert [c.status for c in session.calls] == [200, 200, 400]


def test_the_token_budget_refuses_calls_once_spent(upstream_key: str) -> None:
    with proxy_to("chat") as (proxy, server):
        session = proxy.open_session(max_tokens=5)  # one call spends more than that
        sdk = client(proxy, session.token)
        ask(sdk, [{"role": "user", "content": TASK}])
        with pytest.raises(openai.BadRequestError, match="token budget of 5 is spent"):
            ask(sdk, [{"role": "user", "content": TASK}])
        assert session.over_budget and not session.over_limit
        assert server.requests == 1


def test_upstream_errors_reach_the_agent_with_their_status(upstream_key: str) -> None:
    with proxy_to("chat", Faults(statuses=[429, 500])) as (proxy, _server):
        session = proxy.open_session()
        sdk = client(proxy, session.token)
        with pytest.raises(openai.RateLimitError):
            ask(sdk, [{"role": "user", "content": TASK}])
        with pytest.raises(openai.InternalServerError, match="HTTP 500"):
            ask(sdk, [{"role": "user", "content": TASK}])
        ask(sdk, [{"role": "user", "content": TASK}])
        assert [c.status for c in session.calls] == [429, 500, 200]
        assert session.calls[0].error and session.calls[0].response_message == {}


def test_an_unreachable_upstream_is_a_502_the_agent_sees(upstream_key: str) -> None:
    with proxy_to("chat") as (proxy, server):
        server.stop()
        session = proxy.open_session()
        with pytest.raises(openai.InternalServerError, match="unreachable"):
            ask(client(proxy, session.token), [{"role": "user", "content": TASK}])
        assert session.calls[0].status == 502


def test_the_upstream_key_never_reaches_the_agent_records_or_logs(
    upstream_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    faults = Faults(echo_auth=True, statuses=[500], echo_auth_in_reply=True)
    with proxy_to("chat", faults) as (proxy, server):
        session = proxy.open_session()
        sdk = client(proxy, session.token)
        with pytest.raises(openai.InternalServerError) as refused:
            ask(sdk, [{"role": "user", "content": TASK}])
        reply = ask(sdk, [{"role": "user", "content": TASK}])

        # the upstream did quote the key: the proxy hid it from everything after
        assert KEY in server.authorizations[0]
        assert "received credentials" in str(refused.value) and KEY not in str(refused.value)
        assert "***" in reply.choices[0].message.content and KEY not in reply.model_dump_json()
        records = json.dumps([vars(c) for c in session.calls])
        assert "received credentials" in records and KEY not in records
        assert caplog.records and KEY not in caplog.text
        assert KEY not in session.token


def test_the_conversation_is_the_main_thread_and_its_last_answer(upstream_key: str) -> None:
    with proxy_to("chat") as (proxy, _server):
        session = proxy.open_session()
        sdk = client(proxy, session.token)
        thread = [{"role": "system", "content": "Play."}, {"role": "user", "content": TASK}]
        first = ask(sdk, thread).choices[0].message
        call = first.tool_calls[0]
        thread += [
            first.model_dump(exclude_none=True, exclude={"refusal", "annotations", "audio"}),
            {"role": "tool", "tool_call_id": call.id, "content": "Legal actions: 4, 8"},
        ]
        ask(sdk, thread)
        # a side call (a title for the session) after the main thread's last call
        sdk.chat.completions.create(
            model="small", messages=[{"role": "user", "content": "Title: Legal actions: 0"}]
        )

        messages, tools = conversation(session.calls)
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
        assert messages[:4] == session.calls[1].request_messages
        assert json.loads(messages[-1]["tool_calls"][0]["function"]["arguments"]) == {
            "action_id": 4
        }
        assert tools == [PLAY_MOVE]
        assert len(session.calls) == 3


def test_a_conversation_with_no_answered_call_is_empty(upstream_key: str) -> None:
    with proxy_to("chat", Faults(always_status=503)) as (proxy, _server):
        session = proxy.open_session()
        with pytest.raises(openai.InternalServerError):
            ask(client(proxy, session.token), [{"role": "user", "content": TASK}])
        assert conversation(session.calls) == ([], [])


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_chat_agent_is_answered_by_an_anthropic_upstream(upstream_key: str, stream: bool) -> None:
    with proxy_to("anthropic", Faults(echo_auth_in_reply=True)) as (proxy, server):
        session = proxy.open_session()
        sdk = client(proxy, session.token)
        thread = [{"role": "system", "content": "Play."}, {"role": "user", "content": TASK}]
        first = ask(sdk, thread, max_tokens=300)
        call = first.choices[0].message.tool_calls[0]
        thread += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call.model_dump(exclude_none=True)],
            },
            {"role": "tool", "tool_call_id": call.id, "content": "Legal actions: 4, 8"},
        ]
        if stream:
            chunks = list(ask(sdk, thread, stream=True))
            deltas = [c.choices[0].delta for c in chunks if c.choices]
            arguments = "".join(
                d.tool_calls[0].function.arguments or "" for d in deltas if d.tool_calls
            )
        else:
            arguments = ask(sdk, thread).choices[0].message.tool_calls[0].function.arguments

        assert json.loads(arguments) == {"action_id": 4}
        body = server.bodies[1]
        assert body["system"] == "Play."
        assert body["max_tokens"] == 4096 and server.bodies[0]["max_tokens"] == 300
        assert body["messages"][1]["content"][0]["type"] == "tool_use"
        assert body["messages"][2]["content"][0] == {
            "type": "tool_result",
            "tool_use_id": call.id,
            "content": "Legal actions: 4, 8",
        }
        # the key went as x-api-key: the model quotes it, the proxy hides it
        assert "my request said ***" in session.calls[1].response_message["content"]
        assert KEY not in json.dumps([vars(c) for c in session.calls])


def test_parallel_calls_cannot_pass_the_turn_limit_together(upstream_key: str) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with proxy_to("chat", Faults(delay=0.3)) as (proxy, server):
        session = proxy.open_session(max_calls=2)
        sdk = client(proxy, session.token)

        def one(_: int) -> str:
            try:
                ask(sdk, [{"role": "user", "content": TASK}])
            except openai.BadRequestError:
                return "refused"
            return "answered"

        with ThreadPoolExecutor(4) as pool:
            outcomes = sorted(pool.map(one, range(4)))
        assert outcomes == ["answered", "answered", "refused", "refused"]
        assert server.requests == 2 and session.over_limit


def test_a_forward_hook_answers_from_its_own_store_without_the_upstream(
    upstream_key: str,
) -> None:
    store: dict[str, object] = {}
    replaying = False

    def cached(request, complete):
        key = json.dumps(request, sort_keys=True)
        if key not in store:
            if replaying:
                raise UpstreamError(503, "no recorded answer for this request")
            store[key] = complete(request)
        return store[key]

    with proxy_to("chat") as (proxy, server):
        proxy.forward = cached
        session = proxy.open_session()
        sdk = client(proxy, session.token)
        first = ask(sdk, [{"role": "user", "content": TASK}])
        replaying = True
        again = ask(sdk, [{"role": "user", "content": TASK}], stream=True)
        arguments = "".join(
            c.choices[0].delta.tool_calls[0].function.arguments or ""
            for c in again
            if c.choices and c.choices[0].delta.tool_calls
        )
        assert arguments == first.choices[0].message.tool_calls[0].function.arguments
        with pytest.raises(openai.InternalServerError, match="no recorded answer"):
            ask(sdk, [{"role": "user", "content": "Legal actions: 1"}])
        assert server.requests == 1
        assert [c.status for c in session.calls] == [200, 200, 503]


def test_bad_requests_get_their_status_in_the_dialect_s_error_form(upstream_key: str) -> None:
    import httpx

    with proxy_to("chat") as (proxy, server):
        session = proxy.open_session()
        bearer = {"Authorization": f"Bearer {session.token}"}
        with httpx.Client(base_url=proxy.base_url, timeout=10) as http:
            broken = http.post("/v1/chat/completions", content=b"{not json", headers=bearer)
            assert broken.status_code == 400
            assert broken.json()["error"]["message"] == "the request body is not JSON"
            anthropic_broken = http.post(
                "/v1/messages", content=b"[1]", headers={"x-api-key": session.token}
            )
            assert anthropic_broken.status_code == 400
            assert anthropic_broken.json()["type"] == "error"
            assert http.post("/v1/embeddings", json={}, headers=bearer).status_code == 404
            assert http.head("/").status_code == 200  # the CLIs' probe needs no token
            assert http.get("/v1/models").status_code == 401
            assert http.get("/v1/models/some-model", headers=bearer).json()["id"] == UPSTREAM_MODEL
        assert server.requests == 0 and session.calls == []


def test_a_named_key_variable_that_is_not_set_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_openenv.agents.capture import CaptureProxy, Upstream
    from pytest_openenv.errors import BadInput

    monkeypatch.delenv("CAPTURE_TEST_MISSING_KEY", raising=False)
    proxy = CaptureProxy(Upstream("http://127.0.0.1:9/v1", "chat", "CAPTURE_TEST_MISSING_KEY", "m"))
    with pytest.raises(BadInput, match=r"\$CAPTURE_TEST_MISSING_KEY, which is not set"):
        proxy.start()


def test_a_chunked_request_body_is_read_and_an_oversized_one_refused(upstream_key: str) -> None:
    import socket

    import httpx

    with proxy_to("chat") as (proxy, server):
        session = proxy.open_session()
        body = json.dumps(
            {"model": "m", "messages": [{"role": "user", "content": TASK}], "tools": [PLAY_MOVE]}
        ).encode()
        pieces = (body[i : i + 50] for i in range(0, len(body), 50))  # sent chunked
        answer = httpx.post(
            f"{proxy.base_url}/v1/chat/completions",
            content=pieces,
            headers={"Authorization": f"Bearer {session.token}"},
        )
        assert answer.status_code == 200
        assert answer.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == (
            "play_move"
        )
        port = int(proxy.base_url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            raw.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                + f"Authorization: Bearer {session.token}\r\n".encode()
                + b"Content-Length: 999999999999\r\n\r\n"
            )
            assert raw.recv(4096).startswith(b"HTTP/1.1 413")
        assert server.requests == 1
