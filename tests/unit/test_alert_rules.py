"""Alert rules, pure: validation, statistics crossing lines, hysteresis, releases, dialects."""

from __future__ import annotations

from datetime import date

import pytest

from observatory.alerts import rules as R
from observatory.core.geometry import parse_geometry
from observatory.core.trends import TrendRow
from observatory.store.trends import Population


def row(model_id: str, created: date, kind: str = "GQA", g: float | None = 4.0, *, hybrid: bool = False,
        downloads: int = 10, model_type: str = "llama") -> TrendRow:
    return TrendRow(model_id=model_id, author=model_id.split("/")[0], model_type=model_type, created_at=created,
                    attention_kind=kind, is_hybrid=hybrid, group_size=None if kind in ("MLA", "none") else g,
                    kv_bytes_per_token=1000, num_parameters=None, downloads=downloads)


def month_rows(month: int, *, gqa: int = 0, mla: int = 0, mha: int = 0, g: float = 4.0, year: int = 2025,
               prefix: str = "o") -> list[TrendRow]:
    rows, d = [], 1
    for kind, n in (("GQA", gqa), ("MLA", mla), ("MHA", mha)):
        for i in range(n):
            rows.append(row(f"{prefix}{month}{kind}{i}/m", date(year, month, d), kind, 1.0 if kind == "MHA" else g))
            d += 1
    return rows


# ---- definitions ------------------------------------------------------------------------------


def test_defaults_are_filled_and_the_key_ignores_spelling():
    a = R.make_rule("kind_share", {"kind": "MLA", "threshold": 0.2})
    b = R.make_rule("kind_share", {"threshold": "0.2", "direction": "above"}, {"min_downloads": 0})
    assert a.params == b.params and a.key == b.key
    assert a.params["hysteresis"] == 0.02 and a.params["period"] == "month"
    assert R.make_rule("kind_share", {"threshold": 0.3}).key != a.key
    assert R.make_rule("kind_share", {}, {"author": "acme"}).key != R.make_rule("kind_share").key
    assert a.title == "Share of MLA >= 20% (month)"
    assert R.make_rule("median_g_shift", {}, {"min_downloads": 1000}).title.endswith("[originals;min_downloads=1000]")
    assert R.make_rule("median_g_shift", {}, {"lineage": "all"}).title.endswith("[all]")
    assert R.make_rule("median_g_shift").population == Population("originals")


@pytest.mark.parametrize(("kind", "params", "population", "message"), [
    ("nope", {}, {}, "unknown rule kind"),
    ("kind_share", {"colour": 1}, {}, "unknown parameter"),
    ("kind_share", {"threshold": 1.5}, {}, "threshold must be at most 1"),
    ("kind_share", {"threshold": -0.1}, {}, "threshold must be at least 0"),
    ("kind_share", {"threshold": "lots"}, {}, "threshold must be a number"),
    ("kind_share", {"threshold": True}, {}, "threshold must be a number"),
    ("kind_share", {"threshold": float("nan")}, {}, "finite"),
    ("kind_share", {"kind": "XYZ"}, {}, "kind must be one of"),
    ("median_g_shift", {"min_models": 2.5}, {}, "whole number"),
    ("median_g_shift", {"delta": 0}, {}, "delta must be at least"),
    ("release_changed", {"group_by": "planet"}, {}, "group_by must be one of"),
    ("new_dialect", {}, {"min_downloads": -1}, "min_downloads"),
    ("new_dialect", {}, {"author": "<script>"}, "population.author"),
    ("new_dialect", {}, {"colour": "red"}, "unknown field"),
    ("new_dialect", {}, {"lineage": "everyone"}, "population.lineage"),
    ("new_dialect", {}, {"min_params": -5}, "population.min_params"),
    ("kind_share", {"min_models": 2}, {}, "min_models must be at least 5"),
])
def test_bad_definitions_are_refused_with_every_reason(kind, params, population, message):
    with pytest.raises(R.RuleError) as info:
        R.make_rule(kind, params, population)
    assert message in str(info.value)


def test_all_problems_are_listed_at_once():
    with pytest.raises(R.RuleError) as info:
        R.make_rule("kind_share", {"threshold": 2, "period": "decade"}, {"author": "a b"})
    assert len(info.value.errors) == 3


def test_built_in_rules_are_valid():
    keys = {R.make_rule(kind, params).key for kind, params in R.BUILT_IN_RULES}
    assert len(keys) == len(R.BUILT_IN_RULES)


# ---- state machine ----------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "state", "judged", "expected"), [
    (None, "fire", True, "fire"),
    (None, "hold", True, "none"),
    (None, "clear", True, "none"),
    ("resolved", "fire", True, "fire"),
    ("resolved", "hold", True, "none"),
    ("firing", "fire", True, "keep"),
    ("firing", "hold", True, "keep"),
    ("firing", "clear", True, "resolve"),
    ("firing", None, True, "resolve"),
    ("firing", None, False, "keep"),
])
def test_transition_of_stateful_alerts(status, state, judged, expected):
    finding = None if state is None else R.Finding({}, state, 0.0, "s")
    assert R.transition(status, finding, stateful=True, judged=judged) == expected


def test_one_shot_alerts_fire_once():
    finding = R.Finding({"group": "a"}, "fire", None, "s")
    assert R.transition(None, finding, stateful=False, judged=True) == "fire"
    assert R.transition("event", finding, stateful=False, judged=True) == "none"


def test_fingerprint_depends_on_rule_and_labels_only():
    assert R.fingerprint("k", {"a": "1", "b": "2"}) == R.fingerprint("k", {"b": "2", "a": "1"})
    assert R.fingerprint("k", {"a": "1"}) != R.fingerprint("k", {"a": "2"})
    assert R.fingerprint("k", {}) != R.fingerprint("j", {})


# ---- trend rules ------------------------------------------------------------------------------


def test_kind_share_band_fire_hold_clear():
    spec = R.make_rule("kind_share", {"kind": "MLA", "threshold": 0.2, "hysteresis": 0.05})
    before = month_rows(12, gqa=9, mha=1, year=2024)  # 0 % MLA: a rise past 20 % is a crossing

    def state(mla: int, other: int) -> str:
        result = R.evaluate_trend_rule(spec, before + month_rows(1, gqa=other - 1, mha=1, mla=mla))
        assert result.judged
        (finding,) = result.findings
        return finding.state

    assert state(2, 8) == "fire"  # 20 %
    assert state(2, 9) == "hold"  # 18.2 %: inside the band
    assert state(1, 9) == "clear"  # 10 %


def test_kind_share_below_and_explanation():
    spec = R.make_rule("kind_share", {"kind": "MHA", "direction": "below", "threshold": 0.1})
    rows = month_rows(1, gqa=5, mha=5) + month_rows(2, gqa=10, mha=1)
    (finding,) = R.evaluate_trend_rule(spec, rows).findings
    assert finding.state == "fire" and finding.value == pytest.approx(1 / 11)
    d = finding.details
    assert d["period"] == "2025-02" and d["before"]["value"] == 0.5 and d["before"]["period"] == "2025-01"
    assert d["after"]["count"] == 11
    # "below": the models that pushed the share down are the other kinds
    assert len(d["models"]) == 10 and all(m["kind"] != "MHA" for m in d["models"])
    assert "9.1% in 2025-02 (was 50.0% in 2025-01)" in finding.summary


def test_a_partial_period_is_not_judged_until_it_has_enough_models():
    spec = R.make_rule("kind_share", {"kind": "MLA", "threshold": 0.2, "min_models": 5})
    rows = month_rows(1, gqa=10) + month_rows(2, mla=3)  # February has only 3 models
    (finding,) = R.evaluate_trend_rule(spec, rows).findings
    assert finding.details["period"] == "2025-01" and finding.state == "clear"
    assert R.evaluate_trend_rule(spec, month_rows(2, mla=3)) == R.RuleResult([], judged=False)


def test_download_weighting_changes_the_verdict():
    rows = month_rows(12, gqa=9, year=2024) + month_rows(1, gqa=9) + [row("big/mla", date(2025, 1, 20), "MLA",
                                                                          downloads=1000)]
    by_count = R.make_rule("kind_share", {"kind": "MLA", "threshold": 0.2})
    by_downloads = R.make_rule("kind_share", {"kind": "MLA", "threshold": 0.2, "weighting": "downloads"})
    assert R.evaluate_trend_rule(by_count, rows).findings[0].state == "clear"
    assert R.evaluate_trend_rule(by_downloads, rows).findings[0].state == "fire"


def test_g_over_16_share():
    spec = R.make_rule("g_over_16_share", {"threshold": 0.25})
    rows = month_rows(12, gqa=6, g=4, year=2024) + month_rows(1, gqa=6, g=4) + month_rows(1, gqa=2, g=32, prefix="big")
    (finding,) = R.evaluate_trend_rule(spec, rows).findings
    assert finding.state == "fire" and finding.value == 0.25
    assert {m["group_size"] for m in finding.details["models"]} == {32.0}


def test_tp8_fill_share_fires_when_new_models_stop_filling_a_node():
    def k_rows(month: int, tp_max: int, n: int, prefix: str) -> list[TrendRow]:
        return [TrendRow(model_id=f"{prefix}{month}{i}/m", author=prefix, model_type="llama",
                         created_at=date(2025, month, i + 1), attention_kind="GQA", is_hybrid=False, group_size=8.0,
                         kv_bytes_per_token=1000, num_parameters=None, downloads=10, kv_tp_max=tp_max)
                for i in range(n)]

    spec = R.make_rule("tp8_fill_share", {"direction": "below", "threshold": 0.5})
    assert spec.title == "Share filling a TP = 8 node without replication <= 50% (month)"
    # January: 5 of 6 fill (K = 8); February: 2 of 6 (K = 4 replicates twice at TP = 8).
    rows = k_rows(1, 8, 5, "a") + k_rows(1, 4, 1, "b") + k_rows(2, 8, 2, "a") + k_rows(2, 4, 4, "b")
    (finding,) = R.evaluate_trend_rule(spec, rows).findings
    assert finding.state == "fire" and finding.value == pytest.approx(2 / 6)
    assert finding.details["before"]["value"] == pytest.approx(5 / 6)
    assert len(finding.details["models"]) == 4  # the February models that do not fill a node
    # Models whose KV heads are not known are not judged: four of them leave February thin.
    unknown = [TrendRow(model_id=f"u{i}/m", author="u", model_type="llama", created_at=date(2025, 2, 20),
                        attention_kind="GQA", is_hybrid=False, group_size=8.0, kv_bytes_per_token=1000,
                        num_parameters=None, downloads=10) for i in range(4)]
    thin = k_rows(1, 8, 5, "a") + k_rows(1, 4, 1, "b") + k_rows(2, 4, 2, "b") + unknown
    (held,) = R.evaluate_trend_rule(spec, thin).findings
    assert held.details["period"] == "2025-01"  # February has 2 judged models: January is the latest judged


def test_median_shift_against_previous_period():
    spec = R.make_rule("median_g_shift", {"delta": 2})
    rows = month_rows(1, gqa=6, g=4) + month_rows(2, gqa=6, g=8)
    (finding,) = R.evaluate_trend_rule(spec, rows).findings
    assert finding.state == "fire" and finding.value == 4
    assert finding.labels == {"period": "2025-02"}
    assert finding.details["before"] == {"value": 4.0, "periods": ["2025-01"], "count": 6, "period_models": 6}
    assert finding.details["after"]["value"] == 8.0
    assert len(finding.details["models"]) == 6 and all(m["group_size"] == 8 for m in finding.details["models"])
    assert finding.summary.startswith("Median G rose from 4 (2025-01) to 8 in 2025-02")


def test_median_shift_floor_applies_to_the_models_with_a_g():
    # Issue 20: a median-G alert fired on a period where only 2 of its 5 models have a G (MLA has none).
    spec = R.make_rule("median_g_shift", {"delta": 2})
    thin_g = month_rows(1, gqa=6, g=4) + month_rows(2, gqa=2, mla=3, g=64)
    assert R.THIN_N > 2 and len([r for r in thin_g if r.created_at.month == 2]) >= R.THIN_N
    assert R.evaluate_trend_rule(spec, thin_g).findings == []  # February's median rests on 2: not judged
    # With enough models holding a G, it is judged, and the counts say which n the medians rest on.
    enough = month_rows(1, gqa=6, mla=2, g=4) + month_rows(2, gqa=R.THIN_N, mla=3, g=8)
    (finding,) = R.evaluate_trend_rule(spec, enough).findings
    assert finding.state == "fire"
    assert (finding.details["before"]["count"], finding.details["before"]["period_models"]) == (6, 8)
    assert (finding.details["after"]["count"], finding.details["after"]["period_models"]) == (R.THIN_N, R.THIN_N + 3)


def test_share_floor_applies_to_the_models_the_share_is_of():
    # The share of G > 16 is a share of the models with a G: a month of MLA models cannot carry it.
    spec = R.make_rule("g_over_16_share", {"threshold": 0.5})
    rows = month_rows(1, gqa=6, g=4) + month_rows(2, gqa=2, mla=4, g=32)
    (finding,) = R.evaluate_trend_rule(spec, rows).findings
    assert finding.details["period"] == "2025-01"  # February: 2 models with a G, below the floor
    assert finding.details["after"]["count"] == 6


def test_median_shift_hysteresis_and_baseline():
    hold = R.make_rule("median_g_shift", {"delta": 2, "hysteresis": 0.5})
    rows = month_rows(1, gqa=6, g=4) + month_rows(2, gqa=6, g=5.75)
    assert R.evaluate_trend_rule(hold, rows).findings[0].state == "hold"  # 1.75 is inside (1.5, 2)
    baseline = R.make_rule("median_g_shift", {"delta": 2, "compare": "baseline", "baseline_periods": 3})
    rows = month_rows(1, gqa=5, g=2) + month_rows(2, gqa=5, g=4) + month_rows(3, gqa=5, g=6) + month_rows(4, gqa=5, g=6)
    (finding,) = R.evaluate_trend_rule(baseline, rows).findings
    assert finding.details["before"]["value"] == 4  # mean of the medians 2, 4, 6
    assert finding.state == "fire" and finding.value == 2


def test_median_shift_needs_consecutive_qualifying_periods():
    spec = R.make_rule("median_g_shift", {"delta": 2})
    gap = month_rows(1, gqa=6, g=4) + month_rows(3, gqa=6, g=8)  # February is empty
    assert R.evaluate_trend_rule(spec, gap).judged is False
    assert R.evaluate_trend_rule(spec, month_rows(1, gqa=6)).judged is False


# ---- releases and dialects --------------------------------------------------------------------


def test_release_changed_compares_whole_release_days():
    spec = R.make_rule("release_changed")
    rows = [
        # day 1: a family released in two sizes with different G: one release, no alert
        row("acme/small", date(2025, 1, 1), g=4), row("acme/large", date(2025, 1, 1), g=8),
        row("acme/mid", date(2025, 2, 1), g=8),  # in the previous release's set: no alert
        row("acme/new", date(2025, 3, 1), g=16),  # new G
        row("acme/mla", date(2025, 4, 1), "MLA"),  # new kind
        row("solo/only", date(2025, 4, 1), g=2),  # a first release has nothing to differ from
    ]
    findings = R.evaluate_release_rule(spec, rows).findings
    assert [f.labels for f in findings] == [{"group": "acme", "release": "2025-03-01"},
                                           {"group": "acme", "release": "2025-04-01"}]
    first = findings[0]
    assert first.details["before"]["release"] == "2025-02-01"
    assert [m["id"] for m in first.details["after"]["models"]] == ["acme/new"]
    assert "acme/new (GQA, G=16)" in first.summary and "had GQA, G=8" in first.summary


def test_release_changed_can_watch_kind_only_and_group_by_family():
    rows = [row("a/x", date(2025, 1, 1), g=4, model_type="qwen2"),
            row("b/y", date(2025, 2, 1), g=8, model_type="qwen2")]
    assert R.evaluate_release_rule(R.make_rule("release_changed", {"watch": "kind"}), rows).findings == []
    by_family = R.evaluate_release_rule(R.make_rule("release_changed", {"group_by": "model_type"}), rows).findings
    assert [f.labels["group"] for f in by_family] == ["qwen2"]
    assert R.evaluate_release_rule(R.make_rule("release_changed"), rows).findings == []  # different orgs


def test_unknown_layer_types_come_from_the_parsers_own_warnings():
    geom = parse_geometry({"model_type": "zz", "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 512,
                           "num_hidden_layers": 3, "layer_types": ["full_attention", "wavelet_attention", "ssm_x"]})
    assert R.unknown_layer_types(geom.warnings) == ["wavelet_attention", "ssm_x"]
    assert R.unknown_layer_types(["layer_types[1]: something else"]) == []


def test_dialect_rule_findings():
    rows = [
        R.DialectRow("a/1", "a", "llama", 5, "GQA", False, (), None),
        R.DialectRow("b/2", "b", "zz", 5, "GQA", False, ('layer_types[1]: unknown layer type "wavelet" counted as '
                                                         'holding no KV cache',), None),
        R.DialectRow("c/3", "c", "zz", 5, "GQA", False, ('layer_types[2]: unknown layer type "wavelet" counted as '
                                                         'holding no KV cache',), None),
        R.DialectRow("d/4", "d", None, 5, None, False, (), "no query-head count (num_attention_heads, ...)"),
    ]
    labels = [f.labels for f in R.evaluate_dialect_rule(R.make_rule("new_dialect"), rows).findings]
    assert labels == [{"what": "kind", "value": "GQA"}, {"what": "layer_type", "value": "wavelet"},
                      {"what": "parse_error", "value": "d/4"}]
    kinds_only = R.evaluate_dialect_rule(R.make_rule("new_dialect", {"watch": "kinds"}), rows).findings
    assert [f.labels["what"] for f in kinds_only] == ["kind"]
    assert R.population_filter(Population(model_type="zz"), rows) == rows[1:3]


# ---- crossings only ----------------------------------------------------------------------------


def test_a_share_that_stays_past_its_threshold_is_no_news():
    # "The share of MHA is 0.0% in 2025-07 (was 0.0% in 2025-06); threshold <= 5%" must stay silent.
    spec = R.make_rule("kind_share", {"kind": "MHA", "direction": "below", "threshold": 0.05})
    rows = month_rows(6, gqa=8) + month_rows(7, gqa=9)
    (finding,) = R.evaluate_trend_rule(spec, rows).findings
    assert finding.state == "hold" and finding.value == 0
    assert R.transition(None, finding, stateful=True, judged=True) == "none"


def test_without_an_earlier_judged_period_there_is_no_crossing():
    spec = R.make_rule("kind_share", {"kind": "MLA", "threshold": 0.2})
    rows = month_rows(3, gqa=2) + month_rows(4, gqa=4, mla=4)  # March is thin: nothing to compare with
    (finding,) = R.evaluate_trend_rule(spec, rows).findings
    assert finding.state == "hold" and finding.details["before"] is None


def test_the_previous_judged_period_may_be_further_back_than_a_thin_one():
    spec = R.make_rule("kind_share", {"kind": "MLA", "threshold": 0.2})
    rows = month_rows(2, gqa=6) + month_rows(3, mla=2) + month_rows(4, gqa=4, mla=4)
    (finding,) = R.evaluate_trend_rule(spec, rows).findings
    assert finding.state == "fire" and finding.details["before"]["period"] == "2025-02"


def test_a_long_past_period_is_never_judged():
    # July 2025 qualifies, but the months after it hold models too few to judge: the rule says
    # nothing rather than report on a month long gone.
    spec = R.make_rule("kind_share", {"kind": "MHA", "direction": "below", "threshold": 0.05})
    rows = month_rows(6, gqa=5, mha=5) + month_rows(7, gqa=9) + month_rows(9, gqa=1) + month_rows(11, gqa=2)
    assert R.evaluate_trend_rule(spec, rows) == R.RuleResult([], judged=False)


def test_share_of_a_stack_type():
    spec = R.make_rule("kind_share", {"kind": "hybrid", "threshold": 0.3})
    before = month_rows(1, gqa=6)
    now = month_rows(2, gqa=3) + [row(f"h{i}/m", date(2025, 2, 20 + i), hybrid=True) for i in range(3)]
    (finding,) = R.evaluate_trend_rule(spec, before + now).findings
    assert finding.state == "fire" and finding.value == 0.5
    assert {m["kind"] for m in finding.details["models"]} == {"GQA hybrid"}
