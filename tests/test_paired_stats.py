"""The paired tests, the price table and the arms' ids, checked against hand computations."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pytest_openenv.config.convert import names
from pytest_openenv.config.prices import cost_usd, price_table
from pytest_openenv.errors import EnvConfigError
from pytest_openenv.policies.arms import Arm, arms_of, id_part
from pytest_openenv.report.paired import (
    compare_pair,
    mcnemar_one_sided_worse,
    mcnemar_two_sided,
    wilcoxon_signed_rank,
)


def test_exact_mcnemar_by_hand() -> None:
    # b=1, c=7: n=8, P(X <= 1) = (C(8,0) + C(8,1)) / 2^8 = 9/256, two-sided 18/256
    assert mcnemar_two_sided(1, 7) == pytest.approx(18 / 256)
    assert mcnemar_two_sided(7, 1) == pytest.approx(18 / 256)
    # b=c: the two-sided p is capped at 1
    assert mcnemar_two_sided(3, 3) == 1.0
    assert mcnemar_two_sided(0, 0) == 1.0
    # 6 vs 0: 2 / 2^6
    assert mcnemar_two_sided(6, 0) == pytest.approx(1 / 32)
    # one-sided "worse": lost 7 of 8 discordant, P(X >= 7) = (8 + 1) / 256
    assert mcnemar_one_sided_worse(7, 1) == pytest.approx(9 / 256)
    assert mcnemar_one_sided_worse(1, 7) == pytest.approx(1 - 1 / 256)
    assert mcnemar_one_sided_worse(0, 0) == 1.0


def test_signed_rank_exact_by_hand() -> None:
    # |d| ranks 1..5, W+ = 1 + 2 + 4 + 5 = 12; of the 32 sign assignments 5 have a rank
    # sum <= 3 ({}, {1}, {2}, {3}, {1,2}), so by symmetry P(W+ >= 12) = 5/32, p = 10/32
    result = wilcoxon_signed_rank([1, 2, -3, 4, 5, 0, 0])
    assert (result.n, result.w_plus, result.method) == (5, 12, "exact")
    assert result.p_value == pytest.approx(10 / 32)
    # ties: |d| = 1, 1, 2 get ranks 1.5, 1.5, 3; W+ = 1.5 + 3 = 4.5 of 6. The 8 sign
    # assignments give sums 0, 1.5, 1.5, 3, 3, 4.5, 4.5, 6: P(W+ >= 4.5) = 3/8, p = 6/8
    tied = wilcoxon_signed_rank([1, -1, 2])
    assert tied.w_plus == 4.5 and tied.p_value == pytest.approx(6 / 8)
    assert wilcoxon_signed_rank([0, 0]).p_value == 1.0


def test_signed_rank_normal_approximation_by_hand() -> None:
    # 30 differences of +1 and 10 of -1: all tied, rank 20.5 each; W+ = 30 x 20.5 = 615
    differences = [1.0] * 30 + [-1.0] * 10
    result = wilcoxon_signed_rank(differences)
    n = 40
    mean = n * (n + 1) / 4
    variance = n * (n + 1) * (2 * n + 1) / 24 - (40**3 - 40) / 48
    z = (615 - mean - 0.5) / math.sqrt(variance)
    p = 2 * (1 - 0.5 * (1 + math.erf(z / math.sqrt(2))))
    assert result.method == "normal" and result.w_plus == 615
    assert result.z == pytest.approx(z) and result.p_value == pytest.approx(p)


def test_compare_pair_counts_and_verdict() -> None:
    a = {i: (True, 1.0) for i in range(8)}
    b = {i: (i == 0, 1.0 if i == 0 else -1.0) for i in range(8)}
    pair = compare_pair("a", "b", a, b, 0.95)
    assert pair["pass"]["only_a_passed"] == 7 and pair["pass"]["only_b_passed"] == 0
    assert pair["pass"]["p_value"] == pytest.approx(2 / 2**7)
    assert pair["reward"]["mean_difference"] == pytest.approx(14 / 8)
    assert pair["verdict"].startswith("a is better than b on pass rate and reward at 95%")
    same = compare_pair("a", "b", a, a, 0.95)
    assert "no significant difference" in same["verdict"]


def test_price_table_and_cost(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"m": {"input": 2, "output": 8}}))
    table = price_table("prices", str(path))
    assert table == {"m": {"input": 2.0, "output": 8.0}}
    assert price_table("prices", '{"m": {"input": 2, "output": 8}}') == table
    assert price_table("prices", {"m": {"input": 2, "output": 8}}) == table
    # 1000 prompt tokens at $2/M plus 500 completion tokens at $8/M
    assert cost_usd(table, "m", 1000, 500) == pytest.approx(0.002 + 0.004)
    assert cost_usd(table, "other", 10, 10) is None
    assert cost_usd(table, "other", 0, 0) == 0.0
    for bad, why in [
        (str(tmp_path / "missing.json"), "does not exist"),
        ("{", "not valid JSON"),
        ('{"m": {"input": 1}}', "'output' must be a number"),
        ('{"m": {"input": 1, "output": 1, "cached": 1}}', "must be an object with"),
        ("{}", "non-empty"),
    ]:
        with pytest.raises(pytest.UsageError, match="--openenv-prices=") as info:
            price_table("prices", bad)
        assert why in str(info.value)


def test_names_are_listed_once() -> None:
    assert names("model", ["a", "b"]) == ("a", "b")
    assert names("model", "a") == ("a",)  # an ini key read as one string
    with pytest.raises(pytest.UsageError, match="--openenv-model='a' is listed twice"):
        names("model", ["a", "b", "a"])


def test_a_blank_name_is_refused_showing_the_value_as_given() -> None:
    with pytest.raises(pytest.UsageError) as info:
        names("model", ["   "])
    assert "--openenv-model='   ' is invalid: the value is blank" in str(info.value)


def test_arms_and_their_id_parts() -> None:
    assert id_part("Qwen/Qwen2.5-7B-Instruct") == "Qwen_Qwen2.5-7B-Instruct"
    assert id_part("openai:gpt-4o [x]") == "openai_gpt-4o_x"
    assert arms_of(("openai",), ("a", "b")) == [Arm("openai", "a"), Arm("openai", "b")]
    assert arms_of(("scripted", "openai"), ("a", "b")) == [
        Arm("scripted"),
        Arm("openai", "a"),
        Arm("openai", "b"),
    ]
    assert arms_of(("openai",), ("a",)) == [Arm("openai", "a")]
    with pytest.raises(EnvConfigError, match="would share the episode ids a_b-ep-"):
        arms_of(("openai",), ("a/b", "a:b"))
