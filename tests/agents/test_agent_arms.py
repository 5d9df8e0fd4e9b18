"""Each agent program is an arm of its own on a model: two agents, or an agent and our own
loop, on the same model are told apart in episode ids, groups and comparisons."""

from __future__ import annotations

from pytest_openenv.policies.arms import arm_name, arms_of, id_part


def test_agents_on_one_model_are_arms_of_their_own_with_ids_of_their_own() -> None:
    arms = arms_of(("openai", "agent:codex", "agent:opencode", "scripted"), ("org/m-1",))
    assert [arm.name for arm in arms] == [
        "org/m-1",
        "agent:codex / org/m-1",
        "agent:opencode / org/m-1",
        "scripted",
    ]
    assert [id_part(arm.name) for arm in arms] == [
        "org_m-1",
        "agent_codex_org_m-1",
        "agent_opencode_org_m-1",
        "scripted",
    ]


def test_an_agent_on_several_models_is_one_arm_per_model() -> None:
    arms = arms_of(("agent:claude-code",), ("a", "b"))
    assert [arm.name for arm in arms] == ["agent:claude-code / a", "agent:claude-code / b"]


def test_a_policy_of_our_own_loop_is_still_named_by_its_model() -> None:
    assert arm_name("openai", "gpt-4o-mini") == "gpt-4o-mini"
    assert arm_name("scripted", None) == "scripted"
    assert arm_name("agent:codex", None) == "agent:codex"
