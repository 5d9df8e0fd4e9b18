"""``--openenv-shard``: which part of the run's episodes this process plays.

A run too large for one machine is split the way schedulers already split work: one
independent pytest per machine, each told its index. ``I/N`` names the shard; ``auto/N``
reads the index from the scheduler (a Kubernetes Indexed Job's ``JOB_COMPLETION_INDEX``, else
a Slurm job array's ``SLURM_ARRAY_TASK_ID``); ``auto`` reads the count too
(``SLURM_ARRAY_TASK_COUNT``: a Kubernetes pod does not see its job's completions count).

An episode belongs to shard ``index % N`` by its index within its test (``ep-000007`` is
index 7), so every test is split evenly, every repeat and every model of one seed land in the
same shard, and the split is the same whatever ``-n``, the order of tests, or n.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

#: where a shard's index (and count) came from -> the variables read, in order
SOURCES = {
    "kubernetes": ("JOB_COMPLETION_INDEX", None),
    "slurm": ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"),
}
FORMS = (
    "I/N (0 <= I < N, e.g. 2/8), auto/N (I from JOB_COMPLETION_INDEX or "
    "SLURM_ARRAY_TASK_ID) or auto (I and N from SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT)"
)


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (0-based) of ``count``; ``source``: option, kubernetes or slurm."""

    index: int
    count: int
    source: str = "option"

    @property
    def name(self) -> str:
        """As the option writes it (and the run identity records it): ``2/8``."""
        return f"{self.index}/{self.count}"

    @property
    def folder_name(self) -> str:
        """The output folder of this shard under the run's: ``shard-2-of-8``."""
        return f"shard-{self.index}-of-{self.count}"

    def holds(self, episode_index: int) -> bool:
        return episode_index % self.count == self.index

    def described(self) -> str:
        """``shard 2/8 (from SLURM_ARRAY_TASK_ID)``: what the header and summary say."""
        variables = [name for name in SOURCES.get(self.source, ()) if name]
        where = "--openenv-shard" if self.source == "option" else " and ".join(variables)
        return f"shard {self.name} (from {where})"

    def to_json(self) -> dict[str, object]:
        return {"index": self.index, "count": self.count, "source": self.source}


def _usage(raw: object, why: str) -> pytest.UsageError:
    return pytest.UsageError(f"--openenv-shard={raw!r} is invalid: {why}; expected {FORMS}")


def _whole(raw: object, text: str, what: str) -> int:
    if not text.isdigit():
        raise _usage(raw, f"{what} {text!r} is not a whole number")
    return int(text)


def parse_shard(raw: object, environ: Mapping[str, str] | None = None) -> Shard:
    """The shard ``raw`` names; ``auto`` parts are read from ``environ`` (the process's)."""
    environ = os.environ if environ is None else environ
    text = str(raw).strip()
    index_text, slash, count_text = text.partition("/")
    source = "option"
    if index_text == "auto":
        source, index_text = _scheduler_index(raw, environ)
        if not slash:
            if source != "slurm":
                raise _usage(
                    raw,
                    "the index came from JOB_COMPLETION_INDEX, and a Kubernetes pod does not see "
                    "its job's completions count: give the count, --openenv-shard=auto/N",
                )
            count_text = environ.get("SLURM_ARRAY_TASK_COUNT", "").strip()
            if not count_text:
                raise _usage(
                    raw,
                    "the shard count is not known: SLURM_ARRAY_TASK_COUNT is not set (give it: "
                    "--openenv-shard=auto/N)",
                )
    elif not slash:
        raise _usage(raw, "no shard count")
    index = _whole(raw, index_text, "the index")
    count = _whole(raw, count_text, "the count")
    if count < 1:
        raise _usage(raw, "the count must be at least 1")
    if index >= count:
        raise _usage(raw, f"the index {index} is not below the count {count} (0-based)")
    return Shard(index, count, source)


def _scheduler_index(raw: object, environ: Mapping[str, str]) -> tuple[str, str]:
    for source, (variable, _) in SOURCES.items():
        value = environ.get(variable, "").strip()  # type: ignore[arg-type]
        if value:
            if not value.isdigit():
                raise _usage(raw, f"{variable}={value!r} is not a whole number")
            first = environ.get("SLURM_ARRAY_TASK_MIN", "").strip() if source == "slurm" else ""
            if first.isdigit():
                # ``--array=1-4`` numbers its tasks from 1: the shard is the task's place
                return source, str(int(value) - int(first))
            return source, value
    raise _usage(raw, "neither JOB_COMPLETION_INDEX nor SLURM_ARRAY_TASK_ID is set")


def shard_option(flag: str, raw: object) -> Shard:
    """The ``--openenv-shard`` converter (``options.py``)."""
    return parse_shard(raw)


@dataclass
class ShardCollection:
    """What selecting a shard found in the collection: the whole run's episode tests (so a
    merge can name the episodes of a shard that never came) and the items left out."""

    #: test function -> {"n": episodes per repeat, "repeats": runs per seed}, over all shards
    tests: dict[str, dict[str, Any]]
    #: node ids of the items of other shards
    deselected: list[str]

    def to_wire(self) -> dict[str, object]:
        return {"tests": self.tests, "deselected": self.deselected}

    @classmethod
    def from_wire(cls, data: Mapping[str, object]) -> ShardCollection:
        tests = data.get("tests")
        deselected = data.get("deselected")
        return cls(
            dict(tests) if isinstance(tests, dict) else {},
            list(deselected) if isinstance(deselected, list) else [],
        )


#: the worker side's selection, for the controller (one process: the same config; xdist:
#: carried by the worker's ``workeroutput``)
SHARD_COLLECTION: pytest.StashKey[ShardCollection] = pytest.StashKey()
#: ``workeroutput`` key of the selection on an xdist worker
SHARD_WIRE = "openenv_shard_collection"
