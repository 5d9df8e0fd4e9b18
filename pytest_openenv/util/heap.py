"""Keep CPython's cyclic GC off the objects that live for the whole run.

A run that plays episodes imports large SDKs (``import openai`` builds some 650
pydantic models) and collects thousands of items, and all of it lives until the
run ends. Every full collection re-scans each of those objects: pytest's own
unconfigure runs full collections, and so does the interpreter on its way out.
On a short LLM run that was a quarter of a second spent proving that the SDK is
still alive. ``gc.freeze()`` moves what exists to a permanent generation that
collections skip. Reference counting still frees everything as usual; only
*cyclic* garbage among frozen objects waits for ``gc.unfreeze()``:

* after pytest's last collection when the process goes on after the run
  (``pytest.main()`` from a script or notebook, pytester's in-process runs), so
  nothing of the run is kept from the collector afterwards;
* never when the process ends with the run (the ``pytest`` command, an xdist
  worker): the operating system takes the memory back at once. Such a process
  freezes once more as its unconfigure begins (``freeze_for_exit``): what is alive
  then (every report of the session: 20,000 episodes are most of a million objects)
  lives until exit, and pytest's last collections and the interpreter's on its way
  out would otherwise scan all of it, a few tenths of a second after the last episode.
"""

from __future__ import annotations

import gc
import os
import sys

import pytest

FROZEN_KEY = pytest.StashKey[bool]()
#: how the ``pytest`` command starts: ``python -m pytest`` or the console script
PYTEST_MAINS = ("pytest", "py.test", "__main__.py")


def arrange_thaw(config: pytest.Config) -> None:
    """Called first thing in configure: the cleanup then runs after pytest's own GC passes."""
    config.add_cleanup(lambda: thaw(config))


def freeze(config: pytest.Config) -> None:
    """Freeze everything allocated so far (cumulative: call again after more setup)."""
    gc.freeze()
    config.stash[FROZEN_KEY] = True


def thaw(config: pytest.Config) -> None:
    if config.stash.get(FROZEN_KEY, False):
        config.stash[FROZEN_KEY] = False
        if not process_ends_with_run(config):
            gc.unfreeze()


def process_ends_with_run(config: pytest.Config) -> bool:
    """Whether this process exits as soon as the run is over."""
    if hasattr(config, "workerinput"):
        return True  # an xdist worker lives for one session
    main = sys.modules.get("__main__")
    main_file = os.path.basename(getattr(main, "__file__", None) or "")
    started_as_pytest = main_file in PYTEST_MAINS and (
        main_file != "__main__.py" or getattr(main, "__package__", None) == "pytest"
    )
    # pytest.main(args) from code started as pytest (a plugin, a test) is not the command
    return started_as_pytest and tuple(config.invocation_params.args) == tuple(sys.argv[1:])


def freeze_for_exit(config: pytest.Config) -> None:
    """As unconfigure begins in a process that ends with the run: freeze what is alive."""
    if config.stash.get(FROZEN_KEY, False) and process_ends_with_run(config):
        gc.freeze()


#: the youngest generation's threshold while episodes play (CPython's default is 700).
#: Episodes in flight keep their transcripts alive, so each young collection also walks
#: what they hold, and one ran every nine or so episodes: a tenth of the in-session GC
#: work at a threshold of 10,000, measured at ``--openenv-concurrency=64``. Reference
#: counting frees what is not cyclic as before; cyclic garbage waits a little longer.
EPISODE_GEN0 = 10_000
THRESHOLDS_KEY = pytest.StashKey[tuple[int, ...]]()


def fewer_young_collections(config: pytest.Config) -> None:
    """Raise the youngest generation's threshold for the run; put it back at its end.

    A threshold of 0 (collection turned off) or above ``EPISODE_GEN0`` is left as it is.
    """
    if THRESHOLDS_KEY in config.stash:
        return
    before = gc.get_threshold()
    config.stash[THRESHOLDS_KEY] = before
    if 0 < before[0] < EPISODE_GEN0:
        gc.set_threshold(EPISODE_GEN0, *before[1:])
        config.add_cleanup(lambda: gc.set_threshold(*before))
