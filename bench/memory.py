"""Controller memory and per-episode cost at 2,000 vs 20,000 episodes, measured in one run.

    python bench/memory.py [--small 2000] [--large 20000] [--workers 4]

Runs the bundled episode test (scripted teacher on embedded tic-tac-toe, files
written) with ``-n WORKERS`` at both sizes, in fresh folders with identical flags.
A probe plugin (``-p``, controller process only) records:
  * the controller's peak RSS (``VmHWM`` from /proc, = ``ru_maxrss``) at session end,
    after the final sorted rewrite of results.jsonl;
  * the wall time from the first to the last episode report (steady state, without
    startup and collection) and the controller's CPU seconds.
Prints both peaks and their difference (target: growth < 100 MB), and per-episode
costs at both sizes (target: they do not rise with N).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAGS = ["-q", "-p", "no:cacheprovider", "--tb=no", "-o", "console_output_style=classic"]

PROBE = '''
"""Controller-only probe: peak RSS and report timing, written as JSON at the very end."""
import json
import os
import resource
import time

_first = _last = None
_reports = 0
_run_rss_kb = 0


def _status_kb(*keys):
    found = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            key, _, value = line.partition(":")
            if key in keys:
                found[key] = int(value.split()[0])
    return found


def _controller(config):
    return not hasattr(config, "workerinput")


def pytest_runtest_logreport(report):
    global _first, _last, _reports
    if report.when == "call" or (report.when == "setup" and not report.passed):
        now = time.perf_counter()
        _first = _first if _first is not None else now
        _last = now
        _reports += 1
        if _reports % 500 == 0:
            global _run_rss_kb
            _run_rss_kb = max(_run_rss_kb, _status_kb("VmRSS")["VmRSS"])


def pytest_unconfigure(config):
    if not _controller(config):
        return
    status = _status_kb("VmHWM", "VmRSS")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["MEMORY_PROBE_OUT"], "w") as out:
        json.dump({
            "peak_kb": status.get("VmHWM", usage.ru_maxrss),
            "rss_kb": status.get("VmRSS"),
            "run_rss_kb": _run_rss_kb,
            "ru_maxrss_kb": usage.ru_maxrss,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "episodes": _reports,
            "steady_s": (_last - _first) if _reports > 1 else None,
        }, out)
'''


def measure(n: int, workers: int, probe_dir: Path) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "probe.json"
        env = {
            **os.environ,
            "MEMORY_PROBE_OUT": str(out),
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(probe_dir), os.environ.get("PYTHONPATH")])
            ),
        }
        command = [
            sys.executable,
            "-m",
            "pytest",
            *FLAGS,
            "-p",
            "openenv_memory_probe",
            "-n",
            str(workers),
            "--openenv-env=openspiel:tic_tac_toe",
            f"--openenv-n={n}",
            # every episode passes, so all N rows go through the writer and the final rewrite
            "--openenv-min-reward=-1",
        ]
        start = time.perf_counter()
        done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0 or not out.exists():
            sys.exit(
                f"pytest failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
            )
        figures = json.loads(out.read_text())
        rows = (Path(folder) / "openenv-results" / "results.jsonl").read_bytes().count(b"\n")
        if rows != n or figures["episodes"] != n:
            sys.exit(f"expected {n} rows and reports, got {rows} rows, {figures['episodes']}")
        figures["wall_s"] = wall
        return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--large", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as probe_dir:
        (Path(probe_dir) / "openenv_memory_probe.py").write_text(PROBE)
        small = measure(args.small, args.workers, Path(probe_dir))
        large = measure(args.large, args.workers, Path(probe_dir))

    def mb(kb: float) -> float:
        return kb / 1024

    growth = mb(large["peak_kb"] - small["peak_kb"])
    print(f"scripted tic-tac-toe episodes, -n {args.workers}, every row written")
    print("controller process memory:")
    for fig, n in ((small, args.small), (large, args.large)):
        print(
            f"  N={n:>6}: peak RSS {mb(fig['peak_kb']):6.1f} MB "
            f"(highest sampled while episodes ran {mb(fig['run_rss_kb']):6.1f} MB, "
            f"at exit {mb(fig['rss_kb']):6.1f} MB)"
        )
    print(f"  peak RSS growth {args.small} -> {args.large}: {growth:+.1f} MB  (target < 100 MB)")
    print("per-episode cost:")
    for fig, n in ((small, args.small), (large, args.large)):
        print(
            f"  N={n:>6}: wall {fig['wall_s']:6.1f} s, {1000 * fig['wall_s'] / n:5.2f} ms/episode; "
            f"first-to-last report {1000 * fig['steady_s'] / n:5.2f} ms/episode, "
            f"controller CPU {1000 * fig['cpu_s'] / n:5.2f} ms/episode"
        )

    def ratio(key: str) -> float:
        return (large[key] / args.large) / (small[key] / args.small)

    print(
        f"  ratio large/small: overall {ratio('wall_s'):.2f}, first-to-last "
        f"{ratio('steady_s'):.2f}, controller CPU {ratio('cpu_s'):.2f}  (no rise with N: <= ~1)"
    )


if __name__ == "__main__":
    main()
