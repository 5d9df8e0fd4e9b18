"""Three env servers, one killed mid-run: what is lost, what errors, how episodes spread.

    python bench/servers.py [--n 300] [--concurrency 4] [--step-delay 0.05] [--workers 0 2]

Starts three real OpenEnv tic-tac-toe servers (``tests/servers/openenv_servers.py``, each
its own process on 127.0.0.1, every step slowed by ``--step-delay`` so episodes overlap),
then for each ``-n`` value runs the expert teacher over N episodes on all three with
``--openenv-concurrency C`` twice: once undisturbed (the baseline), once with the third
server killed (SIGKILL, as a crashed container) after a third of the episodes are reported.
Fresh servers for every run.

Printed per run: rows written (results + failures; target: N, each id once), errors and,
for each, whether it was an episode in flight on the dead server (its session on that
server dropped mid-request) rather than one sent there after it died, the sessions open on
the dead server when it died (server-side TCP connections, from /proc/net/tcp), wall time
and its ratio to the baseline, and the split of episodes over the servers.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchenv import PYTEST_QUIET, user_env

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

ENV = "openspiel:tic_tac_toe"

#: the killer: a plugin on the controller (it sees every report, with or without xdist)
KILL_CONFTEST = '''
import os
import signal
from pathlib import Path


def open_connections(port):
    """Established TCP connections whose local end is ``port``: the server's sessions."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":
                count += 1
    return count


class KillAfter:
    reports = 0

    def pytest_runtest_logreport(self, report):
        if report.when != "call":
            return
        self.reports += 1
        if self.reports == int(os.environ["KILL_AFTER"]):
            Path("open_at_kill").write_text(str(open_connections(int(os.environ["KILL_PORT"]))))
            os.kill(int(os.environ["KILL_PID"]), signal.SIGKILL)


def pytest_configure(config):
    if os.environ.get("KILL_PID") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(KillAfter(), "kill-after")
'''


def read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def one_run(args: argparse.Namespace, workers: int, kill: bool) -> dict[str, Any]:
    from servers.openenv_servers import ServerProcess

    servers = [ServerProcess("tictactoe", step_delay=args.step_delay) for _ in range(3)]
    dead = servers[2]
    try:
        with tempfile.TemporaryDirectory(prefix="bench-servers-") as tmp:
            folder = Path(tmp)
            (folder / "conftest.py").write_text(KILL_CONFTEST)
            env = user_env("PYTEST_", "OPENAI_", "ANTHROPIC_", "HF_")
            if kill:
                env.update(
                    KILL_PID=str(dead.process.pid),
                    KILL_PORT=str(dead.port),
                    KILL_AFTER=str(max(1, args.n // 3)),
                )
            command = [
                *PYTEST_QUIET,
                f"--openenv-env={ENV}",
                f"--openenv-n={args.n}",
                "--openenv-policy=expert",
                *(f"--openenv-server={s.url}" for s in servers),
                f"--openenv-concurrency={args.concurrency}",
                f"--openenv-output={folder / 'out'}",
                "-n",
                str(workers),
            ]
            started = time.perf_counter()
            finished = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - started
            results = read_rows(folder / "out" / "results.jsonl")
            failures = read_rows(folder / "out" / "failures.jsonl")
            open_at_kill = folder / "open_at_kill"
            sessions_at_kill = int(open_at_kill.read_text()) if open_at_kill.exists() else None
    finally:
        killed = dead.process.poll() is not None
        for server in servers:
            server.stop()
    ids = [row["episode_id"] for row in results + failures]
    errors = [row for row in failures if row["failure"]["outcome"] == "error"]
    rows = results + [row for row in failures if row not in errors]
    names = {s.url: f"server{i + 1}" for i, s in enumerate(servers)}
    return {
        "workers": workers,
        "killed": killed,
        "exit": finished.returncode,
        "tail": finished.stdout[-1500:] + finished.stderr[-1500:],
        "written": len(ids),
        "unique": len(set(ids)) == len(ids) == args.n,
        "passed": len(results),
        "errors": [
            {
                "id": row["episode_id"],
                # in flight on the dead server: its open session there broke mid-request
                "in_flight_on_dead": dead.url in row["failure"]["message"]
                and "cannot open a session" not in row["failure"]["message"]
                and "no --openenv-server is in rotation" not in row["failure"]["message"],
                "message": row["failure"]["message"][-160:],
            }
            for row in errors
        ],
        "sessions_at_kill": sessions_at_kill,
        "wall": wall,
        "split": dict(
            sorted(collections.Counter(names[row["extra"]["server"]] for row in rows).items())
        ),
    }


def show(run: dict[str, Any], baseline: float | None, n: int) -> None:
    label = "kill server3" if run["killed"] else "undisturbed"
    ratio = f" ({run['wall'] / baseline:.2f}x baseline)" if baseline else ""
    print(f"  -n {run['workers']} {label}: exit {run['exit']}, wall {run['wall']:.1f}s{ratio}")
    print(
        f"    rows written {run['written']}/{n}, each id once: {run['unique']}; "
        f"passed {run['passed']}, errors {len(run['errors'])}"
    )
    if run["killed"]:
        on_dead = sum(e["in_flight_on_dead"] for e in run["errors"])
        print(
            f"    sessions open on server3 when it died: {run['sessions_at_kill']}; "
            f"errors that were in flight on it: {on_dead}/{len(run['errors'])}"
        )
        for error in run["errors"]:
            print(f"      {error['id']} in flight on dead: {error['in_flight_on_dead']}")
            if not error["in_flight_on_dead"]:
                print(f"        {error['message']}")
    print(f"    episodes per server: {run['split']}")
    if run["written"] != n:
        print(run["tail"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--step-delay", type=float, default=0.05)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    args = parser.parse_args()
    print(
        f"{args.n} expert tic-tac-toe episodes on 3 OpenEnv servers (step delay "
        f"{args.step_delay:g}s), --openenv-concurrency {args.concurrency}; "
        f"server3 killed after {max(1, args.n // 3)} reports; {os.cpu_count()} cores"
    )
    for workers in args.workers:
        baseline = one_run(args, workers, kill=False)
        show(baseline, None, args.n)
        show(one_run(args, workers, kill=True), baseline["wall"], args.n)


if __name__ == "__main__":
    main()
