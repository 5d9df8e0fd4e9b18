"""Shared pieces of the LLM policy tests: fake model servers, arguments, output readers.

Fixtures are named ``*_fixture`` here and registered under their ``name=``: a test
module imports them (``from llm_helpers import openai_server_fixture``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import read_jsonl
from servers.anthropic_messages import AnthropicMessagesServer
from servers.fake_model import Faults
from servers.openai_compat import OpenAICompatServer

ENV = "--openenv-env=openspiel:tic_tac_toe"
MODEL = "fake-model"
#: environment variables that would change which endpoint or key the SDKs use
SDK_ENV = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "OPENAI_LOG",
    "ANTHROPIC_LOG",
    "ANTHROPIC_AUTH_TOKEN",
)


@pytest.fixture(autouse=True, name="clean_sdk_env")
def clean_sdk_env_fixture(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs see only the keys and endpoints each test sets."""
    for name in SDK_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(name="openai_server")
def openai_server_fixture() -> Iterator[OpenAICompatServer]:
    server = OpenAICompatServer(Faults()).start()
    yield server
    server.stop()


@pytest.fixture(name="anthropic_server")
def anthropic_server_fixture() -> Iterator[AnthropicMessagesServer]:
    server = AnthropicMessagesServer(Faults()).start()
    yield server
    server.stop()


def llm_args(server: Any, *extra: str, n: int = 2, policy: str | None = None) -> list[str]:
    args = [ENV, f"--openenv-n={n}", f"--openenv-llm-endpoint={server.base_url}"]
    args.append(f"--openenv-model={MODEL}")
    if policy:
        args.append(f"--openenv-policy={policy}")
    return [*args, *extra]


def dist(workers: int) -> list[str]:
    return ["-n", str(workers)] if workers else []


def output(pytester: pytest.Pytester) -> Path:
    return pytester.path / "openenv-results"


def results(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    return read_jsonl(output(pytester) / "results.jsonl")


def failures(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    return read_jsonl(output(pytester) / "failures.jsonl")


def all_rows(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    """Every written episode by id; fails on an id written twice."""
    rows = results(pytester) + failures(pytester)
    ids = [r["episode_id"] for r in rows]
    assert len(ids) == len(set(ids)), f"an episode was written twice: {sorted(ids)}"
    return {r["episode_id"]: r for r in rows}


def errors(pytester: pytest.Pytester) -> dict[str, str]:
    return {
        r["episode_id"]: r["failure"]["message"]
        for r in failures(pytester)
        if r["failure"]["outcome"] == "error"
    }


def turns_taken(rows: dict[str, dict[str, Any]]) -> int:
    """Model calls the written episodes made (one per turn)."""
    return sum(r["metrics"]["turns"] for r in rows.values())


def scripted_rewards(n: int) -> dict[str, float]:
    """Rewards of the scripted policy (first legal move) on episodes 0..n-1, in-process.

    The fake model plays the first legal move too, so an LLM run must match these.
    """
    from pytest_openenv.envs.registry import build_family
    from pytest_openenv.episode.loop import EnvFactory, run_episode
    from pytest_openenv.episode.spec import EpisodeSpec
    from pytest_openenv.policies.scripted import ScriptedPolicy

    env = EnvFactory(build_family("openspiel:tic_tac_toe", {}))
    specs = [EpisodeSpec(env="openspiel:tic_tac_toe", index=i, seed=i) for i in range(n)]
    return {s.episode_id: run_episode(s, env, ScriptedPolicy()).reward for s in specs}


def junit_times(path: Path) -> dict[str, float]:
    """Seconds per test case (setup + call + teardown) from a JUnit XML report."""
    root = ET.parse(path).getroot()
    return {case.get("name", ""): float(case.get("time", 0)) for case in root.iter("testcase")}
