"""The run report at scale: writing report.html for 10,000 episodes, and its first paint.

    python bench/report_scale.py [--episodes 10000] [--seed-run 200]

Makes a folder of ``--episodes`` rows by running ``--seed-run`` real tic-tac-toe episodes
(first-legal policy: about 18% fail) and copying their lines under new ids (real sizes,
real transcripts), then prints, measured in this one run:
  - the time to write report.html + pass-rate.svg (``write_report``) and the file's size,
    with how many transcripts it embedded under the 20 MB cap;
  - in headless Chromium (Debian's chromium + chromedriver): the time to first contentful
    paint and until the page's script has built the table, from a file:// URL.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchenv import PYTEST_QUIET, user_env

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))
sys.path.insert(0, str(ROOT))


def seed_folder(work: Path, episodes: int) -> Path:
    import subprocess

    run = [
        *PYTEST_QUIET,
        "--openenv-env=openspiel:tic_tac_toe",
        f"--openenv-n={episodes}",
        "--openenv-policy=scripted",
        "-n",
        "2",
    ]
    subprocess.run(run, cwd=work, env=user_env(), capture_output=True, check=False)
    return work / "openenv-results"


def replicate(source: Path, target: Path, episodes: int) -> None:
    """``target`` with ``episodes`` rows copied from ``source``'s, each under a new id."""
    target.mkdir(parents=True, exist_ok=True)
    for name in ("metadata.json", "summary.json"):
        shutil.copy(source / name, target / name)
    lines = []
    for name in ("results.jsonl", "failures.jsonl"):
        lines += [(name, line) for line in (source / name).read_text().splitlines() if line]
    handles = {name: (target / name).open("w") for name in ("results.jsonl", "failures.jsonl")}
    counts = {"passed": 0, "failed": 0}
    for index in range(episodes):
        name, line = lines[index % len(lines)]
        row = json.loads(line)
        row["episode_id"] = f"ep-{index:06d}"
        row["seed"] = index
        row["test"] = f"openenv::test_episode[ep-{index:06d}]"
        row.setdefault("extra", {})["index"] = index
        handles[name].write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
        counts["passed" if name == "results.jsonl" else "failed"] += 1
    for handle in handles.values():
        handle.close()
    summary = json.loads((target / "summary.json").read_text())
    figures = summary["figures"]
    figures.update(counts, ran=episodes, episodes=episodes, pass_rate=counts["passed"] / episodes)
    (target / "summary.json").write_text(json.dumps(summary))


def first_paint(report: Path) -> tuple[float, float]:
    from pages import chromium, console_errors, wait_ready

    with chromium() as driver:
        driver.get("about:blank")
        start = time.perf_counter()
        driver.get(report.as_uri())
        wait_ready(driver, timeout=120)
        ready = time.perf_counter() - start
        paint = driver.execute_script(
            "const p = performance.getEntriesByName('first-contentful-paint')[0];"
            "return p ? p.startTime : null;"
        )
        errors = console_errors(driver)
    if errors:
        raise SystemExit(f"console errors: {errors}")
    return (paint or 0.0) / 1000, ready


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--seed-run", type=int, default=200)
    args = parser.parse_args()
    from pytest_openenv.report.page import write_report

    with tempfile.TemporaryDirectory() as work:
        source = seed_folder(Path(work), args.seed_run)
        folder = Path(work) / "scaled"
        replicate(source, folder, args.episodes)
        jsonl = sum((folder / n).stat().st_size for n in ("results.jsonl", "failures.jsonl"))
        start = time.perf_counter()
        found = write_report(folder)
        took = time.perf_counter() - start
        report = folder / "report.html"
        html = report.read_text(encoding="utf-8")
        embedded = html.count('<script type="application/json" id="t-')
        print(f"episodes: {len(found.rows):,} (JSONL {jsonl / 2**20:.1f} MiB)")
        print(f"write_report: {took:.2f} s; report.html {report.stat().st_size / 2**20:.1f} MiB")
        print(f"  transcripts embedded: {embedded:,} of {len(found.rows):,} (cap 20 MiB)")
        paint, ready = first_paint(report)
        print(f"chromium: first contentful paint {paint:.2f} s, table built {ready:.2f} s")


if __name__ == "__main__":
    main()
