"""Figures as people read them: percentages, numbers, intervals and Markdown tables.

The one renderer behind the terminal summary, ``$GITHUB_STEP_SUMMARY``, the gate
verdict and the dataset card, so a pass rate reads the same wherever it appears.
Here in ``util`` because both ``report/`` and ``dataset/`` (the card) use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

#: what a figure that could not be computed (no episode ran) shows
NOT_AVAILABLE = "n/a"


def percent(x: object) -> str:
    """``0.571`` -> ``57.1%``; None, or anything but a number (read from JSON) -> ``n/a``."""
    return f"{100 * x:.1f}%" if isinstance(x, (int, float)) else NOT_AVAILABLE


def number(x: float | None) -> str:
    """Four significant digits (a threshold, a figure); None -> ``n/a``."""
    return NOT_AVAILABLE if x is None else f"{x:.4g}"


def interval(low: float | None, high: float | None) -> str:
    """A confidence interval of two rates: ``25.0% - 84.0%``."""
    return f"{percent(low)} - {percent(high)}"


def cell(text: str) -> str:
    """``text`` safe inside a GFM table cell: a pipe would end the cell, even in code."""
    return text.replace("|", "\\|")


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A GFM table's lines: the header, its rule, one line per row.

    Cells are written as given: pass user text through ``cell`` first. An empty cell
    is one space (``| | |`` is a header without titles).
    """

    def line(cells: Sequence[str]) -> str:
        return "|" + "|".join(f" {text} " if text else " " for text in cells) + "|"

    return [line(header), "|" + "|".join("---" for _ in header) + "|", *map(line, rows)]
