"""Load, while episodes wait on the network, what the end of the run will import.

After the last episode the run renders the dataset card (PyYAML), and
hypothesis' pytest plugin (hypothesis is a dependency of this one) imports the
whole library for its terminal summary: about a tenth of a second after the
last episode, on every run. A concurrent run mostly waits on models and servers,
so one background import takes that off the end. Only in the process that
prints the summary: with ``-n 0`` once episodes are queued in the pool (never where
they are CPU-bound, no pool); under xdist in the controller at the first worker report.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
import warnings

import pytest

#: what the end of a run imports, and the plugin whose summary needs it (None: ours):
#: the card's front matter (PyYAML, huggingface_hub's card data), report.html's renderer
END_OF_RUN_IMPORTS = (
    ("yaml", None),
    ("huggingface_hub.repocard_data", None),
    ("pytest_openenv.report.page", None),
    ("hypothesis.internal.observability", "hypothesispytest"),
)


def start(config: pytest.Config) -> threading.Thread | None:
    wanted = [
        module
        for module, plugin in END_OF_RUN_IMPORTS
        if module not in sys.modules and (plugin is None or config.pluginmanager.has_plugin(plugin))
    ]
    if not wanted:
        return None
    thread = threading.Thread(target=_import, args=(wanted,), name="openenv-warmup", daemon=True)
    thread.start()
    return thread


def _import(modules: list[str]) -> None:
    # hypothesis, imported whole, runs trio's entry-point hook, whose warning about its own
    # random instance would otherwise be printed into pytest's progress line: no test or
    # collection is running in this thread to capture it
    warnings.filterwarnings("ignore", message="It looks like `register_random`", module="trio")
    for module in modules:
        with contextlib.suppress(Exception):  # only a head start: the real import reports
            importlib.import_module(module)
