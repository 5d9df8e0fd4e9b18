"""Keep CPython's cyclic GC off the objects that live for the whole run.

A run that plays episodes imports large SDKs (``import openai`` builds some 650
pydantic models) and collects thousands of items, and all of it lives until the
process ends. Every full collection re-scans each of those objects, and pytest's
own unconfigure runs full collections too: on a short LLM run that was a tenth
of a second spent proving that the SDK is still alive. ``gc.freeze()`` moves what
exists to a permanent generation that collections skip. Reference counting still
frees everything as usual; only *cyclic* garbage among frozen objects waits for
``gc.unfreeze()``, which runs after pytest's last collection.
"""

from __future__ import annotations

import gc

import pytest

FROZEN_KEY = pytest.StashKey[bool]()


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
        gc.unfreeze()
