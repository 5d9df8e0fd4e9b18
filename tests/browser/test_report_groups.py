"""report.html of a run with several groups, in a real headless Chromium: the table's group
filter, the charts of one group at a time, and an episode on a view of its own with
previous / next (buttons and j / k), back to the table where it was, and tic-tac-toe boards
whose empty cells cannot be read as a mark."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pages import chromium, console_errors, rows, run_pytest, shown_ids, wait_for, wait_ready
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

THREE_TESTS = """
import pytest

@pytest.mark.openenv("openspiel:tic_tac_toe", n=12, policy="expert")
def test_expert(episode):
    assert episode.passed, episode.explain()

@pytest.mark.openenv("openspiel:tic_tac_toe", n=12, policy="random", seed=3)
def test_random(episode):
    assert episode.passed, episode.explain()

@pytest.mark.openenv("reasoning_gym:chain_sum", n=12)
def test_chain(episode):
    assert episode.passed, episode.explain()
"""


@pytest.fixture(scope="module")
def grouped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("groups")
    (folder / "test_three.py").write_text(THREE_TESTS)
    done = run_pytest(folder, "test_three.py")
    assert "INTERNALERROR" not in done.stdout, done.stdout[-3000:]
    assert done.returncode == 1, done.stdout[-3000:]  # the random player loses some
    return folder / "openenv-results"


@pytest.fixture(scope="module")
def browser() -> Any:
    with chromium() as driver:
        yield driver


def every_row(folder: Path) -> list[dict[str, Any]]:
    return rows(folder / "results.jsonl") + rows(folder / "failures.jsonl")


def open_report(driver: Any, folder: Path) -> None:
    driver.get("about:blank")
    driver.get_log("browser")
    driver.get((folder / "report.html").as_uri())
    wait_ready(driver)


def visible(driver: Any, element_id: str) -> bool:
    return driver.find_element(By.ID, element_id).is_displayed()


@pytest.mark.slow
def test_the_group_filter_shows_one_groups_episodes_and_its_charts(
    browser: Any, grouped: Path
) -> None:
    open_report(browser, grouped)
    filter_ = Select(browser.find_element(By.ID, "group-filter"))
    labels = [option.text for option in filter_.options]
    assert labels[0] == "all groups" and len(labels) == 4
    random_label = next(label for label in labels if "test_random" in label)
    assert random_label == "test_three.py::test_random · openspiel:tic_tac_toe · random"
    filter_.select_by_visible_text(random_label)
    expected = sorted(r["episode_id"] for r in every_row(grouped) if "::test_random[" in r["test"])
    assert sorted(shown_ids(browser)) == expected
    tests = browser.execute_script(
        "return Array.from(document.querySelectorAll('#episode-rows td.test'))"
        ".map(td => td.textContent)"
    )
    assert set(tests) == {"test_three.py::test_random"}
    assert browser.find_element(By.ID, "shown-count").text == f"{len(expected)} of 36 episodes"

    # the charts: one group's at a time, the pooled set only when asked for, labelled
    def shown_chart_sets() -> list[str]:
        return browser.execute_script(
            "return Array.from(document.querySelectorAll('.charts[data-group]'))"
            ".filter(e => e.offsetParent !== null).map(e => e.querySelector('h3').textContent)"
        )

    assert len(shown_chart_sets()) == 1 and "pooled" not in shown_chart_sets()[0]
    charts = Select(browser.find_element(By.ID, "chart-group"))
    charts.select_by_visible_text(random_label)
    assert shown_chart_sets() == [random_label]
    charts.select_by_visible_text("pooled (all groups)")
    assert shown_chart_sets() == ["pooled (all groups)"]
    # no model played: no token chart anywhere
    assert not browser.find_elements(By.CSS_SELECTOR, 'svg[data-chart="tokens"]')
    # passed rows carry no failure reason
    reasons = browser.execute_script(
        "filter = document.getElementById('group-filter'); filter.value = 'all';"
        "filter.dispatchEvent(new Event('change'));"
        "return Array.from(document.querySelectorAll('#episode-rows tr[data-outcome=passed]'))"
        ".map(tr => tr.querySelector('td.reason').textContent)"
    )
    assert reasons and set(reasons) == {""}
    assert console_errors(browser) == []


@pytest.mark.slow
def test_an_episode_opens_on_its_own_view_with_previous_next_and_back(
    browser: Any, grouped: Path
) -> None:
    browser.set_window_size(1280, 700)
    open_report(browser, grouped)
    Select(browser.find_element(By.ID, "group-filter")).select_by_visible_text(
        "test_three.py::test_expert · openspiel:tic_tac_toe · expert"
    )
    order = shown_ids(browser)
    assert len(order) == 12
    third = browser.find_element(By.CSS_SELECTOR, f'#episode-rows tr[data-id="{order[2]}"] a')
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", third)
    scrolled = browser.execute_script("return window.scrollY")
    assert scrolled > 0
    third.click()
    wait_for(
        browser, f"document.querySelector('#transcript h2')?.textContent === 'Episode {order[2]}'"
    )
    assert visible(browser, "episode-view") and not visible(browser, "episodes-section")
    assert not visible(browser, "summary")
    assert "episode 3 of 12" in browser.find_element(By.ID, "episode-position").text

    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys("j")
    wait_for(
        browser, f"document.querySelector('#transcript h2')?.textContent === 'Episode {order[3]}'"
    )
    body.send_keys(Keys.ARROW_LEFT)
    body.send_keys("k")
    wait_for(
        browser, f"document.querySelector('#transcript h2')?.textContent === 'Episode {order[1]}'"
    )
    browser.find_element(By.ID, "next-episode").click()
    wait_for(
        browser, f"document.querySelector('#transcript h2')?.textContent === 'Episode {order[2]}'"
    )
    browser.find_element(By.ID, "prev-episode").click()
    browser.find_element(By.ID, "prev-episode").click()
    wait_for(
        browser, f"document.querySelector('#transcript h2')?.textContent === 'Episode {order[0]}'"
    )
    assert not browser.find_element(By.ID, "prev-episode").is_enabled()

    # the board: an empty cell is ".", never its action id beside an "O"
    text = browser.find_element(By.ID, "transcript").text
    boards = [line for line in text.splitlines() if re.fullmatch(r" ?\S \| \S \| \S ?", line)]
    assert boards, text[:2000]
    assert not any(re.search(r"\d", line) for line in boards), boards
    assert any("." in line for line in boards) and any("X" in line for line in boards)

    browser.find_element(By.ID, "back-to-table").click()
    wait_for(browser, "document.getElementById('episodes-section').offsetParent !== null")
    assert not visible(browser, "episode-view")
    assert browser.execute_script("return window.scrollY") == scrolled
    assert shown_ids(browser) == order  # the filter is as it was
    assert console_errors(browser) == []
