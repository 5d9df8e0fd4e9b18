"""Paths and seeds are checked where they are read: a usage error, never a crash mid-run.

A path component over 255 bytes in --openenv-output/-cache/-baseline was an
INTERNALERROR (exit 3); ``~`` in an ini key made a folder literally named ``~`` for
one of them; a seed past int64 was accepted and then read back by ``datasets`` as a
float64, so neighbouring episodes showed one seed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ENV = "--openenv-env=openspiel:tic_tac_toe"
LONG = "a" * 256
INT64_MAX = 2**63 - 1


@pytest.mark.parametrize(
    "option",
    [
        f"--openenv-output=out/{LONG}",
        f"--openenv-cache=cache/{LONG}",
        f"--openenv-baseline={LONG}/summary.json",
    ],
)
@pytest.mark.slow
def test_a_path_component_over_255_bytes_is_a_usage_error(run_pytest: Any, option: str) -> None:
    flag = option.partition("=")[0]
    extra = ["--openenv-policy=openai", "--openenv-model=m"] if "cache" in flag else []
    result = run_pytest(ENV, "--openenv-n=2", option, *extra)
    assert result.ret == 4, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    result.stderr.fnmatch_lines([f"ERROR: {flag}: the path component *256 bytes long*255 bytes*"])


def test_a_path_component_counts_bytes_not_characters(run_pytest: Any) -> None:
    # 128 two-byte characters: 256 bytes, which no Linux filesystem holds in one name
    result = run_pytest(ENV, "--openenv-n=2", "--openenv-output=" + "é" * 128)
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*256 bytes long*"])


@pytest.mark.slow
def test_a_tilde_in_the_ini_file_means_home(
    pytester: pytest.Pytester, run_pytest: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = pytester.path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    earlier = pytester.path / "earlier"
    pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", ENV, "--openenv-n=2", f"--openenv-output={earlier}"
    )
    (home / "runs").mkdir()
    (earlier / "summary.json").rename(home / "runs" / "summary.json")
    pytester.makeini(
        "[pytest]\nopenenv_output = ~/out\nopenenv_baseline = ~/runs/summary.json\n"
        "openenv_cache = ~/cache\n"
    )
    result = run_pytest(ENV, "--openenv-n=2")
    assert result.ret == 0, result.stdout.str()[-3000:] + result.stderr.str()[-2000:]
    assert not (pytester.path / "~").exists()
    metadata = json.loads((home / "out" / "metadata.json").read_text())
    assert metadata["settings"]["output"] == str(home / "out")
    assert metadata["evaluation"]["baseline"] == str(home / "runs" / "summary.json")
    assert metadata["settings"]["llm"]["cache"] == str(home / "cache")


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (
            [f"--openenv-seed={INT64_MAX + 1}"],
            "",
            f"*--openenv-seed='{INT64_MAX + 1}' is invalid: expected an integer seed from *(int64)",
        ),
        (
            [f"--openenv-seed={-(2**63) - 1}"],
            "",
            "*--openenv-seed=* is invalid: expected an integer seed from *(int64)",
        ),
        ([], f"openenv_seed = {INT64_MAX + 1}", "*expected an integer seed*(ini key openenv_seed*"),
        # the base fits, the last episode's seed does not
        (
            [f"--openenv-seed={INT64_MAX - 1}", "--openenv-n=3"],
            "",
            f"*the last episode's seed would be {INT64_MAX + 1}*up to {INT64_MAX - 2}",
        ),
    ],
)
def test_seeds_past_int64_are_refused(
    pytester: pytest.Pytester, run_pytest: Any, args: list[str], ini: str, message: str
) -> None:
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    result = run_pytest(ENV, *args)
    assert result.ret == 4, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    result.stderr.fnmatch_lines([message])
    assert not (pytester.path / "openenv-results").exists()


@pytest.mark.slow
def test_a_marker_seed_past_int64_is_refused_at_collection(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    pytester.makepyfile(
        test_eps=f"""
        import pytest

        @pytest.mark.openenv("openspiel:tic_tac_toe", n=2, seed={INT64_MAX})
        def test_ep(episode):
            assert episode.passed
        """
    )
    result = run_pytest("test_eps.py")
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        [f"*openenv marker seed={INT64_MAX}, n=2*last episode's seed would be {INT64_MAX + 1}*"]
    )
    assert "test_ep[ep-000000] PASSED" not in result.stdout.str()
    assert not (Path(pytester.path) / "openenv-results" / "results.jsonl").exists()


@pytest.mark.slow
def test_the_largest_seeds_load_as_distinct_integers(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    result = run_pytest(ENV, "--openenv-n=2", f"--openenv-seed={INT64_MAX - 1}")
    assert result.ret == 0, result.stdout.str()[-3000:]
    rows = (pytester.path / "openenv-results" / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(row)["seed"] for row in rows) == [INT64_MAX - 1, INT64_MAX]
