"""The best evaluation so far, and the checkpoint folder that keeps its model.

Which evaluation is the best is a rule over paired runs on the same seeds:

- ``higher``: a pass rate above the best's (a noisy "better": one seed more counts);
- ``significant``: the paired test says so, two-sided exact McNemar against the best at
  the callback's confidence, in favour of the new evaluation (the test the plugin's
  baselines use: of the seeds only one of the two passed, the new one passed so many that
  chance is unlikely).

Step 0 is the first best. The kept checkpoint is replaced only when a new best is found,
written beside the old one first and then swapped in, so a run stopped while saving still
leaves a whole checkpoint of an evaluated step.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Literal

BestRule = Literal["higher", "significant"]
BEST_RULES: tuple[str, ...] = ("higher", "significant")
#: the file in the checkpoint folder that names the evaluation it was kept for
BEST_RECORD = "openenv_best.json"


def is_new_best(
    rule: BestRule, pass_rate: float | None, best_rate: float | None, vs_best: dict[str, Any]
) -> bool:
    """Whether an evaluation beats the best so far (``vs_best``: ``compare_pair`` of this
    evaluation, as ``a``, against the best)."""
    if rule == "significant":
        verdict = vs_best["pass"]
        return verdict["better"] is not None and verdict["better"] == vs_best["a"]
    return (pass_rate or 0.0) > (best_rate or 0.0)


def rule_text(rule: BestRule, confidence: float) -> str:
    """The rule in words, as the checkpoint's record states it."""
    if rule == "significant":
        return (
            "passes significantly more of the same seeds than the best before it "
            f"(two-sided exact McNemar, p < {1 - confidence:.3g})"
        )
    return "a higher pass rate than the best before it"


def save_checkpoint(
    folder: Path, model: Any, processing_class: Any, record: dict[str, Any]
) -> Path:
    """``model`` and its tokenizer (``save_pretrained``) in ``folder``, with ``record``
    as ``openenv_best.json``; the folder a previous best left is replaced whole."""
    partial = folder.with_name(f".{folder.name}.partial")
    old = folder.with_name(f".{folder.name}.old")
    for leftover in (partial, old):
        if leftover.exists():
            shutil.rmtree(leftover)
    model.save_pretrained(partial)
    if processing_class is not None:
        processing_class.save_pretrained(partial)
    (partial / BEST_RECORD).write_text(json.dumps(record, indent=2), encoding="utf-8")
    if folder.exists():
        folder.rename(old)
    partial.rename(folder)
    if old.exists():
        shutil.rmtree(old)
    return folder
