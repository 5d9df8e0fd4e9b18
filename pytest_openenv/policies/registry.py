"""Turn ``--openenv-policy`` into a ``Policy`` through lazy factories (whether it fits the
env: ``worker/policy_fit.py``).

A policy name stands for a ``PolicyKind``: the ``module:attr`` of its factory, imported only
when a process builds the policy, and what the run must know without building it: whether
it plays a model (takes ``--openenv-model`` and the sampling options, goes through
``--openenv-cache``), calls ``--openenv-llm-endpoint``, or wants the env's expert move.
``pkg.module:callable`` loads a user's function (``callable.py``), also cached.

The built-in kinds are a static table here, not entry points in this package's metadata as
env families are: every collection and the controller ask what a name plays (is a model
option used, does the metadata say it sampled) and a table answers that from this module
alone, with no metadata file read, even from a source tree with none installed; only
building imports a provider module (an SDK client, transformers). Third parties register
through the entry point group ``pytest_openenv.policies``: the entry point names a
``PolicyKind`` object, which belongs in a module that imports nothing heavy (loading the
entry point imports it; the factory's own module is imported only to build). That group is
read only for a name that is neither built in nor ``pkg.module:callable``.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..util.overload import OverloadSignal
    from .base import Policy

GROUP = "pytest_openenv.policies"


class PolicyFactory(Protocol):
    """Builds the policy for a run, checking what it needs (model, SDK, key) first: a
    misfit is a ``pytest.UsageError``. ``overload`` hears a model endpoint's pushback."""

    def __call__(self, settings: Settings, overload: OverloadSignal | None = None) -> Policy: ...


@dataclass(frozen=True)
class PolicyKind:
    """What a policy name is, known without importing its factory."""

    #: ``module:attr`` of a ``PolicyFactory``
    factory: str
    #: sends ``--openenv-model`` and samples with the sampling options (and is cached)
    plays_model: bool = False
    #: sends its requests to ``--openenv-llm-endpoint`` when one is given
    calls_endpoint: bool = False
    #: plays the env's expert move (``Turn.expert``)
    wants_expert: bool = False
    #: its factory takes the policy's name too (``name=``): one factory, many names
    named: bool = False

    def load_factory(self) -> PolicyFactory:
        module, _, attr = self.factory.partition(":")
        found: Any = importlib.import_module(module)
        for part in attr.split("."):
            found = getattr(found, part)
        return found  # type: ignore[no-any-return]


_OWN = "pytest_openenv.policies"

#: The policies of this package, in the order messages list them.
BUILT_IN: dict[str, PolicyKind] = {
    "scripted": PolicyKind(f"{_OWN}.scripted:build_scripted_policy"),
    "random": PolicyKind(f"{_OWN}.scripted:build_random_policy"),
    "expert": PolicyKind(f"{_OWN}.expert:build_expert_policy", wants_expert=True),
    "openai": PolicyKind(
        f"{_OWN}.llm.openai_chat:build_openai_policy", plays_model=True, calls_endpoint=True
    ),
    "anthropic": PolicyKind(
        f"{_OWN}.llm.anthropic_messages:build_anthropic_policy",
        plays_model=True,
        calls_endpoint=True,
    ),
    "transformers": PolicyKind(
        f"{_OWN}.llm.transformers_local:build_transformers_policy", plays_model=True
    ),
}


#: ``agent:NAME``: an agent program plays the whole episode through the env's MCP tools; the
#: episode layer owns its factory (the agent runner and the loop meet there)
AGENT_PREFIX = "agent:"
AGENT = PolicyKind(
    "pytest_openenv.episode.agent_policy:build_agent_policy",
    plays_model=True,
    calls_endpoint=True,
    named=True,
)


def teachers() -> list[str]:
    """The built-in policies that play no model (what a family may refuse to be played by)."""
    return [name for name, kind in BUILT_IN.items() if not kind.plays_model]


def model_policies() -> list[str]:
    """The built-in policies that play a model."""
    return [name for name, kind in BUILT_IN.items() if kind.plays_model]


@functools.cache
def installed_policies() -> dict[str, Any]:
    """Name -> entry point of the group (not loaded), read once per process."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def kind_of(name: str) -> PolicyKind | None:
    """The kind of ``name``; None for ``pkg.module:callable`` and for a name no one registered."""
    if name in BUILT_IN:
        return BUILT_IN[name]
    if name.startswith(AGENT_PREFIX):
        return AGENT
    if ":" in name:
        return None
    entry_point = installed_policies().get(name)
    if entry_point is None:
        return None
    return _load_kind(name, entry_point)


def _load_kind(name: str, entry_point: Any) -> PolicyKind:
    try:
        kind = entry_point.load()
    except Exception as exc:
        raise pytest.UsageError(
            f"--openenv-policy={name}: entry point {entry_point.value!r} in group {GROUP} "
            f"cannot be loaded ({type(exc).__name__}: {exc})"
        ) from None
    if not isinstance(kind, PolicyKind):
        raise pytest.UsageError(
            f"--openenv-policy={name}: entry point {entry_point.value!r} in group {GROUP} "
            f"gives {kind!r}, not a pytest_openenv.policies.registry.PolicyKind"
        )
    return kind


def plays_a_model(name: str) -> bool:
    """Whether ``name`` sends ``--openenv-model`` (and samples with the sampling options)."""
    kind = kind_of(name)
    return kind is not None and kind.plays_model


def samples(name: str) -> bool:
    """Whether ``name`` samples with the run's sampling options (an agent program samples
    with its own)."""
    return plays_a_model(name) and not name.startswith(AGENT_PREFIX)


def calls_endpoint(name: str) -> bool:
    """Whether ``name`` sends its requests to ``--openenv-llm-endpoint``."""
    kind = kind_of(name)
    return kind is not None and kind.calls_endpoint


def build_policy(name: str, settings: Settings, overload: OverloadSignal | None = None) -> Policy:
    """The policy ``name``; a model-backed one tells ``overload`` of its endpoint's pushback."""
    if settings.llm.replay and not settings.llm.cache:
        raise pytest.UsageError(
            "--openenv-replay needs --openenv-cache DIR (the recorded responses to replay)"
        )
    check_known(name)
    kind = kind_of(name)
    if kind is None:
        from .callable import load_policy

        policy = load_policy(name)
    else:
        factory: Any = kind.load_factory()
        policy = (
            factory(settings, overload, name=name) if kind.named else factory(settings, overload)
        )
        if not kind.plays_model or kind is AGENT:
            return policy
    from ..util.secrets import KnownSecrets
    from .cache import wrap_with_cache

    return wrap_with_cache(policy, settings.llm, name, KnownSecrets.from_settings(settings))


def check_known(name: str) -> None:
    """Raise ``pytest.UsageError`` unless ``name`` is a policy this registry can build."""
    if ":" in name or kind_of(name) is not None:
        return  # agent:NAME: its factory names the agents when NAME is none of them
    others = sorted(installed_policies())
    raise pytest.UsageError(
        f"--openenv-policy={name!r} is unknown; choose one of: "
        f"{', '.join([*BUILT_IN, *others])}, or pkg.module:callable"
    )
