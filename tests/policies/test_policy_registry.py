"""Policies by name: the built-in kinds, and a third party's through the entry point group
``pytest_openenv.policies``, known without importing the module that builds them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from llm_helpers import ENV, all_rows, scripted_rewards

from pytest_openenv.config.settings import LLMSettings, Settings
from pytest_openenv.policies import registry
from pytest_openenv.policies.arms import Arm, arms_of

#: the kind: a light module, all a process reads to learn what the name plays
KIND_MODULE = """
from pytest_openenv.policies.registry import PolicyKind

KIND = PolicyKind("{provider}:build", plays_model=True)
"""

#: the factory: stands for a provider module that imports an SDK
PROVIDER_MODULE = """
from pytest_openenv.policies.base import Policy, Reply, ToolCall


class FirstMove(Policy):
    name = "mine"

    def __init__(self, model):
        self.model = model

    def act(self, turn):
        return Reply(tool_calls=(ToolCall.from_proposed(turn.scripted, "call_1"),))


def build(settings, overload=None):
    return FirstMove(settings.llm.model)
"""


@pytest.fixture
def third_party(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[tuple[str, str]]:
    """A policy ``mine`` registered through the group (its kind and provider modules
    written fresh); yields the two module names."""
    suffix = request.node.name.replace("[", "_").replace("]", "").replace("-", "_")
    kinds, provider = f"my_kinds_{suffix}", f"my_provider_{suffix}"
    (tmp_path / f"{kinds}.py").write_text(KIND_MODULE.format(provider=provider))
    (tmp_path / f"{provider}.py").write_text(PROVIDER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    point = EntryPoint(name="mine", value=f"{kinds}:KIND", group=registry.GROUP)
    every = registry.entry_points

    def with_ours(**params: Any) -> Any:
        found = list(every(**params))
        return [*found, point] if params.get("group") == registry.GROUP else found

    monkeypatch.setattr(registry, "entry_points", with_ours)
    registry.installed_policies.cache_clear()
    yield kinds, provider
    registry.installed_policies.cache_clear()
    for name in (kinds, provider):
        sys.modules.pop(name, None)


def test_the_built_in_kinds_say_what_they_play_without_importing_a_provider() -> None:
    assert registry.teachers() == ["scripted", "random", "expert"]
    assert registry.model_policies() == ["openai", "anthropic", "transformers"]
    assert registry.BUILT_IN["expert"].wants_expert
    assert [n for n in registry.BUILT_IN if registry.calls_endpoint(n)] == ["openai", "anthropic"]
    assert not registry.plays_a_model("my_agents:center_first")


def test_a_third_party_kind_is_known_without_importing_its_provider(
    third_party: tuple[str, str],
) -> None:
    kinds, provider = third_party
    assert registry.plays_a_model("mine")
    registry.check_known("mine")
    assert arms_of(("mine", "scripted"), ("m1", "m2")) == [
        Arm("mine", "m1"),
        Arm("mine", "m2"),
        Arm("scripted"),
    ]
    assert kinds in sys.modules
    assert provider not in sys.modules  # what the controller asks never builds the policy
    policy = registry.build_policy("mine", Settings(llm=LLMSettings(model="m1")))
    assert type(policy).__name__ == "FirstMove" and policy.model == "m1"
    assert provider in sys.modules


def test_an_unknown_name_lists_the_installed_third_party_policies_too(
    third_party: tuple[str, str],
) -> None:
    with pytest.raises(pytest.UsageError) as info:
        registry.check_known("nosuch")
    assert str(info.value) == (
        "--openenv-policy='nosuch' is unknown; choose one of: scripted, random, expert, "
        "openai, anthropic, transformers, mine, or pkg.module:callable"
    )


def test_an_entry_point_that_is_not_a_kind_is_a_usage_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "not_a_kind_mod.py").write_text("KIND = 'openai'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    point = EntryPoint(name="bad", value="not_a_kind_mod:KIND", group=registry.GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda **params: [point])
    registry.installed_policies.cache_clear()
    try:
        with pytest.raises(pytest.UsageError, match=r"gives 'openai', not a .*PolicyKind"):
            registry.plays_a_model("bad")
    finally:
        registry.installed_policies.cache_clear()
        sys.modules.pop("not_a_kind_mod", None)


@pytest.mark.slow
def test_a_policy_of_an_installed_distribution_plays_a_run(
    run_pytest, pytester: pytest.Pytester
) -> None:
    """A distribution on the path (its metadata folder is what pip would write) declares
    ``mine`` in the group; the run plays it with the model it was given."""
    pytester.makepyfile(
        my_kinds=KIND_MODULE.format(provider="my_provider"), my_provider=PROVIDER_MODULE
    )
    meta = pytester.path / "my_policies-0.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: my-policies\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text(f"[{registry.GROUP}]\nmine = my_kinds:KIND\n")
    result = run_pytest(ENV, "--openenv-n=3", "--openenv-policy=mine", "--openenv-model=m1")
    assert result.ret in (0, 1), result.stdout.str()  # the first legal move loses some
    rows = all_rows(pytester)
    assert {row["policy"] for row in rows.values()} == {"mine"}
    assert {row["model"] for row in rows.values()} == {"m1"}
    assert {i: row["reward"] for i, row in rows.items()} == scripted_rewards(3)
