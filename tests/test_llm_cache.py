"""``--openenv-cache`` and ``--openenv-replay``: record with the server up, replay without it."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from llm_helpers import (
    ENV,
    MODEL,
    all_rows,
    clean_sdk_env_fixture,  # noqa: F401 - fixture
    dist,
    errors,
    llm_args,
    turns_taken,
)
from servers.openai_compat import serve_openai

from pytest_openenv.policies.base import Reply, ToolCall, Turn, Usage
from pytest_openenv.policies.cache import (
    ResponseCache,
    cache_key,
    reply_from_json,
    reply_to_json,
)
from pytest_openenv.util.atomic import temp_target


def entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.json") if temp_target(p.name) is None)


def episodes(pytester: pytest.Pytester) -> dict[str, tuple[float, list]]:
    return {k: (r["reward"], r["messages"]) for k, r in all_rows(pytester).items()}


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.slow
def test_record_then_replay_without_the_server(
    run_pytest, pytester: pytest.Pytester, workers: int
) -> None:
    cache = pytester.path / "llm-cache"
    with serve_openai() as server:
        recorded = run_pytest(
            *llm_args(server, f"--openenv-cache={cache}", "--openenv-concurrency=2", n=4),
            *dist(workers),
        )
        assert recorded.ret in (0, 1), recorded.stdout.str()
        requests = server.requests
    first = episodes(pytester)
    assert len(first) == 4 and requests == turns_taken(all_rows(pytester))
    files = entries(cache)
    # one entry per model call: none torn, none duplicated, no temporary file left
    assert len(files) == requests
    assert not [p for p in cache.rglob(".*") if temp_target(p.name) is not None]
    entry = json.loads(files[0].read_text())
    assert entry["format"] == "pytest-openenv/response-cache/1"
    assert entry["model"] == MODEL and entry["provider"] == "openai"
    assert files[0].stem == entry["key"]

    # the server is gone and no key is set: replay gives the same episodes and sends nothing,
    # whether pointed at an endpoint (a live witness server that must see no request) or, as
    # in CI, at the official API with no OPENAI_API_KEY at all
    replay = [ENV, "--openenv-n=4", f"--openenv-model={MODEL}", f"--openenv-cache={cache}"]
    replay += ["--openenv-replay", "--openenv-concurrency=2", *dist(workers)]
    with serve_openai() as witness:
        if workers == 0:
            replayed = run_pytest(*replay, f"--openenv-llm-endpoint={witness.base_url}")
        else:
            replayed = run_pytest(*replay, "--openenv-policy=openai")
        assert witness.requests == 0
    assert replayed.ret == recorded.ret, replayed.stdout.str()
    assert episodes(pytester) == first
    assert len(entries(cache)) == len(files)


@pytest.mark.slow
def test_a_replay_miss_is_an_episode_error_and_sends_nothing(
    run_pytest, pytester: pytest.Pytester
) -> None:
    cache = pytester.path / "llm-cache"
    with serve_openai() as server:
        run_pytest(*llm_args(server, f"--openenv-cache={cache}", n=1))
        recorded = server.requests
        # episode 1 was never recorded; a changed temperature misses everywhere
        result = run_pytest(
            *llm_args(server, f"--openenv-cache={cache}", "--openenv-replay", n=2),
        )
        changed = run_pytest(
            *llm_args(
                server,
                f"--openenv-cache={cache}",
                "--openenv-replay",
                "--openenv-temperature=0.7",
                n=1,
            )
        )
        assert server.requests == recorded
    assert result.ret == 1 and changed.ret == 1
    found = errors(pytester)
    assert list(found) == ["ep-000000"]
    assert "--openenv-replay: no cached response for ep-000000 turn 1" in found["ep-000000"]


@pytest.mark.slow
def test_a_replay_miss_says_what_differs_from_the_stored_entries(
    run_pytest, pytester: pytest.Pytester
) -> None:
    """A miss did not say whether the system prompt, the temperature or the
    messages differ from the entries stored for that episode and turn."""
    cache = pytester.path / "llm-cache"
    replay = (f"--openenv-cache={cache}", "--openenv-replay")
    with serve_openai() as server:
        run_pytest(*llm_args(server, f"--openenv-cache={cache}", n=1))
        recorded = server.requests
        said = {}
        for name, extra in {
            "temperature": ["--openenv-temperature=0.7"],
            "system prompt": ["--openenv-system-prompt=Play to win."],
            "messages": ['--openenv-env-config={"opponent": "first"}'],
            "episode": ["--openenv-seed=5"],
            "nothing": ["--openenv-id-prefix=other"],
        }.items():
            result = run_pytest(*llm_args(server, *replay, *extra, n=1))
            assert result.ret == 1, result.stdout.str()[-3000:]
            (said[name],) = errors(pytester).values()
        assert server.requests == recorded
    assert "1 entry is stored for this episode and turn" in said["temperature"]
    assert "differs in temperature (recorded 0.2, this run 0.7)" in said["temperature"]
    assert "differs in the system prompt" in said["system prompt"]
    assert "temperature" not in said["system prompt"]
    # the opponent is named in the task: the first message after the system prompt
    assert (
        "differs in the messages from message 1 after the system prompt on (a user"
        in (said["messages"])
    ), said["messages"]
    assert "differs in the system prompt" not in said["messages"]
    assert "nothing is stored for other-ep-000000" in said["nothing"], said
    # another seed: the same opening, then the seeded opponent answers otherwise
    assert "no cached response for ep-000000 turn 2" in said["episode"]
    assert (
        "differs in the messages from message 3 after the system prompt on (a tool "
        in (said["episode"])
    ), said["episode"]


@pytest.mark.slow
def test_a_corrupt_entry_is_an_error_naming_the_file_on_replay(
    run_pytest, pytester: pytest.Pytester
) -> None:
    cache = pytester.path / "llm-cache"
    with serve_openai() as server:
        run_pytest(*llm_args(server, f"--openenv-cache={cache}", n=1))
        first = min(entries(cache), key=lambda p: json.loads(p.read_text())["turn"])
        first.write_text('{"reply": {"tool_calls": "nope"')
        before = server.requests
        result = run_pytest(*llm_args(server, f"--openenv-cache={cache}", "--openenv-replay", n=1))
        assert result.ret == 1
        assert f"{first.name} is not a cache entry" in errors(pytester)["ep-000000"]
        assert server.requests == before
        # without --openenv-replay the corrupt entry is a miss, asked again and rewritten
        healed = run_pytest(*llm_args(server, f"--openenv-cache={cache}", n=1))
        assert healed.ret in (0, 1)
        assert server.requests == before + 1
    assert json.loads(first.read_text())["reply"]["tool_calls"]


@pytest.mark.slow
def test_replay_usage_errors(run_pytest, pytester: pytest.Pytester) -> None:
    no_cache = run_pytest(ENV, "--openenv-replay")
    assert no_cache.ret == pytest.ExitCode.USAGE_ERROR
    no_cache.stderr.fnmatch_lines(["*--openenv-replay needs --openenv-cache DIR*"])
    missing = run_pytest(
        ENV,
        "--openenv-policy=openai",
        f"--openenv-model={MODEL}",
        "--openenv-cache=nowhere",
        "--openenv-replay",
    )
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--openenv-cache='nowhere' does not exist*"])


def _turn(messages: list, episode: str = "ep-000000") -> Turn:
    return Turn(messages=messages, tools=[{"type": "function"}], episode_id=episode, seed=0, turn=1)


def test_the_key_covers_what_determines_the_answer() -> None:
    hello = [{"role": "user", "content": "x"}]
    base = cache_key("openai", "m", {"temperature": 0.2}, _turn(hello))
    assert base == cache_key("openai", "m", {"temperature": 0.2}, _turn(list(hello)))
    others = {
        cache_key("anthropic", "m", {"temperature": 0.2}, _turn(hello)),
        cache_key("openai", "m2", {"temperature": 0.2}, _turn(hello)),
        cache_key("openai", "m", {"temperature": 0.3}, _turn(hello)),
        cache_key("openai", "m", {"temperature": 0.2}, _turn([{"role": "user", "content": "y"}])),
        cache_key("openai", "m", {"temperature": 0.2}, _turn(hello, "ep-000001")),
    }
    assert base not in others and len(others) == 5


def test_concurrent_writers_of_one_key_leave_one_whole_entry(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    entries_written = [
        {"key": "k", "reply": reply_to_json(Reply(content=str(i) * 5000))} for i in range(8)
    ]
    key = "ab" + "0" * 62
    threads = [threading.Thread(target=cache.store, args=(key, e)) for e in entries_written]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    files = list(tmp_path.rglob("*"))
    assert [p.name for p in files if p.is_file()] == [f"{key}.json"]
    reply = cache.load(key)
    assert reply is not None and len(set(reply.content)) == 1


tool_calls = st.builds(
    ToolCall,
    id=st.text(min_size=1, max_size=20),
    name=st.text(min_size=1, max_size=20),
    arguments=st.text(max_size=60),
)
replies = st.builds(
    Reply,
    content=st.text(max_size=80),
    tool_calls=st.lists(tool_calls, max_size=3).map(tuple),
    usage=st.builds(Usage, st.integers(0, 10**6), st.integers(0, 10**6)),
)


@given(replies)
def test_stored_replies_come_back_unchanged(reply: Reply) -> None:
    assert reply_from_json(json.loads(json.dumps(reply_to_json(reply)))) == reply


#: each worker process may write no file past 300 bytes: every cache entry fails (EFBIG, as a
#: full disk fails with ENOSPC) while the controller's output folder still takes its rows
SMALL_FILES_ON_WORKERS = """
import resource

def pytest_configure(config):
    if hasattr(config, "workerinput"):
        resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300))
"""


@pytest.mark.slow
def test_a_cache_that_cannot_be_written_names_its_path_and_stops_the_run(
    run_pytest, pytester: pytest.Pytester
) -> None:
    pytester.makeconftest(SMALL_FILES_ON_WORKERS)
    cache = pytester.path / "llm-cache"
    with serve_openai() as server:
        result = run_pytest(*llm_args(server, f"--openenv-cache={cache}", n=12), "-n", "1")
        requests = server.requests
    out = result.stdout.str()
    assert result.ret not in (0, 1), out  # stopped, not a finished run
    assert f"cannot write to the response cache {cache} (--openenv-cache): File too large" in out
    assert "the run stopped" in out
    assert "OSError" not in out and "Traceback" not in out
    rows = all_rows(pytester)
    # the first episode's call was made and could not be kept; none after it was paid for
    assert requests <= 2, requests
    assert len(rows) < 12
    assert all(r.get("failure", {}).get("outcome") == "error" for r in rows.values())


@pytest.mark.slow
def test_a_replay_says_its_tokens_were_replayed_not_spent(
    run_pytest, pytester: pytest.Pytester
) -> None:
    """A replay reported "tokens: 13352 in / 568 out" as if the run had spent them."""
    cache = pytester.path / "llm-cache"
    with serve_openai() as server:
        recorded = run_pytest(*llm_args(server, f"--openenv-cache={cache}", n=2))
        assert recorded.ret in (0, 1), recorded.stdout.str()
        folder = pytester.path / "openenv-results"
        spent = json.loads((folder / "summary.json").read_text())["figures"]
        assert spent["prompt_tokens"] > 0 and spent["completion_tokens"] > 0
        assert spent["tokens_spent"] == spent["prompt_tokens"] + spent["completion_tokens"]
        assert "replayed_prompt_tokens" not in spent
        assert f"tokens: {spent['prompt_tokens']} in / {spent['completion_tokens']} out" in (
            recorded.stdout.str()
        )
        replay = llm_args(server, f"--openenv-cache={cache}", "--openenv-replay", n=2)
        replayed = run_pytest(*replay)
    figures = json.loads((folder / "summary.json").read_text())["figures"]
    assert figures["tokens_spent"] == 0
    assert figures["replayed_prompt_tokens"] == spent["prompt_tokens"]
    assert figures["replayed_completion_tokens"] == spent["completion_tokens"]
    assert (
        f"tokens: 0 spent ({spent['prompt_tokens']} in / {spent['completion_tokens']} out "
        "replayed from the response cache)"
    ) in replayed.stdout.str()
    card = (folder / "README.md").read_text()
    assert "(replayed from the response cache: 0 spent)" in card
    assert "replayed from the response cache: 0 spent" in (folder / "report.html").read_text()
