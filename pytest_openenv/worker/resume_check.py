"""``--openenv-resume`` at collection: each test's rows in results.jsonl against how it plays now.

The controller hands every worker the rows already in results.jsonl with what each says
of how it was played (``dataset/identity.RowIdentity``). A resumed item is skipped, so
its row stands for the episode this run would play: if the test's marker (or the command
line) now resolves to another env, config, seed, policy, model or pass rule, the row is
another episode under the same id. Such a test fails its collection with the reason, and
the report carries it to the controller, which refuses the run (exit 4) before any
episode: refusing keeps every earlier row (re-running would replace them without a word).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from ..config.settings import Settings
from ..dataset.identity import (
    UNCHECKED,
    PlayedNow,
    RowIdentity,
    prompt_digest,
    row_mismatch,
    row_problem,
)
from ..envs.base import EnvFamily
from ..episode.loop import sampling_of
from ..episode.spec import EpisodeSpec
from ..policies.arms import Arm
from .fixtures import fixture_is_ours
from .marker import EpisodeTest
from .service import EpisodeService


class ResumeCheck:
    def __init__(self, rows: Mapping[str, RowIdentity]) -> None:
        #: node id -> what its row in results.jsonl says
        self.rows = rows
        self._by_function: dict[str, list[tuple[str, RowIdentity]]] | None = None
        #: refusals found since the last collection report (which carries them)
        self.refused: list[str] = []

    def rows_of(self, function: str) -> list[tuple[str, RowIdentity]]:
        if self._by_function is None:
            by_function: dict[str, list[tuple[str, RowIdentity]]] = {}
            for nodeid, row in self.rows.items():
                by_function.setdefault(nodeid.rpartition("[")[0], []).append((nodeid, row))
            self._by_function = by_function
        return self._by_function.get(function, [])

    def check(
        self,
        metafunc: pytest.Metafunc,
        test: EpisodeTest,
        family: EnvFamily,
        arm: Arm,
        specs: list[EpisodeSpec],
        service: EpisodeService,
    ) -> None:
        """Raise a collection error naming the first row the test would now play otherwise."""
        rows = self.rows_of(metafunc.definition.nodeid)
        if not rows:
            return
        now = played_now(metafunc, test, family, arm, service.settings, service)
        seeds = {spec.episode_id: spec.seed for spec in specs}
        differ = [
            (nodeid, row)
            for nodeid, row in rows
            if row.episode_id in seeds and row_mismatch(row, now, seeds[row.episode_id]) is not None
        ]
        if not differ:
            return
        nodeid, row = differ[0]
        message = row_problem(nodeid, row, now, seeds[row.episode_id], more=len(differ) - 1)
        assert message is not None
        self.refused.append(message)
        raise pytest.Collector.CollectError(f"{metafunc.definition.nodeid}: {message}")

    def take(self) -> str | None:
        """The refusals for the collection report being made (then forgotten)."""
        if not self.refused:
            return None
        text, self.refused = "\n".join(self.refused), []
        return text


def played_now(
    metafunc: pytest.Metafunc,
    test: EpisodeTest,
    family: EnvFamily,
    arm: Arm,
    settings: Settings,
    service: EpisodeService,
) -> PlayedNow:
    """What the rows of this test must say, were they played by this run."""
    definition = metafunc.definition
    rule = family.pass_rule().overridden(
        min_reward=test.min_reward if test.min_reward is not None else settings.run.min_reward,
        judge_at=test.judge_at or settings.run.judge_at,
    )
    env_is_ours = fixture_is_ours(definition, "openenv_env")
    policy_is_ours = fixture_is_ours(definition, "openenv_policy")
    played = service.policy(arm.policy, arm.model) if policy_is_ours else None
    prompt = settings.run.system_prompt
    if prompt is None:
        prompt = family.default_system_prompt()
    sampling = sampling_of(played) if played is not None else None
    return PlayedNow(
        env=family.spec if env_is_ours else UNCHECKED,
        config=family.config_json if env_is_ours else UNCHECKED,
        policy=played.name if played is not None else UNCHECKED,
        model=played.model if played is not None else UNCHECKED,
        min_reward=float(rule.min_reward),
        judged_at_turn_limit=rule.at_turn_limit,
        arguments_form=settings.output.tool_arguments or "string",
        system_prompt=prompt_digest(prompt) if env_is_ours else UNCHECKED,
        max_turns=(settings.run.max_turns or family.default_max_turns())
        if env_is_ours
        else UNCHECKED,
        prompt_style=getattr(family, "prompt_style", None) if env_is_ours else UNCHECKED,
        sampling=(json.dumps(sampling, sort_keys=True) if sampling else None)
        if played is not None
        else UNCHECKED,
        sources={
            "env": "the openenv marker's env, else --openenv-env",
            "env_config": "the openenv marker's keywords over --openenv-env-config",
            "seed": "the openenv marker's seed, else --openenv-seed",
            "policy": test.policy_source or f"the default teacher of {test.env}",
            "model": "--openenv-model",
            "min_reward": "the openenv marker's min_reward, else --openenv-min-reward or "
            f"the pass rule of {family.spec}",
            "judge_at": "the openenv marker's judge_at, else --openenv-judge-at",
            "tool_arguments": "--openenv-tool-arguments (or the --openenv-chat-template check)",
            "system_prompt": "--openenv-system-prompt (a digest of the text is compared)",
            "max_turns": "--openenv-max-turns",
            "prompt_style": "--openenv-prompt-style",
            "sampling": "--openenv-temperature / --openenv-max-tokens",
        },
    )
