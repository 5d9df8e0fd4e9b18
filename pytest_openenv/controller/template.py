"""Controller side: ``--openenv-chat-template`` before the run and after it.

Before any episode runs (``prepare``), a sample row built from the env's tools
(``dataset/chat_template/sample``) is rendered in both argument forms. Without
``--openenv-tool-arguments`` the run takes the first form in which every call and
result survives (``string``, else ``object``); with it, that form must survive. When
none does, the run is a usage error naming the template and what went wrong: the
dataset would not train as it looks, and finding out after the collection wastes it.
Checking before the run matters because the form is fixed when rows are built, on
the workers, so it must be known before the first episode; the real rows are checked
too, after the run (``check_rows``: the first ``ROWS_CHECKED`` of ``results.jsonl``),
and what both checks found goes to ``metadata.json``, the card and the terminal.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..config.convert import TOOL_ARGUMENT_FORMS
from ..config.settings import Settings
from ..envs.base import EnvFamily
from ..errors import RenderTimeout

if TYPE_CHECKING:
    from ..episode.service import EpisodeService

#: rows of results.jsonl rendered after the run (each costs one rendering per message)
ROWS_CHECKED = 8
FLAG = "--openenv-chat-template"


@dataclass
class TemplateCheck:
    """What the template check found; owned by the controller, recorded in metadata.json."""

    model: str
    source: str
    form: str
    #: ``--openenv-tool-arguments`` (given), or ``the template check`` (chosen by it)
    chosen_by: str
    #: problems of the sample row in each form, before the run; empty dict: not checked
    sample: dict[str, list[str]] = field(default_factory=dict)
    rows_checked: int = 0
    row_problems: list[str] = field(default_factory=list)
    #: preferences.jsonl: pairs rendered (both conversations of each), and what broke
    pairs_checked: int = 0
    pair_problems: list[str] = field(default_factory=list)
    renderer: Any = field(default=None, repr=False, compare=False)

    def check_rows(self, results: Path) -> None:
        """Render the first ``ROWS_CHECKED`` rows of ``results`` (the written dataset)."""
        from ..dataset.chat_template.survival import rows_problems
        from ..dataset.jsonl import iter_records

        rows = []
        for row in iter_records(results):
            rows.append(row)
            if len(rows) == ROWS_CHECKED:
                break
        try:
            self.rows_checked, self.row_problems = rows_problems(self.renderer, rows)
        except RenderTimeout as exc:
            self.rows_checked, self.row_problems = len(rows), [str(exc)]

    def check_pairs(self, preferences: Path) -> None:
        """Render the first ``ROWS_CHECKED`` pairs: prompt + chosen, prompt + rejected."""
        from ..dataset.chat_template.survival import rows_problems
        from ..dataset.preferences import first_pairs, pair_conversations

        pairs = first_pairs(preferences, ROWS_CHECKED)
        conversations = [row for pair in pairs for row in pair_conversations(pair)]
        _, self.pair_problems = rows_problems(self.renderer, conversations)
        self.pairs_checked = len(pairs)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "source": self.source,
            "tool_arguments": self.form,
            "chosen_by": self.chosen_by,
            "sample": self.sample,
            "rows_checked": self.rows_checked,
            "row_problems": self.row_problems,
            **(
                {"pairs_checked": self.pairs_checked, "pair_problems": self.pair_problems}
                if self.pairs_checked
                else {}
            ),
        }

    def terminal_lines(self) -> list[str]:
        return self.row_lines() + self.pair_lines()

    def pair_lines(self) -> list[str]:
        if not self.pairs_checked:
            return []
        head = f"chat template {self.model}: the first {self.pairs_checked} preference pair(s)"
        if not self.pair_problems:
            return [f"{head} render with every tool call and result intact"]
        return [f"WARNING: {head}: " + "; ".join(self.pair_problems[:3])]

    def row_lines(self) -> list[str]:
        head = f"chat template {self.model}: tool-call arguments as {self.form}s"
        head += f" ({self.chosen_by})"
        if not self.rows_checked:
            return [f"{head}; no passing row to check after the run"]
        if not self.row_problems:
            return [
                f"{head}; the first {self.rows_checked} row(s) render with every tool call "
                "and result intact"
            ]
        return [
            f"WARNING: {head}; in the first {self.rows_checked} row(s): "
            + "; ".join(self.row_problems[:3])
        ]


def _refusal(check: TemplateCheck, given: bool) -> str:
    said = "; ".join(
        f"with --openenv-tool-arguments={form}, {problems[0]}"
        for form, problems in check.sample.items()
        if problems
    )
    intro = (
        f"{FLAG}={check.model}: rows would not train as they look through its chat template "
        f"({check.source}), checked on a sample row of the env's tools before any episode: "
    )
    working = [form for form, problems in check.sample.items() if not problems]
    if given and working:
        return (
            f"{intro}{said}. --openenv-tool-arguments={working[0]} renders every call and "
            f"result intact: use it, or leave --openenv-tool-arguments out and the check "
            "chooses"
        )
    return (
        f"{intro}{said}. Neither argument form survives this template: train a model whose "
        "template renders tool calls (Qwen2.5 or Qwen3 instruct models do), or leave out "
        f"{FLAG} to collect without the check"
    )


def check_chat_template(service: EpisodeService) -> TemplateCheck | None:
    """``--openenv-chat-template``, before any episode; None without it.

    The service's settings then carry the argument form rows are built in (xdist hands
    it to each worker: ``controller/xdist.py``).
    """
    if not service.settings.output.chat_template:
        return None
    service.settings, check = prepare(service.settings, service.run_family())
    return check


def prepare(settings: Settings, family: EnvFamily | None) -> tuple[Settings, TemplateCheck]:
    """Load and check the template; the settings with the argument form it needs.

    ``family``: the run's env family (None when only markers name envs: the form is
    then the given one or ``string``, and only the rows are checked, after the run).
    Raises ``pytest.UsageError`` naming the template and the problem.
    """
    from ..dataset.chat_template.render import Renderer, TemplateFailure
    from ..dataset.chat_template.sample import sample_row
    from ..dataset.chat_template.source import TemplateNotFound, load_chat_template
    from ..dataset.chat_template.survival import rows_problems
    from ..episode.record import stable_row

    output = settings.output
    model = str(output.chat_template)
    try:
        template = load_chat_template(model)
        renderer = Renderer(template)
    except (TemplateNotFound, TemplateFailure) as exc:
        raise pytest.UsageError(f"{FLAG}: {exc}") from None
    given = output.tool_arguments_given
    check = TemplateCheck(
        model=model,
        source=template.source,
        form=output.tool_arguments,
        chosen_by="--openenv-tool-arguments" if given else "the template check",
        renderer=renderer,
    )
    if family is None:
        if not given:
            check.chosen_by = "the default: no --openenv-env to check before the run"
        return settings, check
    raw = sample_row(family, settings.run.system_prompt)
    try:
        for form in TOOL_ARGUMENT_FORMS:
            check.sample[form] = rows_problems(renderer, [stable_row(raw, form)])[1]
    except RenderTimeout as exc:
        raise pytest.UsageError(f"{FLAG}={model}: {exc}") from None
    forms = [output.tool_arguments] if given else list(TOOL_ARGUMENT_FORMS)
    usable = [form for form in forms if not check.sample[form]]
    if not usable:
        raise pytest.UsageError(_refusal(check, given))
    check.form = usable[0]
    chosen = dataclasses.replace(output, tool_arguments=check.form)
    return dataclasses.replace(settings, output=chosen), check
