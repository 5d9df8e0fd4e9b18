"""Fixtures of the fault-injection suite; the helpers live in ``faults.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from faults import Launcher


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    """Starts pytest runs in ``tmp_path/work``; whatever still runs is killed at teardown."""
    folder = tmp_path / "work"
    folder.mkdir()
    launch = Launcher(folder)
    try:
        yield launch
    finally:
        launch.close()
