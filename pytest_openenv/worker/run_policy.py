"""The run's policy, checked before any episode: built and fitted to the env.

``--openenv-policy``, else the env family's best teacher. A policy that cannot be
built or cannot play the env is a usage error at start-up, not an error on every
episode (a process that plays episodes then loads it: its SDK and key are checked).
"""

from __future__ import annotations

import pytest

from ..policies.base import Policy
from .service import EpisodeService


def check_run_policy(config: pytest.Config, service: EpisodeService) -> Policy:
    """Fail fast on a bad run policy; returns it, for a process that plays to load."""
    settings = service.settings
    family = service.run_family()
    run_policy = service.run_policy_name()
    policy = service.policy(run_policy or "scripted")
    if family is not None and run_policy_in_use(config):
        from .policy_fit import check_fits, check_honoured

        where = (
            f"--openenv-policy={run_policy}"
            if settings.run.policy
            else f"no --openenv-policy is given, and the default teacher ({run_policy})"
        )
        check_fits(policy, family, where)
        check_honoured(str(run_policy), family, where)
    return policy


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
