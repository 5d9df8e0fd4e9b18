"""A resume that plays a subset describes the whole dataset in the folder.

40 episodes, 34 passed (85%); then ``--lf --openenv-resume --openenv-min-pass-rate 0.7``
printed ``pass rate 0.0% (n=6)``, failed the gate, and the card said 6 episodes while
results.jsonl held 34 rows. The same with ``-k`` and with a smaller ``--openenv-n``.
The earlier rows this run does not reach (deselected, past a smaller n) are still the
dataset in the folder, so figures, gate and card count them, and say how many of them
this run played.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import SCRIPTED, assert_clean, read_jsonl

ENV = "--openenv-env=openspiel:tic_tac_toe"
N = 40


@pytest.fixture(autouse=True)
def not_a_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)  # the child pytest must not think it a worker


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # the cache provider stays on: --lf reads it
    result = pytester.runpytest_subprocess(ENV, SCRIPTED, "-W", "ignore", *args, timeout=300)
    assert_clean(result)
    return result


def figures(pytester: pytest.Pytester) -> dict[str, Any]:
    summary = json.loads((pytester.path / "openenv-results" / "summary.json").read_text())
    return summary["figures"]


@pytest.fixture
def earlier(pytester: pytest.Pytester) -> dict[str, Any]:
    """The scripted teacher loses some games: a folder of passes and failures."""
    first = run(pytester, f"--openenv-n={N}")
    assert first.ret == 1, first.stdout.str()[-3000:]
    return figures(pytester)


def assert_describes_the_folder(
    pytester: pytest.Pytester, result: pytest.RunResult, earlier: dict[str, Any], played: int
) -> None:
    folder = pytester.path / "openenv-results"
    passed = len(read_jsonl(folder / "results.jsonl"))
    failed = len(read_jsonl(folder / "failures.jsonl"))
    assert passed + failed == N
    now = figures(pytester)
    assert (now["passed"], now["ran"], now["played"]) == (passed, N, played)
    assert now["passed"] == earlier["passed"]  # the scripted teacher is deterministic
    rate = f"{100 * passed / N:.1f}%"
    result.stdout.fnmatch_lines(
        [
            f"this run played {played} of them; the other {N - played} are the earlier run's "
            "rows in the output folder*",
            f"pass rate: {rate}  (95% Wilson CI *, n={N})",
            "gate: PASSED",
        ]
    )
    card = (folder / "README.md").read_text()
    assert f"| episodes | {N} ({passed} passed" in card, card
    assert f"the last run played {played} |" in card


@pytest.mark.slow
def test_last_failed_resume_gates_on_the_whole_folder(
    pytester: pytest.Pytester, earlier: dict[str, Any]
) -> None:
    failed = earlier["failed"]
    assert 0 < failed < N
    again = run(
        pytester, f"--openenv-n={N}", "--lf", "--openenv-resume", "--openenv-min-pass-rate=0.7"
    )
    assert again.ret == 0, again.stdout.str()[-3000:]
    # the failed episodes finished: --lf selects them, and the resume keeps them as they were
    assert_describes_the_folder(pytester, again, earlier, played=0)


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.slow
def test_a_k_subset_on_resume_counts_the_rows_it_did_not_select(
    pytester: pytest.Pytester, earlier: dict[str, Any], workers: str
) -> None:
    # ep-000000 .. ep-000009: every one finished (passed or failed), so each is skipped
    again = run(
        pytester,
        "-p",
        "no:cacheprovider",
        "-n",
        workers,
        f"--openenv-n={N}",
        "-k",
        "ep-00000",
        "--openenv-resume",
        "--openenv-min-pass-rate=0.7",
    )
    assert again.ret == 0, again.stdout.str()[-3000:]
    assert_describes_the_folder(pytester, again, earlier, played=0)


@pytest.mark.slow
def test_a_smaller_n_on_resume_keeps_counting_the_episodes_past_it(
    pytester: pytest.Pytester, earlier: dict[str, Any]
) -> None:
    again = run(
        pytester,
        "-p",
        "no:cacheprovider",
        "--openenv-n=10",
        "--openenv-resume",
        "--openenv-min-pass-rate=0.7",
    )
    assert again.ret == 0, again.stdout.str()[-3000:]
    assert_describes_the_folder(pytester, again, earlier, played=0)
