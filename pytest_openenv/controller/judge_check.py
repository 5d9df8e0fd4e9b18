"""Controller side: the judge's endpoint checked once, before any episode, as the policy's is.

A dead judge endpoint, a refused key or a model it does not serve would otherwise make every
item error after its retries; here it is one usage error (``model_check``'s requests, none
that costs tokens). ``--openenv-replay`` needs no endpoint and is not checked.
"""

from __future__ import annotations

import dataclasses

import pytest

from ..config.settings import Settings
from ..policies.judging import judge_provider
from ..util.endpoints import redact
from ..util.secrets import KnownSecrets
from .model_check import endpoint_of, endpoint_problem


def check_judge_endpoint(config: pytest.Config, settings: Settings) -> None:
    model = settings.judge.model
    if model is None or settings.llm.replay or config.getoption("collectonly", False):
        return
    provider = judge_provider(settings)
    endpoint = settings.judge.endpoint or settings.llm.endpoint
    judged = dataclasses.replace(settings, llm=dataclasses.replace(settings.llm, endpoint=endpoint))
    found = endpoint_problem(provider, model, judged)
    if found is None:
        return
    where = redact(endpoint_of(provider, judged))
    message = KnownSecrets.from_settings(settings).scrub(
        f"--openenv-judge={model}: the judge's endpoint {where} cannot judge (checked before "
        f"any episode ran): {found}. Start it or fix its URL (--openenv-judge-endpoint), the "
        "key, or the model name; --openenv-cache DIR --openenv-replay replays recorded verdicts"
    )
    raise pytest.UsageError(message)
