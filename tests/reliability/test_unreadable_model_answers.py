"""An HTTP 200 that is not a model turn is an infrastructure error, not the agent's failure.

A wrong ``--openenv-llm-endpoint`` (a web UI, a login page) or a proxy answers 200
with an HTML page or its own JSON. Scored as an empty agent turn, that would lower
the pass rate; it must error the episode, naming the endpoint and what came back
(cut short, secrets scrubbed). A real completion with no tool call, empty content
or content parts stays a model turn. A 429 whose ``Retry-After`` is longer than the
SDK waits is reported as what happened (not retried), not as retries spent, under the
name of the header read. A completion is read as JSON whatever its content type says.

The real ``openai`` and ``anthropic`` SDKs against the loopback fake model.
"""

from __future__ import annotations

import json

import pytest
from faults import Launcher, read_rows
from servers.anthropic_messages import AnthropicMessagesServer
from servers.fake_model import Faults
from servers.openai_compat import OpenAICompatServer
from servers.scripted_http import ScriptedHTTP, with_headers

from pytest_openenv.policies.llm.anthropic_messages import is_message
from pytest_openenv.policies.llm.openai_chat import is_chat_completion

SERVERS = {"openai": OpenAICompatServer, "anthropic": AnthropicMessagesServer}
SECRET = "sk-proj-abcdefghijklmnop1234"
HTML = (
    "<!DOCTYPE html><html><head><title>Sign in</title></head><body>"
    f"<script>var key = '{SECRET}';</script>" + "<p>please log in</p>" * 200 + "</body></html>"
)
BODIES = {
    "html": ("text/html; charset=utf-8", HTML),
    "foreign-json": ("application/json", json.dumps({"foo": 1})),
    "broken-json": ("application/json", "upstream error: 502 Bad Gateway"),
}
SAID = {"html": "an HTML page", "foreign-json": "JSON", "broken-json": "text"}


def run(launcher: Launcher, provider: str, faults: Faults, *extra: str) -> tuple[int, list]:
    server = SERVERS[provider](faults).start()
    try:
        finished = launcher.run(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=2",
            f"--openenv-policy={provider}",
            f"--openenv-llm-endpoint={server.base_url}",
            "--openenv-model=fake-model",
            "--openenv-max-retries=0",
            *extra,
            env={"OPENAI_API_KEY": SECRET, "ANTHROPIC_API_KEY": SECRET},
        )
    finally:
        server.stop()
    return finished.returncode, read_rows(launcher.output / "failures.jsonl")


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("provider", sorted(SERVERS))
@pytest.mark.slow
def test_a_200_that_is_not_a_model_turn_errors_the_episode(
    launcher: Launcher, provider: str, body: str
) -> None:
    code, failures = run(launcher, provider, Faults(raw_200=BODIES[body]))
    assert code == 1
    assert len(failures) == 2
    for row in failures:
        assert row["failure"]["outcome"] == "error", row["failure"]  # not "failed"
        message = row["failure"]["message"]
        assert "answered HTTP 200 with" in message and SAID[body] in message, message
        assert "127.0.0.1" in message  # the endpoint
        assert SECRET not in message
        assert len(message) < 600  # the page is quoted cut short
    assert not (launcher.output / "results.jsonl").exists() or not read_rows(
        launcher.output / "results.jsonl"
    )


def test_a_200_error_does_not_count_against_the_pass_rate(launcher: Launcher) -> None:
    code, _ = run(launcher, "openai", Faults(raw_200=BODIES["html"]), "--openenv-min-pass-rate=0.5")
    summary = json.loads((launcher.output / "summary.json").read_text())
    assert summary["figures"]["errored"] == 2 and summary["figures"]["failed"] == 0
    assert code == 1  # errored episodes count as not passed: the gate fails


@pytest.mark.parametrize(
    "response",
    [
        {"choices": []},
        {"choices": [{"message": {"role": "assistant", "content": None}}]},
        {"choices": [{"message": {"role": "assistant", "content": ""}}]},
        {"choices": [{"message": {"content": [{"type": "text", "text": "hi"}]}}]},
    ],
)
def test_odd_but_real_completions_are_model_turns(response: dict) -> None:
    assert is_chat_completion(response)


@pytest.mark.parametrize(
    "response", ["<html></html>", {"foo": 1}, {"choices": "x"}, {"choices": [1]}, None, [1]]
)
def test_other_bodies_are_not_completions(response: object) -> None:
    assert not is_chat_completion(response)
    assert not is_message(response)


def test_messages_shapes() -> None:
    assert is_message({"type": "message", "content": []})
    assert is_message({"content": [{"type": "text", "text": ""}]})
    assert not is_message({"content": ["x"]})


# -- 429 with a long Retry-After --------------------------------------------------------------


@pytest.mark.parametrize("provider", sorted(SERVERS))
@pytest.mark.slow
def test_a_long_retry_after_says_what_happened(launcher: Launcher, provider: str) -> None:
    server = SERVERS[provider](Faults(always_status=429, retry_after=3600)).start()
    try:
        finished = launcher.run(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=1",
            f"--openenv-policy={provider}",
            f"--openenv-llm-endpoint={server.base_url}",
            "--openenv-model=fake-model",
            "--openenv-max-retries=2",
            timeout=90,
        )
        requests = server.requests
    finally:
        server.stop()
    assert finished.returncode == 1, finished.text[-3000:]
    [row] = read_rows(launcher.output / "failures.jsonl")
    message = row["failure"]["message"]
    assert row["failure"]["outcome"] == "error"
    assert requests == 1  # nobody waits an hour: asked once, not retried
    assert "HTTP 429" in message and "Retry-After: 3600" in message, message
    assert "not retried" in message, message
    assert "after 2 retries" not in message, message


def test_retries_spent_are_counted_not_assumed(launcher: Launcher) -> None:
    server = OpenAICompatServer(Faults(always_status=429, retry_after=0.05)).start()
    try:
        finished = launcher.run(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=1",
            "--openenv-policy=openai",
            f"--openenv-llm-endpoint={server.base_url}",
            "--openenv-model=fake-model",
            "--openenv-max-retries=2",
        )
        requests = server.requests
    finally:
        server.stop()
    assert finished.returncode == 1
    [row] = read_rows(launcher.output / "failures.jsonl")
    assert requests == 3
    assert "HTTP 429 after 2 retries" in row["failure"]["message"], row["failure"]["message"]


BAD_USAGE = {
    "text": "abc",
    "infinity": float("inf"),
    "nan": float("nan"),
    "negative": -7000000,
    "fraction": 2.5,
}


@pytest.mark.parametrize("value", sorted(BAD_USAGE))
@pytest.mark.parametrize("provider", sorted(SERVERS))
@pytest.mark.slow
def test_usage_that_is_not_a_count_is_no_traceback_and_never_negative(
    launcher: Launcher, provider: str, value: str
) -> None:
    """``"abc"``, Infinity, NaN were a raw traceback; -7000000 was printed."""
    bad = BAD_USAGE[value]
    names = (
        ("prompt_tokens", "completion_tokens")
        if provider == "openai"
        else ("input_tokens", "output_tokens")
    )
    faults = Faults(usage=dict.fromkeys(names, bad))
    code, failures = run(launcher, provider, faults, "--openenv-min-reward=-1")
    assert code == 0, failures  # every game counts as passed: the answers were read
    assert failures == []
    figures = json.loads((launcher.output / "summary.json").read_text())["figures"]
    assert (figures["prompt_tokens"], figures["completion_tokens"]) == (0, 0), figures
    for row in read_rows(launcher.output / "results.jsonl"):
        assert row["metrics"]["prompt_tokens"] == 0 == row["metrics"]["completion_tokens"]


#: the controller's peak memory, written at its end (``-n 0``: the episodes run there too);
#: the process's own high-water mark (VmHWM): ``ru_maxrss`` survives exec, so it starts
#: from the parent's peak (this test process, torch and all) and hides the run's own
PEAK_MEMORY_CONFTEST = """
from pathlib import Path


def pytest_unconfigure(config):
    status = Path("/proc/self/status").read_text()
    peak_kb = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
    Path("peak_kb").write_text(peak_kb)
"""


@pytest.mark.parametrize("length", [True, False], ids=["content-length", "no-length"])
@pytest.mark.parametrize("provider", sorted(SERVERS))
@pytest.mark.slow
def test_a_huge_model_answer_is_an_episode_error_read_no_further(
    launcher: Launcher, provider: str, length: bool
) -> None:
    """One 400 MB answer cost 1.7 GB of memory and became a 400 MB row."""
    from pytest_openenv.util.jsonlimits import MAX_ANSWER_BYTES

    (launcher.folder / "conftest.py").write_text(PEAK_MEMORY_CONFTEST)
    # what the same run peaks at with ordinary answers: the interpreter, the SDK, the engine
    run(launcher, provider, Faults(), "-n", "0")
    ordinary_mb = int((launcher.folder / "peak_kb").read_text()) / 1024
    code, failures = run(launcher, provider, Faults(huge_answer=(400 * 2**20, length)), "-n", "0")
    assert code == 1 and len(failures) == 2, failures
    for row in failures:
        assert row["failure"]["outcome"] == "error", row["failure"]
        message = row["failure"]["message"]
        assert f"sent an answer over {MAX_ANSWER_BYTES} bytes" in message, message
        assert "127.0.0.1" in message
        assert len(json.dumps(row)) < 100_000  # the answer is not in the row
    peak_mb = int((launcher.folder / "peak_kb").read_text()) / 1024
    # reading stops at the cap: a few copies of 32 MiB at most, never the 400 MB answer
    extra_mb = peak_mb - ordinary_mb
    assert extra_mb < 4 * MAX_ANSWER_BYTES / 2**20, (
        f"the run peaked at {peak_mb:.0f} MB, {extra_mb:.0f} MB over an ordinary run's"
    )


def test_a_callable_policy_answer_past_the_cap_is_an_episode_error(launcher: Launcher) -> None:
    """The same cap on any policy's reply: a callable, a local checkpoint, a cache entry."""
    from pytest_openenv.util.jsonlimits import MAX_ANSWER_BYTES

    (launcher.folder / "talker.py").write_text(
        f"def talk(messages, tools):\n    return 'y' * {MAX_ANSWER_BYTES + 1}\n"
    )
    finished = launcher.run(
        "--openenv-env=openspiel:tic_tac_toe", "--openenv-n=1", "--openenv-policy=talker:talk"
    )
    assert finished.returncode == 1, finished.stdout[-3000:]
    [row] = read_rows(launcher.output / "failures.jsonl")
    assert row["failure"]["outcome"] == "error"
    message = row["failure"]["message"]
    assert f"answered {MAX_ANSWER_BYTES + 1} bytes" in message, message
    assert len(json.dumps(row)) < 100_000


@pytest.mark.parametrize("client", ["http", "sdk"])
@pytest.mark.slow
def test_a_long_retry_after_ms_is_named_as_the_header_read(launcher: Launcher, client: str) -> None:
    """A ``retry-after-ms`` was reported as ``Retry-After``, a header the server never sent."""
    slow_down = with_headers(
        429,
        {"Content-Type": "application/json", "retry-after-ms": "3600000"},
        json.dumps({"error": {"message": "slow down"}}).encode(),
    )
    with ScriptedHTTP({"/v1/chat/completions": slow_down}) as server:
        finished = launcher.run(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=1",
            f"--openenv-llm-endpoint={server.url}/v1",
            "--openenv-model=fake-model",
            f"--openenv-llm-client={client}",
            timeout=90,
        )
    assert finished.returncode == 1, finished.text[-3000:]
    [row] = read_rows(launcher.output / "failures.jsonl")
    message = row["failure"]["message"]
    assert "(retry-after-ms: 3600000: the server asked to wait 3600 s" in message, message
    assert "Retry-After" not in message, message


@pytest.mark.parametrize("client", ["http", "sdk"])
@pytest.mark.slow
def test_a_completion_sent_as_text_plain_is_a_model_turn(launcher: Launcher, client: str) -> None:
    """Both paths refused a valid completion whose content type said text/plain, which the
    SDK's ``chat.completions.create`` reads as JSON whatever the content type says."""
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "no move from me"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14},
    }
    faults = Faults(raw_200=("text/plain; charset=utf-8", json.dumps(completion)))
    run(launcher, "openai", faults, f"--openenv-llm-client={client}")
    rows = read_rows(launcher.output / "failures.jsonl")
    assert len(rows) == 2
    assert all(row["failure"]["outcome"] == "failed" for row in rows), rows[0]["failure"]
    assert all(row["metrics"]["turns"] >= 1 for row in rows)
