"""``-n W --openenv-concurrency C``: up to W x C episodes in flight, xdist's rules kept.

``schedule.EpisodeLoadScheduling`` keeps each worker's queue as long as its
run-ahead window. End to end (real xdist workers, the loopback OpenAI-compatible
server): the server sees more than C requests at once; ``-x`` still stops the
run early; a worker that dies with episodes in flight loses none and writes none
twice, the one it was running is an error, and ``--openenv-resume`` plays it again.
The scheduling rules themselves are checked against xdist's ``LoadScheduling``
with recording stand-ins for the worker channels.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from llm_helpers import (
    ENV,
    all_rows,
    clean_sdk_env_fixture,  # noqa: F401 - fixture
    errors,
    failures,
    llm_args,
    results,
    turns_taken,
)
from servers.openai_compat import serve_openai

from pytest_openenv.controller.schedule import EpisodeLoadScheduling, make_scheduler
from pytest_openenv.worker.runahead import WINDOW_FACTOR

#: a callable policy (so episodes run ahead: the fixtures stay the plugin's own) that plays
#: the first legal move, slowly, and can kill its worker once, with other episodes in flight
AGENTS = """
import os
import threading
import time
from pathlib import Path

_active = 0
_lock = threading.Lock()


def play(messages, tools, turn):
    global _active
    with _lock:
        _active += 1
    try:
        time.sleep(float(os.environ.get("AGENT_DELAY", "0")))
        if turn.seed == int(os.environ.get("AGENT_FAIL_SEED", "-1")):
            raise RuntimeError("this episode fails")
        flag = Path(os.environ.get("AGENT_FLAG", "no-such-flag"))
        if turn.seed == int(os.environ.get("AGENT_KILL_SEED", "-1")) and not flag.exists():
            deadline = time.monotonic() + 20
            while _active < 3 and time.monotonic() < deadline:
                time.sleep(0.01)  # die only with other episodes of this worker in flight
            flag.write_text(str(_active))
            os._exit(13)
        return {"name": "play_move", "arguments": turn.legal[0].arguments}
    finally:
        with _lock:
            _active -= 1
"""


def outcome_count(text: str) -> int:
    tail = text.strip().splitlines()[-1]
    return sum(int(n) for n, _ in re.findall(r"(\d+) (passed|failed|errors?)\b", tail))


# -- end to end ----------------------------------------------------------------
@pytest.mark.slow
def test_each_worker_keeps_c_episodes_in_flight(run_pytest, pytester: pytest.Pytester) -> None:
    # 32 items: xdist's own scheduler hands each worker at most 6 at a time (so at most 12
    # episodes in flight); a worker with C=16 needs its whole share to keep 16 in flight
    c, n = 16, 32
    # episodes of about a second: the two workers' episodes overlap despite start-up skew
    with serve_openai(delay=0.3) as server:
        result = run_pytest(*llm_args(server, f"--openenv-concurrency={c}", n=n), "-n", "2")
    assert result.ret in (0, 1), result.stdout.str()
    rows = all_rows(pytester)  # fails on an episode written twice
    assert sorted(rows) == [f"ep-{i:06d}" for i in range(n)]
    assert server.requests == turns_taken(rows)  # no episode ran twice
    # two workers, each with its C threads busy: more than one process's worth at once
    assert c < server.max_in_flight <= 2 * c, server.max_in_flight


@pytest.mark.parametrize("workers", [[], ["-n", "0"]])
def test_a_dist_mode_without_workers_is_a_run_of_its_own_that_plays(
    run_pytest, pytester: pytest.Pytester, workers: list[str]
) -> None:
    # ``--dist`` in an ini's addopts, the run started without workers: xdist distributes
    # nothing, so this process must play the episodes itself
    pytester.makeini("[pytest]\naddopts = --dist=worksteal\n")
    result = run_pytest("--openenv-env=openspiel:tic_tac_toe", "--openenv-n=3", *workers)
    result.assert_outcomes(passed=3)
    assert len(all_rows(pytester)) == 3


@pytest.mark.parametrize("stop", [["-x"], ["--maxfail=1"]])
@pytest.mark.slow
def test_x_and_maxfail_still_stop_the_run_early(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, stop: list[str]
) -> None:
    n, c, failing = 400, 16, 100
    pytester.makepyfile(agents=AGENTS)
    monkeypatch.setenv("AGENT_DELAY", "0.1")
    monkeypatch.setenv("AGENT_FAIL_SEED", str(failing))  # the only episode that fails
    result = run_pytest(
        ENV,
        f"--openenv-n={n}",
        "--openenv-min-reward=-1",
        "--openenv-policy=agents:play",
        f"--openenv-concurrency={c}",
        "-n",
        "2",
        *stop,
    )
    text = result.stdout.str()
    # xdist ends a stopped run as interrupted, as without the episode scheduler
    assert result.ret == pytest.ExitCode.INTERRUPTED, text
    assert "stopping after 1 failures" in text
    assert list(errors(pytester)) == [f"ep-{failing:06d}"]
    reported = outcome_count(text)
    assert 1 <= len(all_rows(pytester)) <= reported
    # Each worker held up to 5 x C items; they were taken back at the stop. Without that,
    # the other worker would run its whole queue (about 200 reported in all).
    assert reported < failing + WINDOW_FACTOR * c + c, text[-2000:]


@pytest.mark.slow
def test_a_worker_dying_with_episodes_in_flight_loses_none_and_writes_none_twice(
    run_pytest, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    n, kill_seed = 40, 9
    flag = pytester.path / "killed"
    pytester.makepyfile(agents=AGENTS)
    monkeypatch.setenv("AGENT_DELAY", "0.03")
    monkeypatch.setenv("AGENT_KILL_SEED", str(kill_seed))
    monkeypatch.setenv("AGENT_FLAG", str(flag))
    args = [
        ENV,
        f"--openenv-n={n}",
        "--openenv-policy=agents:play",
        "--openenv-concurrency=8",
        "-n",
        "2",
    ]
    result = run_pytest(*args)
    text = result.stdout.str()
    assert result.ret == 1, text
    assert int(flag.read_text()) >= 3  # it died with other episodes of its own in flight
    assert text.count("replacing crashed worker") == 1
    rows = all_rows(pytester)  # fails on an episode written twice
    assert sorted(rows) == [f"ep-{i:06d}" for i in range(n)]  # none lost
    crashed = errors(pytester)
    assert len(crashed) == 1, crashed  # the item xdist saw running, once, as an error
    ((crashed_id, message),) = crashed.items()
    assert "crashed while running" in message
    assert "other episodes of that worker were in flight" in message

    passed = {r["episode_id"] for r in results(pytester)}
    # the first run's: the crashed episode may fail when it is played again
    failed = {r["episode_id"] for r in failures(pytester) if r["failure"]["outcome"] == "failed"}
    again = run_pytest(*args, "--openenv-resume", "-v")
    assert again.ret in (0, 1), again.stdout.str()
    ran = set(re.findall(r"(?:PASSED|FAILED|ERROR) .*test_episode\[(ep-\d+)\]", again.stdout.str()))
    # resume plays what never finished: the crashed episode, not the passed or failed ones
    assert crashed_id in ran and ran == set(rows) - passed - failed
    assert errors(pytester) == {}
    assert sorted(all_rows(pytester)) == sorted(rows)


# -- the scheduling rules --------------------------------------------------------
class Node:
    """Stands in for xdist's ``WorkerController``: records what the scheduler sends."""

    def __init__(self, name: str) -> None:
        self.gateway = type("Gateway", (), {"id": name})()
        self.sent: list[int] = []
        self.steals: list[list[int]] = []
        self.shutting_down = False
        #: the worker has exited: its channel refuses commands, as execnet's does
        self.gone = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def send_steal(self, indices: list[int]) -> None:
        if self.gone:
            raise OSError("cannot send to <Channel id=1 closed>")
        self.steals.append(list(indices))

    def shutdown(self) -> None:
        self.shutting_down = True


class DSession:
    shouldstop: bool | str = False


def scheduler(
    pytester: pytest.Pytester, ids: list[str], c: int, *, workers: int = 2
) -> tuple[EpisodeLoadScheduling, list[Node], DSession]:
    config = pytester.parseconfig("--tx", f"{workers}*popen", "--dist", "load")
    dsession = DSession()
    config.pluginmanager.register(dsession, "dsession")
    sched = make_scheduler(config, None, c)
    assert isinstance(sched, EpisodeLoadScheduling)
    nodes = [Node(f"gw{i}") for i in range(workers)]
    for node in nodes:
        sched.add_node(node)  # type: ignore[arg-type]
    for node in nodes:
        sched.add_node_collection(node, ids)  # type: ignore[arg-type]
    sched.schedule()
    return sched, nodes, dsession


def episode_ids(n: int) -> list[str]:
    return [f"test_x.py::test_ep[ep-{i:06d}]" for i in range(n)]


def complete(sched: EpisodeLoadScheduling, node: Node, count: int = 1) -> None:
    for _ in range(count):
        sched.mark_test_complete(node, sched.node2pending[node][0], duration=0.5)  # type: ignore[index]


def test_each_node_is_kept_at_its_run_ahead_window(pytester: pytest.Pytester) -> None:
    c = 4
    window = WINDOW_FACTOR * c
    sched, nodes, _ = scheduler(pytester, episode_ids(1000), c)
    for node in nodes:
        assert len(sched.node2pending[node]) >= window  # type: ignore[index]
    first = nodes[0]
    # long-running items (0.5 s each) no longer drain a node to two pending items
    complete(sched, first, 200)
    assert window <= len(sched.node2pending[first]) <= window + c  # type: ignore[index]
    every = [i for node in nodes for i in node.sent] + sched.pending
    assert sorted(every) == list(range(1000))  # each item handed out at most once


def test_the_tail_is_shared_evenly(pytester: pytest.Pytester) -> None:
    c = 16
    sched, nodes, _ = scheduler(pytester, episode_ids(40), c)
    sizes = [len(sched.node2pending[node]) for node in nodes]  # type: ignore[index]
    assert sum(sizes) + len(sched.pending) == 40
    assert max(sizes) - min(sizes) <= max(2, 40 // 8), sizes  # no node took everything


def test_a_dead_nodes_items_go_back_and_its_running_one_is_the_crash(
    pytester: pytest.Pytester,
) -> None:
    sched, nodes, _ = scheduler(pytester, episode_ids(100), 4)
    dead = nodes[0]
    held = list(sched.node2pending[dead])  # type: ignore[index]
    crashed = sched.remove_node(dead)  # type: ignore[arg-type]
    assert crashed == episode_ids(100)[held[0]]
    handed = {i for i in nodes[1].sent} | set(sched.pending)
    assert set(held[1:]) <= handed  # re-run elsewhere


def test_a_stopped_session_takes_the_queued_items_back(pytester: pytest.Pytester) -> None:
    sched, nodes, dsession = scheduler(pytester, episode_ids(200), 4)
    dsession.shouldstop = "stopping after 1 failures"
    node = nodes[0]
    complete(sched, node)
    queued = sched.node2pending[node]  # type: ignore[index]
    assert node.steals == [queued[2:]]  # all but the running and the next item
    assert nodes[1].steals  # every node, not only the one that reported
    complete(sched, node)
    assert len(node.steals) == 1  # one request at a time
    # the worker had already started one of them: it gives nothing back; ask for one less
    sched.remove_pending_tests_from_node(node, [])  # type: ignore[arg-type]
    complete(sched, node)
    assert node.steals[1] == sched.node2pending[node][3:]  # type: ignore[index]
    sched.remove_pending_tests_from_node(node, node.steals[1])  # type: ignore[arg-type]
    assert len(sched.node2pending[node]) == 3  # type: ignore[index]
    assert not set(node.steals[1]) & set(sched.pending)  # never handed out again


def test_a_write_error_takes_the_queued_items_back(pytester: pytest.Pytester) -> None:
    """``RunStop`` (the controller's write error) asks the scheduler at once, C = 1 too."""
    from pytest_openenv.controller.stopping import RunStop, TakesBackQueued

    for c in (1, 4):
        sched, nodes, dsession = scheduler(pytester, episode_ids(200), c)
        assert isinstance(sched, TakesBackQueued)
        nodes[1].gone = True  # a worker that has already exited is skipped, not an error
        stopper = RunStop(sched.config)
        stopper.scheduler = sched
        stopper.stop("openenv: cannot write to results.jsonl: No space left on device")
        assert dsession.shouldstop.startswith("openenv: cannot write")
        queued = sched.node2pending[nodes[0]]  # type: ignore[index]
        assert nodes[0].steals == [queued[2:]], c
        assert sched.pending == [] and not nodes[1].steals
        # the worker had started one: asked again, for one less, at its next completion
        sched.remove_pending_tests_from_node(nodes[0], [])  # type: ignore[arg-type]
        complete(sched, nodes[0])
        assert nodes[0].steals[1] == sched.node2pending[nodes[0]][3:], c  # type: ignore[index]


def test_suites_without_episodes_keep_xdist_s_own_rules(pytester: pytest.Pytester) -> None:
    ids = [f"test_x.py::test_{i}" for i in range(1000)]
    sched, nodes, _ = scheduler(pytester, ids, 16)
    assert not sched.active
    node = nodes[0]
    complete(sched, node, 125 - 2)
    assert len(sched.node2pending[node]) == 2  # type: ignore[index]  # xdist's heuristic


def test_one_episode_in_flight_keeps_xdist_s_own_load_rules(pytester: pytest.Pytester) -> None:
    # --dist load always gets the episode scheduler (it can stop), scheduling as xdist's
    sched, nodes, dsession = scheduler(pytester, episode_ids(1000), 1)
    assert not sched.active
    node = nodes[0]
    complete(sched, node, 125 - 2)
    assert len(sched.node2pending[node]) == 2  # type: ignore[index]  # xdist's heuristic
    dsession.shouldstop = "stopping after 1 failures"
    node.shutting_down = True  # what xdist's shutdown does
    complete(sched, node)
    assert node.steals == []  # -x: xdist's queues are short, xdist's own shutdown ends them


@pytest.mark.parametrize(
    ("args", "concurrency"),
    [
        (["--dist", "worksteal"], 8),
        (["--dist", "loadscope"], 8),
    ],
)
def test_other_runs_get_xdist_s_own_scheduler(
    pytester: pytest.Pytester, args: list[str], concurrency: Any
) -> None:
    config = pytester.parseconfig("--tx", "2*popen", *args)
    assert make_scheduler(config, None, concurrency) is None


def test_auto_schedules_for_its_ceiling(pytester: pytest.Pytester) -> None:
    from pytest_openenv.worker.adaptive import AUTO_CEILING

    config = pytester.parseconfig("--tx", "2*popen", "--dist", "load")
    sched = make_scheduler(config, None, "auto")
    assert isinstance(sched, EpisodeLoadScheduling)
    assert sched.low == WINDOW_FACTOR * AUTO_CEILING
