"""What every benchmark's pytest subprocess shares: the command head and the environment."""

from __future__ import annotations

import os
import sys

#: a quiet pytest run that leaves no cache behind
PYTEST_QUIET = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no"]


def user_env(*drop_prefixes: str) -> dict[str, str]:
    """This environment with bytecode caching on, as on a user's machine.

    Some sandboxes set PYTHONDONTWRITEBYTECODE, which makes every run recompile every
    import: that measures the sandbox, not the plugin. ``drop_prefixes`` removes
    variables such as API keys that must not reach the run.
    """
    return {
        key: value
        for key, value in os.environ.items()
        if key != "PYTHONDONTWRITEBYTECODE" and not key.startswith(drop_prefixes or ("\0",))
    }
