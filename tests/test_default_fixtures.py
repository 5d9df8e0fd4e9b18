"""The overridable ``openenv_env`` / ``openenv_policy`` fixtures and how episodes report failures.

The defaults are session-scoped and pick each episode's env and policy from its
spec (``for_episode``); a user's object with ``for_episode`` is a per-episode
router. Failed episodes report their story, not a traceback, unless
``--fulltrace`` asks for one.
"""

from __future__ import annotations

import pytest
from helpers import assert_clean, read_jsonl


def run_suite(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    """Write ``source`` as the one test file, run it in a subprocess, and check it ran clean."""
    pytester.makepyfile(test_suite=source)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    assert_clean(result)
    return result


ROUTER_SUITE = """
import pytest
from pytest_openenv.policies.scripted import RandomPolicy, ScriptedPolicy

class Alternate:
    '''Even episodes get the first-legal teacher, odd ones the random one.'''
    def for_episode(self, spec):
        return ScriptedPolicy() if spec.index % 2 == 0 else RandomPolicy()

@pytest.fixture
def openenv_policy():
    return Alternate()

@pytest.mark.openenv("openspiel:tic_tac_toe", n=6)
def test_game(episode):
    pass
"""


@pytest.mark.slow
def test_a_policy_router_picks_the_policy_of_each_episode(pytester: pytest.Pytester) -> None:
    # the random policy's lost games pass this test: every one is read from results.jsonl
    result = run_suite(pytester, ROUTER_SUITE, "-n", "2", "--openenv-train-on=test")
    result.assert_outcomes(passed=6)
    rows = read_jsonl(pytester.path / "openenv-results" / "results.jsonl")
    policies = {row["extra"]["index"]: row["policy"] for row in rows}
    assert policies == {i: "scripted" if i % 2 == 0 else "random" for i in range(6)}


@pytest.mark.slow
def test_the_default_policy_fixture_can_be_wrapped_by_an_override(
    pytester: pytest.Pytester,
) -> None:
    # the override receives the default (the marker's policy) and may return it
    result = run_suite(
        pytester,
        """
        import pytest

        @pytest.fixture
        def openenv_policy(openenv_policy):
            return openenv_policy

        @pytest.mark.openenv("openspiel:tic_tac_toe", n=2, policy="random")
        def test_game(episode):
            assert episode.done
        """,
    )
    result.assert_outcomes(passed=2)
    rows = read_jsonl(pytester.path / "openenv-results" / "results.jsonl")
    assert [row["policy"] for row in rows] == ["random", "random"]


@pytest.mark.slow
def test_an_env_override_that_is_not_a_factory_names_what_would_work(
    pytester: pytest.Pytester,
) -> None:
    result = run_suite(
        pytester,
        """
        import pytest

        @pytest.fixture
        def openenv_env():
            return "openspiel:tic_tac_toe"

        @pytest.mark.openenv("openspiel:tic_tac_toe", n=1)
        def test_game(episode):
            pass
        """,
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*openenv_env must return an env factory*got str*"])


@pytest.mark.slow
def test_an_env_router_picks_the_env_of_each_episode(pytester: pytest.Pytester) -> None:
    result = run_suite(
        pytester,
        """
        import pytest
        from pytest_openenv import EnvFactory
        from pytest_openenv.envs.openspiel import OpenSpielFamily

        class ByIndex:
            def for_episode(self, spec):
                opponent = "first" if spec.index == 0 else "last"
                return EnvFactory(OpenSpielFamily("tic_tac_toe", {"opponent": opponent}))

        @pytest.fixture
        def openenv_env():
            return ByIndex()

        @pytest.mark.openenv("openspiel:tic_tac_toe", n=2)
        def test_game(episode):
            pass
        """,
    )
    result.assert_outcomes(passed=2)
    rows = read_jsonl(pytester.path / "openenv-results" / "results.jsonl")
    assert [row["task"]["config"] for row in rows] == [
        '{"opponent": "first"}',
        '{"opponent": "last"}',
    ]


@pytest.mark.slow
def test_a_failed_episode_reports_its_story_and_fulltrace_still_shows_frames(
    pytester: pytest.Pytester,
) -> None:
    # seed 1: the first-legal teacher loses to the random opponent
    args = [
        "-p",
        "no:cacheprovider",
        "--openenv-env=openspiel:tic_tac_toe",
        "--openenv-seed=1",
        "--openenv-policy=scripted",
    ]
    short = pytester.runpytest_subprocess(*args, "--openenv-n=1", "-rf")
    assert_clean(short)
    short.assert_outcomes(failed=1)
    text = short.stdout.str()
    assert "reason: loss: reward -1" in text
    assert "bundled_test.py" not in text, "a message-only failure showed a traceback"
    short.stdout.fnmatch_lines(["FAILED*test_episode[[]ep-000000[]] - Failed: ep*"])

    full = pytester.runpytest_subprocess(*args, "--openenv-n=1", "--fulltrace")
    full.assert_outcomes(failed=1)
    assert "bundled_test.py" in full.stdout.str()


def test_a_router_can_hand_an_episode_back_to_the_default(pytester: pytest.Pytester) -> None:
    result = run_suite(
        pytester,
        """
        import pytest
        from pytest_openenv.policies.scripted import RandomPolicy

        @pytest.fixture
        def openenv_policy(openenv_policy):
            default = openenv_policy

            class FirstToRandom:
                def for_episode(self, spec):
                    return RandomPolicy() if spec.index == 0 else default

            return FirstToRandom()

        @pytest.mark.openenv("openspiel:tic_tac_toe", n=3)
        def test_game(episode):
            pass
        """,
        "--openenv-policy=scripted",
        "--openenv-train-on=test",  # a random game lost still passes this test
    )
    result.assert_outcomes(passed=3)
    rows = read_jsonl(pytester.path / "openenv-results" / "results.jsonl")
    assert [row["policy"] for row in rows] == ["random", "scripted", "scripted"]


def test_a_router_that_never_settles_is_a_clear_error(pytester: pytest.Pytester) -> None:
    result = run_suite(
        pytester,
        """
        import pytest

        class Loop:
            def for_episode(self, spec):
                return self

        @pytest.fixture
        def openenv_policy():
            return Loop()

        @pytest.mark.openenv("openspiel:tic_tac_toe", n=1)
        def test_game(episode):
            pass
        """,
    )
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*for_episode() of Loop led through 8 routers*"])


def test_using_the_default_marker_directly_explains_itself() -> None:
    from pytest_openenv.worker.defaults import DEFAULT_ENV, DEFAULT_POLICY

    with pytest.raises(AttributeError, match="stands for each episode's own env"):
        DEFAULT_ENV.family  # noqa: B018
    with pytest.raises(AttributeError, match="has no 'act'"):
        DEFAULT_POLICY.act  # noqa: B018
    assert not hasattr(DEFAULT_ENV, "open")  # so it is never taken for a factory
