"""Ini keys in every config file pytest reads mean the same run on pytest 8 and on pytest 9.

The keys are declared with their real types where the running pytest has them (ints and
floats from 8.4, ``int | Literal["auto"]`` from 9.2); TOML values keep their types in
pytest 9's ``[tool.pytest]`` table and are strings in ``[tool.pytest.ini_options]``. Each
case here runs on whatever pytest is installed: CI's newest job and its lowest-versions job.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

PYTEST_9 = int(pytest.__version__.split(".")[0]) >= 9

#: the TOML tables this pytest reads our keys from (pytest 8 ignores [tool.pytest])
TOML_TABLES = ["tool.pytest.ini_options", *(["tool.pytest"] if PYTEST_9 else [])]

TOML_KEYS = """
openenv_env = "openspiel:tic_tac_toe"
openenv_n = 4
openenv_seed = 3
openenv_max_turns = 20
openenv_min_pass_rate = 0.5
openenv_min_reward = -1
openenv_request_timeout = 30.5
openenv_resume = true
openenv_concurrency = 2
openenv_env_config = { opponent = "first", game_params = {} }
"""

INI_KEYS = """
openenv_env = openspiel:tic_tac_toe
openenv_n = 4
openenv_seed = 3
openenv_max_turns = 20
openenv_min_pass_rate = 0.5
openenv_min_reward = -1
openenv_request_timeout = 30.5
openenv_resume = true
openenv_concurrency = 2
openenv_env_config = {"opponent": "first", "game_params": {}}
"""

EXPECTED = {
    "env": "openspiel:tic_tac_toe",
    "n": 4,
    "seed": 3,
    "max_turns": 20,
    "min_reward": -1.0,
    "resume": True,
    "env_config": {"opponent": "first", "game_params": {}},
}


def settings_of(pytester: pytest.Pytester) -> dict[str, Any]:
    metadata = json.loads((pytester.path / "openenv-results" / "metadata.json").read_text())
    return metadata["settings"]


def assert_the_same_run(pytester: pytest.Pytester, run_pytest: Any) -> dict[str, Any]:
    result = run_pytest()
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*4 passed*", "gate: PASSED"])
    settings = settings_of(pytester)
    assert {key: settings[key] for key in EXPECTED} == EXPECTED
    # a float key (a sampling one would be refused: the expert samples nothing)
    assert settings["llm"]["request_timeout"] == 30.5 and settings["llm"]["concurrency"] == 2
    rows = (pytester.path / "openenv-results" / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(row)["seed"] for row in rows) == [3, 4, 5, 6]
    return settings


@pytest.mark.parametrize("table", TOML_TABLES)
@pytest.mark.slow
def test_toml_ints_floats_bools_and_inline_tables(
    pytester: pytest.Pytester, run_pytest: Any, table: str
) -> None:
    pytester.makepyprojecttoml(f"[{table}]\n{TOML_KEYS}")
    assert_the_same_run(pytester, run_pytest)


@pytest.mark.slow
def test_an_ini_file_means_the_same_run(pytester: pytest.Pytester, run_pytest: Any) -> None:
    pytester.makeini(f"[pytest]\n{INI_KEYS}")
    assert_the_same_run(pytester, run_pytest)


@pytest.mark.parametrize("table", TOML_TABLES)
@pytest.mark.slow
def test_toml_arrays_are_repeated_values(
    pytester: pytest.Pytester, run_pytest: Any, table: str
) -> None:
    # two servers that are not there: the preflight names both, so both were read
    pytester.makepyprojecttoml(
        f"[{table}]\n"
        'openenv_env = "openspiel:tic_tac_toe"\n'
        'openenv_server = ["http://127.0.0.1:9/a", "http://127.0.0.1:9/b"]\n'
    )
    result = run_pytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "127.0.0.1:9/a" in result.stderr.str() and "127.0.0.1:9/b" in result.stderr.str()


@pytest.mark.parametrize("value", ['"auto"', "4", '"4"'])
@pytest.mark.slow
def test_concurrency_takes_a_number_or_auto(
    pytester: pytest.Pytester, run_pytest: Any, value: str
) -> None:
    table = TOML_TABLES[-1]
    pytester.makepyprojecttoml(
        f'[{table}]\nopenenv_env = "openspiel:tic_tac_toe"\nopenenv_n = 2\n'
        f"openenv_concurrency = {value}\n"
    )
    result = run_pytest()
    assert result.ret == 0, result.stdout.str()[-3000:]
    expected = {'"auto"': "auto", "4": 4, '"4"': 4}[value]
    assert settings_of(pytester)["llm"]["concurrency"] == expected


BAD_VALUES = [
    ('openenv_n = "many"', "--openenv-n", "a positive integer"),
    ("openenv_n = 2.5", "--openenv-n", "a positive integer"),
    ("openenv_n = 0", "--openenv-n", "a positive integer"),
    ("openenv_min_pass_rate = 2", "--openenv-min-pass-rate", "a fraction between 0 and 1"),
    ('openenv_temperature = "hot"', "--openenv-temperature", "a number"),
    ('openenv_resume = "maybe"', "--openenv-resume", "true or false"),
    ("openenv_env_config = 3", "--openenv-env-config", "a JSON object"),
    ("openenv_concurrency = 0", "--openenv-concurrency", "1..256 or auto"),
    ('openenv_server = ["ftp://x"]', "--openenv-server", "http://"),
]


@pytest.mark.parametrize("table", TOML_TABLES)
@pytest.mark.parametrize(("line", "option", "expected"), BAD_VALUES)
def test_a_bad_toml_value_names_the_option_and_what_would_be_right(
    pytester: pytest.Pytester, run_pytest: Any, table: str, line: str, option: str, expected: str
) -> None:
    pytester.makepyprojecttoml(f'[{table}]\nopenenv_env = "openspiel:tic_tac_toe"\n{line}\n')
    result = run_pytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-2000:]
    error = result.stderr.str()
    assert option in error and expected in error, error
    assert f"ini key {line.split()[0]}" in error and "pyproject.toml" in error, error
    assert not (pytester.path / "openenv-results").exists()


@pytest.mark.parametrize(
    ("line", "option"),
    [("openenv_n = lots", "--openenv-n"), ("openenv_resume = maybe", "--openenv-resume")],
)
def test_a_bad_ini_value_names_the_option(
    pytester: pytest.Pytester, run_pytest: Any, line: str, option: str
) -> None:
    pytester.makeini(f"[pytest]\nopenenv_env = openspiel:tic_tac_toe\n{line}\n")
    result = run_pytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    error = result.stderr.str()
    assert option in error and "tox.ini" in error, error  # pytester.makeini writes tox.ini


@pytest.mark.slow
def test_a_bad_override_says_it_came_from_dash_o(
    pytester: pytest.Pytester, run_pytest: Any
) -> None:
    pytester.makeini("[pytest]\nopenenv_env = openspiel:tic_tac_toe\n")
    result = run_pytest("-o", "openenv_n=7x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--openenv-n='7x'" in result.stderr.str() and "given with -o" in result.stderr.str()


@pytest.mark.slow
def test_the_command_line_wins_over_the_file(pytester: pytest.Pytester, run_pytest: Any) -> None:
    pytester.makepyprojecttoml(f"[{TOML_TABLES[-1]}]\n{TOML_KEYS}")
    result = run_pytest("--openenv-n=2", "--openenv-env-config", '{"opponent": "random"}')
    assert result.ret == 0, result.stdout.str()[-3000:]
    settings = settings_of(pytester)
    assert settings["n"] == 2 and settings["env_config"] == {"opponent": "random"}


def test_declared_types_follow_the_running_pytest() -> None:
    from pytest_openenv.config import ini
    from pytest_openenv.config.options import OPTION_BY_FLAG

    declared = {flag: ini.ini_type(opt.kind) for flag, opt in OPTION_BY_FLAG.items()}
    assert declared["resume"] == "bool" and declared["server"] == "args"
    assert declared["env-config"] == "string" and declared["env"] == "string"
    numbers = ini.HAS_NUMBER_TYPES
    assert declared["n"] == ("int" if numbers else "string")
    assert declared["min-pass-rate"] == ("float" if numbers else "string")
    if ini.HAS_TYPE_EXPRESSIONS:
        assert declared["concurrency"] not in ("string", "int")
