"""``pytest --help`` shows the plugin's options in one section per settings group.

54 options in one section were 231 lines a newcomer read whole to find how to gate or where
an endpoint goes; each section now holds one group's options and nothing else.
"""

from __future__ import annotations

import re

import pytest

from pytest_openenv.config.options import HELP_GROUPS, OPTIONS, help_group


def sections_of_help(text: str) -> dict[str, list[str]]:
    """Each ``openenv: ...`` section title of ``--help`` with the ``--openenv-*`` flags under it."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            title = line.rstrip(":")
            current = sections.setdefault(title, []) if title.startswith("openenv:") else None
            continue
        flag = re.match(r"\s+(--openenv-[a-z0-9-]+)", line)
        if current is not None and flag:
            current.append(flag.group(1))
    return sections


def test_every_option_fills_a_group_that_has_a_help_section() -> None:
    assert {help_group(opt) for opt in OPTIONS} == set(HELP_GROUPS)


def test_help_shows_each_group_in_its_own_section(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--help")
    assert result.ret == 0
    sections = sections_of_help(result.stdout.str())
    assert len(sections) >= 6, sorted(sections)
    assert set(sections) == set(HELP_GROUPS.values())
    for opt in OPTIONS:
        title = HELP_GROUPS[help_group(opt)]
        assert f"--openenv-{opt.flag}" in sections[title], (opt.flag, title)
    gates = sections[HELP_GROUPS["gate"]]
    assert "--openenv-min-pass-rate" in gates
    assert "--openenv-llm-endpoint" in sections[HELP_GROUPS["llm"]]
    assert "--openenv-llm-endpoint" not in gates
