"""core.uptraining: the verdict on "uptraining at 5-10% recovers MHA quality; MQA recovers less",
on grids built here so each rule can be seen to flip it."""

from __future__ import annotations

import pytest

from observatory.core import claims
from observatory.core.uptraining import RECOVERY_TOLERANCE, gaps, judge

H = 16
FRACTIONS = (0.0, 0.025, 0.05, 0.10)


def grid(gap_of) -> list[dict]:
    """Cells whose perplexity is the control's x (1 + gap_of(method, K, fraction)); the control
    improves with steps, so a cell compared with the base instead of the control would be misjudged."""
    cells = []
    for f in FRACTIONS:
        control = 4.0 - 2 * f
        cells.append({"method": "mha", "kv_heads": H, "fraction": f, "perplexity": control})
        for method in ("mean", "first", "random"):
            for k in (8, 4, 2, 1):
                cells.append({"method": method, "kv_heads": k, "fraction": f,
                              "perplexity": control * (1 + gap_of(method, k, f))})
    return cells


def paper_like(method, k, f):
    start = {8: 0.05, 4: 0.08, 2: 0.12, 1: 0.3}[k] * (1 if method == "mean" else 3)
    return start * {0.0: 1, 0.025: 0.4, 0.05: 0.15, 0.10: 0.1}[f]


def test_gaps_are_against_the_control_at_the_same_steps():
    g = gaps(grid(paper_like))
    assert g[(8, 0.10)] == pytest.approx(0.005) and g[(1, 0.0)] == pytest.approx(0.3)


def test_recovery_within_tolerance_at_5_and_10_percent_and_mqa_behind_holds():
    result = judge(grid(paper_like), H)
    assert result["verdict"] == "holds", result["summary"]
    assert "Judged at our scale only" in result["summary"]


def test_mqa_recovering_as_well_as_gqa_is_a_caveat():
    result = judge(grid(lambda m, k, f: 0.001 if f else 0.1), H)
    assert result["verdict"] == "holds with caveats" and "MQA's gap" in result["summary"]


def test_recovery_only_at_10_percent_is_a_caveat():
    result = judge(grid(lambda m, k, f: {0.0: 0.2, 0.025: 0.1, 0.05: 0.05, 0.10: 0.01 if k > 1 else 0.04}[f]), H)
    assert result["verdict"] == "holds with caveats" and "at 5% only K = none" in result["summary"]


def test_conversion_that_costs_nothing_is_a_caveat_not_a_confirmation():
    result = judge(grid(lambda m, k, f: 0.0 if k > 1 else 0.05), H)
    assert result["verdict"] == "holds with caveats" and "conversion alone" in result["summary"]


def test_no_gqa_within_tolerance_at_10_percent_does_not_hold():
    result = judge(grid(lambda m, k, f: RECOVERY_TOLERANCE * 2 + (0.1 if k == 1 else 0)), H)
    assert result["verdict"] == "does not hold"
    assert "No GQA K is within the tolerance" in result["summary"] and "only K =" not in result["summary"]


def test_a_grid_without_the_cells_is_unchecked():
    cells = [c for c in grid(paper_like) if c["fraction"] != 0.05]
    assert judge(cells, H)["verdict"] is None


def test_the_claim_is_unchecked_without_a_run_and_judged_with_one():
    claim = next(c for c in claims.CLAIMS if c.id == "gqa-uptraining")
    assert claims.check(claim, claims.Inputs(geometries={}))["verdict"] is None
    run = {"cells": grid(paper_like), "sizes": {"shape": {"heads": H}}, "run_key": "abcdef12-0000", "scale": 1.0,
           "seed": 0, "corpus": {"sha256": "0" * 64}}
    result = claims.check(claim, claims.Inputs(geometries={}, uptrain=run))
    assert result["verdict"] == "holds" and result["steps"][-1].startswith("run abcdef12")
