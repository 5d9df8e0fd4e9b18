"""The row a report's line was dumped from, handed from the worker side to the controller side.

Without xdist both sides run in one process and the controller gets the very report
object the worker made. The end of the run keeps a digest of every row (a dozen fields,
``report/digests.py``); parsing each row's line back for it, a few kilobytes of JSON per
episode, is most of what the controller does per row, and the worker still holds the
dict the line was dumped from. A row's fields are each of one JSON type
(``episode/record.py``), so that dict is what parsing its line gives.

Handed over only where nothing changes the text between the two: not when secrets are
scrubbed (the writer then digests the scrubbed line), not for a line the controller
rewrites. One slot: pytest logs each report as soon as it is made.
"""

from __future__ import annotations

from typing import Any


class RowHandoff:
    def __init__(self) -> None:
        self._report: object | None = None
        self._row: dict[str, Any] | None = None

    def give(self, report: object, row: dict[str, Any]) -> None:
        """``row``: what ``report``'s line is the JSON of, unchanged since."""
        self._report, self._row = report, row

    def take(self, report: object) -> dict[str, Any] | None:
        """The row ``report``'s line was dumped from, if it was handed over."""
        if report is not self._report:
            return None
        row, self._report, self._row = self._row, None, None
        return row
