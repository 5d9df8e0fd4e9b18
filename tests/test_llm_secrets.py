"""API keys set in the environment reach no file, cache entry, terminal line or JUnit XML.

Even when the endpoint quotes the credentials it received in its error body
(as some proxies do), the episode error the plugin reports is scrubbed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from llm_helpers import (
    ENV,
    MODEL,
    clean_sdk_env_fixture,  # noqa: F401 - fixture
    dist,
)
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
@pytest.mark.slow
def test_keys_reach_no_output_of_a_run(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, keys, workers: int
) -> None:
    cache = pytester.path / "llm-cache"
    with serve_openai() as server:
        # the official-API path: the key from the environment goes out in every request
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        result = run_pytest(
            ENV,
            "--openenv-n=2",
            f"--openenv-model={MODEL}",
            "--openenv-policy=openai",
            f"--openenv-cache={cache}",
            "--junitxml=junit.xml",
            "-v",
            "--openenv-concurrency=2",
            *dist(workers),
        )
        assert server.requests > 0
    assert result.ret in (0, 1), result.stdout.str()
    written = {p.name for p in (pytester.path / "openenv-results").iterdir()}
    assert {"metadata.json", "summary.json", "README.md"} <= written
    assert list(cache.rglob("*.json")) and (pytester.path / "junit.xml").exists()
    assert leaks(pytester.path, result.stdout.str(), result.stderr.str()) == []


@pytest.mark.slow
def test_credentials_quoted_by_an_endpoint_are_scrubbed(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, keys
) -> None:
    outputs = []
    common = [ENV, "--openenv-n=2", f"--openenv-model={MODEL}", "-v"]
    with serve_openai(always_status=401, echo_auth=True) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        result = run_pytest(
            *common, "--openenv-policy=openai", "--junitxml=junit-openai.xml", "--openenv-output=oa"
        )
        assert result.ret == 1
        # the server did quote the key; the plugin kept the rest of what it said
        result.stdout.fnmatch_lines(["*HTTP 401*received credentials: Bearer [*][*][*]*"])
        outputs += [result.stdout.str(), result.stderr.str()]
    with serve_anthropic(always_status=403, echo_auth=True) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        result = run_pytest(
            *common,
            "--openenv-policy=anthropic",
            "--junitxml=junit-anthropic.xml",
            "--openenv-output=an",
        )
        assert result.ret == 1
        result.stdout.fnmatch_lines(["*HTTP 403*received credentials: *[*][*][*]*"])
        outputs += [result.stdout.str(), result.stderr.str()]
    assert (pytester.path / "oa" / "failures.jsonl").exists()
    assert (pytester.path / "an" / "failures.jsonl").exists()
    assert leaks(pytester.path, *outputs) == []
