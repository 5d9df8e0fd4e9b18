"""``python -m pytest_openenv view`` on a 100,000-episode folder: memory and answer times.

    python bench/view_memory.py [--episodes 100000]

Makes the folder from a real 200-episode run, its lines copied under new ids
(``report_scale.replicate``), starts the viewer as a user would, and prints, measured in
this one run: the folder's size, the time until it serves, its resident memory (peak and
after serving), the page's size, and the time to serve a few transcripts read by offset.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from benchenv import user_env
from report_scale import replicate, seed_folder


def rss_mib(pid: int) -> tuple[float, float]:
    status = Path(f"/proc/{pid}/status").read_text()
    now = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    peak = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    return now / 1024, peak / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        source = seed_folder(Path(work), 200)
        folder = Path(work) / "scaled"
        replicate(source, folder, args.episodes)
        jsonl = sum((folder / n).stat().st_size for n in ("results.jsonl", "failures.jsonl"))
        print(f"episodes: {args.episodes:,} (JSONL {jsonl / 2**20:.0f} MiB)")
        start = time.perf_counter()
        viewer = subprocess.Popen(
            [sys.executable, "-m", "pytest_openenv", "view", str(folder), "--port", "0"],
            stdout=subprocess.PIPE,
            text=True,
            env=user_env(),
        )
        try:
            assert viewer.stdout is not None
            line = viewer.stdout.readline()
            url = re.search(r"(http://127\.0\.0\.1:\d+/)", line).group(1)  # type: ignore[union-attr]
            ready = time.perf_counter() - start
            page = urllib.request.urlopen(url, timeout=60).read()
            timings = []
            for number in (0, args.episodes // 2, args.episodes - 1, 12_345 % args.episodes):
                begin = time.perf_counter()
                urllib.request.urlopen(f"{url}api/episode/{number}", timeout=60).read()
                timings.append(time.perf_counter() - begin)
            now, peak = rss_mib(viewer.pid)
        finally:
            viewer.terminate()
            viewer.wait(timeout=10)
        print(f"viewer: serving after {ready:.1f} s; page {len(page) / 2**20:.1f} MiB")
        print(f"  resident memory: {now:.0f} MiB now, {peak:.0f} MiB peak (VmRSS / VmHWM)")
        print("  one transcript by offset: " + ", ".join(f"{1000 * t:.1f} ms" for t in timings))


if __name__ == "__main__":
    main()
