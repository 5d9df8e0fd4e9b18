"""Command-line options and ini keys, parsed once into ``Settings``.

Every ``--openenv-x-y`` has an ini key ``openenv_x_y``; the command line wins.
Each option is one row of ``OPTIONS``; parsing a bad value raises
``pytest.UsageError`` naming the option and what would be valid.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

BUILTIN_POLICIES = ("scripted", "random")


def _bad(flag: str, value: Any, expected: str) -> pytest.UsageError:
    return pytest.UsageError(f"--openenv-{flag}={value!r} is invalid: expected {expected}")


def _positive_int(flag: str, raw: Any) -> int:
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise _bad(flag, raw, "a positive integer, e.g. 10") from None
    if value <= 0:
        raise _bad(flag, raw, "a positive integer (> 0), e.g. 10")
    return value


def _int(flag: str, raw: Any) -> int:
    try:
        return int(str(raw).strip())
    except ValueError:
        raise _bad(flag, raw, "an integer, e.g. 0") from None


def _float(flag: str, raw: Any) -> float:
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise _bad(flag, raw, "a number, e.g. 0.5") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise _bad(flag, raw, "a finite number")
    return value


def _json_object(flag: str, raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(str(raw))
    except ValueError as exc:
        raise _bad(
            flag, raw, f'a JSON object such as \'{{"opponent": "random"}}\' ({exc})'
        ) from None
    if not isinstance(value, dict):
        raise _bad(flag, raw, 'a JSON object such as \'{"opponent": "random"}\'')
    return value


def _text(flag: str, raw: Any) -> str:
    return str(raw)


def _flag(flag: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise _bad(flag, raw, "true or false")


@dataclass(frozen=True)
class Option:
    flag: str
    help: str
    convert: Callable[[str, Any], Any] = _text
    default: Any = None
    metavar: str | None = None
    is_flag: bool = False

    @property
    def dest(self) -> str:
        return "openenv_" + self.flag.replace("-", "_")


OPTIONS: list[Option] = [
    Option(
        "env",
        "env as family:variant, e.g. openspiel:tic_tac_toe (plugin is inert without it)",
        metavar="SPEC",
    ),
    Option("n", "episodes per episode test (default 10)", _positive_int, 10, "N"),
    Option("seed", "base seed; episode i gets seed S+i (default 0)", _int, 0, "S"),
    Option(
        "env-config",
        "env options as a JSON object (opponent, game params, dataset config)",
        _json_object,
        None,
        "JSON",
    ),
    Option(
        "policy",
        "scripted, random, or another installed policy (default scripted)",
        _text,
        "scripted",
        "P",
    ),
    Option(
        "system-prompt", "system prompt for the agent (default: the family's)", _text, None, "TEXT"
    ),
    Option(
        "max-turns",
        "policy turns per episode before it counts as failed (default 10)",
        _positive_int,
        10,
        "N",
    ),
    Option("output", "output folder (default openenv-results under rootdir)", _text, None, "DIR"),
    Option(
        "resume",
        "skip episodes already in results.jsonl (reported as skipped)",
        _flag,
        False,
        is_flag=True,
    ),
    Option(
        "min-reward",
        "an episode passes iff reward >= R (default: the family's verdict)",
        _float,
        None,
        "R",
    ),
]


def register(parser: pytest.Parser) -> None:
    group = parser.getgroup("openenv", "agent episodes in OpenEnv environments")
    for opt in OPTIONS:
        flag = f"--openenv-{opt.flag}"
        if opt.is_flag:
            group.addoption(flag, action="store_true", default=None, dest=opt.dest, help=opt.help)
            parser.addini(opt.dest, opt.help, type="bool", default=False)
        else:
            group.addoption(
                flag,
                action="store",
                default=None,
                dest=opt.dest,
                metavar=opt.metavar,
                help=opt.help,
            )
            parser.addini(opt.dest, opt.help, default=None)


def raw_values(config: pytest.Config) -> dict[str, Any]:
    """Option values after CLI-over-ini precedence, converted and checked."""
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        raw = config.getoption(opt.dest, None)
        if raw is None:
            raw = config.getini(opt.dest)
            if raw in (None, "", []) or (opt.is_flag and raw is False):
                raw = None
        values[opt.flag] = opt.default if raw is None else opt.convert(opt.flag, raw)
    return values


@dataclass(frozen=True)
class Settings:
    """The run configuration shared by controller and workers."""

    env: str | None
    n: int
    seed: int
    env_config: dict[str, Any]
    policy: str
    system_prompt: str | None
    max_turns: int
    output: Path
    resume: bool
    min_reward: float | None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        values = raw_values(config)
        output = values["output"]
        folder = Path(output) if output else Path(config.rootpath) / "openenv-results"
        if not folder.is_absolute():
            folder = Path(config.invocation_params.dir) / folder
        return cls(
            env=values["env"],
            n=values["n"],
            seed=values["seed"],
            env_config=values["env-config"] or {},
            policy=values["policy"],
            system_prompt=values["system-prompt"],
            max_turns=values["max-turns"],
            output=folder,
            resume=bool(values["resume"]),
            min_reward=values["min-reward"],
            extra=values,
        )

    def public(self) -> dict[str, Any]:
        """For metadata.json: plain values, never secrets (none are ever options)."""
        return {
            "env": self.env,
            "n": self.n,
            "seed": self.seed,
            "env_config": self.env_config,
            "policy": self.policy,
            "system_prompt": self.system_prompt,
            "max_turns": self.max_turns,
            "output": str(self.output),
            "resume": self.resume,
            "min_reward": self.min_reward,
        }


def check_output_writable(folder: Path) -> None:
    """Fail before any episode if the output folder cannot be created or written.

    Creates nothing: the plugin writes nothing until an episode reports.
    """
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise pytest.UsageError(
            f"--openenv-output={str(folder)!r} is not usable: {probe} exists and is not a "
            "directory; pass a folder path that is writable"
        )
    if not os.access(probe, os.W_OK | os.X_OK):
        raise pytest.UsageError(
            f"--openenv-output={str(folder)!r} is not writable ({probe} denies write access); "
            "pass a folder path that is writable"
        )
