"""Workers that are not local popen children: execnet socket servers, each in its own folder.

This is how xdist reaches other machines (``--tx ssh=...`` and ``--tx socket=...``
differ only in transport): the controller writes the one results.jsonl, the
workers write nothing where they run, and resume works although they do not
see the controller's disk.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import execnet
import pytest
from faults import ENV, Launcher, read_rows
from helpers import SCRIPTED
from servers.openenv_servers import serve_in_thread

N = 16
SOCKET_SERVER = Path(execnet.__file__).parent / "script" / "socketserver.py"


class SocketServer:
    """execnet's own socket exec server, on an ephemeral 127.0.0.1 port, in ``folder``."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir()
        self.folder = folder
        self.proc = subprocess.Popen(
            [sys.executable, "-u", str(SOCKET_SERVER), "127.0.0.1:0"],
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        first: list[bytes] = []
        reader = threading.Thread(target=lambda: first.append(self.proc.stdout.readline()))
        reader.start()
        reader.join(30)
        match = re.search(rb"\('127\.0\.0\.1', (\d+)\)", first[0] if first else b"")
        assert match, f"socket server did not start: {first}"
        self.port = int(match.group(1))
        # keep draining its chatter so a full pipe never blocks it
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def socket_servers(tmp_path: Path) -> Iterator[list[SocketServer]]:
    servers: list[SocketServer] = []
    try:
        for name in ("host-a", "host-b"):
            servers.append(SocketServer(tmp_path / name))
        yield servers
    finally:
        for server in servers:
            server.stop()


@pytest.mark.slow
def test_socket_gateways_write_one_dataset_on_the_controller(
    launcher: Launcher, socket_servers: list[SocketServer]
) -> None:
    tx = [arg for s in socket_servers for arg in ("--tx", f"socket=127.0.0.1:{s.port}")]
    args = ("--dist", "load", *tx, f"--openenv-env={ENV}", f"--openenv-n={N}", "-v", SCRIPTED)
    finished = launcher.run(*args)
    assert finished.returncode == 1, finished.stdout[-3000:]  # the losing seeds fail

    # both gateways ran episodes, each in its server's own folder (xdist ships pytest
    # into the gateway's working dir, pyexecnetcache, for workers on other hosts)
    for gw in ("gw0", "gw1"):
        ran = re.findall(rf"\[{gw}\] \[\s*\d+%\] (?:PASSED|FAILED)", finished.stdout)
        assert ran, f"{gw} ran no episode"
    for server in socket_servers:
        assert (server.folder / "pyexecnetcache" / "pytest").is_dir()
        assert not list(server.folder.rglob("*.jsonl")), "a worker wrote a dataset file"
        assert not list(server.folder.rglob("openenv-results")), "a worker made an output dir"

    results = read_rows(launcher.output / "results.jsonl")
    failures = read_rows(launcher.output / "failures.jsonl")
    ids = [row["episode_id"] for row in results]
    assert ids == sorted(set(ids))
    assert sorted(ids + [row["episode_id"] for row in failures]) == [
        f"ep-{i:06d}" for i in range(N)
    ]
    assert all(row["test"].startswith("openenv::test_episode[") for row in results)

    # resume through the same remote workers: they learn the done set from the controller
    resumed = launcher.run(*args, "--openenv-resume")
    assert resumed.returncode == 1  # the failed episodes it keeps fail the run as before
    kept = sum(1 for row in failures if row["failure"]["outcome"] == "failed")
    assert f"{len(results) + kept} skipped" in resumed.stdout
    again = read_rows(launcher.output / "results.jsonl")
    assert [row["episode_id"] for row in again] == ids


@pytest.mark.slow
def test_socket_gateways_share_env_servers_within_workers_times_concurrency(
    launcher: Launcher, socket_servers: list[SocketServer]
) -> None:
    """Two machines (gateways), two env servers, C episodes in flight per worker."""
    n, concurrency = 24, 2
    tx = [arg for s in socket_servers for arg in ("--tx", f"socket=127.0.0.1:{s.port}")]
    with (
        serve_in_thread("tictactoe", step_delay=0.05) as first,
        serve_in_thread("tictactoe", step_delay=0.05) as second,
    ):
        finished = launcher.run(
            "--dist",
            "load",
            *tx,
            f"--openenv-env={ENV}",
            f"--openenv-n={n}",
            "--openenv-policy=expert",
            f"--openenv-server={first.url}",
            f"--openenv-server={second.url}",
            f"--openenv-concurrency={concurrency}",
            "-v",
        )
        peaks = [server.stats()["peak_sessions"] for server in (first, second)]
    assert finished.returncode == 0, finished.stdout[-3000:]  # the expert never loses
    for gw in ("gw0", "gw1"):
        assert re.search(rf"\[{gw}\] \[\s*\d+%\] PASSED", finished.stdout), f"{gw} ran nothing"
    results = read_rows(launcher.output / "results.jsonl")
    assert [row["episode_id"] for row in results] == [f"ep-{i:06d}" for i in range(n)]
    used = [row["extra"]["server"] for row in results]
    assert used.count(first.url) and used.count(second.url), used
    # sessions open at once on a server: never more than workers x concurrency (the
    # controller keeps no session of its own), and more than one worker's worth overall
    assert max(peaks) <= len(socket_servers) * concurrency, peaks
    assert sum(peaks) > concurrency, peaks
