"""Plugin overhead per episode item vs pytest's own per-item cost, measured in one run.

    python bench/overhead.py [--n 2000] [--repeat 3] [--tty] [--episode-arg=ARG ...]

``--tty`` runs every pytest on a pseudo-terminal (where the live status line is drawn in
place); ``--episode-arg`` adds a flag to B, e.g. ``--episode-arg=--openenv-progress=off``
to compare the status line on and off.

Runs, in fresh empty folders and with identical pytest flags:
  A. N trivial parametrized tests (pytest's own per-item cost), with the plugin set of B:
     the bundled episode run unloads syrupy and hypothesis (nothing of theirs runs there),
     so A runs with ``-p no:syrupy -p no:hypothesispytest`` too (``--trivial-plugins=all``
     keeps them in A, the comparison a user's suite sees);
  B. N built-in episode items (scripted policy on embedded tic-tac-toe, files written);
and prints both wall times (best of --repeat) and the ratio B/A (target <= 1.5), the
median of the per-repeat ratios (each repeat runs A and B back to back, so slow drift of a
shared machine cancels out of it), and each repeat's ratio of the two runs' CPU seconds
(start-up included), which other load on the machine moves less than wall time.
Then measures the import cost of the plugin module when no option is given
(``python -X importtime``, target < 50 ms).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchenv import user_env

FLAGS = ["-q", "-p", "no:cacheprovider", "--tb=no", "-o", "console_output_style=classic"]
#: what the bundled episode run leaves out by itself (``plugin.py``): A leaves them out too
BUNDLED_RUN_UNLOADS = ["-p", "no:syrupy", "-p", "no:hypothesispytest"]
ENV = user_env()


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(args: list[str], cwd: Path, tty: bool = False) -> tuple[float, float]:
    """Wall seconds and the pytest process's CPU seconds (less moved by other load)."""
    cpu = children_cpu()
    wall = timed_wall(args, cwd, tty)
    return wall, children_cpu() - cpu


def timed_wall(args: list[str], cwd: Path, tty: bool = False) -> float:
    if tty:
        return timed_on_a_terminal(args, cwd)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", *FLAGS, *args],
        cwd=cwd,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - start


def timed_on_a_terminal(args: list[str], cwd: Path) -> float:
    """The same run with stdout on a pseudo-terminal (read and dropped as it comes)."""
    import os
    import pty
    import threading

    master, slave = pty.openpty()

    def drain() -> None:
        with contextlib.suppress(OSError):
            while os.read(master, 65536):
                pass

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pytest", *FLAGS, *args],
        cwd=cwd,
        env={**ENV, "TERM": "xterm", "COLUMNS": "120"},
        stdout=slave,
        stderr=slave,
        check=False,
    )
    elapsed = time.perf_counter() - start
    os.close(slave)
    reader.join(timeout=5)
    os.close(master)
    return elapsed


def trivial_suite(folder: Path, n: int) -> None:
    (folder / "test_trivial.py").write_text(
        "import pytest\n\n"
        f"@pytest.mark.parametrize('i', range({n}))\n"
        "def test_item(i):\n    assert i >= 0\n"
    )


def import_cost_ms() -> float:
    """Cumulative import time of pytest_openenv.plugin once pytest itself is loaded."""
    code = "import pytest, _pytest.pytester; import pytest_openenv.plugin"
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=ENV,
    ).stderr
    best = None
    for line in out.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|\s+(\s*)pytest_openenv\.plugin$", line)
        if match:
            best = int(match.group(2)) / 1000
    if best is None:
        raise SystemExit("could not find pytest_openenv.plugin in -X importtime output")
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tty", action="store_true", help="run pytest on a pseudo-terminal")
    parser.add_argument("--episode-arg", action="append", default=[], help="a flag for B")
    parser.add_argument(
        "--trivial-plugins",
        choices=("same", "all"),
        default="same",
        help="same: A unloads what B unloads (like with like); all: A keeps every plugin",
    )
    args = parser.parse_args()
    unloads = BUNDLED_RUN_UNLOADS if args.trivial_plugins == "same" else []
    trivial_runs: list[tuple[float, float]] = []
    episode_runs: list[tuple[float, float]] = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            trivial_suite(Path(a), args.n)
            trivial_runs.append(timed([*unloads, "test_trivial.py"], Path(a), args.tty))
            run = [
                "--openenv-env=openspiel:tic_tac_toe",
                "--openenv-policy=scripted",
                f"--openenv-n={args.n}",
            ]
            episode_runs.append(timed([*run, *args.episode_arg], Path(b), args.tty))
    trivial = [wall for wall, _ in trivial_runs]
    episodes = [wall for wall, _ in episode_runs]
    t, e = min(trivial), min(episodes)
    print(
        f"N={args.n} items, best of {args.repeat}, flags: {' '.join(FLAGS)}"
        + (" (on a pseudo-terminal)" if args.tty else "")
        + (f", episode flags: {' '.join(args.episode_arg)}" if args.episode_arg else "")
    )
    print(f"  trivial tests plugin flags : {' '.join(unloads) or '(every plugin installed)'}")
    print(f"  trivial parametrized tests : {t:7.2f} s  ({1000 * t / args.n:.3f} ms/item)")
    print(f"  openenv episode items      : {e:7.2f} s  ({1000 * e / args.n:.3f} ms/item)")
    print(f"  ratio episodes/trivial     : {e / t:7.2f}   (target <= 1.5)")
    paired = statistics.median(b / a for a, b in zip(trivial, episodes, strict=True))
    print(f"  median of paired ratios    : {paired:7.2f}   (each repeat: A then B)")
    print(
        "  every repeat (trivial, episodes): "
        + ", ".join(f"({a:.2f}, {b:.2f})" for a, b in zip(trivial, episodes, strict=True))
    )
    cpu = " ".join(
        f"{b / a:.2f}" for (_, a), (_, b) in zip(trivial_runs, episode_runs, strict=True)
    )
    print(f"  CPU ratio, every repeat    : {cpu}   (the processes' CPU, less moved by load)")
    costs = sorted(import_cost_ms() for _ in range(5))
    print(f"plugin import (no options), median of 5: {costs[2]:.1f} ms  (target < 50 ms)")


if __name__ == "__main__":
    main()
