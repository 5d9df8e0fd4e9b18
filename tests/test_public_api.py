"""The public API, pinned: a name added, removed or moved shows here first.

What a user imports (``pytest_openenv``, ``pytest_openenv.strategies``), what a test reads
off the ``episode`` fixture, the fixtures a conftest may override, and the
methods a third-party env family implements (``EnvFamily``).
"""

from __future__ import annotations

import abc
import dataclasses
import subprocess
import sys

import pytest

import pytest_openenv
import pytest_openenv.strategies

TOP_LEVEL = [
    "ActionRejected",
    "Backend",
    "EnvConfigError",
    "EnvFactory",
    "EnvFamily",
    "EnvUnavailable",
    "Episode",
    "EpisodeSpec",
    "JudgeFailed",
    "JudgeVerdict",
    "Limits",
    "OpenEnvError",
    "Policy",
    "ProposedCall",
    "Reply",
    "StepResult",
    "ToolCall",
    "ToolSpec",
    "Turn",
    "Usage",
    "episode_record_fields",
    "from_episode_record",
    "run_episode",
    "to_episode_record",
]

STRATEGIES = [
    "EnvStateMachine",
    "LegalSequence",
    "episode_specs",
    "illegal_calls",
    "legal_action_sequences",
    "seeds",
]

#: what the ``episode`` fixture returns
EPISODE_FIELDS = {
    "episode_id",
    "seed",
    "env",
    "reward",
    "passed",
    "done",
    "turns",
    "messages",
    "tool_trace",
    "usage",
    "metrics",
}
EPISODE_METHODS = {"trajectory", "explain", "record"}

#: what a family must answer, by concern (envs/base.py): abstract ones first
FAMILY_ABSTRACT = {"describe_task", "describe_result", "tools", "to_action", "embedded_backend"}
FAMILY_CONCERNS = {
    "Prompts": {
        "default_system_prompt",
        "describe_result",
        "describe_task",
        "prompt_style",
        "prompt_styles",
        "system_prompt",
        "task_info",
        "use_prompt_style",
    },
    "ToolCalls": {"argument_texts", "openai_tools", "reported_error", "to_action", "tools"},
    "Backends": {"embedded_backend", "has_embedded_engine", "remote_backend", "reset_options"},
    "Verdict": {
        "default_max_turns",
        "default_min_reward",
        "default_turns_words",
        "has_terminal_state",
        "outcome",
        "pass_rule",
        "passes",
        "reads_final_state",
        "verdict_warning",
    },
    "Teachers": {
        "builtin_policy_problem",
        "default_policy",
        "expert_call",
        "expert_problem",
        "legal_calls",
        "offers_expert",
        "scripted_call",
    },
    "Hosting": {
        "action_fields",
        "bind_servers",
        "hosted_by",
        "hosting_mismatch",
        "known",
        "servers",
        "start_warnings",
    },
}


def test_the_top_level_names() -> None:
    assert sorted(pytest_openenv.__all__) == TOP_LEVEL
    for name in TOP_LEVEL:
        value = getattr(pytest_openenv, name)
        assert value is not None
        assert getattr(value, "__module__", "").startswith("pytest_openenv."), name
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        pytest_openenv.Nope  # noqa: B018


def test_importing_the_package_loads_no_engine_and_no_sdk() -> None:
    heavy = ["pyspiel", "reasoning_gym", "openai", "anthropic", "huggingface_hub", "torch"]
    code = (
        "import sys, pytest_openenv, pytest_openenv.plugin; "
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"


def test_the_strategies_module() -> None:
    assert sorted(pytest_openenv.strategies.__all__) == STRATEGIES
    for name in STRATEGIES:
        assert callable(getattr(pytest_openenv.strategies, name)), name


def test_what_an_episode_offers() -> None:
    fields = {field.name for field in dataclasses.fields(pytest_openenv.Episode)}
    assert fields >= EPISODE_FIELDS, EPISODE_FIELDS - fields
    for name in EPISODE_METHODS:
        assert hasattr(pytest_openenv.Episode, name), name


def test_what_an_env_family_implements() -> None:
    family = pytest_openenv.EnvFamily
    assert set(family.__abstractmethods__) == FAMILY_ABSTRACT
    concerns = {
        base.__name__: {name for name in vars(base) if not name.startswith("_")}
        for base in family.__mro__[1:]
        if base not in (abc.ABC, object)
    }
    assert concerns == FAMILY_CONCERNS


def test_the_fixtures_a_conftest_may_override(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest("--fixtures", "-p", "no:randomly")
    listed = result.stdout.str()
    for name in ("episode", "openenv_episode", "openenv_policy", "openenv_env"):
        assert f"\n{name}" in listed or listed.startswith(name), name
