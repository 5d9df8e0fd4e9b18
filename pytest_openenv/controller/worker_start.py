"""What an xdist worker of the bundled episode test does not load: plugins it never calls.

A worker loads every installed pytest plugin before it reads a single option, and
some cost more than the whole plugin stack: anyio's imports asyncio and, with trio
installed (selenium needs it), all of trio to list its backends; pytest-html imports
jinja2; syrupy and hypothesis' plugin load their libraries, only for this plugin to
unregister them (``worker/bundled.py``). Together about half a second of each worker's
start, before its first model request. The bundled episode test calls none of them, so
the controller starts its workers with ``-p no:NAME`` for each (through the worker's
``PYTEST_ADDOPTS``, the one setting read before plugins load), unless the run names one
of that plugin's own options or ini keys: those must still parse, and then the plugin
stays. The controller keeps its plugins as they are.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from typing import Any

import pytest

#: entry-point plugins the bundled episode test never calls in a worker
IDLE_IN_WORKERS = ("anyio", "syrupy", "hypothesispytest", "html", "html_fixtures")

#: the worker's environment variable pytest reads its extra arguments from before plugins load
ADDOPTS = "PYTEST_ADDOPTS"


class _Recorder:
    """Stands in for pytest's parser to learn the options and ini keys a plugin registers."""

    def __init__(self) -> None:
        self.options: set[str] = set()
        self.ini: set[str] = set()

    def getgroup(self, *args: Any, **kwargs: Any) -> _Recorder:
        return self

    def addoption(self, *names: str, **kwargs: Any) -> None:
        self.options.update(names)

    _addoption = addoption

    def addini(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.ini.add(name)


def registered_names(plugin: object, manager: Any) -> tuple[set[str], set[str]] | None:
    """The options and ini keys ``plugin`` registers; None when it cannot be told."""
    add = getattr(plugin, "pytest_addoption", None)
    recorder = _Recorder()
    if add is None:
        return recorder.options, recorder.ini
    import inspect

    given = {"parser": recorder, "pluginmanager": manager}
    try:
        wanted = inspect.signature(add).parameters
        add(**{name: given[name] for name in wanted})
    except Exception:  # a parser call the recorder lacks: leave the plugin loaded
        return None
    return recorder.options, recorder.ini


def _named(args: Iterable[str], options: set[str]) -> bool:
    for arg in args:
        name = arg.split("=", 1)[0]
        if name in options or any(len(o) == 2 and arg.startswith(o) for o in options):
            return True
    return False


def _ini_keys(config: pytest.Config, args: list[str]) -> set[str]:
    """The ini keys the run sets: in its ini file, or with ``-o key=value``."""
    # pytest 9 deprecates the public name of the same mapping
    found = getattr(config, "_inicfg", None)
    keys = set(found if found is not None else config.inicfg)
    for before, arg in zip(["", *args], args, strict=False):
        if before in ("-o", "--override-ini"):
            keys.add(arg.split("=", 1)[0])
        elif arg.startswith("--override-ini="):
            keys.add(arg.removeprefix("--override-ini=").split("=", 1)[0])
        elif arg.startswith("-o") and arg != "-o":
            keys.add(arg[2:].split("=", 1)[0])
    return keys


def idle_plugins(config: pytest.Config, plugins: dict[str, object]) -> list[str]:
    """Which of ``plugins`` (name: module, as loaded here) a worker can leave out."""
    args = [
        *config.invocation_params.args,
        *shlex.split(os.environ.get(ADDOPTS, "")),
        *config.getini("addopts"),
    ]
    ini_keys = _ini_keys(config, args)
    idle = []
    for name, plugin in plugins.items():
        names = registered_names(plugin, config.pluginmanager)
        if names is None:
            continue
        options, ini = names
        if not _named(args, options) and not (ini & ini_keys):
            idle.append(name)
    return idle


def loaded_idle_plugins(config: pytest.Config) -> dict[str, object]:
    """The idle plugins loaded in this process (before ``bundled.py`` unregisters some)."""
    manager = config.pluginmanager
    found = {name: manager.get_plugin(name) for name in IDLE_IN_WORKERS}
    return {name: plugin for name, plugin in found.items() if plugin is not None}


def worker_addopts(idle: list[str]) -> str | None:
    """The workers' ``PYTEST_ADDOPTS``: this process's, then ``-p no:NAME`` for each idle
    plugin; None when there is nothing to add."""
    if not idle:
        return None
    return " ".join([os.environ.get(ADDOPTS, ""), *(f"-p no:{name}" for name in idle)]).strip()


def leave_out_in_workers(specs: list[Any], addopts: str) -> None:
    """Every worker spec starts its worker with ``addopts`` as its ``PYTEST_ADDOPTS``.

    Set on the specs xdist already made (their worker ids allocated), which execnet
    applies in the new process before xdist's worker reads its arguments.
    """
    for spec in specs:
        if ADDOPTS not in spec.env:  # one the user's --tx set is theirs to decide
            spec.env[ADDOPTS] = addopts
