"""Hostile input is a usage error (exit 4) naming what is wrong, never an INTERNALERROR,
a raw traceback, a hang or unbounded memory.

Malformed URLs, JSON nested thousands deep, a server whose ``/schema`` is huge or deeply
nested, a ``results.jsonl`` that is a directory, bytes that are not UTF-8, an episode count
too big to collect, and a reasoning_gym config whose questions take forever to generate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from faults import Launcher

from pytest_openenv.config.convert import MAX_ITEMS
from pytest_openenv.util.jsonlimits import MAX_JSON_BYTES, MAX_JSON_DEPTH

TTT = "--openenv-env=openspiel:tic_tac_toe"
USAGE = pytest.ExitCode.USAGE_ERROR


def nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def run(launcher: Launcher, *args: str, env: dict[str, str] | None = None) -> Any:
    finished = launcher.run(*args, env=env)  # asserts no INTERNALERROR, no traceback
    assert not launcher.output.exists() or not any(launcher.output.glob("*.jsonl"))
    return finished


# -- URLs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["http://[::1", "http://user:s3cret-pw@[::1", "ws://[fe80::1%", "https://]x["]
)
@pytest.mark.parametrize("option", ["server", "llm-endpoint"])
def test_a_malformed_url_is_a_usage_error(launcher: Launcher, option: str, url: str) -> None:
    extra = ["--openenv-model=m"] if option == "llm-endpoint" else []
    finished = run(launcher, TTT, "--openenv-n=1", f"--openenv-{option}={url}", *extra)
    assert finished.returncode == USAGE, finished.text[-2000:]
    assert f"--openenv-{option}" in finished.stderr
    assert "s3cret-pw" not in finished.text


# -- JSON nesting ------------------------------------------------------------------------------


# 20,000 levels: about the longest single argument Linux passes (128 KiB)
@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 2000, 20_000])
@pytest.mark.parametrize("via_ini", [False, True])
def test_env_config_nested_too_deep_is_a_usage_error(
    launcher: Launcher, depth: int, via_ini: bool
) -> None:
    value = nested(depth)
    option = f"openenv_env_config={value}" if via_ini else f"--openenv-env-config={value}"
    args = ["-o", option] if via_ini else [option]
    finished = run(launcher, TTT, "--openenv-n=1", *args)
    assert finished.returncode == USAGE, finished.text[-2000:]
    assert "--openenv-env-config" in finished.stderr
    assert f"nested deeper than {MAX_JSON_DEPTH} levels" in finished.stderr


def test_env_config_at_the_depth_limit_is_parsed() -> None:
    from pytest_openenv.config.convert import json_object as _json_object

    value = _json_object("env-config", nested(MAX_JSON_DEPTH - 1))  # one more: the outer {}
    assert list(value) == ["a"]


# -- a generic server's /schema --------------------------------------------------------------


class HostileSchemaServer:
    """Healthy, but ``GET /schema`` is ``kind``: ``deep`` JSON or ``huge`` (endless bytes)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.schema_bytes_sent = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.startswith("/schema"):
                    outer.schema(self)
                    return
                body = json.dumps({"status": "healthy", "name": "hostile"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def schema(self, handler: BaseHTTPRequestHandler) -> None:
        handler.close_connection = True
        if self.kind == "deep":
            body = ('{"action":' + "[" * 50_000 + "]" * 50_000 + "}").encode()
            size = len(body)
        else:  # 200 MB announced, sent until the client stops reading
            body, size = b" " * 65536, 200 * 1024 * 1024
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(size))
        handler.end_headers()
        try:
            while self.schema_bytes_sent < size:
                handler.wfile.write(body)
                self.schema_bytes_sent += len(body)
        except OSError:  # the client hung up: what we want
            pass

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10)


@pytest.fixture
def hostile_server(request: pytest.FixtureRequest) -> Iterator[HostileSchemaServer]:
    server = HostileSchemaServer(request.param)
    yield server
    server.close()


@pytest.mark.parametrize("hostile_server", ["deep", "huge"], indirect=True)
def test_a_hostile_schema_is_a_usage_error_naming_the_server(
    launcher: Launcher, hostile_server: HostileSchemaServer
) -> None:
    finished = run(
        launcher,
        "--openenv-env=openenv:hostile",
        f"--openenv-server={hostile_server.url}",
        "--openenv-policy=openai",
        "--openenv-llm-endpoint=http://127.0.0.1:1/v1",
        "--openenv-model=m",
        "--openenv-n=1",
    )
    assert finished.returncode == USAGE, finished.text[-2000:]
    assert f"GET {hostile_server.url}/schema" in finished.stderr
    if hostile_server.kind == "deep":
        assert f"nested deeper than {MAX_JSON_DEPTH} levels" in finished.stderr
    else:
        assert f"more than {MAX_JSON_BYTES} bytes" in finished.stderr
        # it read the cap and stopped, not the 200 MB (the socket buffers hold a few MB more)
        assert hostile_server.schema_bytes_sent < 4 * MAX_JSON_BYTES


# -- the output folder -------------------------------------------------------------------------


def test_resume_from_a_results_jsonl_that_is_a_directory_is_a_usage_error(
    launcher: Launcher,
) -> None:
    (launcher.output / "results.jsonl").mkdir(parents=True)
    finished = launcher.run(TTT, "--openenv-n=1", "--openenv-resume")
    assert finished.returncode == USAGE, finished.text[-2000:]
    assert f"--openenv-resume cannot read {launcher.output / 'results.jsonl'}" in finished.stderr
    assert "is a directory, not a regular file" in finished.stderr


def not_a_file(path: Path, kind: str) -> None:
    if kind == "dev-zero":
        path.symlink_to("/dev/zero")  # one endless line
    else:
        os.mkfifo(path)  # an open that never returns


@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
@pytest.mark.parametrize("name", ["results.jsonl", "failures.jsonl"])
@pytest.mark.slow
def test_resume_from_a_device_or_fifo_is_refused_before_reading_it(
    launcher: Launcher, kind: str, name: str
) -> None:
    launcher.output.mkdir(parents=True)
    not_a_file(launcher.output / name, kind)
    finished = launcher.run(TTT, "--openenv-n=1", "--openenv-resume", timeout=60)
    assert finished.returncode == USAGE, finished.text[-2000:]
    assert f"--openenv-resume cannot read {launcher.output / name}" in finished.stderr
    assert "not a regular file" in finished.stderr


@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
@pytest.mark.parametrize("name", ["results.jsonl", "summary.json"])
@pytest.mark.slow
def test_a_baseline_folder_holding_a_device_or_fifo_is_refused(
    launcher: Launcher, tmp_path: Path, kind: str, name: str
) -> None:
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    summary = {"figures": {"passed": 1, "ran": 2, "envs": ["openspiel:tic_tac_toe"]}}
    if name != "summary.json":
        (earlier / "summary.json").write_text(json.dumps(summary))
    not_a_file(earlier / name, kind)
    finished = launcher.run(TTT, "--openenv-n=1", f"--openenv-baseline={earlier}", timeout=60)
    assert finished.returncode == USAGE, finished.text[-2000:]
    assert f"{earlier / name} is a" in finished.stderr
    assert "not a regular file" in finished.stderr


def test_a_line_past_the_bound_is_a_corrupt_line_not_a_memory_blowup(tmp_path: Path) -> None:
    from pytest_openenv.dataset import jsonl

    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"episode_id": "a"}\n' + b" " * (jsonl.MAX_LINE_BYTES + 10) + b"\n")
    with pytest.raises(jsonl.CorruptLine, match=r"results.jsonl:2: a line longer than"):
        list(jsonl.iter_records(path))


# -- bytes that are not UTF-8 ------------------------------------------------------------------

NOT_UTF8 = os.fsdecode(b"x\xff\xfey")  # what Python makes of such bytes in argv


@pytest.mark.parametrize(
    ("option", "via_ini"),
    [
        *((option, False) for option in ("model", "output", "system-prompt", "env-config")),
        ("server", False),
        # the launcher's own --openenv-output wins over an ini output: not tried by ini
        *((option, True) for option in ("model", "system-prompt", "env-config", "server")),
    ],
)
def test_an_option_that_is_not_utf8_is_a_usage_error(
    launcher: Launcher, option: str, via_ini: bool
) -> None:
    value = f"out-{NOT_UTF8}" if option == "output" else NOT_UTF8
    dest = "openenv_" + option.replace("-", "_")
    args = ["-o", f"{dest}={value}"] if via_ini else [f"--openenv-{option}={value}"]
    # subprocess encodes str arguments with os.fsencode: the raw bytes reach the run
    finished = launcher.run(TTT, "--openenv-n=1", *args)
    assert finished.returncode == USAGE, finished.text[-2000:]
    assert f"--openenv-{option}=" in finished.stderr and "not valid UTF-8" in finished.stderr
    assert not launcher.output.exists()


# -- too many items ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        [f"--openenv-n={MAX_ITEMS + 1}"],
        ["--openenv-n=10000000"],
        [f"--openenv-n={MAX_ITEMS // 2 + 1}", "--openenv-repeats=2"],
        [f"--openenv-repeats={MAX_ITEMS + 1}"],
    ],
)
def test_more_items_than_the_limit_is_refused_before_collection(
    launcher: Launcher, args: list[str]
) -> None:
    finished = launcher.run(TTT, *args)
    assert finished.returncode == USAGE, finished.text[-2000:]
    assert f"{MAX_ITEMS:,}" in finished.stderr
    assert "--openenv-seed" in finished.stderr  # how to split the collection
    assert "collected" not in finished.stdout


def test_a_marker_asking_for_too_many_items_is_a_collection_error(launcher: Launcher) -> None:
    (launcher.folder / "test_big.py").write_text(
        "import pytest\n\n"
        f"@pytest.mark.openenv('openspiel:tic_tac_toe', n={MAX_ITEMS + 1})\n"
        "def test_big(episode):\n    pass\n"
    )
    finished = launcher.run("test_big.py")
    assert finished.returncode == pytest.ExitCode.INTERRUPTED, finished.text[-2000:]
    assert f"openenv marker n={MAX_ITEMS + 1}" in finished.stdout
    assert "collected 0 items / 1 error" in finished.stdout


@pytest.mark.slow
def test_the_item_limit_collects_on_this_machine(tmp_path: Path) -> None:
    """The limit is one collection handles: exactly MAX_ITEMS items collect (no run)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--collect-only",
            "-q",
            TTT,
            f"--openenv-n={MAX_ITEMS}",
            f"--openenv-output={tmp_path / 'out'}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{MAX_ITEMS} tests collected" in done.stdout


# -- a reasoning_gym config that never finishes a question -------------------------------------

ENDLESS = {"min_terms": 100_000_000, "max_terms": 100_000_000}


@pytest.mark.slow
def test_a_reasoning_gym_config_that_never_generates_is_a_usage_error(
    launcher: Launcher,
) -> None:
    finished = launcher.run(
        "--openenv-env=reasoning_gym:chain_sum",
        "--openenv-n=1",
        f"--openenv-env-config={json.dumps(ENDLESS)}",
        env={"PYTEST_OPENENV_GENERATION_TIMEOUT": "1"},
        timeout=90,
    )
    assert finished.returncode == USAGE, finished.text[-2000:]
    assert "no question after 1s" in finished.stderr
    assert "'min_terms': 100000000" in finished.stderr  # names the config
    assert "PYTEST_OPENENV_GENERATION_TIMEOUT" in finished.stderr


@pytest.mark.slow
def test_a_marker_config_that_never_generates_is_a_collection_error(launcher: Launcher) -> None:
    (launcher.folder / "test_endless.py").write_text(
        "import pytest\n\n"
        f"@pytest.mark.openenv('reasoning_gym:chain_sum', n=1, **{ENDLESS!r})\n"
        "def test_endless(episode):\n    pass\n"
    )
    finished = launcher.run(
        "test_endless.py", env={"PYTEST_OPENENV_GENERATION_TIMEOUT": "1"}, timeout=90
    )
    assert finished.returncode == pytest.ExitCode.INTERRUPTED, finished.text[-2000:]
    assert "test_endless.py" in finished.stdout and "no question after 1s" in finished.stdout


@pytest.mark.slow
def test_a_question_that_takes_too_long_during_the_run_is_that_episodes_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Start-up passed (its question came in time); a later seed's question does not."""
    from pytest_openenv.envs.registry import build_family
    from pytest_openenv.episode.loop import EnvFactory, EpisodeError, run_episode
    from pytest_openenv.episode.spec import EpisodeSpec
    from pytest_openenv.policies.scripted import ScriptedPolicy

    slow = {"min_terms": 2_000_000, "max_terms": 2_000_000}  # ~2 s of generation per question
    monkeypatch.setenv("PYTEST_OPENENV_GENERATION_TIMEOUT", "60")
    family = build_family("reasoning_gym:chain_sum", slow)  # the start-up question: in time
    monkeypatch.setenv("PYTEST_OPENENV_GENERATION_TIMEOUT", "0.2")
    spec = EpisodeSpec(env="reasoning_gym:chain_sum", index=1, seed=1)
    with pytest.raises(EpisodeError) as caught:
        run_episode(spec, EnvFactory(family), ScriptedPolicy())
    message = str(caught.value)
    assert "ep-000001" in message and "no question after 0.2s for seed 1" in message
    assert "'min_terms': 2000000" in message


def test_an_ini_file_that_is_not_utf8_fails_inside_pytest_before_any_plugin(
    launcher: Launcher,
) -> None:
    """Out of this plugin's reach, pinned so the claim stays true: pytest reads its ini file
    (iniconfig) before it loads any plugin, and a byte that is not UTF-8 ends there with
    pytest's own traceback (pytest-dev/pytest#4441). No frame of this plugin is in it."""
    (launcher.folder / "pytest.ini").write_bytes(b"[pytest]\nopenenv_model = x\xff\xfey\n")
    finished = launcher.start(TTT, "--openenv-n=1").wait(120)
    assert finished.returncode != 0
    assert "UnicodeDecodeError" in finished.stderr
    assert "iniconfig" in finished.stderr
    assert "pytest_openenv" not in finished.stderr
    assert not launcher.output.exists()


# -- model text on the terminal ----------------------------------------------------------------

ESCAPING_AGENT = """
HOSTILE = "\\x1b]52;c;aGk=\\x07\\x1b[2J\\x1b]0;pwned\\x07\\r\\x9b31m\\u202e"

def hostile(messages, tools):
    return {"name": HOSTILE, "arguments": {"action_id": 0}}
"""

EXPLAINING_TEST = """
import pytest

@pytest.mark.openenv(env="openspiel:tic_tac_toe", n=1, policy="hostile_agent:hostile")
def test_explained(episode):
    print(episode.explain())
    assert episode.passed, episode.explain()
"""


@pytest.mark.slow
def test_model_text_reaches_the_terminal_without_its_control_characters(
    run_pytest, pytester: pytest.Pytester
) -> None:
    """OSC 52 (clipboard), clear-screen, title, carriage return, 8-bit CSI and bidi override
    from a model's tool call: shown as escapes in explain() and in failure messages."""
    pytester.makepyfile(hostile_agent=ESCAPING_AGENT, test_explained=EXPLAINING_TEST)
    result = run_pytest("-rA", "-s", "--openenv-max-turns=2")
    text = "\n".join(result.outlines + result.errlines)
    assert result.ret == 1, text
    assert "\\x1b]52;c;aGk=\\x07" in text  # shown, as an escape
    for raw in ("\x1b", "\x07", "\r", "\x9b", "\u202e"):
        assert raw not in text, repr(raw)
    written = (pytester.path / "openenv-results" / "failures.jsonl").read_text()
    assert "\\u001b]52;c;aGk=" in written  # the row keeps the text as it was (JSON-escaped)
