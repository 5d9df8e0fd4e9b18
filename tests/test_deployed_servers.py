"""Episodes against deployed OpenEnv servers, end to end through pytest itself.

Every server here is a real OpenEnv server (``openenv`` package, uvicorn on
127.0.0.1): tic-tac-toe with OpenEnv's openspiel schema, OpenEnv's reasoning_gym
server, and an echo env the plugin has no adapter for.
"""

from __future__ import annotations

import json
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import read_jsonl
from servers.openenv_servers import ServerProcess, ThreadServer, serve_in_thread
from servers.scripted_http import ScriptedHTTP, trickled

from pytest_openenv.controller.preflight import HEALTH_TIMEOUT
from pytest_openenv.envs.registry import build_family
from pytest_openenv.episode.loop import EnvFactory, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.scripted import ScriptedPolicy


@pytest.fixture(scope="module")
def tictactoe() -> Iterator[ThreadServer]:
    with serve_in_thread("tictactoe") as server:
        yield server


@pytest.fixture(scope="module")
def reasoning() -> Iterator[ThreadServer]:
    with serve_in_thread("reasoning_gym") as server:
        yield server


@pytest.fixture(scope="module")
def echo() -> Iterator[ThreadServer]:
    with serve_in_thread("echo") as server:
        yield server


def rows(folder: Path) -> dict[str, dict[str, Any]]:
    """Every record of a run (results and failures), by episode id; fails on a torn line."""
    found: dict[str, dict[str, Any]] = {}
    for name in ("results.jsonl", "failures.jsonl"):
        for row in read_jsonl(folder / name):
            assert row["episode_id"] not in found, f"{row['episode_id']} written twice"
            found[row["episode_id"]] = row
    return found


def all_text(folder: Path) -> str:
    return "\n".join(p.read_text() for p in folder.rglob("*") if p.is_file())


# -- openspiel over the wire --------------------------------------------------------------
def embedded_rows(env: str, n: int, seed: int) -> dict[str, dict[str, Any]]:
    """The same episodes on the embedded engine, run in this process."""
    family = build_family(env, {})
    episodes = [
        run_episode(
            EpisodeSpec(env=env, index=i, seed=seed + i), EnvFactory(family), ScriptedPolicy()
        )
        for i in range(n)
    ]
    return {e.episode_id: e.record() for e in episodes}


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_remote_openspiel_records_look_like_embedded_ones(
    run_pytest, pytester: pytest.Pytester, tictactoe: ThreadServer, workers: str
) -> None:
    secret_url = tictactoe.url.replace("http://", "http://bob:hunter2@")
    remote = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-n=6",
        "--openenv-seed=20",
        "--openenv-policy=scripted",  # as the embedded twin plays
        f"--openenv-server={secret_url}",
        "-n",
        workers,
    )
    assert remote.ret in (0, 1)
    folder = pytester.path / "openenv-results"
    local, deployed = embedded_rows("openspiel:tic_tac_toe", 6, 20), rows(folder)
    assert sorted(deployed) == [f"ep-{i:06d}" for i in range(6)]
    assert {r["reward"] for r in deployed.values()} != {0.0}, "expected some decided games"
    for episode_id, row in deployed.items():
        assert row["extra"]["backend"] == "remote"
        assert row["extra"]["server"] == tictactoe.url
        twin = local[episode_id]
        assert twin["extra"]["backend"] == "embedded"
        for key in ("messages", "tools", "reward", "done", "task", "tool_trace", "passed"):
            assert row[key] == twin[key], f"{episode_id}: {key} differs"
    # the password was used to connect and then forgotten
    metadata = json.loads((folder / "metadata.json").read_text())
    assert metadata["settings"]["servers"] == [tictactoe.url]
    assert "hunter2" not in all_text(folder)
    assert "hunter2" not in remote.stdout.str() + remote.stderr.str()


@pytest.mark.slow
def test_episodes_spread_round_robin_over_servers_from_ini(
    run_pytest, pytester: pytest.Pytester
) -> None:
    with serve_in_thread("tictactoe") as first, serve_in_thread("tictactoe") as second:
        pytester.makeini(f"[pytest]\nopenenv_server = {first.url} {second.url}\n")
        result = run_pytest("--openenv-env=openspiel:tic_tac_toe", "--openenv-n=5", "-n", "0")
        assert result.ret in (0, 1)
        found = rows(pytester.path / "openenv-results")
        servers = [found[f"ep-{i:06d}"]["extra"]["server"] for i in range(5)]
        assert servers == [first.url, second.url, first.url, second.url, first.url]
        # one process, one episode at a time: each server's session is reset, not reopened
        assert first.stats()["sessions_opened"] == 1
        assert second.stats()["sessions_opened"] == 1


# -- reasoning_gym, embedded and remote -----------------------------------------------------
@pytest.mark.slow
def test_reasoning_gym_oracle_passes_every_episode_embedded(
    run_pytest, pytester: pytest.Pytester
) -> None:
    result = run_pytest("--openenv-env=reasoning_gym:chain_sum", "--openenv-n=8", "-n", "0")
    result.assert_outcomes(passed=8)
    found = rows(pytester.path / "openenv-results")
    assert {r["verify_metrics"]["outcome"] for r in found.values()} == {"correct"}
    assert all(r["reward"] == 1.0 and r["task"]["answer"] for r in found.values())


@pytest.mark.slow
def test_reasoning_gym_oracle_passes_every_episode_remote(
    run_pytest, pytester: pytest.Pytester, reasoning: ThreadServer
) -> None:
    result = run_pytest(
        "--openenv-env=reasoning_gym:chain_sum",
        "--openenv-n=8",
        "--openenv-env-config",
        '{"min_terms": 3, "max_terms": 4}',
        f"--openenv-server={reasoning.url}",
        "-n",
        "0",
    )
    result.assert_outcomes(passed=8)
    found = rows(pytester.path / "openenv-results")
    assert {r["extra"]["backend"] for r in found.values()} == {"remote"}
    for row in found.values():
        # the question came from the server, built with the dataset config we sent
        expression = row["messages"][1]["content"].split(":", 1)[1].split("=")[0]
        assert 2 <= expression.count("+") + expression.count("-") <= 3


@pytest.mark.slow
def test_reasoning_gym_unknown_dataset_is_a_usage_error(run_pytest) -> None:
    result = run_pytest("--openenv-env=reasoning_gym:chain_summ", "-n", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "did you mean chain_sum" in result.stderr.str()


# -- the generic family -------------------------------------------------------------------
ECHO_POLICY = '''
import json

import pytest

from pytest_openenv.policies.base import Policy, Reply, ToolCall


class SayTheTarget(Policy):
    """Reads the JSON observation; on turn 1 sends a wrong type to meet the server's schema."""

    name = "say-the-target"

    def act(self, turn):
        shown = [m["content"] for m in turn.messages if "Observation: " in (m.get("content") or "")]
        observation = json.loads(shown[-1].split("Observation: ", 1)[1].splitlines()[0])
        (tool,) = turn.tools
        assert tool["function"]["parameters"]["properties"]["message"]["type"] == "string"
        message = 404 if turn.turn == 1 else observation["target"]
        call = ToolCall(f"call_{turn.turn}", "step", json.dumps({"message": message}))
        return Reply(tool_calls=(call,))


@pytest.fixture
def openenv_policy():
    return SayTheTarget()
'''


@pytest.mark.slow
def test_generic_family_drives_a_server_it_has_no_adapter_for(
    run_pytest, pytester: pytest.Pytester, echo: ThreadServer
) -> None:
    pytester.makeconftest(ECHO_POLICY)
    result = run_pytest(
        "--openenv-env=openenv:echo", "--openenv-n=4", f"--openenv-server={echo.url}", "-n", "2"
    )
    result.assert_outcomes(passed=4)
    for row in rows(pytester.path / "openenv-results").values():
        (tool,) = row["tools"]
        assert tool["function"]["name"] == "step"
        assert set(tool["function"]["parameters"]["properties"]) == {"message"}
        assert "Say the target word back." in row["messages"][1]["content"]
        first_reply, second_reply = row["tool_trace"]
        assert "VALIDATION_ERROR" in first_reply["result"]["error"]
        assert '"reward": 1.0' not in first_reply["result"]["data"]
        assert second_reply["result"]["reward"] == 1.0 and second_reply["result"]["done"]
        assert row["env"] == "openenv:echo" and row["passed"] and row["metrics"]["turns"] == 2


def test_generic_family_without_server_is_a_usage_error(run_pytest) -> None:
    result = run_pytest("--openenv-env=openenv:echo", "-n", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--openenv-server URL" in result.stderr.str()


# -- faults -------------------------------------------------------------------------------
@pytest.mark.slow
def test_server_down_before_the_run_is_one_usage_error(
    run_pytest, pytester: pytest.Pytester
) -> None:
    started = time.monotonic()
    result = run_pytest(
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-n=50",
        "--openenv-server=http://127.0.0.1:9",
        "-n",
        "2",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = result.stderr.str()
    assert errors.count("GET http://127.0.0.1:9/health failed") == 1
    assert "before any episode ran" in errors
    assert not (pytester.path / "openenv-results").exists()
    assert time.monotonic() - started < 60  # a hang guard, not a speed target


@pytest.mark.parametrize(
    ("bound", "args"),
    [(5.0, ["--openenv-timeout=5"]), (HEALTH_TIMEOUT, [])],
    ids=["timeout", "default"],
)
@pytest.mark.slow
def test_a_server_trickling_its_health_answer_is_refused_within_the_checks_bound(
    run_pytest, pytester: pytest.Pytester, bound: float, args: list[str]
) -> None:
    """One byte every 2 s: each read succeeds, so a per-read timeout held the run for ever."""
    slow = trickled(json.dumps({"status": "healthy", "pad": "x" * 300}).encode(), every=2.0)
    with ScriptedHTTP({"/health": slow}) as server:
        started = time.monotonic()
        result = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=2",
            f"--openenv-server={server.url}",
            *args,
            timeout=90,
        )
        took = time.monotonic() - started
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = f"GET {server.url}/health failed: no whole answer within {bound:g} s"
    assert said in result.stderr.str()
    assert took < bound + 30, took


@pytest.mark.slow
def test_server_killed_mid_run_errors_the_affected_episodes_only(
    run_pytest, pytester: pytest.Pytester
) -> None:
    folder = pytester.path / "openenv-results"
    with ServerProcess("tictactoe", step_delay=0.15) as server:

        def kill_after_two_records() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                written = sum(
                    (folder / name).read_bytes().count(b"\n")
                    for name in ("results.jsonl", "failures.jsonl")
                    if (folder / name).exists()
                )
                if written >= 2:
                    break
                time.sleep(0.02)
            server.kill()

        killer = threading.Thread(target=kill_after_two_records)
        killer.start()
        result = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=12",
            f"--openenv-server={server.url}",
            "--openenv-timeout=60",
            "-n",
            "2",
        )
        killer.join()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    found = rows(folder)
    assert len(found) == 12
    errored = [r for r in found.values() if r.get("failure", {}).get("outcome") == "error"]
    finished = [r for r in found.values() if r["done"]]
    assert len(finished) >= 2 and errored
    assert len(finished) + len(errored) == 12
    for row in errored:
        assert server.url in row["failure"]["message"]
    assert "errored" in result.stdout.str()
    figures = json.loads((folder / "summary.json").read_text())["figures"]
    assert (figures["episodes"], figures["errored"]) == (12, len(errored))


@pytest.mark.slow
def test_capacity_limit_is_retried_not_lost(run_pytest, pytester: pytest.Pytester) -> None:
    with serve_in_thread("tictactoe", max_sessions=1, step_delay=0.05) as server:
        result = run_pytest(
            "--openenv-env=openspiel:tic_tac_toe",
            "--openenv-n=8",
            f"--openenv-server={server.url}",
            "--openenv-timeout=60",
            "-n",
            "2",
        )
        stats = server.stats()
    found = rows(pytester.path / "openenv-results")
    assert len(found) == 8 and all(r["done"] for r in found.values())
    assert not [r for r in found.values() if r.get("failure", {}).get("outcome") == "error"]
    assert result.ret in (0, 1)
    assert stats["sessions_opened"] == 8 + 1  # +1: the controller's seed probe (preflight.py)
    assert stats["peak_sessions"] == 1
    assert stats["refused_sessions"] >= 1


# -- a third-party family through the entry point ----------------------------------------------
THIRD_PARTY_FAMILY = '''
"""A tiny third-party env family: say the number the env shows."""

from pytest_openenv.envs.base import (
    ActionRejected, Backend, EnvConfigError, EnvFamily, ProposedCall, StepResult, ToolSpec,
)


class NumberBackend(Backend):
    def reset(self, *, seed, episode_id, **options):
        self.target = seed % 7
        return StepResult({"target": self.target})

    def step(self, action):
        hit = action["number"] == self.target
        return StepResult({"target": self.target}, reward=1.0 if hit else 0.0, done=True)


class SayNumberFamily(EnvFamily):
    name = "saynumber"
    default_min_reward = 1.0

    def __init__(self, variant, config):
        super().__init__(variant, config)
        if variant != "basic":
            raise EnvConfigError(f"unknown saynumber variant {variant!r}; try saynumber:basic")

    def tools(self):
        return [ToolSpec("say", "Say a number.", {
            "type": "object", "properties": {"number": {"type": "integer"}},
            "required": ["number"],
        })]

    def embedded_backend(self):
        return NumberBackend()

    def describe_task(self, first):
        return f"Say {first.observation['target']}."

    def describe_result(self, call, result):
        return f"reward {result.reward}"

    def to_action(self, call, current):
        if not isinstance(call.arguments.get("number"), int):
            raise ActionRejected("number must be an integer")
        return {"number": call.arguments["number"]}

    def scripted_call(self, current):
        return ProposedCall("say", {"number": current.observation["target"]})
'''


def build_wheel(folder: Path) -> Path:
    """A real wheel of a package that registers a family under ``pytest_openenv.envs``."""
    wheel = folder / "saynumber_family-0.1-py3-none-any.whl"
    info = "saynumber_family-0.1.dist-info"
    files = {
        "saynumber_family/__init__.py": THIRD_PARTY_FAMILY,
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: saynumber-family\nVersion: 0.1\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        f"{info}/entry_points.txt": (
            "[pytest_openenv.envs]\nsaynumber = saynumber_family:SayNumberFamily\n"
        ),
    }
    record = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(f"{info}/RECORD", record)
    return wheel


PIP_INSTALL = ("-m", "pip", "install", "-q", "--no-deps", "--no-index")


@pytest.mark.slow
def test_third_party_family_installed_from_a_package_works(
    run_pytest, pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    wheel = build_wheel(tmp_path)
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, *PIP_INSTALL, "--target", str(site), str(wheel)],
        check=True,
        timeout=120,
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    result = run_pytest("--openenv-env=saynumber:basic", "--openenv-n=4", "-n", "2")
    result.assert_outcomes(passed=4)
    found = rows(pytester.path / "openenv-results")
    assert {r["env"] for r in found.values()} == {"saynumber:basic"}
    assert {r["task"]["family"] for r in found.values()} == {"saynumber"}

    unknown = run_pytest("--openenv-env=nosuchfamily:x", "-n", "0")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    assert "openenv, openspiel, reasoning_gym, saynumber" in unknown.stderr.str()
