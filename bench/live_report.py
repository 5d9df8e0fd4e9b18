"""1,000 episodes against the loopback model server: the live line, then the report offline.

    python bench/live_report.py [--n 1000] [--workers 2] [--screenshot docs/report.png]

Starts the OpenAI-compatible test server (tests/servers/openai_compat.py: a deterministic
tool-calling model, 5 ms per completion, an illegal move on every third turn of some
episodes), runs tic-tac-toe episodes through the real ``openai`` SDK on a pseudo-terminal
as a user at a terminal would, and prints:
  - how often the status line was drawn, and its last text;
  - pytest's last lines (the run's end);
  - report.html opened from file:// in headless Chromium (no network): console errors,
    the counts on the page against summary.json, first contentful paint; optionally a
    screenshot of the page.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchenv import user_env

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "browser"))

STATUS = re.compile(r"openenv \d+/\d+ \|[^\x1b\n]*")
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_a_terminal(command: list[str], cwd: Path, env: dict[str, str]) -> bytes:
    master, slave = pty.openpty()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=slave, stderr=slave)
    os.close(slave)
    out = bytearray()
    while True:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        elif process.poll() is not None:
            break
    process.wait()
    os.close(master)
    return bytes(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--screenshot", type=Path, default=None)
    args = parser.parse_args()
    from pages import chromium, console_errors, wait_ready
    from servers.fake_model import Faults
    from servers.openai_compat import serve_openai

    with (
        tempfile.TemporaryDirectory() as work,
        serve_openai(Faults(delay=0.005, turn_faults={3: "illegal"})) as server,
    ):
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--openenv-env=openspiel:tic_tac_toe",
            f"--openenv-n={args.n}",
            f"--openenv-llm-endpoint={server.base_url}",
            "--openenv-model=fake-model",
            "--openenv-min-pass-rate=0.5",
            "--openenv-concurrency=4",
            "-n",
            str(args.workers),
        ]
        env = {**user_env(), "TERM": "xterm", "COLUMNS": "150", "OPENAI_API_KEY": "sk-loopback"}
        start = time.perf_counter()
        shown = on_a_terminal(command, Path(work), env).decode("utf-8", "replace")
        took = time.perf_counter() - start
        statuses = STATUS.findall(shown)
        print(f"{args.n} episodes on {args.workers} workers in {took:.1f} s")
        print(f"status line drawn {len(statuses)} times; the last one:")
        print(f"  {statuses[-1] if statuses else '(none)'}")
        lines = [ESCAPES.sub("", line).rstrip() for line in shown.splitlines()]
        print("the run's last lines:")
        for line in [line for line in lines if line.strip()][-6:]:
            print(f"  {line}")
        folder = Path(work) / "openenv-results"
        summary = json.loads((folder / "summary.json").read_text())["figures"]
        with chromium() as driver:
            driver.get((folder / "report.html").as_uri())
            wait_ready(driver, timeout=120)
            counts = driver.execute_script(
                "const o = {}; document.querySelectorAll('[data-figure]')"
                ".forEach(e => o[e.dataset.figure] = e.textContent); return o;"
            )
            paint = driver.execute_script(
                "const p = performance.getEntriesByName('first-contentful-paint')[0];"
                "return p ? p.startTime : null;"
            )
            errors = console_errors(driver)
            if args.screenshot is not None:
                driver.set_window_size(1280, 1180)
                driver.save_screenshot(str(args.screenshot))
        same = all(int(counts[k]) == summary[k] for k in ("passed", "failed", "errored"))
        print(
            f"report.html ({(folder / 'report.html').stat().st_size / 2**20:.1f} MiB) opened "
            f"offline: {len(errors)} console errors, counts equal summary.json: {same}, "
            f"first contentful paint {(paint or 0) / 1000:.2f} s"
        )


if __name__ == "__main__":
    main()
