"""Ini keys declared with their real types, read the same on every pytest this package allows.

pytest 8.4 added ``int`` and ``float`` ini types and pytest 9.2 type expressions
(``int | Literal["auto"]``); older releases know only strings, bools and lists. Each key is
declared with the richest type the running pytest has, and its value always ends in one of
our converters, so a bad value names the ``--openenv-*`` option whatever pytest said.

When pytest refuses a value (a TOML string where it wants an int, an inline table where it
wants a string), ``raw_value`` reads it from the config file itself (public paths only:
``-o`` overrides, then ``config.inipath``) and hands it to the converter, which accepts it or
explains what would be right. pytest 8 turns TOML values of ``[tool.pytest.ini_options]`` into
their ``str()``; an inline table read that way is read again from the file, so the same
pyproject.toml means the same run on pytest 8.0 and 9.2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

import pytest

from ..errors import IniValueUnreadable

#: what an option's value is: the ini type asked of pytest follows from it
IniKind = Literal["string", "int", "float", "bool", "list", "int-or-auto", "table"]

_PYTEST = tuple(int(part) for part in pytest.__version__.split(".")[:2] if part.isdigit())
#: pytest 8.4: ``addini(type="int" | "float")``
HAS_NUMBER_TYPES = _PYTEST >= (8, 4)
#: pytest 9.2: ``addini(type=int | Literal[...])``
HAS_TYPE_EXPRESSIONS = _PYTEST >= (9, 2)


def ini_type(kind: IniKind) -> Any:
    """The ``type=`` for ``parser.addini``: the real one where this pytest has it."""
    if kind in ("int", "float"):
        return kind if HAS_NUMBER_TYPES else "string"
    if kind == "int-or-auto":
        return int | Literal["auto"] if HAS_TYPE_EXPRESSIONS else "string"
    if kind == "bool":
        return "bool"
    if kind == "list":
        return "args"
    return "string"


def raw_value(config: pytest.Config, key: str, refused: Exception) -> Any:
    """The value of ini ``key`` as written, after pytest refused it with ``refused``."""
    for override in config.getoption("override_ini", None) or ():
        name, sep, value = str(override).partition("=")
        if sep and name.strip() == key:
            return value
    path = config.inipath
    if path is not None:
        found = _from_file(Path(path), key)
        if found is not None:
            return found
    raise IniValueUnreadable(str(refused))


def _overridden(config: pytest.Config, key: str) -> bool:
    return any(
        str(item).partition("=")[0].strip() == key
        for item in config.getoption("override_ini", None) or ()
    )


def origin(config: pytest.Config, key: str) -> str:
    """Where ini ``key``'s value came from, for messages."""
    if _overridden(config, key):
        return f"ini key {key} given with -o"
    return f"ini key {key} in {config.inipath}" if config.inipath else f"ini key {key}"


def native_table(config: pytest.Config, key: str) -> Any:
    """An inline table as TOML wrote it (pytest 8 hands us its ``str()``), else None."""
    if _overridden(config, key) or config.inipath is None or Path(config.inipath).suffix != ".toml":
        return None
    return _from_file(Path(config.inipath), key)


def _from_file(path: Path, key: str) -> Any:
    try:
        if path.suffix == ".toml":
            return _from_toml(path, key)
        return _from_ini(path, key)
    except (OSError, ValueError):
        return None


def _from_toml(path: Path, key: str) -> Any:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pytest itself needs tomli on 3.10
        import tomli as tomllib
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    # pyproject.toml: [tool.pytest.ini_options] or pytest 9's [tool.pytest];
    # pytest.toml: [pytest] (or the same [tool.pytest] table)
    tool = data.get("tool", {}).get("pytest", {})
    for table in (tool.get("ini_options", {}), tool, data.get("pytest", {})):
        if isinstance(table, dict) and key in table:
            return table[key]
    return None


def _from_ini(path: Path, key: str) -> Any:
    import iniconfig

    parsed = iniconfig.IniConfig(str(path))
    for section in ("pytest", "tool:pytest"):
        if section in parsed and key in parsed[section]:
            return parsed[section][key]
    return None
