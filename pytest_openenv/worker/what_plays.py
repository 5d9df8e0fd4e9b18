"""What plays is what was asked: a model or sampling option no policy of the run uses.

``--openenv-model`` (or a marker's ``models=[...]``) with only policies that play no model
(``expert``, ``scripted``, ``random``, a user's callable), and ``--openenv-temperature`` /
``--openenv-max-tokens`` with only policies that do not sample, would be dropped without a
word: the run would report the built-in teacher's pass rate as if the model had played. So
each is a usage error naming what would make it play. Worker side: it reads the policies a
test (or the run) names, before any episode.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..policies.registry import AGENT_PREFIX, calls_endpoint, plays_a_model, samples


def _policy_words(policies: Sequence[str], chosen_by: str | None) -> str:
    names = ", ".join(repr(p) for p in policies)
    if chosen_by is None:
        return f"the policy is {names} (the env family's default teacher)"
    plural = "policies are" if len(policies) > 1 else "policy is"
    return f"the {plural} {names} ({chosen_by})"


def _model_fix(model: str) -> str:
    """What would make ``model`` play, the likeliest provider first."""
    openai = "--openenv-policy=openai (needs OPENAI_API_KEY)"
    anthropic = "--openenv-policy=anthropic (needs ANTHROPIC_API_KEY)"
    endpoint = "--openenv-llm-endpoint=URL (an OpenAI-compatible server: vLLM, Ollama, ...)"
    local = "--openenv-policy=transformers (a local checkpoint in-process)"
    lowered = model.lower()
    if lowered.startswith("claude"):
        return f"add {anthropic}"
    if lowered.endswith(".gguf") or ("/" in model and not lowered.startswith(("gpt", "o1", "o3"))):
        return f"add {endpoint}, or {local}"
    return f"add {openai} or {endpoint}"


def unplayed_model(
    policies: Sequence[str], models: Sequence[str], *, models_given: str, chosen_by: str | None
) -> str | None:
    """Why ``models`` would not play with ``policies``, or None when one of them plays it.

    ``models_given``: how the models were set (``--openenv-model=gpt-4o-mini``, ``openenv
    marker models=[...]``); ``chosen_by``: what named the policies (None: the family default).
    """
    if not models or any(plays_a_model(p) for p in policies):
        return None
    return (
        f"{models_given} is set but {_policy_words(policies, chosen_by)}, which plays no "
        f"model: {_model_fix(models[0])}; or leave the model out to collect the teacher's "
        "episodes"
    )


def unused_endpoint(
    policies: Sequence[str], endpoint_given: str | None, *, chosen_by: str | None
) -> str | None:
    """Why ``--openenv-llm-endpoint`` would be called by none of ``policies``, or None."""
    if endpoint_given is None or any(calls_endpoint(p) for p in policies):
        return None
    return (
        f"{endpoint_given} is set but {_policy_words(policies, chosen_by)}, which calls no "
        "endpoint: leave out --openenv-policy (an endpoint alone plays --openenv-policy=openai) "
        "or name openai or anthropic, with --openenv-model"
    )


def unused_sampling(
    policies: Sequence[str], given: Sequence[tuple[str, str]], *, chosen_by: str | None
) -> str | None:
    """Why the sampling options ``given`` (flag, how it was set) would be dropped, or None."""
    if not given or any(samples(p) for p in policies):
        return None
    shown = " and ".join(how for _, how in given)
    verb = "are" if len(given) > 1 else "is"
    return (
        f"{shown} {verb} set but {_policy_words(policies, chosen_by)}, which does not sample: "
        "sampling options reach only --openenv-policy=openai (needs OPENAI_API_KEY), "
        "anthropic (needs ANTHROPIC_API_KEY), transformers, or --openenv-llm-endpoint=URL, "
        "each with --openenv-model; name one of those, or leave the option out"
    )


def unused_system_prompt(
    policies: Sequence[str], prompt_given: str | None, *, chosen_by: str | None
) -> str | None:
    """Why ``--openenv-system-prompt`` would reach none of ``policies`` (each an agent
    program, which plays with its own system prompt), or None."""
    if prompt_given is None or not policies:
        return None
    if not all(p.startswith(AGENT_PREFIX) for p in policies):
        return None
    return (
        f"{prompt_given} is set but {_policy_words(policies, chosen_by)}: an agent program "
        "plays with its own system prompt, so ours would never reach the model; leave the "
        "option out, or add a policy of our own loop (e.g. --openenv-policy=openai) that it "
        "is meant for"
    )


class WhatPlays:
    """One process's collection: the tests refused for a model or sampling option their
    policies do not use, and whether any test plays the command line's model."""

    def __init__(self) -> None:
        #: refusals found since the last collection report (which carries them)
        self.refused: list[str] = []
        #: a test of the collection plays a model (the command line's model is used)
        self.model_played = False
        #: the first test whose policies play no model, and why, for the run-wide refusal
        self.unplayed: str | None = None

    def take(self) -> str | None:
        if not self.refused:
            return None
        text, self.refused = "\n".join(self.refused), []
        return text

    def run_wide_problem(self) -> str | None:
        """The command line's model or sampling options, when no test of the collection
        plays a model: the problem of the first test, else None."""
        return None if self.model_played else self.unplayed
