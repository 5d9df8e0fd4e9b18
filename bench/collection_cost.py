"""What one collected episode item costs: peak RSS and wall time of ``--collect-only``.

    python bench/collection_cost.py [--small 1000] [--large 100000]

Collects the bundled episode test (embedded tic-tac-toe, nothing runs) at both sizes
in a fresh pytest process each, and prints the peak RSS of each process, the extra
memory and time per item (large minus small, over the item difference), and what
``MAX_ITEMS`` items therefore cost per pytest process (the controller and every xdist
worker collect them all). ``--openenv-n`` x ``--openenv-repeats`` is refused above
``MAX_ITEMS`` (pytest_openenv/config/options.py) for this reason.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_openenv.config.convert import MAX_ITEMS


def collect(n: int) -> tuple[float, float]:
    """(peak RSS in MB, wall seconds) of one ``--collect-only`` run of n items."""
    with tempfile.TemporaryDirectory() as folder:
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--collect-only",
            "--openenv-env=openspiel:tic_tac_toe",
            f"--openenv-n={n}",
            f"--openenv-output={Path(folder) / 'out'}",
        ]
        # ru_maxrss of children is the largest child so far: measure each size in a child
        probe = (
            "import resource, subprocess, sys, time\n"
            "t = time.monotonic()\n"
            "done = subprocess.run(sys.argv[1:], capture_output=True)\n"
            "assert done.returncode == 0, done.stderr[-2000:]\n"
            "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
            "print(peak, time.monotonic() - t)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", probe, *command],
            cwd=folder,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    return float(out[0]), float(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=MAX_ITEMS)
    args = parser.parse_args()
    started = time.monotonic()
    small_mb, small_s = collect(args.small)
    large_mb, large_s = collect(args.large)
    items = args.large - args.small
    per_item_kb = (large_mb - small_mb) * 1024 / items
    per_item_us = (large_s - small_s) * 1e6 / items
    print(f"{args.small:>9,} items: peak RSS {small_mb:7.1f} MB, {small_s:6.1f} s")
    print(f"{args.large:>9,} items: peak RSS {large_mb:7.1f} MB, {large_s:6.1f} s")
    print(f"per item: {per_item_kb:.2f} KB, {per_item_us:.0f} us of collection")
    print(
        f"MAX_ITEMS={MAX_ITEMS:,}: ~{per_item_kb * MAX_ITEMS / 1024:.0f} MB and "
        f"~{per_item_us * MAX_ITEMS / 1e6:.0f} s per pytest process "
        f"(ratio large/small RSS: {large_mb / small_mb:.1f}x)"
    )
    print(f"bench wall time {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
