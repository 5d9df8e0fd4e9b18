"""The run report: ``report.html`` in the output folder, and the card's chart.

``write_report(folder)`` reads the folder as a finished run left it (``results.jsonl``,
``failures.jsonl``, ``summary.json``, ``metadata.json``) and writes ``report.html``
(``html.py``) and ``pass-rate.svg`` (the chart the dataset card shows), each replaced at
once (``util/atomic.py``), with every known secret scrubbed like every other file.
"""

from __future__ import annotations

from pathlib import Path

from ...dataset.writer import CHART, METADATA, REPORT, SUMMARY
from ...util.atomic import replacing, write_atomically
from ...util.secrets import KnownSecrets
from .. import charts
from .html import DEFAULT_CAP, render
from .rows import FolderRows, read_json, scan_folder

__all__ = ["DEFAULT_CAP", "write_report"]


def write_report(
    folder: Path,
    *,
    secrets: KnownSecrets | None = None,
    cap: int = DEFAULT_CAP,
    found: FolderRows | None = None,
) -> FolderRows:
    """Write ``report.html`` and ``pass-rate.svg`` into ``folder``; returns what it read.

    ``found``: the folder's rows as ``scan_folder`` would read them, when the caller
    already knows them (``report/digests.py``)."""
    secrets = secrets or KnownSecrets()
    found = found if found is not None else scan_folder(folder)
    summary = read_json(folder / SUMMARY)
    metadata = read_json(folder / METADATA)
    # a view of the data files, rewritten at every session end: replaced at once, but not
    # worth a wait on the disk (a crash at worst leaves the view to be written again)
    with replacing(folder / REPORT, durable=False) as out:
        for chunk in render(found, summary, metadata, served=False, cap=cap):
            out.write((secrets.scrub(chunk) if secrets.active else chunk).encode("utf-8"))
    chart = charts.running_pass_rate([row.outcome == "passed" for row in found.rows])
    write_atomically(folder / CHART, secrets.scrub(chart).encode("utf-8"), durable=False)
    return found
