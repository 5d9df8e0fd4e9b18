"""One run against the same run as shards plus a merge, and a merge of a million rows.

    python bench/shard_merge.py [--quick] [--n 20000] [--shards 4] [--workers 2]
                                [--rows 1000000]

1. One run of N tic-tac-toe episodes (the bundled test, ``--openenv-policy=random``, ``-n
   WORKERS``), then the same run as SHARDS shards played one after another
   (``--openenv-shard=I/SHARDS``) and ``python -m pytest_openenv merge``: the wall time of
   each, the merge's own time and peak RSS, and the merge's share of the shards' total time
   (target: under 5%). The merged summary is checked against the single run's (same counts).
2. The merge of ROWS synthetic rows (a real row of step 1 copied with new ids, spread over
   SHARDS shard folders) and of a tenth as many: time and peak RSS of each merge process,
   the rows and figures (memory flat in the number of rows: the two peaks are close), then
   with the views a run writes (report.html, card) at a tenth of the rows.

``--quick``: N = 2,000 and ROWS = 100,000; ``--only-rows``: step 2 alone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from benchenv import PYTEST_QUIET, user_env  # noqa: E402

#: runs the merge in a process of its own and prints its peak RSS (KiB) last
MERGE_PROBE = """
import json, resource, sys, time
from pathlib import Path
from pytest_openenv.report import merge as merging
if sys.argv[1] == "rows":  # the rows and figures alone: the views a run writes left out
    import pytest_openenv.report.page as page
    page.write_report = lambda *args, **kwargs: None
    merging.render_card = lambda *args, **kwargs: ""
started = time.perf_counter()
out, shards = Path(sys.argv[2]), [Path(path) for path in sys.argv[3:]]
result = merging.merge_shards(out, shards, say=lambda line: None)
print(json.dumps({
    "seconds": time.perf_counter() - started,
    "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "exit": result.exit_status,
    "ran": result.summary["figures"]["ran"],
}))
"""


def timed(command: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=user_env(), capture_output=True, text=True)
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-2000:]}")
    return time.perf_counter() - started


def merge_probe(out: Path, shards: list[Path], *, views: bool) -> dict[str, float]:
    command = [sys.executable, "-c", MERGE_PROBE, "views" if views else "rows", str(out)]
    done = subprocess.run(
        [*command, *map(str, shards)], env=user_env(), capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"merge failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_and_shards(work: Path, n: int, shards: int, workers: int) -> list[Path]:
    run = [
        *PYTEST_QUIET,
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-policy=random",
        f"--openenv-n={n}",
        "-n",
        str(workers),
    ]
    single = timed([*run, "--openenv-output=single"], work)
    shard_times = []
    for index in range(shards):
        shard_times.append(timed([*run, f"--openenv-shard={index}/{shards}"], work))
    folders = [work / "openenv-results" / f"shard-{index}-of-{shards}" for index in range(shards)]
    merge = timed(
        [sys.executable, "-m", "pytest_openenv", "merge", "merged", *map(str, folders)], work
    )
    probe = merge_probe(work / "merged-probe", folders, views=True)
    one = json.loads((work / "single" / "summary.json").read_text())["figures"]
    merged = json.loads((work / "merged" / "summary.json").read_text())["figures"]
    same = all(one[key] == merged[key] for key in ("ran", "passed", "failed", "errored"))
    total = sum(shard_times)
    each = ", ".join(f"{seconds:.1f}" for seconds in shard_times)
    lines = [
        f"1. {n:,} episodes, -n {workers}, random policy",
        f"   one run:                        {single:8.1f} s",
        f"   {shards} shards, one after another:  {total:8.1f} s  ({each})",
        f"   merge (python -m ..., process): {merge:8.2f} s  = {merge / total:.1%} of the "
        "shards' time (target < 5%)",
        f"   merge itself (in its process):  {probe['seconds']:8.2f} s, peak RSS "
        f"{probe['rss_kib'] / 1024:.0f} MiB",
        f"   shards + merge vs one run:      {(total + merge) / single:.2f}x",
        f"   merged counts equal the run's:  {same} (ran {merged['ran']}, passed "
        f"{merged['passed']})",
    ]
    print("\n".join(lines), flush=True)
    return folders


def synthetic(work: Path, template_shards: list[Path], rows: int) -> list[Path]:
    """``rows`` rows over the shards of step 1: the first row of a shard with new ids."""
    count = len(template_shards)
    folders = []
    template = json.loads((template_shards[0] / "results.jsonl").open().readline())
    failure = None
    for shard in template_shards:
        path = shard / "failures.jsonl"
        if path.stat().st_size:
            failure = json.loads(path.open().readline())
            break
    test = template["test"].rpartition("[")[0]
    for index, source in enumerate(template_shards):
        folder = work / f"shard-{index}-of-{count}"
        folder.mkdir(parents=True)
        metadata = json.loads((source / "metadata.json").read_text())
        metadata["shard"]["tests"] = {test: {"n": rows, "repeats": 1, "arms": [""]}}
        (folder / "metadata.json").write_text(json.dumps(metadata))
        summary = json.loads((source / "summary.json").read_text())
        (folder / "summary.json").write_text(json.dumps(summary))
        with (
            (folder / "results.jsonl").open("w") as results,
            (folder / "failures.jsonl").open("w") as failures,
        ):
            for i in range(index, rows, count):
                # one in four fails: both files and both outcomes are merged
                row = dict(failure if failure is not None and i % 4 == 3 else template)
                episode_id = f"ep-{i:06d}" if i < 1_000_000 else f"ep-{i}"
                row["episode_id"] = episode_id
                row["seed"] = i
                row["test"] = f"{test}[{episode_id}]"
                row["extra"] = {**row["extra"], "index": i}
                line = json.dumps(row, separators=(",", ":")) + "\n"
                (failures if "failure" in row else results).write(line)
        folders.append(folder)
    return folders


def template_shards(work: Path, shards: int) -> list[Path]:
    """A few episodes per shard: the rows the synthetic ones are copied from."""
    run = [*PYTEST_QUIET, "--openenv-env=openspiel:tic_tac_toe", "--openenv-policy=random"]
    for index in range(shards):
        timed([*run, f"--openenv-n={8 * shards}", f"--openenv-shard={index}/{shards}"], work)
    return [work / "openenv-results" / f"shard-{index}-of-{shards}" for index in range(shards)]


def merge_rows(work: Path, shards: list[Path], rows: int, *, views: bool) -> None:
    folders = synthetic(work / f"rows-{rows}", shards, rows)
    size = sum(
        (folder / name).stat().st_size
        for folder in folders
        for name in ("results.jsonl", "failures.jsonl")
    )
    probe = merge_probe(work / f"rows-{rows}" / "merged", folders, views=views)
    what = "rows, figures and views" if views else "rows and figures"
    print(
        f"   {rows:>9,} rows ({size / 2**20:5.0f} MiB), {what:<23}: {probe['seconds']:7.1f} s, "
        f"{rows / probe['seconds']:7,.0f} rows/s, peak RSS {probe['rss_kib'] / 1024:5.0f} MiB",
        flush=True,
    )
    assert probe["ran"] == rows, probe
    shutil.rmtree(work / f"rows-{rows}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N=2,000 and ROWS=100,000")
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--only-rows", action="store_true", help="leave out step 1 (the run and its shards)"
    )
    args = parser.parse_args()
    if args.quick:
        args.n, args.rows = 2_000, 100_000
    with tempfile.TemporaryDirectory(prefix="shard-merge-") as temp:
        work = Path(temp)
        if args.only_rows:
            shards = template_shards(work, args.shards)
        else:
            shards = run_and_shards(work, args.n, args.shards, args.workers)
        print(f"2. merge of synthetic rows over {args.shards} shards (one in four failed)")
        # memory flat in rows: the peak at a tenth of the rows and at all of them
        merge_rows(work, shards, args.rows // 10, views=False)
        merge_rows(work, shards, args.rows, views=False)
        # report.html's table holds a line per episode, as a run's own report does
        merge_rows(work, shards, args.rows // 10, views=True)


if __name__ == "__main__":
    main()
