"""Paired tests for two policies (or two runs) on the same episodes, with the stdlib only.

Two models that played the same seeds are compared episode by episode, which is far
more sensitive than comparing two pass rates as if they came from unrelated samples:
most seeds are easy or hard for both, and only the seeds where they differ carry
information.

* pass/fail: the **exact McNemar test**, a binomial test on the discordant pairs.
  Of the ``b + c`` seeds where exactly one of A and B passed, A alone passed ``b``;
  if neither is better, ``b ~ Binomial(b + c, 1/2)``.
* reward: the **Wilcoxon signed-rank test** on the differences ``reward_A - reward_B``
  (zero differences dropped, tied magnitudes given their average rank). Exact (the
  distribution of the signed-rank sum over every sign assignment, ties included) up
  to ``EXACT_WILCOXON`` non-zero differences; past that the normal approximation with
  tie and continuity corrections.

p-values are two-sided unless a function says otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

# the verdict's words are shared with the Markdown that shows names as code (``comparison_line``)
from ..util.format import verdict_text

#: non-zero differences up to which the signed-rank test is exact
EXACT_WILCOXON = 25

MCNEMAR = "exact McNemar (binomial test on discordant pairs)"
WILCOXON = "Wilcoxon signed-rank"


def binomial_tail_at_most(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def mcnemar_two_sided(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs."""
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * binomial_tail_at_most(min(b, c), n))


def mcnemar_one_sided_worse(lost: int, gained: int) -> float:
    """p-value of "B is worse than A": B failed where A passed ``lost`` times and passed
    where A failed ``gained`` times; P(X >= lost) under no difference."""
    n = lost + gained
    if n == 0:
        return 1.0
    return 1.0 - binomial_tail_at_most(lost - 1, n)


@dataclass(frozen=True)
class SignedRank:
    #: non-zero differences
    n: int
    #: sum of the ranks of the positive differences
    w_plus: float
    p_value: float
    #: "exact" or "normal"
    method: str
    z: float | None = None


def _ranks(magnitudes: list[float]) -> list[float]:
    """Average ranks (1-based) of ``magnitudes``, ties sharing the mean of their ranks."""
    order = sorted(range(len(magnitudes)), key=lambda i: magnitudes[i])
    ranks = [0.0] * len(magnitudes)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and magnitudes[order[j + 1]] == magnitudes[order[i]]:
            j += 1
        for position in range(i, j + 1):
            ranks[order[position]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def wilcoxon_signed_rank(differences: list[float]) -> SignedRank:
    """Two-sided Wilcoxon signed-rank test of "the differences are centred on 0"."""
    nonzero = [d for d in differences if d != 0]
    n = len(nonzero)
    if n == 0:
        return SignedRank(0, 0.0, 1.0, "exact")
    ranks = _ranks([abs(d) for d in nonzero])
    w_plus = sum(rank for rank, d in zip(ranks, nonzero, strict=True) if d > 0)
    if n <= EXACT_WILCOXON:
        # ranks are whole or halves: count sign assignments by twice their rank sum
        doubled = [round(2 * rank) for rank in ranks]
        counts = [0] * (sum(doubled) + 1)
        counts[0] = 1
        reach = 0
        for value in doubled:
            reach += value
            for total in range(reach, value - 1, -1):
                counts[total] += counts[total - value]
        observed = round(2 * w_plus)
        every = 2**n
        low = sum(counts[: observed + 1]) / every
        high = sum(counts[observed:]) / every
        return SignedRank(n, w_plus, min(1.0, 2 * min(low, high)), "exact")
    mean = n * (n + 1) / 4
    ties: dict[float, int] = {}
    for rank in ranks:
        ties[rank] = ties.get(rank, 0) + 1
    variance = n * (n + 1) * (2 * n + 1) / 24 - sum(t**3 - t for t in ties.values()) / 48
    if variance <= 0:
        return SignedRank(n, w_plus, 1.0, "normal")
    shift = w_plus - mean
    corrected = max(0.0, abs(shift) - 0.5)
    z = math.copysign(corrected, shift) / math.sqrt(variance)
    p_value = min(1.0, 2 * (1 - NormalDist().cdf(abs(z))))
    return SignedRank(n, w_plus, p_value, "normal", z)


#: one episode's outcome for pairing: (passed, reward; None when it errored)
Outcome = tuple[bool, "float | None"]


def compare_pair(
    a: str,
    b: str,
    outcomes_a: dict[Any, Outcome],
    outcomes_b: dict[Any, Outcome],
    confidence: float,
) -> dict[str, Any]:
    """Both paired tests of ``a`` against ``b`` on the episodes both played, and a verdict."""
    common = [key for key in outcomes_a if key in outcomes_b]
    only_a = only_b = both = neither = 0
    differences: list[float] = []
    for key in common:
        (pass_a, reward_a), (pass_b, reward_b) = outcomes_a[key], outcomes_b[key]
        if pass_a and pass_b:
            both += 1
        elif pass_a:
            only_a += 1
        elif pass_b:
            only_b += 1
        else:
            neither += 1
        if reward_a is not None and reward_b is not None:
            differences.append(reward_a - reward_b)
    alpha = 1 - confidence
    p_pass = mcnemar_two_sided(only_a, only_b)
    rank = wilcoxon_signed_rank(differences)
    mean_difference = sum(differences) / len(differences) if differences else None
    pass_better = (a if only_a > only_b else b) if p_pass < alpha else None
    reward_better = None
    if rank.p_value < alpha and mean_difference is not None and rank.n:
        reward_better = a if rank.w_plus > rank.n * (rank.n + 1) / 4 else b
    return {
        "a": a,
        "b": b,
        "paired_episodes": len(common),
        "confidence": confidence,
        "pass": {
            "test": MCNEMAR,
            "both_passed": both,
            "only_a_passed": only_a,
            "only_b_passed": only_b,
            "neither_passed": neither,
            "p_value": p_pass,
            "better": pass_better,
        },
        "reward": {
            "test": f"{WILCOXON} ({rank.method})",
            "pairs": len(differences),
            "nonzero_differences": rank.n,
            "mean_difference": mean_difference,
            "w_plus": rank.w_plus,
            "z": rank.z,
            "p_value": rank.p_value,
            "better": reward_better,
        },
        "verdict": verdict_text(a, b, len(common), pass_better, reward_better, confidence),
    }
