"""Command-line options and ini keys: one row of ``OPTIONS`` per ``--openenv-x-y``.

Every ``--openenv-x-y`` has an ini key ``openenv_x_y``; the command line wins. A row names
its converter (``convert.py``: a bad value is a ``pytest.UsageError`` naming the option and
what would be valid), its default, and the typed settings field it fills (``into``,
``settings.py``). The ini key is declared with its real type where pytest has one (``ini.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from ..errors import IniValueUnreadable
from . import ini
from .convert import (
    AUTO_CEILING,
    AUTO_START,
    DEFAULT_FAILURE_REPORTS,
    DEFAULT_PROGRESS_SECONDS,
    INSPECT_LOGS_DEFAULT,
    INSPECT_LOGS_DEFAULT_FLAG,
    JUDGE_AT,
    KIND,
    LLM_CLIENTS,
    MAX_CONCURRENCY,
    MAX_ITEMS,
    MODEL_DTYPES,
    PROMPT_STYLES,
    TOOL_ARGUMENT_FORMS,
    TRAIN_ON,
    boolean,
    concurrency,
    confidence,
    failure_reports,
    folders,
    fraction,
    gate_metric,
    http_url,
    hub_license,
    hub_repo,
    id_prefix,
    inspect_log_dir,
    item_count,
    json_object,
    model_or_path,
    names,
    non_negative_int,
    non_negative_number,
    number,
    one_of,
    path_text,
    positive_int,
    positive_number,
    positive_seconds,
    progress_seconds,
    seed,
    server_urls,
    text,
)
from .prices import price_table
from .rubric import rubric_text
from .shard import shard_option

#: seconds one LLM request may take when nothing else is set: the SDKs' own default
#: (600 s, retried twice) leaves a hung endpoint holding an episode for ~30 minutes
DEFAULT_REQUEST_TIMEOUT = 120.0


@dataclass(frozen=True)
class Option:
    flag: str
    help: str
    convert: Callable[[str, Any], Any] = text
    default: Any = None
    metavar: str | None = None
    is_flag: bool = False
    #: may be given several times; the CLI values (or the ini list) reach ``convert`` as one list
    repeat: bool = False
    #: the settings field this option fills, ``group.field`` (``settings.Settings``)
    into: str = ""
    #: the value of the flag given alone (``--openenv-x`` for ``--openenv-x=VALUE``)
    alone: str | None = None

    @property
    def dest(self) -> str:
        return "openenv_" + self.flag.replace("-", "_")

    @property
    def kind(self) -> ini.IniKind:
        return KIND.get(self.convert, "string")


OPTIONS: list[Option] = [
    Option(
        "env",
        "env as family:variant, e.g. openspiel:tic_tac_toe (plugin is inert without it)",
        metavar="SPEC",
        into="run.env",
    ),
    Option(
        "n",
        f"episodes per episode test (default 10; at most {MAX_ITEMS:,} x repeats)",
        item_count,
        10,
        "N",
        into="run.n",
    ),
    Option("seed", "base seed; episode i gets seed S+i (default 0)", seed, 0, "S", into="run.seed"),
    Option(
        "id-prefix",
        "prefix of every episode id: P-ep-000000 (tell runs apart when datasets are merged)",
        id_prefix,
        None,
        "P",
        into="run.id_prefix",
    ),
    Option(
        "shard",
        "play only shard I of N of the episodes (0-based, by episode index): I/N, auto/N (I "
        "from JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID) or auto (N from "
        "SLURM_ARRAY_TASK_COUNT too); merge shards with python -m pytest_openenv merge",
        shard_option,
        None,
        "I/N",
        into="run.shard",
    ),
    Option(
        "env-config",
        "env options as a JSON object (opponent, game params, dataset config)",
        json_object,
        None,
        "JSON",
        into="run.env_config",
    ),
    Option(
        "server",
        "deployed OpenEnv server URL (HF Space, container, uvicorn); repeat it for several: "
        "each episode goes to the one with the fewest in flight, and one that fails leaves "
        "rotation for a cool-down (default: embedded engine)",
        server_urls,
        None,
        "URL",
        repeat=True,
        into="servers.urls",
    ),
    Option(
        "policy",
        "expert, scripted, random, openai, anthropic, transformers (a local checkpoint "
        "in-process), agent:claude-code|codex|opencode|command (an agent program playing "
        "through MCP), or pkg.module:callable (default: the "
        "env family's best teacher, expert where OpenSpiel's bots play the game, else "
        "scripted; openai when --openenv-llm-endpoint is given); repeat it to compare "
        "policies on the same episodes (ids P-ep-000000, one row per policy in the summary)",
        names,
        None,
        "P",
        repeat=True,
        into="run.policies",
    ),
    Option(
        "agent-command",
        "--openenv-policy=agent:command: the program to run per episode, a command line "
        "with placeholders {prompt} or {prompt_file}, {mcp_config}, {mcp_url}, {base_url}, "
        "{proxy_url}, {model}, {workdir} (docs/agents.md)",
        text,
        None,
        "TEMPLATE",
        into="run.agent_command",
    ),
    Option(
        "agent-writable",
        "a folder an agent program may write to besides its episode's own (repeatable): "
        "on Linux every other write of the agent and of what it starts is refused "
        "(Landlock), as a read-only folder's would be",
        folders,
        (),
        "DIR",
        repeat=True,
        into="run.agent_writable",
    ),
    Option(
        "system-prompt",
        "system prompt for the agent (default: the family's; '' sends no system message)",
        text,
        None,
        "TEXT",
        into="run.system_prompt",
    ),
    Option(
        "max-turns",
        "policy turns per episode before it counts as failed (default 10, or more when the "
        "env's family knows a whole episode needs more: e.g. 21 for openspiel:connect_four)",
        positive_int,
        None,
        "N",
        into="run.max_turns",
    ),
    Option(
        "output",
        "output folder (default openenv-results under rootdir)",
        path_text,
        None,
        "DIR",
        into="output.folder",
    ),
    Option(
        "resume",
        "play only the episodes that never finished: skip those in results.jsonl and the "
        "failed ones in failures.jsonl (each counts by its first attempt); errored ones play "
        "again",
        boolean,
        False,
        is_flag=True,
        into="output.resume",
    ),
    Option(
        "resume-failed",
        "with --openenv-resume: play the failed episodes again too (to collect more passing "
        "rows); the figures are then best of N attempts and no gate is judged on them "
        "unless --openenv-gate-best-of",
        boolean,
        False,
        is_flag=True,
        into="output.resume_failed",
    ),
    Option(
        "gate-best-of",
        "judge the gate even when --openenv-resume-failed made the figures best of N attempts "
        "(needs --openenv-resume)",
        boolean,
        False,
        is_flag=True,
        into="output.gate_best_of",
    ),
    Option(
        "min-reward",
        "an episode passes iff reward >= R (default: the family's verdict)",
        number,
        None,
        "R",
        into="run.min_reward",
    ),
    Option(
        "judge-at",
        "when an episode is judged: done (when the env ends it; out of turns is unfinished, "
        "never a pass) or turn-limit (the env has no terminal state: an episode the turn limit "
        "ends is judged on its reward too) (default: the family's; done for the built-in ones)",
        one_of(*JUDGE_AT),
        None,
        "WHEN",
        into="run.judge_at",
    ),
    Option(
        "train-on",
        "which episodes fill results.jsonl, the training split: verdict (default: the test "
        "passed and the env's verdict passed too; a test-passed episode the verdict failed "
        "goes to failures.jsonl as verdict-failed) or test (every test-passed episode, for "
        "suites whose test body is the judge)",
        one_of(*TRAIN_ON),
        TRAIN_ON[0],
        "RULE",
        into="output.train_on",
    ),
    # -- a judge model's verdict (policies/judging/, docs/judging.md) --
    Option(
        "judge",
        "a judge model decides each episode's verdict by --openenv-judge-rubric (its verdict, "
        "score and reasoning go in the row; a judge that cannot answer makes the item error)",
        model_or_path,
        None,
        "MODEL",
        into="judge.model",
    ),
    Option(
        "judge-endpoint",
        "OpenAI-compatible base URL of the judge model (default: --openenv-llm-endpoint; "
        "none: the official API of the run's provider)",
        http_url,
        None,
        "URL",
        into="judge.endpoint",
    ),
    Option(
        "judge-rubric",
        "what a passing episode must show, as text or @FILE (default: a rubric asking "
        "whether the agent did the task it was given)",
        rubric_text,
        None,
        "TEXT|@FILE",
        into="judge.rubric",
    ),
    # -- evaluation: gates, repeats, baseline (report/gates.py, report/passk.py) --
    Option(
        "min-pass-rate",
        "gate: the session fails iff the pass rate is below F (episode failures alone then "
        "do not fail it)",
        fraction,
        None,
        "F",
        into="gate.min_pass_rate",
    ),
    Option(
        "min-mean-reward",
        "gate: the session fails iff mean reward < R",
        number,
        None,
        "R",
        into="gate.min_mean_reward",
    ),
    Option(
        "gate-confidence",
        "gate on the lower bound of the C confidence interval instead of the point estimate; "
        "also the level of the --openenv-baseline test (default 0.95 there)",
        confidence,
        None,
        "C",
        into="gate.confidence",
    ),
    Option(
        "repeats",
        "run each seed K times (ids ep-000000-r0 ...); report pass@1, pass@k, pass^k",
        item_count,
        1,
        "K",
        into="run.repeats",
    ),
    Option(
        "gate-metric",
        "what the pass-rate gate reads: pass@1, pass@k or pass^k (default pass@1)",
        gate_metric,
        "pass@1",
        "M",
        into="gate.metric",
    ),
    Option(
        "baseline",
        "earlier summary.json or output folder; fail only on a significant pass-rate drop",
        path_text,
        None,
        "PATH",
        into="gate.baseline",
    ),
    Option(
        "baseline-any-env",
        "compare with a --openenv-baseline of another env (refused otherwise: its pass rate "
        "measures other tasks)",
        boolean,
        False,
        is_flag=True,
        into="gate.baseline_any_env",
    ),
    Option(
        "gate-pooled",
        "the gates judge the run's pooled figures (every group together) instead of each "
        "group (test function, env, model or policy) on its own",
        boolean,
        False,
        is_flag=True,
        into="gate.pooled",
    ),
    Option(
        "gate-model",
        "with several models or policies: the one whose groups the gates (--openenv-min-pass-"
        "rate, --openenv-min-mean-reward, --openenv-baseline, --openenv-gate-vs) judge, by "
        "its exact name (default: every group; with --openenv-gate-vs every other model's)",
        text,
        None,
        "MODEL",
        into="gate.model",
    ),
    Option(
        "gate-vs",
        "gate: the gated model must not be significantly worse than MODEL on the same "
        "episodes (one-sided exact McNemar test on pass/fail, at --openenv-gate-confidence, "
        "default 0.95)",
        text,
        None,
        "MODEL",
        into="gate.vs",
    ),
    # -- LLM policies (policies/llm.py, cache.py; concurrency in prefetch.py) --
    Option(
        "model",
        "model for LLM policies: an id for openai / anthropic; for transformers a checkpoint "
        "folder, a .gguf file or a Hub id; repeat it to compare models on the same "
        "episodes (ids M-ep-000000 with M the model's id part, one row per model in the "
        "summary and a paired test for each pair)",
        names,
        None,
        "M",
        repeat=True,
        into="llm.models",
    ),
    Option(
        "llm-endpoint",
        "any OpenAI-compatible base URL (vLLM, TGI, Ollama, ...); implies --openenv-policy=openai",
        http_url,
        None,
        "URL",
        into="llm.endpoint",
    ),
    Option(
        "llm-client",
        "what sends --openenv-policy=openai requests: http (the standard library, one "
        "keep-alive connection per episode thread: the least CPU per request), sdk (the "
        "openai SDK: OPENAI_BASE_URL, its auth and client options) or auto (default: http "
        "for --openenv-llm-endpoint, sdk for the official API)",
        one_of(*LLM_CLIENTS),
        LLM_CLIENTS[0],
        "CLIENT",
        into="llm.client",
    ),
    Option(
        "temperature",
        "sampling temperature; 0 is greedy for transformers (default 0.2)",
        non_negative_number,
        0.2,
        "T",
        into="llm.temperature",
    ),
    Option(
        "max-tokens",
        "max tokens per model reply (default 256)",
        positive_int,
        256,
        "N",
        into="llm.max_tokens",
    ),
    Option(
        "timeout",
        "wall-clock limit per episode in seconds; over it the item errors (default none: "
        "each model request is still bounded by --openenv-request-timeout, each turn by it "
        "x (1 + retries), each episode by that x --openenv-max-turns)",
        positive_seconds,
        None,
        "SEC",
        into="run.timeout",
    ),
    Option(
        "request-timeout",
        f"seconds one model request may take, its answer's bytes included, before the SDK "
        f"retries it (default {DEFAULT_REQUEST_TIMEOUT:g}); with the retries and "
        "--openenv-max-turns it bounds an episode that has no --openenv-timeout",
        positive_seconds,
        DEFAULT_REQUEST_TIMEOUT,
        "SEC",
        into="llm.request_timeout",
    ),
    Option(
        "max-retries",
        "transport retries per model call on 429, 5xx, connection errors (default: the SDK's)",
        non_negative_int,
        None,
        "K",
        into="llm.max_retries",
    ),
    Option(
        "concurrency",
        f"episodes in flight per pytest process (1..{MAX_CONCURRENCY}); items are still "
        "reported in order; with -n W up to W x C in flight; auto: start at "
        f"{AUTO_START}, grow while latency holds, halve on 429/CAPACITY_REACHED/timeouts, "
        f"ceiling {AUTO_CEILING} (default 1)",
        concurrency,
        1,
        "C",
        into="run.concurrency",
    ),
    Option(
        "cache",
        "response cache folder for LLM policies: hit = reuse, miss = call and store",
        path_text,
        None,
        "DIR",
        into="llm.cache",
    ),
    Option(
        "replay",
        "with --openenv-cache: a cache miss is an episode error, never a network call",
        boolean,
        False,
        is_flag=True,
        into="llm.replay",
    ),
    Option(
        "model-dtype",
        "--openenv-policy=transformers: the type the weights are loaded in: auto (default: "
        "float32 on CPU, the checkpoint's own on GPU), float32, bfloat16 (about twice as fast "
        "on a CPU with AVX512-BF16 or AMX; greedy replies may differ from float32's) or "
        "float16; part of the response cache key",
        one_of(*MODEL_DTYPES),
        MODEL_DTYPES[0],
        "DTYPE",
        into="llm.model_dtype",
    ),
    Option(
        "trust-remote-code",
        "--openenv-policy=transformers: let a checkpoint that ships its own Python code "
        "(auto_map in config.json) run it; without it such a checkpoint is refused",
        boolean,
        False,
        is_flag=True,
        into="llm.trust_remote_code",
    ),
    # -- cost and budgets (config/prices.py, controller/budget.py) --
    Option(
        "prices",
        "price table: a JSON file (or inline JSON object, or an ini/TOML table) mapping each "
        'model to USD per million tokens, {"MODEL": {"input": 0.15, "output": 0.6}}; '
        "episodes get a cost in their rows, the summary, card and report the totals",
        price_table,
        None,
        "FILE",
        into="budget.prices",
    ),
    Option(
        "max-cost",
        "run budget in USD (needs --openenv-prices): once the run's episodes have cost this "
        "much, no further episode starts; those left are reported as skipped and "
        "--openenv-resume finishes the run",
        positive_number,
        None,
        "USD",
        into="budget.max_cost",
    ),
    Option(
        "max-total-tokens",
        "run budget in tokens (prompt + completion): once the run's episodes have used this "
        "many, no further episode starts; those left are reported as skipped and "
        "--openenv-resume finishes the run",
        positive_int,
        None,
        "N",
        into="budget.max_total_tokens",
    ),
    Option(
        "strict-budget",
        "with --openenv-max-cost or --openenv-max-total-tokens: a model answer whose usage "
        "is missing or unreadable stops the run (its spend cannot be counted); without it "
        "the run warns once and goes on",
        boolean,
        False,
        is_flag=True,
        into="budget.strict",
    ),
    Option(
        "episode-max-tokens",
        "token limit per episode (prompt + completion, all turns): an episode that passes "
        "it ends there as a failure (reason token_limit), never an error",
        positive_int,
        None,
        "N",
        into="budget.episode_max_tokens",
    ),
    # -- publishing (dataset/hub.py, dataset/card.py) --
    Option(
        "push-to-hub",
        "after the run, upload the output folder as the Hub dataset repo REPO (owner/name); "
        "token from HF_TOKEN or `hf auth login`",
        hub_repo,
        None,
        "REPO",
        into="publish.repo",
    ),
    Option(
        "private",
        "with --openenv-push-to-hub: create the dataset repo private",
        boolean,
        False,
        is_flag=True,
        into="publish.private",
    ),
    Option(
        "commit-message",
        "with --openenv-push-to-hub: the commit message (default: episodes, env, pass rate)",
        text,
        None,
        "MSG",
        into="publish.commit_message",
    ),
    Option(
        "tool-arguments",
        "how the written messages carry assistant tool_calls[].function.arguments: string "
        "(a JSON string, OpenAI's wire format, what DeepSeek-style chat templates "
        "concatenate as text) or object (the parsed JSON object, null for a refused call: "
        "for Qwen2.5 / Llama-3.1 style templates that apply `tojson` to the arguments and "
        "would otherwise encode the string twice); default string, or the form "
        "--openenv-chat-template's template needs",
        one_of(*TOOL_ARGUMENT_FORMS),
        None,  # unset: string, or what the chat template check chooses
        "FORM",
        into="output.tool_arguments",
    ),
    # -- what a person sees during and after a run (controller/progress.py, report/page/) --
    Option(
        "progress",
        "the live status line of the run (done/total, pass rate with its interval, reward, "
        "episodes/s, ETA, tokens, gate): in place on a terminal; otherwise a plain line every "
        f"SEC seconds (default {DEFAULT_PROGRESS_SECONDS:g}); off: none (-qq also silences it)",
        progress_seconds,
        DEFAULT_PROGRESS_SECONDS,
        "SEC|off",
        into="output.progress",
    ),
    Option(
        "failure-reports",
        "episode failures and errors shown with their full report at the end of a run "
        f"(default {DEFAULT_FAILURE_REPORTS}); the others get one line each, linked to their "
        "transcript in report.html; all: every one in full, as pytest does",
        failure_reports,
        DEFAULT_FAILURE_REPORTS,
        "N|all",
        into="output.failure_reports",
    ),
    Option(
        "chat-template",
        "check before the run (on a sample built from the env's tools) and after it (on the "
        "first rows) that rows render through this model's chat template with every tool "
        "call and tool result intact, and choose the --openenv-tool-arguments form it "
        "needs: a local model or tokenizer folder, a chat_template.jinja or "
        "tokenizer_config.json file, or a model id in the Hugging Face cache",
        model_or_path,
        None,
        "MODEL",
        into="output.chat_template",
    ),
    Option(
        "prompt-style",
        "whose wording the prompts, tools and tool results follow: native (default; this "
        "plugin's, with the rules and a correct board) or openenv (what OpenEnv's own "
        "harness, `openenv collect`, writes for openspiel and reasoning_gym, so SFT data "
        "and GRPO rollouts through that harness share one format)",
        one_of(*PROMPT_STYLES),
        PROMPT_STYLES[0],
        "STYLE",
        into="run.prompt_style",
    ),
    Option(
        "inspect-log",
        "at the end of the run, write one inspect-ai eval log per group (test, env, model "
        "or policy) into DIR, for `inspect view` and inspect_ai.analysis; given alone, "
        f"into {INSPECT_LOGS_DEFAULT}/ inside the output folder (write a folder as "
        "--openenv-inspect-log=DIR); needs the inspect extra",
        inspect_log_dir,
        None,
        "DIR",
        into="output.inspect_log",
        alone=INSPECT_LOGS_DEFAULT_FLAG,
    ),
    Option(
        "license",
        "license id for the dataset card, e.g. mit or cc-by-4.0 (default: none stated)",
        hub_license,
        None,
        "ID",
        into="publish.license",
    ),
]


OPTION_BY_FLAG = {opt.flag: opt for opt in OPTIONS}


def default_of(flag: str) -> Any:
    """The default of ``--openenv-{flag}``: settings fields take it from the row."""
    return OPTION_BY_FLAG[flag].default


#: ``pytest --help`` shows one section per settings group, so a reader looking for "how do I
#: gate" or "where does my vLLM go" reads one short section, not all 54 options
HELP_GROUPS = {
    "run": "openenv: env and episodes (what plays, how many, how it is judged)",
    "llm": "openenv: model, sampling and transport (LLM policies)",
    "servers": "openenv: deployed env servers",
    "gate": "openenv: gates and statistics",
    "budget": "openenv: budgets",
    "output": "openenv: output folder and files",
    "publish": "openenv: publishing to the Hugging Face Hub",
    "judge": "openenv: judge model (verdicts by a rubric)",
}


def help_group(opt: Option) -> str:
    """The settings group an option fills: its section of ``pytest --help``."""
    return opt.into.partition(".")[0]


def register(parser: pytest.Parser) -> None:
    groups = {key: parser.getgroup(f"openenv-{key}", title) for key, title in HELP_GROUPS.items()}
    for opt in OPTIONS:
        group = groups[help_group(opt)]
        flag = f"--openenv-{opt.flag}"
        if opt.is_flag:
            group.addoption(flag, action="store_true", default=None, dest=opt.dest, help=opt.help)
        elif opt.alone is not None:
            group.addoption(
                flag,
                action="store",
                nargs="?",
                const=opt.alone,
                default=None,
                dest=opt.dest,
                metavar=opt.metavar,
                help=opt.help,
            )
        else:
            group.addoption(
                flag,
                action="append" if opt.repeat else "store",
                default=None,
                dest=opt.dest,
                metavar=opt.metavar,
                help=opt.help,
            )
        default: Any = False if opt.is_flag else [] if opt.repeat else None
        parser.addini(opt.dest, opt.help, type=ini.ini_type(opt.kind), default=default)


def _ini_value(config: pytest.Config, opt: Option) -> Any:
    try:
        value = config.getini(opt.dest)
    except (pytest.UsageError, TypeError, ValueError) as refused:
        # pytest refused what the file holds (a TOML string for an int key, an inline
        # table for a string key, a bad bool): read it as written and let our converter
        # accept it or say, naming the option, what would be right
        try:
            return ini.raw_value(config, opt.dest, refused)
        except IniValueUnreadable as exc:
            raise pytest.UsageError(
                f"--openenv-{opt.flag} (ini key {opt.dest}) is invalid: {exc}"
            ) from None
    if opt.kind == "table" and isinstance(value, str) and value.lstrip().startswith("{"):
        # pytest 8's [tool.pytest.ini_options] hands an inline table over as its str()
        native = ini.native_table(config, opt.dest)
        if isinstance(native, dict):
            return native
    return value


def read_values(config: pytest.Config) -> dict[str, Any]:
    """Each option's value by flag, after CLI-over-ini precedence, converted and checked."""
    values: dict[str, Any] = {}
    for opt in OPTIONS:
        raw = config.getoption(opt.dest, None)
        from_ini = raw is None
        if from_ini:
            raw = _ini_value(config, opt)
            if raw in (None, "", []) or (opt.is_flag and raw is False):
                raw = None
        if raw is None:
            values[opt.flag] = opt.default
            continue
        try:
            _refuse_undecodable(opt, raw)
            values[opt.flag] = opt.convert(opt.flag, raw)
        except pytest.UsageError as exc:
            if not from_ini:
                raise
            raise pytest.UsageError(f"{exc} ({ini.origin(config, opt.dest)})") from None
    return values


def given_as(config: pytest.Config, flag: str) -> str | None:
    """How ``--openenv-{flag}`` was set, for messages (``--openenv-temperature=0.7``, or its
    ini key and file); None when it was left at its default."""
    opt = OPTION_BY_FLAG[flag]
    raw = config.getoption(opt.dest, None)
    if raw is not None:
        if opt.is_flag:
            return f"--openenv-{flag}"
        values = raw if isinstance(raw, list) else [raw]
        return " ".join(f"--openenv-{flag}={value}" for value in values)
    try:
        value = config.getini(opt.dest)
    except (pytest.UsageError, TypeError, ValueError):
        value = "?"  # read_values has refused it, or will
    if value in (None, "", []) or (opt.is_flag and value is False):
        return None
    return f"{ini.origin(config, opt.dest)} ({value!r})"


def _refuse_undecodable(opt: Option, raw: Any) -> None:
    """Bytes that are not UTF-8 reach Python as lone surrogates; files must hold UTF-8."""
    for value in raw if isinstance(raw, list) else [raw]:
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                shown = value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                raise pytest.UsageError(
                    f"--openenv-{opt.flag}={shown!r} is invalid: it is not valid UTF-8 "
                    "(check the shell's or the ini file's encoding)"
                ) from None
