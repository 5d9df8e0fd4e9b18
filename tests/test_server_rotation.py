"""Several deployed servers: least in flight, and a failing server out of rotation.

Real OpenEnv servers (``openenv`` package, uvicorn on 127.0.0.1): in threads, or in
processes that a run kills mid-flight (``ServerProcess``). A "server that drops
connections" is a real TCP listener on loopback that accepts and hangs up, so the
test can count how often anything knocked on it.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import read_jsonl
from servers.openenv_servers import ServerProcess, serve_in_thread

from pytest_openenv.envs.registry import build_family
from pytest_openenv.envs.remote.rotation import NoServerInRotation, ServerRotation
from pytest_openenv.episode.loop import EnvFactory, EpisodeError, run_episode
from pytest_openenv.episode.spec import EpisodeSpec
from pytest_openenv.policies.scripted import ScriptedPolicy

ENV = "openspiel:tic_tac_toe"


class HangUp:
    """A loopback port that accepts every connection and closes it at once, counting them."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._sock.accept()
            except OSError:
                return
            self.accepted += 1
            connection.close()

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def hang_up() -> Iterator[HangUp]:
    server = HangUp()
    try:
        yield server
    finally:
        server.close()


def eventually(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait for a background health check to land (bounded; not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the health check never finished"
        time.sleep(0.005)


def spec(index: int) -> EpisodeSpec:
    return EpisodeSpec(env=ENV, index=index, seed=index, policy="scripted", config="{}")


def records(folder: Path) -> list[dict[str, Any]]:
    rows = read_jsonl(folder / "results.jsonl") + read_jsonl(folder / "failures.jsonl")
    ids = [row["episode_id"] for row in rows]
    assert len(ids) == len(set(ids)), "an episode was written twice"
    return rows


# -- the choice itself ------------------------------------------------------------------------
def test_least_in_flight_wins_and_ties_go_round_robin() -> None:
    rotation = ServerRotation()
    servers = ("http://a:1", "http://b:1", "http://c:1")
    # all idle: episode i prefers server i mod 3
    for index in range(6):
        server = rotation.take(servers, index=index)
        assert server == servers[index % 3]
        rotation.release(server, completed=True)
    held = [rotation.take(servers, index=0) for _ in range(2)]  # a, then b (a is busy)
    assert held == ["http://a:1", "http://b:1"]
    assert rotation.take(servers, index=1) == "http://c:1"  # b preferred, but c is idle
    assert rotation.take(servers, index=1) == "http://b:1"  # all hold one: the preference
    assert [rotation.in_flight(s) for s in servers] == [1, 2, 1]


def test_a_benched_server_gets_no_episode_until_its_health_check_passes() -> None:
    verdicts: list[str | None] = ["still down", None]

    def probe(server: str) -> str | None:
        assert server == "http://a:1"
        return verdicts.pop(0)

    clock = [0.0]
    rotation = ServerRotation(cool_down=10, probe=probe, clock=lambda: clock[0])
    servers = ("http://a:1", "http://b:1")
    rotation.fault("http://a:1", "connection refused")
    rotation.fault("http://a:1", "connection refused")  # the same outage: no longer pause
    assert rotation.out_of_rotation() == {"http://a:1": "connection refused"}
    for index in range(4):
        assert rotation.take(servers, index=index) == "http://b:1"
    clock[0] = 10.0  # cool-down over: the next choice starts a health check
    assert rotation.take(servers, index=0) == "http://b:1"
    # the check failed: out again, for twice as long
    eventually(lambda: rotation.out_of_rotation() == {"http://a:1": "still down"})
    clock[0] = 29.0
    assert rotation.take(servers, index=0) == "http://b:1"
    assert verdicts == [None], "checked again before its cool-down was over"
    clock[0] = 30.0
    assert rotation.take(servers, index=0) == "http://b:1"
    eventually(lambda: not rotation.out_of_rotation())
    assert not verdicts
    assert rotation.take(servers, index=0) == "http://a:1"  # healthy: back in rotation


@pytest.mark.parametrize("verdict", [None, "GET /health answered HTTP 503"])
def test_with_no_other_server_an_episode_waits_for_the_check_under_way(
    verdict: str | None,
) -> None:
    clock = [0.0]
    rotation = ServerRotation(cool_down=10, probe=lambda server: verdict, clock=lambda: clock[0])
    rotation.fault("http://a:1", "connection refused")
    clock[0] = 10.0  # due: this choice starts the check and, with nothing else, awaits it
    if verdict is None:
        assert rotation.take(("http://a:1",), index=0) == "http://a:1"
        return
    with pytest.raises(NoServerInRotation, match=r"back in 20s at most; out after: GET /health"):
        rotation.take(("http://a:1",), index=0)


def test_with_every_server_out_an_episode_errors_at_once_naming_them() -> None:
    rotation = ServerRotation(cool_down=60)
    rotation.fault("http://u:secret@a:1", "connection refused")
    with pytest.raises(NoServerInRotation) as caught:
        rotation.take(("http://u:secret@a:1",), index=0)
    message = str(caught.value)
    assert "no --openenv-server is in rotation" in message
    assert "http://a:1 (back in 60s" in message and "connection refused" in message
    assert "secret" not in message


# -- against real servers, in process -----------------------------------------------------------
def test_a_server_down_from_the_start_is_benched_after_its_first_failure(
    hang_up: HangUp,
) -> None:
    with serve_in_thread("tictactoe") as live:
        family = build_family(ENV, {}, (hang_up.url, live.url))
        env = EnvFactory(family, (hang_up.url, live.url))  # its own RemoteServers
        episodes = [run_episode(spec(i), env, ScriptedPolicy()) for i in range(10)]
    # knocked on once; that episode (it prefers the first server) moved to the live one
    assert hang_up.accepted == 1
    assert [e.server for e in episodes] == [live.url] * 10
    assert all(e.done for e in episodes)
    assert list(env.remote.rotation.out_of_rotation()) == [hang_up.url]


def test_a_single_failing_server_errors_once_then_is_not_knocked_on(hang_up: HangUp) -> None:
    family = build_family(ENV, {}, (hang_up.url,))
    env = EnvFactory(family, (hang_up.url,))
    with pytest.raises(EpisodeError, match="cannot open a session"):
        run_episode(spec(0), env, ScriptedPolicy())
    for index in range(1, 4):
        with pytest.raises(EpisodeError, match="no --openenv-server is in rotation"):
            run_episode(spec(index), env, ScriptedPolicy())
    assert hang_up.accepted == 1
    assert env.remote.rotation.in_flight(hang_up.url) == 0  # every lease was given back


# -- end to end ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_fast_server_gets_more_episodes_than_the_slow_one(
    run_pytest, pytester: pytest.Pytester
) -> None:
    with (
        serve_in_thread("tictactoe") as fast,
        serve_in_thread("tictactoe", step_delay=0.3) as slow,
    ):
        result = run_pytest(
            f"--openenv-env={ENV}",
            "--openenv-n=16",
            f"--openenv-server={slow.url}",
            f"--openenv-server={fast.url}",
            "--openenv-concurrency=4",
            "-n",
            "0",
        )
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    rows = records(pytester.path / "openenv-results")
    assert len(rows) == 16
    used = [row["extra"]["server"] for row in rows]
    assert set(used) <= {fast.url, slow.url}
    # round-robin would give each 8
    assert used.count(fast.url) >= 2 * used.count(slow.url), used


KILL_CONFTEST = """
import os
import signal


class KillAfter:
    reports = 0

    def pytest_runtest_logreport(self, report):
        if report.when != "call":
            return
        self.reports += 1
        if self.reports == int(os.environ["KILL_AFTER"]):
            os.kill(int(os.environ["KILL_PID"]), signal.SIGKILL)


def pytest_configure(config):
    # registered for the whole session: the bundled episode test lives outside this folder,
    # where a conftest's own hooks do not reach
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(KillAfter(), "kill-after")
"""


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_a_server_killed_mid_run_costs_only_its_episodes_in_flight(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: str
) -> None:
    n, concurrency = 20, 4
    servers = [ServerProcess("tictactoe", step_delay=0.1) for _ in range(3)]
    dead = servers[2]
    try:
        pytester.makeconftest(KILL_CONFTEST)  # on the controller, which sees every report
        monkeypatch.setenv("KILL_PID", str(dead.process.pid))
        monkeypatch.setenv("KILL_AFTER", "6")
        result = run_pytest(
            f"--openenv-env={ENV}",
            f"--openenv-n={n}",
            "--openenv-policy=expert",
            *(f"--openenv-server={s.url}" for s in servers),
            f"--openenv-concurrency={concurrency}",
            "-n",
            workers,
        )
        assert dead.process.poll() == -signal.SIGKILL, "the server was not killed mid-run"
    finally:
        for server in servers:
            server.stop()
    rows = records(pytester.path / "openenv-results")
    # no episode lost: every id written exactly once
    assert sorted(row["episode_id"] for row in rows) == [f"ep-{i:06d}" for i in range(n)]
    errors = [row for row in rows if row.get("failure", {}).get("outcome") == "error"]
    # only the sessions open on the dead server when it died: at most one per slot in flight
    # (none, when the kill fell between its episodes: how many is up to the machine's timing)
    in_flight_cap = concurrency * max(1, int(workers))
    assert len(errors) <= min(in_flight_cap, n), [e["failure"] for e in errors]
    for row in errors:
        message = row["failure"]["message"]
        assert dead.url in message, message
        assert "cannot open a session" not in message, message  # those moved elsewhere
        assert "dropped during" in message or "failed" in message, message
    # the rest ran to the end and passed (the expert never loses), most on the other two
    others = [row for row in rows if row not in errors]
    assert all(row["passed"] for row in others), [r.get("failure") for r in others]
    used = [row["extra"]["server"] for row in others]
    assert used.count(servers[0].url) and used.count(servers[1].url)
    # errored episodes fail the run; a kill that fell between episodes errors none
    assert result.ret == (pytest.ExitCode.TESTS_FAILED if errors else pytest.ExitCode.OK)
    assert f"{len(errors)} error" in result.stdout.str()
