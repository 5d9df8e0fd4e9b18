"""What the end of a run reads of its rows, kept as the writer appends them.

At session end ``summary.json`` needs each row's verdict rule, seeding and first prompt
(``row_facts.py``) and ``report.html`` each row's table cells (``page/rows.py``). Reading
both back from results.jsonl and failures.jsonl parsed every row twice after the last
episode: most of the end of a long run. The writer hands each row to ``RowDigests`` as
it writes it (secrets already scrubbed, the very line the file holds), which keeps only
those few fields; after the final sorted rewrite the writer says where each kept row now
lies (``DatasetWriter.final``), and the table and facts are built from the digests
without opening a file. Only a run whose rows are all its own is told so: a resumed run,
a file written back after it vanished or a failed rewrite reads the files as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..dataset.jsonl import Row
from .page.rows import EpisodeRow, FolderRows, row_from_record
from .row_facts import RowFact, fact_of


class RowDigests:
    def __init__(self) -> None:
        #: (passed, key): the table row (its offset set at the end) and the row's facts;
        #: the last row written per key wins, as in the writer's rewrite
        self._rows: dict[tuple[bool, tuple[str, str]], tuple[EpisodeRow, RowFact] | None] = {}

    def add(
        self, line: str, passed: bool, key: tuple[str, str], parsed: dict[str, Any] | None = None
    ) -> None:
        """``parsed``: what parsing ``line`` gives, when the process that dumped it kept it."""
        record: Any = parsed
        if record is None:
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                record = None
        if not isinstance(record, dict) or "episode_id" not in record:
            # the page would leave such a line out and list it as a problem: read the file
            self._rows[(passed, key)] = None
            return
        table_row = row_from_record(record, 0 if passed else 1, 0, 0)
        self._rows[(passed, key)] = (table_row, fact_of(record))

    def _kept(self, final: dict[bool, list[Row]]) -> list[tuple[Row, EpisodeRow, RowFact]] | None:
        """The digests of the rows the files hold, results first, each in its file's order."""
        kept = []
        for passed in (True, False):
            for row in final[passed]:
                digest = self._rows.get((passed, row.key))
                if digest is None:
                    return None
                kept.append((row, *digest))
        return kept

    def facts(self, final: dict[bool, list[Row]] | None) -> list[RowFact] | None:
        """Each kept row's facts, in the order ``row_facts`` reads the files; None: unknown."""
        kept = self._kept(final) if final is not None else None
        return None if kept is None else [fact for _, _, fact in kept]

    def folder_rows(self, folder: Path, final: dict[bool, list[Row]] | None) -> FolderRows | None:
        """What ``scan_folder`` would read of the finished folder; None: read it instead."""
        kept = self._kept(final) if final is not None else None
        if kept is None:
            return None
        found = FolderRows(folder)
        for where, table_row, _ in kept:
            table_row.offset, table_row.length = where.offset, where.length
            found.rows.append(table_row)
        found.rows.sort(key=lambda row: (row.episode_id, row.test))
        found.number_groups()
        return found
