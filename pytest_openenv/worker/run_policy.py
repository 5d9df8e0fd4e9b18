"""The run's policy, checked before any episode: built and fitted to the env.

``--openenv-policy``, else the env family's best teacher. A policy that cannot be
built or cannot play the env is a usage error at start-up, not an error on every
episode (a process that plays episodes then loads it: its SDK and key are checked).
"""

from __future__ import annotations

import pytest

from ..config.settings import Settings
from ..episode.service import EpisodeService
from ..policies.base import Policy


def check_run_policy(config: pytest.Config, service: EpisodeService) -> list[Policy]:
    """Fail fast on a bad run policy; returns each policy the run plays (one per model of
    several), for a process that plays to load."""
    from ..errors import EnvConfigError
    from ..policies.arms import arms_of
    from ..policies.registry import check_known, plays_a_model

    settings = service.settings
    family = service.run_family()
    run_policy = service.run_policy_name()
    policies = settings.run.named_policies or (run_policy or "scripted",)
    for name in policies:  # a misspelt one is named first, whatever is listed before it
        check_known(name)
    try:
        arms = arms_of(policies, settings.llm.named_models)
    except EnvConfigError as exc:
        raise pytest.UsageError(f"--openenv-policy / --openenv-model: {exc}") from None
    if run_policy_in_use(config):
        check_what_plays(config, policies, settings)
    built = []
    for arm in arms:
        if (
            arm.model is None
            and plays_a_model(arm.policy)
            and models_from_markers(config, settings)
        ):
            continue  # each test's models=[...]; a test without them: its collection error
        policy = service.policy(arm.policy, arm.model)
        built.append(policy)
        if family is not None and run_policy_in_use(config):
            from .policy_fit import check_fits, check_honoured

            where = (
                f"--openenv-policy={arm.policy}"
                if settings.run.policy
                else f"no --openenv-policy is given, and the default teacher ({arm.policy})"
            )
            check_fits(policy, family, where)
            check_honoured(arm.policy, family, where)
    return built


def check_what_plays(config: pytest.Config, policies: tuple[str, ...], settings: Settings) -> None:
    """A model or sampling option none of the run's policies uses is a usage error."""
    from ..config.options import given_as
    from .what_plays import (
        unplayed_model,
        unused_endpoint,
        unused_sampling,
        unused_system_prompt,
    )

    models = settings.llm.named_models
    chosen_by = None
    if settings.run.named_policies:
        chosen_by = " ".join(f"--openenv-policy={p}" for p in settings.run.named_policies)
        chosen_by = given_as(config, "policy") or chosen_by
    problem = unplayed_model(
        policies,
        models,
        models_given=given_as(config, "model") or f"--openenv-model={models[0] if models else ''}",
        chosen_by=chosen_by,
    ) or unused_sampling(policies, settings.llm.sampling_given, chosen_by=chosen_by)
    problem = problem or unused_system_prompt(
        policies, given_as(config, "system-prompt"), chosen_by=chosen_by
    )
    endpoint = settings.llm.endpoint
    if endpoint and given_as(config, "llm-endpoint") is not None:
        from ..util.endpoints import redact

        shown = f"--openenv-llm-endpoint={redact(endpoint)}"  # never its credentials
        problem = problem or unused_endpoint(policies, shown, chosen_by=chosen_by)
    if problem:
        raise pytest.UsageError(problem)


def models_from_markers(config: pytest.Config, settings: Settings) -> bool:
    """No ``--openenv-model``, and test files play (not the bundled test, which has no
    marker): an LLM policy's models may be each test's ``models=[...]``, so one missing is
    refused where a test names none (``worker/marker.py``), not at start-up."""
    bundled = bool(settings.run.env) and config.args_source != pytest.Config.ArgsSource.ARGS
    return not settings.llm.named_models and not bundled


def run_policy_in_use(config: pytest.Config) -> bool:
    """Will episodes play the run's policy? Named on purpose (command line or ini), or the
    bundled test with no conftest ``openenv_policy`` fixture to stand in for it."""
    dest = "openenv_policy"
    if config.getoption(dest, None) or config.getini(dest):
        return True
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        return False  # test files may override the fixture; pytest_generate_tests checks them
    return not any(
        getattr(plugin, "__name__", "").rpartition(".")[2] == "conftest"
        and hasattr(plugin, "openenv_policy")
        for plugin in config.pluginmanager.get_plugins()
    )
