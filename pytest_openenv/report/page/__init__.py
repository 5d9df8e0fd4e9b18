"""The run report: ``report.html`` in the output folder, and the card's chart.

``write_report(folder)`` reads the folder as a finished run left it (``results.jsonl``,
``failures.jsonl``, ``summary.json``, ``metadata.json``) and writes ``report.html``
(``html.py``) and ``pass-rate.svg`` (the chart the dataset card shows), each through a
temp file and ``os.replace``, with every known secret scrubbed like every other file.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...dataset.writer import CHART, METADATA, REPORT, SUMMARY, atomic_write, temp_path
from ...util.secrets import KnownSecrets
from .. import charts
from .html import DEFAULT_CAP, render
from .rows import FolderRows, read_json, scan_folder

__all__ = ["DEFAULT_CAP", "write_report"]


def write_report(
    folder: Path, *, secrets: KnownSecrets | None = None, cap: int = DEFAULT_CAP
) -> FolderRows:
    """Write ``report.html`` and ``pass-rate.svg`` into ``folder``; returns what it read."""
    secrets = secrets or KnownSecrets()
    found = scan_folder(folder)
    summary = read_json(folder / SUMMARY)
    metadata = read_json(folder / METADATA)
    target = folder / REPORT
    tmp = temp_path(target)
    try:
        with tmp.open("w", encoding="utf-8") as out:
            for chunk in render(found, summary, metadata, served=False, cap=cap):
                out.write(secrets.scrub(chunk) if secrets.active else chunk)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    chart = charts.running_pass_rate([row.outcome == "passed" for row in found.rows])
    atomic_write(folder / CHART, secrets.scrub(chart).encode("utf-8"))
    return found
