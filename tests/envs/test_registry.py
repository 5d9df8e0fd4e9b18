"""Finding a family: a built-in name from this package's own metadata, any other name
from every installed package's entry points."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pytest_openenv.envs import registry
from pytest_openenv.envs.base import EnvConfigError
from pytest_openenv.envs.openspiel.family import OpenSpielFamily


@pytest.fixture
def fresh_lookup(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """The lookups uncached, and each read of the whole group noted."""
    reads: list[dict[str, Any]] = []
    every = registry.entry_points

    def noted(**params: Any) -> Any:
        reads.append(params)
        return every(**params)

    monkeypatch.setattr(registry, "entry_points", noted)
    registry.own_families.cache_clear()
    registry.installed_families.cache_clear()
    yield reads
    registry.own_families.cache_clear()
    registry.installed_families.cache_clear()


def test_a_built_in_family_is_found_without_reading_every_installed_package(
    fresh_lookup: list[dict[str, Any]],
) -> None:
    assert registry.family_class("openspiel") is OpenSpielFamily
    assert set(registry.own_families()) == {"openspiel", "reasoning_gym", "openenv"}
    assert fresh_lookup == []


def test_another_name_is_looked_up_in_every_installed_package(
    fresh_lookup: list[dict[str, Any]],
) -> None:
    with pytest.raises(EnvConfigError, match="installed families: openenv, openspiel"):
        registry.family_class("nosuch")
    assert fresh_lookup == [{"group": registry.GROUP}]
