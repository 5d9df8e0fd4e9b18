"""Find env families through the ``pytest_openenv.envs`` entry point group.

The plugin's own families are registered the same way (see pyproject.toml), so a
third-party family is a peer of the built-in ones, never a special case. A name is
looked up in this package's own entry points first: that reads one metadata file,
where the whole group reads every installed package's (10 ms in an environment with
a couple of hundred, in every process that plays); a built-in name is ours.
"""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, distribution, entry_points
from typing import TYPE_CHECKING, Any

from .base import EnvConfigError, EnvFamily

if TYPE_CHECKING:
    from .remote.hosting import KnownServers

GROUP = "pytest_openenv.envs"
DISTRIBUTION = "pytest-openenv"


@functools.cache
def installed_families() -> dict[str, Any]:
    """Family name -> entry point (not loaded: loading may import heavy engines)."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def split_spec(spec: str) -> tuple[str, str]:
    family, sep, variant = spec.partition(":")
    if not sep or not family or not variant:
        raise EnvConfigError(
            f"env spec {spec!r} is not of the form family:variant "
            "(e.g. openspiel:tic_tac_toe, reasoning_gym:chain_sum)"
        )
    return family.strip(), variant.strip()


@functools.cache
def own_families() -> dict[str, Any]:
    """This package's families (none when it runs from a tree with no installed metadata)."""
    try:
        found = distribution(DISTRIBUTION).entry_points
    except PackageNotFoundError:
        return {}
    return {ep.name: ep for ep in found if ep.group == GROUP}


def family_class(name: str) -> type[EnvFamily]:
    families = own_families()
    if name not in families:
        families = installed_families()
    if name not in families:
        known = ", ".join(sorted(families)) or "none"
        raise EnvConfigError(f"unknown env family {name!r}; installed families: {known}")
    cls = families[name].load()
    if not (isinstance(cls, type) and issubclass(cls, EnvFamily)):
        raise EnvConfigError(
            f"entry point {name!r} in group {GROUP} gives {cls!r}, not an EnvFamily subclass"
        )
    return cls


def build_family(
    spec: str,
    config: dict[str, Any],
    servers: tuple[str, ...] = (),
    prompt_style: str = "native",
    known: KnownServers | None = None,
) -> EnvFamily:
    """``known``: what the process knows of its servers (their schemas, read once per run);
    None: the family reads what it needs itself."""
    name, variant = split_spec(spec)
    family = family_class(name)(variant, config)
    if known is not None:
        family.known = known
    family.bind_servers(tuple(servers))
    family.use_prompt_style(prompt_style)
    return family
