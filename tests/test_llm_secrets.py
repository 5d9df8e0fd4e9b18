"""API keys set in the environment reach no file, cache entry, terminal line or JUnit XML.

Even when the endpoint quotes the credentials it received in its error body
(as some proxies do), the episode error the plugin reports is scrubbed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from llm_helpers import ENV, MODEL, clean_sdk_env_fixture, dist  # noqa: F401 - fixture
from servers.anthropic_messages import serve_anthropic
from servers.openai_compat import serve_openai

OPENAI_KEY = "sk-proj-MARKERopenai7f3a9c2e41"
ANTHROPIC_KEY = "sk-ant-api03-MARKERanthropic5b8d"
HF_TOKEN = "hf_MARKERhubtoken9Qx2LmP"
MARKERS = ("MARKERopenai", "MARKERanthropic", "MARKERhubtoken")


def leaks(root: Path, *texts: str) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path}: {m}" for m in MARKERS if m.encode() in data]
    for i, text in enumerate(texts):
        found += [f"output {i}: {m}" for m in MARKERS if m in text]
    return found


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("HF_TOKEN", HF_TOKEN)


@pytest.mark.parametrize("workers", [0, 2])
def test_keys_reach_no_output(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, keys, workers: int
) -> None:
    outputs = []
    cache = pytester.path / "llm-cache"
    common = [ENV, "--openenv-n=2", f"--openenv-model={MODEL}", "-v"]
    with serve_openai() as server:
        # the official-API path: the key from the environment goes out in every request
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        result = run_pytest(
            *common,
            "--openenv-policy=openai",
            f"--openenv-cache={cache}",
            "--junitxml=junit-ok.xml",
            "--openenv-output=out-ok",
            *dist(workers),
        )
        assert result.ret in (0, 1), result.stdout.str()
        assert server.requests > 0
        outputs += [result.stdout.str(), result.stderr.str()]
    with serve_openai(always_status=401, echo_auth=True) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        result = run_pytest(
            *common,
            "--openenv-policy=openai",
            "--junitxml=junit-401.xml",
            "--openenv-output=out-401",
            *dist(workers),
        )
        assert result.ret == 1
        # the server did quote the key; the plugin's message kept the rest of what it said
        result.stdout.fnmatch_lines(["*HTTP 401*received credentials: Bearer [*][*][*]*"])
        outputs += [result.stdout.str(), result.stderr.str()]
    with serve_anthropic(statuses=[429], echo_auth=True, always_status=403) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        result = run_pytest(
            *common,
            "--openenv-policy=anthropic",
            "--junitxml=junit-anthropic.xml",
            "--openenv-output=out-anthropic",
            "--openenv-max-retries=1",
            *dist(workers),
        )
        assert result.ret == 1
        result.stdout.fnmatch_lines(["*HTTP 403*received credentials: *[*][*][*]*"])
        outputs += [result.stdout.str(), result.stderr.str()]
    assert (pytester.path / "out-ok" / "results.jsonl").exists() or (
        pytester.path / "out-ok" / "failures.jsonl"
    ).exists()
    assert list(cache.rglob("*.json"))
    assert leaks(pytester.path, *outputs) == []
