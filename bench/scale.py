"""A long LLM-shaped run: controller memory, throughput over time, the final sorted file.

    python bench/scale.py [--n 100000] [--workers 2] [--concurrency 64|auto] [--delay 0.05]
                          [--repeat 1] [--baseline-tree DIR]

Starts the benchmarks' OpenAI-compatible server (``tests/servers/lean_openai.py``: one
asyncio thread, the suite server's answers at about a third of its CPU, so the cores go to
the run measured; its thread at ``--server-nice``, default -10, as in ``latency.py``)
with a fixed delay per completion and runs N tic-tac-toe episodes through
``--openenv-llm-endpoint`` with ``-n WORKERS --openenv-concurrency C``, every row
written (``--openenv-min-reward=-1``). The controller probe of ``bench/memory.py``
(``-p``, controller only) records its peak RSS (``VmHWM``, after the final sorted
rewrite of results.jsonl) and CPU; this script adds the time of every episode
report, from which it prints episodes/s in the first and the last 10% of the
reports (target: the last no slower than the first), and checks results.jsonl
line by line: N rows, sorted by episode id. CPU seconds per episode (the pytest
processes, and the model server in this process) say whether the run was
CPU-bound: the machine's cores, not the latency bound, then set the pace. It also prints
the episodes/s of each tenth, and the controller's end of session: from the last episode
report to the process's exit, with the time to each stage (sessionfinish, the terminal
summary, unconfigure, the last plugin's unconfigure, exit). ``--baseline-tree DIR`` (a
checkout of the package) runs each round once more with that tree first on the path.
"""

from __future__ import annotations

import argparse
import array
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from benchenv import PYTEST_QUIET, serve_first, user_env  # noqa: E402
from memory import PROBE  # noqa: E402
from servers.fake_model import listen_drops  # noqa: E402
from servers.lean_openai import serve_lean  # noqa: E402

#: the memory probe, plus the time of each episode report (8 bytes each, in the controller)
SCALE_PROBE = (
    PROBE
    + """

import array as _array

import pytest as _pytest

_report_times = _array.array("d")
#: the controller's CPU seconds at each report: a cost per episode that grows with the rows
#: written shows here whatever else the machine runs
_report_cpu = _array.array("d")
_memory_logreport = pytest_runtest_logreport
_memory_unconfigure = pytest_unconfigure
#: when the end of the session reached each stage (perf_counter: the system's monotonic clock)
_end_marks = {}


def _mark(name):
    _end_marks[name] = (time.perf_counter(), time.process_time())


def pytest_runtest_logreport(report):
    _memory_logreport(report)
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _report_times.append(time.perf_counter())
        _report_cpu.append(time.process_time())
        _mark("last_report")


@_pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if not _controller(config):
        return
    # the plugin's own end of session (files, report, card), timed apart from the rest
    from pytest_openenv.controller.finish import SessionEnd

    inner = SessionEnd.finish

    def finish(self, exitstatus):
        _mark("files")
        try:
            return inner(self, exitstatus)
        finally:
            _mark("files_written")

    SessionEnd.finish = finish


@_pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    _mark("sessionfinish")


@_pytest.hookimpl(tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    _mark("terminal_summary")


@_pytest.hookimpl(tryfirst=True, specname="pytest_unconfigure")
def pytest_unconfigure_first(config):
    _mark("unconfigure")


@_pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):  # the last unconfigure: after every plugin's
    _mark("unconfigured")
    _memory_unconfigure(config)
    if _controller(config):
        with open(os.environ["SCALE_TIMES_OUT"], "wb") as out:
            _report_times.tofile(out)
        with open(os.environ["SCALE_TIMES_OUT"] + ".cpu", "wb") as out:
            _report_cpu.tofile(out)
        with open(os.environ["SCALE_TIMES_OUT"] + ".end.json", "w") as out:
            json.dump(_end_marks, out)
"""
)


def rate(times: array.array[float], start: int, stop: int) -> float:
    """Episodes per second over reports start..stop-1."""
    span = times[stop - 1] - times[start]
    return (stop - start - 1) / span if span > 0 else float("inf")


def check_sorted(path: Path) -> tuple[int, bool]:
    """Rows and whether their episode ids ascend, reading one line at a time."""
    rows, ordered, last = 0, True, ""
    with path.open("rb") as handle:
        for line in handle:
            episode_id = json.loads(line)["episode_id"]
            ordered = ordered and episode_id >= last
            last = episode_id
            rows += 1
    return rows, ordered


def one_run(args: argparse.Namespace, tree: str | None) -> list[str]:
    """One run of N episodes (``tree``: a package checkout first on the path); its lines."""
    n = args.n
    with (
        tempfile.TemporaryDirectory() as probe_dir,
        tempfile.TemporaryDirectory() as folder,
        serve_lean(delay=args.delay) as server,
    ):
        serve_first(server, args.server_nice)
        (Path(probe_dir) / "openenv_memory_probe.py").write_text(SCALE_PROBE)
        figures_path, times_path = Path(folder) / "probe.json", Path(folder) / "times.bin"
        env = user_env("OPENAI_", "ANTHROPIC_")
        env.update(
            MEMORY_PROBE_OUT=str(figures_path),
            SCALE_TIMES_OUT=str(times_path),
            PYTHONPATH=os.pathsep.join(filter(None, [probe_dir, tree, env.get("PYTHONPATH")])),
        )
        command = [
            *PYTEST_QUIET,
            "-p",
            "openenv_memory_probe",
            "-n",
            str(args.workers),
            "--openenv-env=openspiel:tic_tac_toe",
            f"--openenv-n={n}",
            "--openenv-min-reward=-1",
            f"--openenv-llm-endpoint={server.base_url}",
            "--openenv-model=bench-model",
            f"--openenv-concurrency={args.concurrency}",
        ]
        self_cpu = resource.getrusage(resource.RUSAGE_SELF)
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        drops_before = listen_drops()
        started = time.perf_counter()
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        drops_after = listen_drops()
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        server_cpu = resource.getrusage(resource.RUSAGE_SELF)
        if done.returncode != 0 or not figures_path.exists():
            sys.exit(
                f"pytest exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
            )
        figures = json.loads(figures_path.read_text())
        times: array.array[float] = array.array("d")
        times.frombytes(times_path.read_bytes())
        report_cpu: array.array[float] = array.array("d")
        report_cpu.frombytes(Path(str(times_path) + ".cpu").read_bytes())
        exited = started + wall
        end_marks = json.loads(Path(str(times_path) + ".end.json").read_text())
        rows, ordered = check_sorted(Path(folder) / "openenv-results" / "results.jsonl")
        completions = server.requests
    tenth = max(2, len(times) // 10)
    first, last = rate(times, 0, tenth), rate(times, len(times) - tenth, len(times))
    pytest_cpu = (children.ru_utime + children.ru_stime) - (
        children_before.ru_utime + children_before.ru_stime
    )
    model_cpu = (server_cpu.ru_utime + server_cpu.ru_stime) - (
        self_cpu.ru_utime + self_cpu.ru_stime
    )
    bound = completions * args.delay / (max(1, args.workers) * _ceiling(args.concurrency))
    lines = [
        f"wall {wall:.1f} s; latency bound {bound:.1f} s ({completions} completions); "
        f"share of bound {bound / wall:.0%}; load average {os.getloadavg()[0]:.1f}"
    ]
    dropped = (
        "unknown" if drops_before is None or drops_after is None else drops_after - drops_before
    )
    lines.append(f"connection attempts the server's listen queue dropped: {dropped} (target 0)")
    lines.append(
        f"controller peak RSS {figures['peak_kb'] / 1024:.1f} MB (while episodes ran "
        f"{figures['run_rss_kb'] / 1024:.1f} MB), controller CPU "
        f"{1000 * figures['cpu_s'] / n:.2f} ms/episode"
    )
    lines.append(
        f"CPU per episode: pytest processes {1000 * pytest_cpu / n:.2f} ms, model server "
        f"{1000 * model_cpu / n:.2f} ms; {os.cpu_count()} cores allow at most "
        f"{(os.cpu_count() or 1) / ((pytest_cpu + model_cpu) / n):.0f} episodes/s"
    )
    lines.append(
        f"episodes/s: first 10% {first:.1f}, last 10% {last:.1f}, ratio {last / first:.2f} "
        f"(target >= 1.0, flat): {'ok' if last >= first else 'MISSED'}"
    )
    tenths = [rate(times, i * tenth, min(len(times), (i + 1) * tenth)) for i in range(10)]
    lines.append("episodes/s in each tenth of the reports: " + " ".join(f"{r:.0f}" for r in tenths))
    cpu_tenths = [
        1000
        * (report_cpu[min(len(times), (i + 1) * tenth) - 1] - report_cpu[i * tenth])
        / max(1, min(len(times), (i + 1) * tenth) - 1 - i * tenth)
        for i in range(10)
    ]
    lines.append(
        "controller CPU ms per episode in each tenth (flat: no cost grows with the rows "
        "written): " + " ".join(f"{c:.2f}" for c in cpu_tenths)
    )
    last_report, last_cpu = end_marks["last_report"]
    stages = [
        ("sessionfinish", end_marks["sessionfinish"][0]),
        ("the plugin's files", end_marks["files"][0]),
        ("files written", end_marks["files_written"][0]),
        ("terminal summary", end_marks["terminal_summary"][0]),
        ("unconfigure", end_marks["unconfigure"][0]),
        ("unconfigured", end_marks["unconfigured"][0]),
        ("process exit", exited),
    ]
    steps, previous = [], last_report
    for name, at in stages:
        steps.append(f"{name} +{at - previous:.3f}")
        previous = at
    end = exited - last_report
    files = end_marks["files_written"][1] - end_marks["files"][1]
    cpu = end_marks["unconfigured"][1] - last_cpu
    lines.append(
        f"controller's end of session, last episode report -> process exit: {end:.2f} s "
        f"(target < 0.3 s): {'ok' if end < 0.3 else 'MISSED'}; " + ", ".join(steps)
    )
    lines.append(
        f"  its CPU from the last report to the last unconfigure {cpu:.3f} s, of which the "
        f"plugin's files (rows sorted, summary, report.html, card) {files:.3f} s"
    )
    lines.append(
        f"results.jsonl: {rows} rows, sorted by episode id: {ordered} "
        f"({'ok' if rows == n and ordered else 'MISSED'})"
    )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", default="64")
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--baseline-tree", help="a package checkout to compare with, runs interleaved"
    )
    parser.add_argument(
        "--server-nice",
        type=int,
        default=-10,
        help="niceness of the model server's thread (default -10: served before the run's "
        "processes, as an endpoint on other machines would answer; 0 leaves it as it is)",
    )
    args = parser.parse_args()
    trees: list[tuple[str, str | None]] = [("this tree", None)]
    if args.baseline_tree:
        trees.append((f"base {args.baseline_tree}", str(Path(args.baseline_tree).resolve())))
    print(
        f"{args.n} tic-tac-toe episodes, {args.delay * 1000:g} ms per completion, "
        f"-n {args.workers}, --openenv-concurrency={args.concurrency}, {os.cpu_count()} CPUs, "
        f"model server at niceness {args.server_nice}"
    )
    for round_ in range(args.repeat):
        for label, tree in trees:
            lines = one_run(args, tree)
            print(f"-- round {round_}, {label}")
            for line in lines:
                print("   " + line, flush=True)


def _ceiling(concurrency: str) -> int:
    from pytest_openenv.worker.adaptive import concurrency_ceiling

    return concurrency_ceiling(concurrency if concurrency == "auto" else int(concurrency))


if __name__ == "__main__":
    main()
