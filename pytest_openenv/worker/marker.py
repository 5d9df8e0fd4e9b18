"""What one episode test runs: its ``openenv`` marker over the command line over ini.

``parametrize`` turns such a test into one item per episode (``pytest_generate_tests``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from ..config.convert import check_item_count, check_seed_range
from ..config.settings import Settings
from ..envs.base import EnvConfigError
from ..envs.verdict import JUDGE_AT
from ..episode.service import EpisodeService
from ..episode.spec import REPEATS_FIX
from ..policies.arms import Arm, id_part
from .episode_plan import EpisodeTest
from .fixtures import EPISODE_FIXTURE, fixture_is_ours

if TYPE_CHECKING:
    from .resume_check import ResumeCheck
    from .what_plays import WhatPlays


def listed_names(kwargs: dict[str, Any], key: str) -> tuple[str, ...] | None:
    """The marker's ``policies=[...]`` / ``models=[...]``; None when not given."""
    value = kwargs.pop(key, None)
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not value:
        raise EnvConfigError(
            f"openenv marker {key}={value!r} is invalid: expected a non-empty list of names, "
            f"e.g. {key}=['a', 'b']"
        )
    found: list[str] = []
    for name in value:
        if not isinstance(name, str) or not name.strip():
            raise EnvConfigError(f"openenv marker {key}={value!r} is invalid: {name!r} is no name")
        if name in found:
            raise EnvConfigError(
                f"openenv marker {key}={value!r} is invalid: {name!r} is listed twice"
            )
        found.append(name)
    return tuple(found)


def episode_test(settings: Settings, marker: pytest.Mark | None) -> EpisodeTest:
    """Read a test's marker; a mistake raises ``EnvConfigError`` naming it."""
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker else {}
    env = marker.args[0] if marker and marker.args else kwargs.pop("env", None)
    kwargs.pop("env", None)
    env = env or settings.run.env
    if not env:
        raise EnvConfigError(
            "this test uses the `episode` fixture but no env is set: pass "
            "--openenv-env=family:variant or mark it @pytest.mark.openenv('openspiel:tic_tac_toe')"
        )
    if not isinstance(env, str):
        raise EnvConfigError(
            f"openenv marker env={env!r} is invalid: expected a string family:variant"
        )
    n = kwargs.pop("n", None)
    n = settings.run.n if n is None else n
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise EnvConfigError(f"openenv marker n={n!r} is invalid: expected a positive integer")
    seed = kwargs.pop("seed", None)
    seed = settings.run.seed if seed is None else seed
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise EnvConfigError(f"openenv marker seed={seed!r} is invalid: expected an integer")
    marked_policy = kwargs.pop("policy", None)
    if marked_policy is not None and (not isinstance(marked_policy, str) or not marked_policy):
        raise EnvConfigError(
            f"openenv marker policy={marked_policy!r} is invalid: expected a policy name "
            "such as 'expert', 'scripted', 'random', 'openai' or 'pkg.module:callable'"
        )
    marked_policies = listed_names(kwargs, "policies")
    marked_models = listed_names(kwargs, "models")
    if marked_policy and marked_policies:
        raise EnvConfigError(
            "openenv marker has both policy= and policies=: give one of them (policies=[...] "
            "for several)"
        )
    policies: tuple[str, ...] = ()
    if marked_policies:
        policies = marked_policies
        policy, source = policies[0], f"openenv marker policies={list(policies)!r}"
    elif marked_policy:
        policy, source = marked_policy, f"openenv marker policy={marked_policy!r}"
    elif settings.run.policy:
        policies = settings.run.named_policies
        policy, source = settings.run.policy, f"--openenv-policy={settings.run.policy}"
    else:
        policy, source = None, None
    models = marked_models if marked_models else settings.llm.named_models
    min_reward = kwargs.pop("min_reward", None)
    if min_reward is not None and (
        isinstance(min_reward, bool) or not isinstance(min_reward, (int, float))
    ):
        raise EnvConfigError(
            f"openenv marker min_reward={min_reward!r} is invalid: expected a number (an "
            "episode passes iff its reward is at least it)"
        )
    judge_at = kwargs.pop("judge_at", None)
    if judge_at is not None and judge_at not in JUDGE_AT:
        raise EnvConfigError(
            f"openenv marker judge_at={judge_at!r} is invalid: expected one of "
            f"{', '.join(map(repr, JUDGE_AT))} (turn-limit: the env never says done, so an "
            "episode is judged when its turns run out)"
        )
    too_many = check_item_count(n, settings.run.repeats, f"openenv marker n={n}")
    if too_many:
        raise EnvConfigError(too_many)
    seeds = check_seed_range(seed, n, f"openenv marker seed={seed}, n={n}")
    if seeds:
        raise EnvConfigError(seeds)
    config = {**settings.run.config, **kwargs}
    return EpisodeTest(
        env=env,
        config=json.dumps(config, sort_keys=True),
        n=n,
        seed=seed,
        policy=policy,
        policy_source=source,
        min_reward=None if min_reward is None else float(min_reward),
        judge_at=judge_at,
        policies=policies if len(policies) > 1 else (),
        models=models,
        models_source=f"openenv marker models={list(marked_models)!r}" if marked_models else None,
    )


def check_what_plays(
    where: str, test: EpisodeTest, arms: list[Arm], settings: Settings, plays: WhatPlays
) -> None:
    """A marker's ``models=[...]`` no policy of the test plays: refused (exit 4). The command
    line's model or sampling options, when the test plays no model: remembered, and refused
    once the collection shows that no test plays one (``WhatPlays.run_wide_problem``)."""
    from ..policies.registry import plays_a_model
    from .what_plays import unplayed_model, unused_sampling

    policies = [arm.policy for arm in arms]
    if any(plays_a_model(p) for p in policies):
        plays.model_played = True
        return
    chosen_by = test.policy_source
    if test.models_source is not None:
        problem = unplayed_model(
            policies, test.models, models_given=test.models_source, chosen_by=chosen_by
        )
        if problem:
            plays.refused.append(f"{where}: {problem}")
            raise pytest.Collector.CollectError(f"{where}: {problem}")
    shown = " ".join(f"--openenv-model={model}" for model in settings.llm.named_models)
    problem = unplayed_model(
        policies, settings.llm.named_models, models_given=shown, chosen_by=chosen_by
    ) or unused_sampling(policies, settings.llm.sampling_given, chosen_by=chosen_by)
    if problem and plays.unplayed is None:
        plays.unplayed = f"{where}: {problem}"


def parametrized_beyond_the_episode(metafunc: pytest.Metafunc) -> str | None:
    """Why the test's items would play each episode more than once, if they would.

    pytest-repeat's ``--count`` (or its ``repeat`` marker), a ``parametrize`` marker and a
    fixture with ``params`` give one test function several items per episode id: each
    would be counted and written as its own row under one ``episode_id`` (resume could
    not tell them apart).
    """
    count = metafunc.config.getoption("count", None)
    repeat = metafunc.definition.get_closest_marker("repeat")
    if metafunc.config.pluginmanager.hasplugin("repeat") and (
        (isinstance(count, int) and count > 1) or repeat is not None
    ):
        asked = "its repeat marker" if repeat is not None else f"--count {count}"
        return (
            f"pytest-repeat's {asked} would play each episode several times, each counted and "
            f"written as its own row under one episode_id; {REPEATS_FIX}"
        )
    marked = [mark for mark in metafunc.definition.iter_markers("parametrize")]
    if marked:
        names = ", ".join(repr(mark.args[0]) for mark in marked if mark.args)
        return (
            f"an episode test cannot be parametrized further (parametrize {names}): each "
            "episode would be played once per value, each counted and written as its own row "
            f"under one episode_id; {REPEATS_FIX}, or write one test per variant, each with "
            "its own openenv marker"
        )
    with_params = parametrized_fixtures(metafunc)
    if with_params:
        names = ", ".join(repr(name) for name in with_params)
        has = "has" if len(with_params) == 1 else "have"
        return (
            f"an episode test cannot use a parametrized fixture ({names} {has} "
            "@pytest.fixture(params=...)): each episode would be played once per param, each "
            "counted and written as its own row under one episode_id; give the fixture one "
            f"value (no params), {REPEATS_FIX}, or write one test per variant, each with its "
            "own openenv marker"
        )
    return None


def parametrized_fixtures(metafunc: pytest.Metafunc) -> list[str]:
    """The fixtures of the test's closure whose ``params`` pytest parametrizes it on.

    As pytest itself decides: the closest definition of each name, or the one it
    overrides when it requests that name. Read from ``_fixtureinfo``, as
    ``fixtures.fixture_is_ours`` does (pytest names no public way before setup).
    """
    info = getattr(metafunc.definition, "_fixtureinfo", None)
    if info is None:
        return []
    found: list[str] = []
    for name in metafunc.fixturenames:
        for fixturedef in reversed(info.name2fixturedefs.get(name, ())):
            if fixturedef.params is not None:
                found.append(name)
                break
            if name not in fixturedef.argnames:  # it does not build on the one it overrides
                break
    return found


def parametrize(
    metafunc: pytest.Metafunc,
    settings: Settings,
    service: EpisodeService,
    resume: ResumeCheck | None = None,
    plays: WhatPlays | None = None,
) -> None:
    """One item per episode of the test, ids ``ep-000000`` ...

    A mistake in a test's marker is one collection error naming the test, with no
    traceback, before any episode runs (not an error on every one of its items); so is
    a ``resume`` whose rows of this test were played otherwise (``resume_check.py``), and
    a marker's ``models=[...]`` that no policy of the test plays (``what_plays.py``).
    """
    where = metafunc.definition.nodeid
    try:
        test = episode_test(settings, metafunc.definition.get_closest_marker("openenv"))
        family = service.family(test.env, test.config)
    except EnvConfigError as exc:
        raise pytest.Collector.CollectError(f"{where}: {exc}") from None
    default = family.default_policy()
    try:
        arms = test.arms(default)
    except EnvConfigError as exc:
        raise pytest.Collector.CollectError(f"{where}: {exc}") from None
    # the test plays the policy it names only where no override stands in for it
    ours = fixture_is_ours(metafunc.definition, "openenv_policy")
    for arm in arms:
        if test.policy_source is None:
            chosen_by = f"the default teacher of {test.env} ({arm.policy})"
        elif len(arms) > 1:
            chosen_by = f"{test.policy_source} ({arm.name})"
        else:
            chosen_by = test.policy_source
        try:
            built = service.policy(arm.policy, arm.model)
        except pytest.UsageError as exc:
            raise pytest.Collector.CollectError(
                f"{where}: {chosen_by} cannot be used: {exc}"
            ) from None
        if ours:
            from .policy_fit import check_fits, check_honoured

            try:
                check_fits(built, family, chosen_by)
                check_honoured(arm.policy, family, chosen_by)
            except pytest.UsageError as exc:
                raise pytest.Collector.CollectError(f"{where}: {exc}") from None
    if ours and plays is not None:
        check_what_plays(where, test, arms, settings, plays)
    played_twice = parametrized_beyond_the_episode(metafunc)
    if played_twice is not None:
        raise pytest.Collector.CollectError(f"{where}: {played_twice}")
    specs = test.specs(arms, settings)
    if resume is not None:
        for arm in arms:  # each arm's rows against what that arm plays now
            part = id_part(arm.name) if len(arms) > 1 else ""
            played = [spec for spec in specs if spec.arm == part]
            resume.check(metafunc, test, family, arm, played, service)
    metafunc.parametrize(
        EPISODE_FIXTURE, specs, ids=[spec.episode_id for spec in specs], indirect=True
    )
