"""How soon an xdist worker asks the model: from its process start to its first request.

    python bench/startup.py [--n 200] [--concurrency 16] [--repeat 3] [--baseline-tree DIR]

Runs ``-n 2`` tic-tac-toe episodes through ``--openenv-llm-endpoint`` (the loopback test
server, 50 ms per completion) with ``--openenv-llm-client=http`` (the default for an
endpoint) and ``=sdk``, rounds interleaved. A probe plugin in each worker notes its process
start (``/proc/self/stat``), its ``pytest_configure`` and its first model request (the
policy's ``_complete``), all on the monotonic clock, the CPU it had used by then (a busy
machine stretches the wall time, hardly the CPU), and whether ``openai`` was imported.
Every worker of every repeat is printed. ``--baseline-tree DIR`` (a checkout of the
package, e.g. ``git worktree add /tmp/base main``) runs each round once more with that
tree first on the path, interleaved, so old and new code are compared in one run.
Target: the first request within 1 s of the worker's start.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from benchenv import PYTEST_QUIET, user_env  # noqa: E402
from servers.openai_compat import serve_openai  # noqa: E402

PROBE = """
import json, os, sys, time

_seen = {}


def _process_start():
    # field 22 of /proc/self/stat: clock ticks since boot, the monotonic clock's origin
    fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")


def pytest_configure(config):
    if not hasattr(config, "workerinput"):
        return
    _seen["configure"] = time.monotonic()
    from pytest_openenv.policies.llm import openai_chat

    for cls in (openai_chat.OpenAIPolicy, openai_chat.OpenAIHTTPPolicy):
        inner = cls.__dict__["_complete"]

        def first(self, client, turn, timeout, _inner=inner):
            if "first_request" not in _seen:
                _seen.update(first_request=time.monotonic(), first_cpu=time.process_time())
            return _inner(self, client, turn, timeout)

        cls._complete = first


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        return
    _seen.update(start=_process_start(), openai="openai" in sys.modules)
    name = config.workerinput["workerid"]
    with open(os.path.join(os.environ["STARTUP_OUT"], name + ".json"), "w") as out:
        json.dump(_seen, out)
"""


def one_run(client: str, n: int, c: int, tree: str | None = None) -> list[dict[str, float]]:
    with (
        serve_openai(delay=0.05) as server,
        tempfile.TemporaryDirectory() as folder,
        tempfile.TemporaryDirectory() as probe,
    ):
        (Path(probe) / "startup_probe.py").write_text(PROBE)
        env = user_env("OPENAI_", "ANTHROPIC_")
        env.update(
            STARTUP_OUT=probe,
            PYTHONPATH=os.pathsep.join(filter(None, [probe, tree, env.get("PYTHONPATH")])),
        )
        command = [
            *PYTEST_QUIET,
            "-p",
            "startup_probe",
            "-n",
            "2",
            "--openenv-env=openspiel:tic_tac_toe",
            f"--openenv-n={n}",
            f"--openenv-llm-endpoint={server.base_url}",
            "--openenv-model=bench-model",
            f"--openenv-concurrency={c}",
            f"--openenv-llm-client={client}",
        ]
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
        if done.returncode not in (0, 1):
            sys.exit(
                f"pytest exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-2000:]}"
            )
        return [json.loads(path.read_text()) for path in sorted(Path(probe).glob("gw*.json"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--baseline-tree", help="a package checkout to compare with, rounds interleaved"
    )
    parser.add_argument(
        "--clients", default="http,sdk", help="comma-separated --openenv-llm-client values"
    )
    args = parser.parse_args()
    trees: list[tuple[str, str | None]] = [("this", None)]
    if args.baseline_tree:
        trees.append(("base", str(Path(args.baseline_tree).resolve())))
    clients = args.clients.split(",")
    rows = []
    for round_ in range(args.repeat):
        for client in clients:
            for tree, path in trees:
                for worker in one_run(client, args.n, args.concurrency, path):
                    rows.append((round_, client, tree, worker))
    print(
        f"-n 2, {args.n} episodes, --openenv-concurrency={args.concurrency}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
        + (f"; base = {args.baseline_tree}" if args.baseline_tree else "")
    )
    print(
        f"{'round':>5} {'client':<6} {'tree':<5} {'start->configure s':>18} "
        f"{'start->1st request s':>20} {'CPU s by then':>13} openai imported"
    )
    firsts: dict[tuple[str, str], list[float]] = {}
    for round_, client, tree, w in rows:
        first = w.get("first_request")
        took = first - w["start"] if first is not None else float("nan")
        firsts.setdefault((client, tree), []).append(took)
        print(
            f"{round_:>5} {client:<6} {tree:<5} {w['configure'] - w['start']:>18.2f} "
            f"{took:>20.2f} {w.get('first_cpu', float('nan')):>13.2f} {w['openai']}"
        )
    for (client, tree), values in firsts.items():
        worst, middle = max(values), sorted(values)[len(values) // 2]
        print(
            f"{client} ({tree}): median worker's first request {middle:.2f} s after its start, "
            f"slowest {worst:.2f} s (target <= 1 s): {'ok' if worst <= 1.0 else 'MISSED'}"
        )


if __name__ == "__main__":
    main()
