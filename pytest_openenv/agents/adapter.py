"""An agent program as the policy: what it is called, how it is started for one episode.

An ``AgentAdapter`` knows one program: the dialect it speaks to its model, how to read its
version offline, and how to write its per-episode config files and build its command line
and environment. The runner (``runner.py``) gives it an ``EpisodeSetup``; it never sees a
real key, only the proxy's per-episode token.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

from ..errors import AgentUnavailable

#: what an agent speaks to its model (the proxy serves all three)
Dialect = Literal["chat", "responses", "anthropic"]

#: variables of the user's environment an agent may see: never a key or a token
PASSED_THROUGH = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT")
#: seconds a ``--version`` may take (a Node CLI starts in about a second)
VERSION_TIMEOUT = 60.0


@dataclass(frozen=True)
class EpisodeSetup:
    """Everything one episode's agent is started with."""

    #: the agent's fresh working directory
    workdir: Path
    #: its own HOME (and XDG folders under it): nothing of the user's is read or written
    home: Path
    #: the first observation, the agent's task
    task: str
    #: the env's tools over MCP (streamable HTTP)
    mcp_url: str
    #: the MCP server's name (the prefix of the tool names the agent sees)
    mcp_name: str
    #: the capture proxy, ``http://127.0.0.1:PORT`` (no ``/v1``)
    proxy_url: str
    #: the episode's key for the proxy (a real key never reaches the agent)
    token: str
    #: the model id the agent asks for
    model: str


@dataclass(frozen=True)
class Launch:
    """How to start the agent: its command line and the variables set for it."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def isolated_env(setup: EpisodeSetup, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every agent starts from: the user's PATH and locale only, a
    per-episode HOME and XDG folders, a temp folder in the episode's directory."""
    source = os.environ if base is None else base
    env = {name: source[name] for name in PASSED_THROUGH if name in source}
    home = setup.home
    folders = {
        "HOME": home,
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_DATA_HOME": home / ".local" / "share",
        "XDG_CACHE_HOME": home / ".cache",
        "XDG_STATE_HOME": home / ".local" / "state",
        "TMPDIR": home / "tmp",
    }
    for name, folder in folders.items():
        folder.mkdir(parents=True, exist_ok=True)
        env[name] = str(folder)
    env.update({"NO_COLOR": "1", "TERM": "dumb", "CI": "1"})
    return env


class AgentAdapter:
    """One agent program. Subclasses set the class attributes and write ``launch``.

    Third parties register a subclass (or a factory returning an instance) under the entry
    point group ``pytest_openenv.agents``; the name there is the one after ``agent:``.
    """

    #: the name after ``agent:`` (``claude-code``)
    name: ClassVar[str] = "agent"
    #: what it speaks to its model
    dialect: ClassVar[Dialect] = "chat"
    #: the executable looked up on PATH
    program: ClassVar[str] = ""
    #: how a user installs it, for the error when it is missing
    install: ClassVar[str] = ""
    #: regular expressions of what its requests hold that differs from run to run with the
    #: same answers (a tool call's measured time): a response cache keys them as one
    volatile: ClassVar[tuple[str, ...]] = ()

    def executable(self) -> str:
        """The program's path; ``AgentUnavailable`` (with how to install it) when missing."""
        found = shutil.which(self.program) if self.program else None
        if found is None:
            how = f"; install it with `{self.install}`" if self.install else ""
            raise AgentUnavailable(f"agent:{self.name} needs `{self.program}` on PATH{how}")
        return found

    def version(self, scratch: Path) -> str:
        """The program's version, read offline (``PROGRAM --version`` with ``scratch`` as its
        HOME, so the check reads and writes nothing of the user's)."""
        scratch.mkdir(parents=True, exist_ok=True)
        setup = EpisodeSetup(scratch, scratch, "", "", "", "", "", "")
        try:
            done = subprocess.run(
                [self.executable(), "--version"],
                env=isolated_env(setup),
                cwd=scratch,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=VERSION_TIMEOUT,
                start_new_session=True,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AgentUnavailable(f"`{self.program} --version` did not answer: {exc}") from None
        words = (done.stdout or done.stderr).split()
        if done.returncode != 0 or not words:
            raise AgentUnavailable(
                f"`{self.program} --version` failed (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[:300]}"
            )
        # "2.1.197 (Claude Code)", "codex-cli 0.171.0", "1.18.33": the word with a digit
        return next((w for w in words if any(c.isdigit() for c in w)), words[0])

    def launch(self, setup: EpisodeSetup) -> Launch:
        """Write the episode's config files (under ``setup.workdir`` / ``setup.home``) and
        say how to start the agent non-interactively."""
        raise NotImplementedError
