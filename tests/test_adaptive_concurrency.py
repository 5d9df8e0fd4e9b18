"""``--openenv-concurrency auto``: episodes in flight grow while latency holds, halve on 429s.

The rules on ``AdaptiveLimit`` directly; the pool that follows it; then whole runs
against the loopback OpenAI-compatible server: one whose latency rises with the
requests in flight (growth stops well below the ceiling), one that answers a
burst of 429s mid-run (the limit is halved, the run completes).
"""

from __future__ import annotations

import re
import threading
import time

import pytest
from llm_helpers import (
    all_rows,
    clean_sdk_env_fixture,  # noqa: F401 - fixture
    llm_args,
)
from servers.fake_model import Faults
from servers.openai_compat import OpenAICompatServer

from pytest_openenv.config.convert import MAX_CONCURRENCY
from pytest_openenv.config.options import OPTIONS
from pytest_openenv.util.overload import OverloadSignal
from pytest_openenv.worker.adaptive import AUTO_CEILING, AUTO_START, AdaptiveLimit
from pytest_openenv.worker.runahead import EpisodePool, Job

SUMMARY = re.compile(
    r"--openenv-concurrency=auto: (\d+) episodes in flight at the end "
    r"\(peak (\d+), ceiling (\d+), halved (\d+) time\(s\)\)"
)


def rounds(limit: AdaptiveLimit, seconds: float, count: int) -> None:
    for _ in range(count):
        for _ in range(limit.limit):
            limit.observe(seconds)


# -- the rules -------------------------------------------------------------------
def test_it_grows_by_one_per_round_while_latency_holds_up_to_the_ceiling() -> None:
    seen: list[int] = []
    limit = AdaptiveLimit(start=4, ceiling=9, on_change=seen.append)
    rounds(limit, 0.05, 3)
    assert limit.limit == 7 and seen == [5, 6, 7]
    rounds(limit, 0.07, 10)  # slower, but within 1.5x of the best round
    assert limit.limit == 9 == limit.peak  # never past the ceiling


def test_it_holds_while_latency_is_past_the_tolerance() -> None:
    limit = AdaptiveLimit(start=4, ceiling=64)
    rounds(limit, 0.05, 2)
    assert limit.limit == 6
    rounds(limit, 0.05 * 1.6, 5)
    assert limit.limit == 6


def test_an_overload_halves_it_once_per_round() -> None:
    limit = AdaptiveLimit(start=16, ceiling=64)
    limit.overloaded()
    assert limit.limit == 8 and limit.cuts == 1
    for _ in range(5):
        limit.overloaded()  # the same burst: no further cut until a round has finished
    assert limit.limit == 8
    rounds(limit, 0.05, 1)
    limit.overloaded()
    assert limit.limit == 4 and limit.cuts == 2
    for _ in range(10):
        rounds(limit, 0.05, 1)
        limit.overloaded()
    assert limit.limit == 1  # never below one


def test_pushback_reaches_every_limit_listening_to_the_signal_and_no_other() -> None:
    signal = OverloadSignal()
    limit = AdaptiveLimit(start=8, ceiling=64)
    signal.listen(limit.overloaded)
    signal.observe_response(type("Response", (), {"status_code": 429})())
    assert limit.limit == 4
    fine = AdaptiveLimit(start=8, ceiling=64)
    signal.listen(fine.overloaded)
    signal.observe_response(type("Response", (), {"status_code": 200})())
    assert fine.limit == 8 and signal.fired == 1
    deaf = AdaptiveLimit(start=8, ceiling=64)  # another process's limit, say
    signal.observe_response(type("Response", (), {"status_code": 503})())
    assert fine.limit == 4 and deaf.limit == 8


def test_the_pool_runs_at_most_its_size_and_follows_a_resize() -> None:
    pool = EpisodePool(2)
    gate = threading.Event()
    running = 0
    peak = 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        gate.wait(10)
        with lock:
            running -= 1

    from pytest_openenv.episode.spec import EpisodeSpec

    jobs = [Job(EpisodeSpec(env="x:y", index=i, seed=i), work) for i in range(6)]
    try:
        for job in jobs:
            pool.submit(job)
        time.sleep(0.2)
        assert peak == 2
        pool.resize(5)
        deadline = time.monotonic() + 5
        while peak < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert peak == 5
        pool.resize(1)
        gate.set()
        assert all(job.done.wait(5) for job in jobs)
    finally:
        gate.set()
        pool.close()


def test_the_option_takes_auto_and_a_bounded_integer() -> None:
    (option,) = [o for o in OPTIONS if o.flag == "concurrency"]
    assert option.convert("concurrency", "auto") == "auto"
    assert option.convert("concurrency", str(MAX_CONCURRENCY)) == MAX_CONCURRENCY
    for bad in ("0", str(MAX_CONCURRENCY + 1), "100000", "lots"):
        with pytest.raises(pytest.UsageError, match=rf"1\.\.{MAX_CONCURRENCY} or auto"):
            option.convert("concurrency", bad)
    assert f"ceiling {AUTO_CEILING}" in option.help and f"start at {AUTO_START}" in option.help


@pytest.mark.slow
def test_a_huge_concurrency_is_a_usage_error_before_any_episode(run_pytest) -> None:
    result = run_pytest("--openenv-env=openspiel:tic_tac_toe", "--openenv-concurrency=100000")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--openenv-concurrency='100000' is invalid*1..256 or auto*"])


# -- whole runs ------------------------------------------------------------------
def auto_run(run_pytest, server: OpenAICompatServer, n: int, *extra: str) -> tuple[int, ...]:
    result = run_pytest(*llm_args(server, "--openenv-concurrency=auto", *extra, n=n))
    assert result.ret in (0, 1), result.stdout.str()
    match = SUMMARY.search(result.stdout.str())
    assert match, result.stdout.str()[-2000:]
    return tuple(int(x) for x in match.groups())


@pytest.mark.slow
def test_growth_stops_where_the_server_slows_down(run_pytest, pytester: pytest.Pytester) -> None:
    # 20 ms plus 10 ms per other request in flight: past ~8 in flight a round is more
    # than 1.5x slower than the first ones
    server = OpenAICompatServer(Faults(delay=0.02, delay_per_in_flight=0.01)).start()
    try:
        _, peak, ceiling, cuts = auto_run(run_pytest, server, 200)
    finally:
        server.stop()
    assert len(all_rows(pytester)) == 200
    assert ceiling == AUTO_CEILING and cuts == 0
    assert AUTO_START < peak <= 16, peak  # it grew, and stopped far below the ceiling
    assert AUTO_START < server.max_in_flight <= peak + 1, server.max_in_flight


@pytest.mark.slow
def test_a_burst_of_429s_halves_it_and_the_run_completes(
    run_pytest, pytester: pytest.Pytester
) -> None:
    server = OpenAICompatServer(Faults(delay=0.03, retry_after=0.01)).start()
    n = 200

    def burst_after(requests: int) -> None:
        deadline = time.monotonic() + 120
        while server.requests < requests and time.monotonic() < deadline:
            time.sleep(0.005)
        server.faults.statuses.extend([429] * 12)

    thread = threading.Thread(target=burst_after, args=(300,), daemon=True)
    thread.start()
    try:
        end, peak, _, cuts = auto_run(run_pytest, server, n, "--openenv-max-retries=8")
    finally:
        server.stop()
    assert 429 in server.statuses_sent  # the burst happened (the SDK retried each one)
    assert len(all_rows(pytester)) == n and not [
        r for r in all_rows(pytester).values() if r.get("failure", {}).get("outcome") == "error"
    ]
    assert cuts >= 1
    assert peak > AUTO_START  # it had grown before the burst
    assert end < AUTO_CEILING
