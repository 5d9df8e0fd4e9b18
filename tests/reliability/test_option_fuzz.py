"""Any value for any ``--openenv-*`` option (or its ini key) is a usage error or a working run.

Never an INTERNALERROR, a traceback or a hang. The option list is read from the
plugin's own table, so an option added later is fuzzed too. Two layers:
configuration in-process (hundreds of cases, fast: every value goes through the
same parsing and start-up checks a run does), then a handful of complete runs in
a subprocess that also play the episodes and write the files.
"""

from __future__ import annotations

import json
import math
import os
import re

import pytest
from faults import ENV, Launcher
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from pytest_openenv.config.options import OPTIONS

FLAGS = {opt.flag: opt for opt in OPTIONS}
#: options naming files or folders: kept relative and inside the test's folder
PATH_OPTIONS = {"output", "cache", "baseline"}
#: what a shell user might type, good and bad, plus arbitrary text
TYPED = [
    "",
    " ",
    "0",
    "-1",
    "1",
    "3",
    "0.5",
    "1e309",
    "-0",
    "nan",
    "inf",
    "true",
    "yes",
    "{}",
    "[]",
    "null",
    '{"opponent": "first"}',
    '{"a":',
    "http://",
    "http://127.0.0.1:1",
    "ws://127.0.0.1:1/x",
    "https://user:pw@127.0.0.1:1",
    "ftp://x",
    "a/b",
    "alice/data",
    "a//b",
    "x" * 5000,
    "é∂🙂",
    "scripted",
    "random",
    "openai",
    "anthropic",
    "no.such.module:thing",
    "openspiel:tic_tac_toe",
    "openspiel:no_such_game",
    "nosuch:thing",
    "pass@k",
    "pass^k",
    "mit",
    # hostile: unparseable URLs, JSON nested past any stack, counts too big to
    # collect, bytes that are not UTF-8 (argv hands them to Python as lone surrogates)
    "http://[::1",
    "https://u:pw@[::1",
    "ws://]",
    '{"a":' * 2000 + "1" + "}" * 2000,
    "[" * 5000 + "]" * 5000,
    "100001",
    "10000000",
    os.fsdecode(b"\xff\xfe"),
    os.fsdecode(b"openspiel:tic_tac_toe\xff"),
]
#: what a shell passes when the terminal's encoding is not UTF-8
undecodable = st.binary(min_size=1, max_size=12).filter(lambda b: b"\x00" not in b).map(os.fsdecode)
values = st.one_of(
    st.sampled_from(TYPED),
    undecodable,
    st.text(max_size=30),
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


def usable(flag: str, value: str) -> bool:
    if flag in PATH_OPTIONS:  # never outside the test folder
        return not (value.startswith(("/", "~", "\\")) or ".." in value or ":" in value)
    return True


option_values = (
    st.sampled_from(sorted(FLAGS))
    .flatmap(lambda flag: st.tuples(st.just(flag), values, st.booleans()))
    .filter(lambda case: usable(case[0], case[1]))
)


def as_args(cases: list[tuple[str, str, bool]]) -> list[str]:
    """Command-line form, or the ini form (``-o openenv_x=value``) when asked or a flag."""
    args = []
    for flag, value, via_ini in cases:
        if via_ini or FLAGS[flag].is_flag:
            args += ["-o", f"{FLAGS[flag].dest}={value}"]
        else:
            args.append(f"--openenv-{flag}={value}")
    return args


@pytest.fixture
def no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "ANTHROPIC_", "HF_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1")  # a closed port: fails at once


@settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(cases=st.lists(option_values, min_size=1, max_size=3))
# an empty ini bool: pytest 9.0 raised it as an INTERNALERROR (CI found this)
@example(cases=[("private", "", False)])
@example(cases=[("server", "http://[::1", False)])
@example(cases=[("llm-endpoint", "http://[::1", True)])
@example(cases=[("env-config", "[" * 3000 + "]" * 3000, False)])
@example(cases=[("model", os.fsdecode(b"m\xff"), True)])
@example(cases=[("n", "1000001", False)])
@example(cases=[("baseline", "x" * 5000, False)])  # a name too long: was an INTERNALERROR
@pytest.mark.slow
def test_any_value_configures_or_is_a_usage_error(
    pytester: pytest.Pytester, no_secrets: None, cases: list[tuple[str, str, bool]]
) -> None:
    args = [f"--openenv-env={ENV}", "-p", "no:cacheprovider", *as_args(cases)]
    try:
        config = pytester.parseconfigure(*args)
    except pytest.UsageError as exc:
        message = str(exc)
        assert message.strip() and "Traceback" not in message
        event("usage error")
        return
    except ValueError as exc:
        # a NUL byte cannot be an argument of a real command line at all
        if any("\x00" in value for _, value, _ in cases):
            return
        raise AssertionError(f"{args!r} -> {exc!r}") from exc
    event("configured")
    config._ensure_unconfigure()


#: values a real run can take without running for long: small numbers stay small
small_values = st.one_of(
    st.sampled_from([v for v in TYPED if len(v) < 100]),
    # a real command line holds no NUL and no lone surrogate (argv must encode)
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
        max_size=12,
    ),
    undecodable,
)
BOUNDED = {"n": 3, "repeats": 2, "max-turns": 12, "concurrency": 4, "timeout": 30}


def bounded(flag: str, value: str) -> bool:
    limit = BOUNDED.get(flag)
    if limit is None:
        return usable(flag, value)
    try:
        number = float(value)
    except ValueError:
        return True  # not a number: the option must refuse it
    return math.isnan(number) or abs(number) <= limit  # NaN passes: it must be refused


run_cases = st.lists(
    st.sampled_from(sorted(FLAGS))
    .flatmap(lambda flag: st.tuples(st.just(flag), small_values, st.booleans()))
    .filter(lambda case: bounded(case[0], case[1]) and "\x00" not in case[1]),
    min_size=1,
    max_size=4,
)


@settings(
    max_examples=8,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(cases=run_cases)
@pytest.mark.slow
def test_fuzzed_runs_end_cleanly(
    tmp_path_factory: pytest.TempPathFactory, cases: list[tuple[str, str, bool]]
) -> None:
    launcher = Launcher(tmp_path_factory.mktemp("fuzz") / "work")
    launcher.folder.mkdir()
    env = {"HF_ENDPOINT": "http://127.0.0.1:1", "HF_HOME": str(launcher.folder / "hf")}
    try:
        finished = launcher.start(
            f"--openenv-env={ENV}", "--openenv-n=2", *as_args(cases), env=env
        ).wait(timeout=90)
    finally:
        launcher.close()
    finished.assert_clean()  # no INTERNALERROR, no traceback on stderr
    event(f"exit {finished.returncode}")
    assert finished.returncode in (0, 1, 4, 5), (cases, finished.text[-3000:])
    if finished.returncode == 4:
        assert re.search(r"openenv|option|invalid|expected", finished.stderr, re.I), (
            cases,
            finished.stderr[-2000:],
        )
    summary = launcher.output / "summary.json"
    if finished.returncode in (0, 1) and summary.exists():
        assert json.loads(summary.read_text())["figures"]["episodes"] >= 1
