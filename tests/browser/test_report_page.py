"""report.html and the view server, looked at in a real headless Chromium.

The folders come from real runs (pytest in a subprocess): tic-tac-toe played by a policy
that plants hostile content (markup that would run, ANSI escapes, a known secret) and an
illegal move, and a reasoning_gym run whose prompts differ, for the text search.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pages import (
    PLANTED_SECRET,
    chromium,
    console_errors,
    hostile_run,
    outcome_of,
    reasoning_run,
    rows,
    shown_ids,
    viewer,
    wait_for,
    wait_ready,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hostile_run(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def reasoning(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return reasoning_run(tmp_path_factory.mktemp("reasoning"))


@pytest.fixture(scope="module")
def browser() -> Any:
    with chromium() as driver:
        yield driver


def all_rows(folder: Path) -> list[dict[str, Any]]:
    return rows(folder / "results.jsonl") + rows(folder / "failures.jsonl")


def page_counts(driver: Any) -> dict[str, int]:
    return driver.execute_script(
        "const out = {}; document.querySelectorAll('[data-figure]').forEach(e => "
        "out[e.dataset.figure] = e.textContent); return out;"
    )


def open_page(driver: Any, url: str) -> None:
    driver.get("about:blank")
    driver.get_log("browser")  # start from an empty console
    driver.get(url)
    wait_ready(driver)


def check_summary_and_filter(driver: Any, folder: Path) -> None:
    summary = json.loads((folder / "summary.json").read_text())["figures"]
    counts = page_counts(driver)
    for name in ("passed", "failed", "errored", "skipped"):
        assert int(counts[name]) == summary[name], (name, counts, summary)
    assert counts["pass_rate"] == f"{100 * summary['pass_rate']:.1f}%"
    episodes = all_rows(folder)
    assert driver.find_element(By.ID, "shown-count").text == (
        f"{len(episodes)} of {len(episodes)} episodes"
    )
    Select(driver.find_element(By.ID, "outcome-filter")).select_by_value("failed")
    failing = sorted(r["episode_id"] for r in episodes if outcome_of(r) == "failed")
    assert failing, "the run must have failures to filter"
    assert sorted(shown_ids(driver)) == failing
    Select(driver.find_element(By.ID, "outcome-filter")).select_by_value("all")


def check_transcript(driver: Any, folder: Path, episode_id: str) -> None:
    row = next(r for r in all_rows(folder) if r["episode_id"] == episode_id)
    driver.find_element(By.CSS_SELECTOR, f'#episode-rows tr[data-id="{episode_id}"] a').click()
    wait_for(
        driver, f"document.querySelector('#transcript h2')?.textContent === 'Episode {episode_id}'"
    )
    box = driver.find_element(By.ID, "transcript")
    assert box.is_displayed()
    assert f"Episode {episode_id}" in box.text
    calls = [c for m in row["messages"] for c in m.get("tool_calls") or ()]
    shown = driver.find_elements(By.CSS_SELECTOR, "#transcript .call")
    assert len(shown) == len(calls) > 0
    for element, call in zip(shown, calls, strict=True):
        assert call["function"]["name"] in element.text
        arguments = json.loads(call["function"]["arguments"])
        assert f'"action_id": {arguments["action_id"]}' in element.text
    illegal = driver.find_elements(By.CSS_SELECTOR, "#transcript .call .flag.illegal")
    refused = [t for t in row["tool_trace"] if t["result"]["error"]]
    assert len(illegal) == len(refused) >= 1  # the planted move 99 is marked illegal
    rewards = driver.find_elements(By.CSS_SELECTOR, "#transcript .call .step-reward")
    assert len(rewards) == len(calls)


def check_hostile_is_text(driver: Any) -> None:
    assert driver.execute_script("return window.__pwned === undefined")
    text = driver.find_element(By.ID, "transcript").text
    assert '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">' in text
    assert "<b>not bold</b>" in text
    assert "\u241b[31mred\u241b[0m" in text  # ESC shown as a visible symbol, not obeyed
    assert not driver.find_elements(
        By.CSS_SELECTOR, "#transcript script, #transcript img, #transcript b"
    )
    assert PLANTED_SECRET not in driver.page_source
    assert "secret=***" in text


@pytest.mark.slow
def test_report_file_in_chromium(browser: Any, hostile: Path) -> None:
    report = hostile / "report.html"
    assert PLANTED_SECRET not in report.read_text(encoding="utf-8")
    open_page(browser, report.as_uri())
    assert console_errors(browser) == []
    check_summary_and_filter(browser, hostile)
    first_failure = sorted(
        r["episode_id"] for r in rows(hostile / "failures.jsonl") if outcome_of(r) == "failed"
    )[0]
    check_transcript(browser, hostile, first_failure)
    check_hostile_is_text(browser)
    browser.save_screenshot(str(hostile / "report-screenshot.png"))  # kept as a CI artifact
    assert console_errors(browser) == []


@pytest.mark.slow
def test_anchor_opens_the_episode(browser: Any, hostile: Path) -> None:
    episode = rows(hostile / "failures.jsonl")[-1]["episode_id"]
    open_page(browser, (hostile / "report.html").as_uri() + f"#{episode}")
    wait_for(browser, "document.querySelector('#transcript h2')")
    assert f"Episode {episode}" in browser.find_element(By.ID, "transcript").text
    current = browser.find_element(By.CSS_SELECTOR, "#episode-rows tr.current")
    assert current.get_attribute("data-id") == episode
    assert console_errors(browser) == []


@pytest.mark.slow
def test_search_finds_an_episode_by_a_word_of_its_prompt(browser: Any, reasoning: Path) -> None:
    episodes = rows(reasoning / "results.jsonl")
    words = {r["episode_id"]: set(r["task"]["prompt"].split()) for r in episodes}
    episode_id, word = next(
        (eid, w)
        for eid, ws in words.items()
        for w in sorted(ws)
        if sum(w in other for other in words.values()) == 1
    )
    open_page(browser, (reasoning / "report.html").as_uri())
    search = browser.find_element(By.ID, "search")
    search.send_keys(word)
    assert shown_ids(browser) == [episode_id]
    search.clear()
    search.send_keys("no-such-word-anywhere")
    assert shown_ids(browser) == []
    assert console_errors(browser) == []


@pytest.mark.slow
def test_view_server_in_chromium(browser: Any, hostile: Path) -> None:
    with viewer(hostile) as url:
        open_page(browser, url)
        assert console_errors(browser) == []
        check_summary_and_filter(browser, hostile)
        first_failure = sorted(
            r["episode_id"] for r in rows(hostile / "failures.jsonl") if outcome_of(r) == "failed"
        )[0]
        check_transcript(browser, hostile, first_failure)
        check_hostile_is_text(browser)
        # a passing episode too: every transcript is served, read from the file on demand
        passing = rows(hostile / "results.jsonl")[0]["episode_id"]
        open_page(browser, f"{url}#{passing}")
        wait_for(browser, "document.querySelector('#transcript .call')")
        assert browser.find_elements(By.CSS_SELECTOR, "#transcript .call")
        browser.save_screenshot(str(hostile / "view-screenshot.png"))
        assert console_errors(browser) == []


def test_rows_that_are_not_conversations_and_a_malformed_fragment_do_not_throw(
    browser: Any, hostile: Path, tmp_path: Path
) -> None:
    """A hand-edited row whose messages or tool_calls is not a list is shown as unreadable."""
    import shutil

    folder = tmp_path / "edited"
    shutil.copytree(hostile, folder)
    path = folder / "results.jsonl"
    edited = rows(path)
    assert len(edited) >= 2, "the hostile run must have two passes to edit"
    edited[0]["messages"] = "not a list"
    edited[1]["messages"][-1]["tool_calls"] = {"function": {"name": "play_move"}}
    path.write_text("".join(json.dumps(row) + "\n" for row in edited))
    with viewer(folder) as url:
        for row, why in ((edited[0], "messages is not a list"), (edited[1], "is not a list")):
            open_page(browser, f"{url}#{row['episode_id']}")
            wait_for(browser, "document.querySelector('#transcript .banner')")
            shown = browser.find_element(By.ID, "transcript").text
            assert "This transcript could not be read" in shown and why in shown, shown
            assert console_errors(browser) == []
        open_page(browser, f"{url}#%E0%A4%A")
        wait_for(browser, "document.querySelector('#transcript .banner')")
        assert "No episode %E0%A4%A" in browser.find_element(By.ID, "transcript").text
        assert console_errors(browser) == []
