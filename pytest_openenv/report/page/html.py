"""The run report page: one self-contained HTML file (no CDN, no network, no dependency).

The page holds the run's summary and charts as markup made here (every value escaped),
the episode table as one JSON block, and transcripts as JSON blocks
(``<script type="application/json">``, which browsers never run) that the page's own
script reads when an episode is opened. A Content-Security-Policy lets only that script
and the page's styles run, so even content that escaped escaping could not execute.

Two modes share everything but where transcripts come from:

- ``file``: ``report.html`` in the output folder; transcripts of every failure and error
  and an even sample of passes are embedded up to a byte budget (``DEFAULT_CAP``);
- ``served``: ``python -m pytest_openenv view DIR`` (``report/view.py``); none are embedded,
  the page fetches each from the server, which reads its line from the JSONL by offset.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from html import escape
from importlib import resources
from typing import Any

from ...util.format import (
    MODEL_COLUMNS,
    comparison_line,
    group_columns,
    group_row,
    model_row,
    percent,
    usd,
)
from .. import charts
from ..passk import pass_at_k
from .rows import COLUMNS, FolderRows

#: bytes of transcripts a report file embeds at most (all rows are always in the table)
DEFAULT_CAP = 20 * 1024 * 1024


def static_text(name: str) -> str:
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def json_for_html(value: Any) -> str:
    """JSON that cannot end its ``<script>`` block: ``<``, ``>``, ``&`` as ``\\u`` escapes."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return inert(text)


def inert(text: str) -> str:
    """JSON text safe inside a ``<script type="application/json">`` (lossless: those
    characters only ever appear inside JSON strings)."""
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _num(value: Any, digits: int = 3) -> str:
    return "n/a" if not isinstance(value, (int, float)) else f"{value:.{digits}f}"


# -- which transcripts a report file embeds ---------------------------------------------
def choose_embedded(found: FolderRows, cap: int) -> tuple[list[int], dict[str, int]]:
    """Row numbers to embed: failures and errors first, then passes spread evenly.

    Returns them and the tally the page states (embedded / total per kind).
    """
    budget = cap
    chosen: list[int] = []
    failing = [n for n, row in enumerate(found.rows) if row.outcome != "passed"]
    passing = [n for n, row in enumerate(found.rows) if row.outcome == "passed"]
    kept_failing = 0
    for number in failing:
        cost = found.rows[number].length
        if cost > budget:
            continue
        budget -= cost
        chosen.append(number)
        kept_failing += 1
    kept_passing = 0
    total_passing = sum(found.rows[n].length for n in passing)
    if passing and budget > 0:
        stride = max(1, math.ceil(total_passing / budget)) if total_passing > budget else 1
        for number in passing[::stride]:
            cost = found.rows[number].length
            if cost > budget:
                continue
            budget -= cost
            chosen.append(number)
            kept_passing += 1
    tally = {
        "failing": len(failing),
        "failing_embedded": kept_failing,
        "passing": len(passing),
        "passing_embedded": kept_passing,
        "cap_bytes": cap,
    }
    return sorted(chosen), tally


# -- summary markup -----------------------------------------------------------------------
def _card(key: str, value: str, note: str = "", figure: str | None = None) -> str:
    attr = f' data-figure="{escape(figure)}"' if figure else ""
    return (
        f'<div class="card"><div class="k">{escape(key)}</div>'
        f'<div class="v"{attr}>{escape(value)}</div>'
        + (f'<div class="n">{escape(note)}</div>' if note else "")
        + "</div>"
    )


def summary_markup(summary: dict[str, Any], metadata: dict[str, Any]) -> str:
    f = summary.get("figures") or {}
    settings = metadata.get("settings") or {}
    low, high = (f.get("pass_rate_ci95") or [None, None])[:2]
    reward = _num(f.get("mean_reward"))
    if isinstance(f.get("mean_reward_stderr"), (int, float)):
        reward += f" ± {f['mean_reward_stderr']:.3f}"
    speed = f.get("episodes_per_s")
    cards = [
        _card("passed", str(f.get("passed", 0)), figure="passed"),
        _card("failed", str(f.get("failed", 0)), figure="failed"),
        _card("errored", str(f.get("errored", 0)), figure="errored"),
        _card("skipped", str(f.get("skipped", 0)), figure="skipped"),
        _card(
            "pass rate",
            percent(f.get("pass_rate")),
            f"95% Wilson CI {percent(low)} - {percent(high)}, n={f.get('ran', 0)}",
            figure="pass_rate",
        ),
        _card("mean reward", reward, "± standard error", figure="mean_reward"),
        _card("mean turns", _num(f.get("mean_turns"), 2)),
        _card(
            "tokens",
            f"{f.get('prompt_tokens', 0):,} in / {f.get('completion_tokens', 0):,} out",
            # --openenv-replay: the cache's answers carried them, none was spent
            "replayed from the response cache: 0 spent"
            if f.get("replayed_prompt_tokens") is not None
            else "",
            figure="tokens",
        ),
        _card(
            "time",
            f"{f.get('wall_time_s', 0):.1f} s",
            f"{speed:.1f} episodes/s" if isinstance(speed, (int, float)) else "",
        ),
    ]
    if f.get("cost_usd") is not None:
        unpriced = f.get("unpriced_episodes") or 0
        note = f"{unpriced} episode(s) not priced" if unpriced else "--openenv-prices"
        cards.append(_card("cost", usd(f.get("cost_usd")), note, figure="cost"))
    facts = [
        ("env", ", ".join(f.get("envs") or []) or settings.get("env") or "n/a"),
        ("policy", ", ".join(f.get("policies") or []) or "n/a"),
        ("model", ", ".join(f.get("models") or []) or "n/a"),
        ("started", metadata.get("started_at") or "n/a"),
        ("finished", metadata.get("finished_at") or "n/a"),
        ("exit status", str(summary.get("exit_status", "n/a"))),
    ]
    passk = summary.get("passk") or {}
    if isinstance(passk.get("k"), int) and passk["k"] > 1:
        k = passk["k"]
        facts.append(
            (
                "repeats",
                f"{k} per seed over {passk.get('problems', 0)} seed(s): pass@1 "
                f"{percent(passk.get('pass@1'))}, pass@{k} {percent(passk.get('pass@k'))}, "
                f"pass^{k} {percent(passk.get('pass^k'))}",
            )
        )
    seeding = summary.get("seeding") or {}
    if seeding.get("unseeded"):
        facts.append(
            (
                "seed",
                f"ignored by the server for {seeding['unseeded']} of "
                f"{seeding.get('episodes', 0)} episode(s) (rows say seeded: false): they "
                f"began from {seeding.get('unseeded_distinct_starting_states', 0)} distinct "
                "starting state(s), and a rerun will not repeat them",
            )
        )
    guessed = [
        f"{entry.get('episodes', 0)} by {entry.get('rule')}"
        for entry in (summary.get("verdict_rules") or {}).values()
        if entry.get("guessed")
    ]
    if guessed:
        facts.append(
            (
                "verdict",
                f"a threshold the plugin guessed, not the env's verifier: {'; '.join(guessed)} "
                "(--openenv-min-reward sets the env's own)",
            )
        )
    budget = summary.get("budget") or {}
    if budget.get("stopped"):
        facts.append(
            (
                "stopped",
                f"{budget['stopped']}; {budget.get('not_started', 0)} episode(s) not started "
                "(skipped; --openenv-resume runs them)",
            )
        )
    rows = "".join(
        f'<tr><th>{escape(name)}</th><td class="mono" data-fact="{escape(name)}">'
        f"{escape(str(value))}</td></tr>"
        for name, value in facts
    )
    pooled = len(summary.get("groups") or []) > 1
    return (
        groups_markup(summary)
        + ('<h3 id="pooled-title">Pooled (all groups)</h3>' if pooled else "")
        + f'<div class="cards">{"".join(cards)}</div>'
        f'<table class="facts">{rows}</table>'
        + models_markup(summary)
        + gate_markup(summary.get("gate"))
    )


def group_id(test: Any, env: Any, played: Any) -> str:
    """The key the page's group filter and charts share: test, env and policy / model."""
    return f"{test}\x1f{env}\x1f{played}"


def groups_markup(summary: dict[str, Any]) -> str:
    """More than one group: a row each (test, env, policy / model and its figures)."""
    groups = [g for g in summary.get("groups") or [] if isinstance(g, dict)]
    if len(groups) < 2:
        return ""
    columns = group_columns(groups)
    head = "".join(f"<th>{escape(name)}</th>" for name in columns)
    body = "".join(
        f'<tr data-group="{escape(group_id(g.get("test"), g.get("env"), g.get("name")))}">'
        + "".join(f"<td>{escape(text)}</td>" for text in group_row(g, columns))
        + "</tr>"
        for g in groups
    )
    return f'<h3>Groups</h3><table class="facts" id="groups"><tr>{head}</tr>{body}</table>'


def models_markup(summary: dict[str, Any]) -> str:
    """Several models (or policies) on the same seeds: one row each, then each pair."""
    models = summary.get("models")
    if not isinstance(models, list) or not models:
        return ""
    head = "".join(f"<th>{escape(name)}</th>" for name in MODEL_COLUMNS)
    body = "".join(
        f'<tr data-model="{escape(str(m.get("name")))}">'
        + "".join(f"<td>{escape(text)}</td>" for text in model_row(m))
        + "</tr>"
        for m in models
        if isinstance(m, dict)
    )
    pairs = "".join(
        f'<li data-pair="{escape(str(c.get("a")))} vs {escape(str(c.get("b")))}">'
        f"{escape(comparison_line(c))}</li>"
        for c in summary.get("comparisons") or []
        if isinstance(c, dict)
    )
    return (
        '<h2>Models on the same seeds</h2><table class="facts" id="models">'
        f"<tr>{head}</tr>{body}</table>" + (f'<ul id="comparisons">{pairs}</ul>' if pairs else "")
    )


def gate_markup(gate: Any) -> str:
    if not isinstance(gate, dict):
        return '<p class="sub" id="gate-verdict" data-verdict="none">No gate was set.</p>'
    passed = gate.get("verdict") == "pass"
    word = "PASSED" if passed else "FAILED"
    parts = [
        f'<p id="gate-verdict" data-verdict="{"pass" if passed else "fail"}">gate: '
        f'<span class="{"verdict-pass" if passed else "verdict-fail"}">{word}</span></p>',
        '<table class="facts">',
    ]
    for check in gate.get("checks") or []:
        mark = "ok" if check.get("passed") else "FAIL"
        parts.append(
            f"<tr><th>{escape(str(check.get('check', '')))}</th>"
            f"<td>{escape(mark)}</td><td>{escape(str(check.get('rule', '')))}</td>"
            f"<td>{escape(str(check.get('detail', '')))}</td></tr>"
        )
    parts.append("</table>")
    for check in gate.get("checks") or []:
        comparison = check.get("comparison")
        if isinstance(comparison, dict):
            parts.append(
                baseline_markup(
                    comparison, str(gate.get("config", {}).get("baseline")), check.get("test")
                )
            )
    return "".join(parts)


def baseline_markup(c: dict[str, Any], path: str, test: Any = None) -> str:
    drop = bool(c.get("significant_drop"))
    used = str(test) if test else "one-sided z-test"
    verdict = (
        "significant drop" if drop else "no significant drop"
    ) + f" ({used}, p = {c.get('p_value', float('nan')):.3g}, level {c.get('confidence')})"
    before_n = c.get("baseline_n", c.get("paired_episodes"))
    after_n = c.get("current_n", c.get("paired_episodes"))
    change = c.get("change")
    change_text = "n/a" if not isinstance(change, (int, float)) else f"{100 * change:+.1f} points"
    return (
        '<h2>Against the baseline</h2><table class="facts" id="baseline">'
        f"<tr><th></th><th>baseline</th><th>this run</th></tr>"
        f"<tr><th>{escape(str(c.get('metric', 'pass@1')))}</th>"
        f"<td>{percent(c.get('baseline'))} (n={escape(str(before_n))})</td>"
        f"<td>{percent(c.get('current'))} (n={escape(str(after_n))})</td></tr>"
        f"<tr><th>change</th><td colspan=2>{escape(change_text)}</td></tr>"
        f'<tr><th>verdict</th><td colspan=2 class="{"verdict-fail" if drop else "verdict-pass"}"'
        f">{escape(verdict)}</td></tr>"
        f'<tr><th>baseline file</th><td colspan=2 class="mono">{escape(path)}</td></tr></table>'
    )


# -- charts -------------------------------------------------------------------------------
def pass_at_k_points(
    found: FolderRows, k: int, chosen: list[int] | None = None
) -> list[tuple[int, float]]:
    counts: dict[tuple[str, int], list[int]] = {}
    for row in found.rows if chosen is None else [found.rows[n] for n in chosen]:
        entry = counts.setdefault((row.function, row.index), [0, 0])
        entry[0] += 1
        entry[1] += int(row.outcome == "passed")
    points = []
    for size in range(1, k + 1):
        scores = [pass_at_k(n, c, size) for n, c in counts.values() if n >= size]
        if scores:
            points.append((size, sum(scores) / len(scores)))
    return points


def chart_markup(
    found: FolderRows, summary: dict[str, Any], chosen: list[int] | None = None
) -> list[str]:
    """The charts of the rows ``chosen`` (None: every row). No token chart for episodes no
    model played: their tokens are zero by construction, not a figure."""
    rows = found.rows if chosen is None else [found.rows[n] for n in chosen]
    figures = summary.get("figures") or {}
    counts = {"passed": 0, "failed": 0, "errored": 0}
    for row in rows:
        counts[row.outcome] = counts.get(row.outcome, 0) + 1
    counts["skipped"] = int(figures.get("skipped") or 0) if chosen is None else 0
    made = [
        charts.running_pass_rate([row.outcome == "passed" for row in rows]),
        charts.histogram("reward", "Reward per episode", [row.reward for row in rows], "reward"),
        charts.outcomes(counts),
        charts.histogram("turns", "Turns per episode", [row.turns for row in rows], "turns"),
    ]
    if any(row.model for row in rows):
        made.append(
            charts.histogram(
                "tokens",
                "Tokens per episode (in + out)",
                [row.tokens_in + row.tokens_out for row in rows],
                "tokens",
            )
        )
    k = (summary.get("passk") or {}).get("k")
    if isinstance(k, int) and k > 1:
        made.append(charts.pass_at_k_curve(pass_at_k_points(found, k, chosen)))
    return made


def group_label(key: tuple[str, str, str]) -> str:
    from ..arms import short_test

    return " · ".join(part for part in (short_test(key[0]), key[1], key[2]) if part)


def charts_section(found: FolderRows, summary: dict[str, Any]) -> str:
    """One set of charts; with several groups a set per group (the first shown, a selector
    for the others) and the pooled set last, labelled, so no chart runs across groups
    unless it says so."""
    if len(found.groups) <= 1:
        return '<div class="charts">' + "".join(chart_markup(found, summary)) + "</div>"
    members: dict[int, list[int]] = {}
    for number, row in enumerate(found.rows):
        members.setdefault(row.group, []).append(number)
    options = "".join(
        f'<option value="{i}">{escape(group_label(key))}</option>'
        for i, key in enumerate(found.groups)
    )
    parts = [
        '<div class="controls"><label>group <select id="chart-group">'
        f'{options}<option value="all">pooled (all groups)</option></select></label></div>'
    ]
    for i, key in enumerate(found.groups):
        parts.append(
            f'<div class="charts" data-group="{i}"{"" if i == 0 else " hidden"}>'
            f'<h3 class="chart-group">{escape(group_label(key))}</h3>'
            + "".join(chart_markup(found, summary, members.get(i, [])))
            + "</div>"
        )
    parts.append(
        '<div class="charts" data-group="all" hidden>'
        '<h3 class="chart-group">pooled (all groups)</h3>'
        + "".join(chart_markup(found, summary))
        + "</div>"
    )
    return "".join(parts)


# -- the page -----------------------------------------------------------------------------
@dataclass(frozen=True)
class PageParts:
    """Everything of the page but the transcripts, in order: ``head`` then ``tail``."""

    head: str
    tail: str


TABLE = """
<section id="episodes-section"><h2>Episodes</h2>
<div class="controls">
<label>outcome <select id="outcome-filter">
<option value="all">all</option><option value="passed">passed</option>
<option value="failed">failed</option><option value="errored">errored</option></select></label>
<label id="group-filter-label">group <select id="group-filter">
<option value="all">all groups</option></select></label>
<input type="search" id="search" placeholder="search id, test, reason, prompt…" aria-label="search">
<span class="count" id="shown-count"></span></div>
<table class="episodes"><thead><tr>
<th data-key="id">id</th><th data-key="test">test</th><th data-key="env">env</th>
<th data-key="model">policy / model</th><th data-key="seed">seed</th>
<th data-key="outcome">outcome</th>
<th data-key="reward">reward</th><th data-key="turns">turns</th>
<th data-key="tokens_in">tokens</th><th data-key="reason">failure reason</th>
</tr></thead><tbody id="episode-rows"></tbody></table>
<div class="pager"><button id="prev-page" type="button">previous</button>
<span id="page-label"></span><button id="next-page" type="button">next</button></div>
</section>
<section id="episode-view" hidden>
<nav class="episode-nav"><button id="back-to-table" type="button">&larr; back to the table</button>
<button id="prev-episode" type="button">&uarr; previous (k)</button>
<button id="next-episode" type="button">next (j) &darr;</button>
<span id="episode-position" class="count"></span></nav>
<section id="transcript"></section></section>
"""


def page_parts(
    found: FolderRows,
    summary: dict[str, Any],
    metadata: dict[str, Any],
    *,
    served: bool,
    embedded: list[int],
    embed_tally: dict[str, int] | None = None,
) -> PageParts:
    script = static_text("report.js")
    style = static_text("report.css")
    csp = (
        "default-src 'none'; "
        f"script-src {csp_hash(script)}; "
        f"style-src {csp_hash(style)} {csp_hash(charts.STYLE)}; "
        "img-src data:; "
        + ("connect-src 'self'; " if served else "")
        + "base-uri 'none'; form-action 'none'"
    )
    figures = summary.get("figures") or {}
    envs = ", ".join(figures.get("envs") or []) or "pytest-openenv run"
    title = f"openenv report: {envs}"
    banners = []
    for problem in found.problems:
        kind = "torn-line" if problem.torn else "bad-line"
        banners.append(f'<p class="banner bad" data-problem="{kind}">{escape(problem.text())}</p>')
    if not summary:
        banners.append(
            '<p class="banner">summary.json is missing or unreadable: the figures below '
            "come from the episode files only.</p>"
        )
    if embed_tally is not None:
        note = (
            f"Transcripts in this file: {embed_tally['failing_embedded']} of "
            f"{embed_tally['failing']} failures and errors, {embed_tally['passing_embedded']} "
            f"of {embed_tally['passing']} passes (cap {embed_tally['cap_bytes'] // (1024 * 1024)}"
            " MB). <code>python -m pytest_openenv view DIR</code> serves every transcript."
        )
        complete = (
            embed_tally["failing_embedded"] == embed_tally["failing"]
            and embed_tally["passing_embedded"] == embed_tally["passing"]
        )
        if not complete:
            banners.append(f'<p class="banner" id="embed-note">{note}</p>')
    payload = {
        "mode": "served" if served else "file",
        "columns": list(COLUMNS),
        "rows": [row.cells() for row in found.rows],
        "embedded": embedded,
        "several_tests": len(found.functions) > 1,
        "groups": [
            {"test": key[0], "env": key[1], "played": key[2], "label": group_label(key)}
            for key in found.groups
        ],
    }
    folder_name = escape(str(found.folder))
    head = (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{escape(csp)}">'
        '<link rel="icon" href="data:,">'
        f"<title>{escape(title)}</title><style>{style}</style></head><body>"
        f"<header><h1>{escape(title)}</h1>"
        f'<p class="sub">pytest-openenv run report · <span class="mono">{folder_name}</span>'
        + (" · served live from the JSONL files" if served else "")
        + "</p>"
        + "".join(banners)
        + "</header><main>"
        + '<section id="summary"><h2>Summary</h2>'
        + summary_markup(summary, metadata)
        + '</section><section id="charts-section"><h2>Charts</h2>'
        + charts_section(found, summary)
        + "</section>"
        + TABLE
        + "</main>"
        + "<footer>Made by pytest-openenv. Every value is shown as text; nothing from the run "
        "is run by this page.</footer>"
        + f'<script type="application/json" id="openenv-data">{json_for_html(payload)}</script>\n'
    )
    tail = f"<script>{script}</script></body></html>\n"
    return PageParts(head, tail)


def transcript_blocks(found: FolderRows, chosen: list[int]) -> Iterator[str]:
    for number, line in found.lines(chosen):
        text = line.decode("utf-8", errors="replace")
        yield f'<script type="application/json" id="t-{number}">{inert(text)}</script>\n'


def render(
    found: FolderRows,
    summary: dict[str, Any],
    metadata: dict[str, Any],
    *,
    served: bool,
    cap: int = DEFAULT_CAP,
) -> Iterable[str]:
    """The page as chunks of text (transcripts streamed from the files, one at a time)."""
    if served:
        parts = page_parts(found, summary, metadata, served=True, embedded=[])
        return [parts.head, parts.tail]
    chosen, tally = choose_embedded(found, cap)
    parts = page_parts(found, summary, metadata, served=False, embedded=chosen, embed_tally=tally)

    def chunks() -> Iterator[str]:
        yield parts.head
        yield from transcript_blocks(found, chosen)
        yield parts.tail

    return chunks()
