"""``util/format.py``: the one way figures and tables are written for people."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from pytest_openenv.util.format import cell, interval, number, percent, table


@pytest.mark.parametrize(
    ("value", "shown"),
    [(None, "n/a"), (0.0, "0.0%"), (4 / 7, "57.1%"), (1, "100.0%"), ("0.5", "n/a"), ([], "n/a")],
)
def test_percent(value: object, shown: str) -> None:
    assert percent(value) == shown


@pytest.mark.parametrize(
    ("value", "shown"), [(None, "n/a"), (0.5, "0.5"), (2 / 3, "0.6667"), (12345.0, "1.234e+04")]
)
def test_number(value: float | None, shown: str) -> None:
    assert number(value) == shown


def test_interval() -> None:
    assert interval(0.25, 0.84) == "25.0% - 84.0%"
    assert interval(None, None) == "n/a - n/a"


def test_table_lines_and_empty_cells() -> None:
    assert table(("", ""), [("env", "x"), ("model", "")]) == [
        "| | |",
        "|---|---|",
        "| env | x |",
        "| model | |",
    ]


def test_a_cell_with_pipes_stays_one_cell() -> None:
    lines = table(("a", "b"), [(cell("x | y"), cell("`p|q`"))])
    tokens = MarkdownIt("commonmark").enable("table").parse("\n".join(lines))
    cells = [t.content for t in tokens if t.type == "inline"][2:]
    assert cells == ["x | y", "`p|q`"]
    assert sum(t.type == "td_open" for t in tokens) == 2
