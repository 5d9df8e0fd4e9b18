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
    variables such as API keys that must not reach the run; an outer xdist run's
    ``PYTEST_XDIST_*`` go too (the suite runs some benchmarks from its workers).
    """
    return {
        key: value
        for key, value in os.environ.items()
        if key != "PYTHONDONTWRITEBYTECODE"
        and not key.startswith(("PYTEST_XDIST_", *drop_prefixes))
    }


def serve_first(server: object, nice: int) -> None:
    """Run the lean server's one thread at niceness ``nice`` (below 0: before the run's).

    A real endpoint answers from other machines; this one shares the run's cores, and at
    ``-n 2`` on two cores the three pytest processes keep them busy, so at the default
    priority its answers went out 1-2 ms late on average (p99 8-13 ms), time the run spent
    waiting on the bench. Served first, it answers on time; its CPU is the same either
    way. Needs root (or CAP_SYS_NICE) to go below 0: without, it says so and goes on.
    """
    thread = getattr(server, "thread_id", None)
    if not nice or thread is None:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, thread, nice)
    except OSError as exc:
        print(f"(model server left at its priority: niceness {nice} refused: {exc})")
