"""Trend aggregation: quantiles, weighting, kind buckets, size classes and periods, checked
against numbers worked out by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import random
from datetime import date, datetime, timezone

import pytest

from observatory.core.trends import (
    ATTENTION_KINDS,
    SIZE_CLASSES,
    STACKS,
    THIN_N,
    TrendColumns,
    TrendRow,
    attention_stack,
    compute_trend_points,
    default_period,
    describe_kind,
    in_population,
    next_period,
    period_start,
    population_mask,
    size_class,
    weighted_quantiles,
)


def row(model_id, when, kind="GQA", g=None, kv=None, params=None, downloads=0, hybrid=False, **extra):
    created = datetime(*when, tzinfo=timezone.utc) if when else None
    return TrendRow(model_id=model_id, author=model_id.split("/")[0], model_type="llama", created_at=created,
                    attention_kind=kind, is_hybrid=hybrid, group_size=g, kv_bytes_per_token=kv,
                    num_parameters=params, downloads=downloads, **extra)


# January 2025: six models, one undated model, nothing in February, one model in March.
ROWS = [
    row("o/a", (2025, 1, 3), "GQA", g=4, kv=1000, params=7_000_000_000, downloads=10),
    row("o/b", (2025, 1, 9), "GQA", g=8, kv=3000, params=70_000_000_000, downloads=30),
    row("o/c", (2025, 1, 15), "MHA", g=1, kv=8000, params=1_000_000_000, downloads=0),
    row("o/d", (2025, 1, 20), "GQA", g=32, kv=500, params=None, downloads=60, hybrid=True),
    row("o/e", (2025, 1, 31, 23, 59), "MLA", g=None, kv=2000, params=671_000_000_000, downloads=100),
    row("o/f", (2025, 1, 2), "none", g=None, kv=0, params=130_000_000, downloads=0),
    row("o/undated", None, "GQA", g=2, kv=10, downloads=1000),
    row("o/g", (2025, 3, 1), "GQA", g=8, kv=4000, params=20_000_000_000, downloads=5),
]


# --- quantiles ----------------------------------------------------------------------------

def test_median_of_two_values_is_their_mean():
    assert weighted_quantiles([(1, 1), (2, 1)], [0.5]) == [1.5]


def test_quartiles_of_four_values():
    # cumulative 1,2,3,4: each target q*W=1,2,3 lands exactly on a boundary -> mean of neighbours
    assert weighted_quantiles([(v, 1) for v in (4, 1, 3, 2)], [0.25, 0.5, 0.75]) == [1.5, 2.5, 3.5]


def test_quartiles_of_three_values():
    # W=3: targets .75, 1.5, 2.25 -> first cumulative weight reaching them: 1, 2, 3
    assert weighted_quantiles([(1, 1), (2, 1), (3, 1)], [0.25, 0.5, 0.75]) == [1, 2, 3]


def test_weights_act_as_copies():
    # (1, 3), (2, 1) is [1, 1, 1, 2]: median 1; q=.75 targets 3 = C_1 exactly -> (1 + 2) / 2
    assert weighted_quantiles([(1, 3), (2, 1)], [0.5, 0.75]) == [1, 1.5]


def test_weighted_equals_repeated_values_numpy():
    np = pytest.importorskip("numpy")
    rng = random.Random(7)
    for _ in range(200):
        values = [rng.choice([1, 2, 4, 5.5, 8, 16, 32]) for _ in range(rng.randint(1, 8))]
        weights = [rng.randint(1, 5) for _ in values]
        qs = [0.1, 0.25, 0.5, 0.75, 0.9]
        repeated = [v for v, w in zip(values, weights) for _ in range(w)]
        expected = np.quantile(repeated, qs, method="averaged_inverted_cdf")
        assert weighted_quantiles(list(zip(values, weights)), qs) == pytest.approx(list(expected))


def test_zero_weights_are_ignored_and_all_zero_is_none():
    assert weighted_quantiles([(1, 0), (5, 2)], [0.5]) == [5]
    assert weighted_quantiles([(1, 0), (5, 0)], [0.25, 0.5]) == [None, None]
    assert weighted_quantiles([], [0.5]) == [None]


# --- buckets, classes, periods --------------------------------------------------------------

@pytest.mark.parametrize("kind, hybrid, stack, label", [
    ("GQA", False, "attention", "GQA"), ("GQA", True, "hybrid", "GQA hybrid"), ("MLA", True, "hybrid", "MLA hybrid"),
    ("MHA", False, "attention", "MHA"), ("MQA", False, "attention", "MQA"), ("MLA", False, "attention", "MLA"),
    ("none", False, "attention-free", "attention-free"), ("none", True, "attention-free", "attention-free"),
])
def test_stack_type_and_label(kind, hybrid, stack, label):
    assert attention_stack(kind, hybrid) == stack
    assert describe_kind(kind, hybrid) == label


@pytest.mark.parametrize("params, cls", [
    (None, "unknown"), (0, "unknown"), (2_999_999_999, "<3B"), (3_000_000_000, "3-15B"),
    (14_999_999_999, "3-15B"), (15_000_000_000, "15-80B"), (80_000_000_000, ">80B"), (10**13, ">80B"),
])
def test_size_class_boundaries(params, cls):
    assert size_class(params) == cls


@pytest.mark.parametrize("day, period, start", [
    (date(2025, 3, 5), "week", date(2025, 3, 3)),  # a Wednesday -> its Monday
    (date(2025, 3, 3), "week", date(2025, 3, 3)),
    (date(2025, 1, 1), "week", date(2024, 12, 30)),  # the ISO week crosses the year
    (date(2025, 3, 5), "month", date(2025, 3, 1)),
    (date(2025, 3, 5), "quarter", date(2025, 1, 1)),
    (date(2024, 12, 31), "quarter", date(2024, 10, 1)),
])
def test_period_start(day, period, start):
    assert period_start(day, period) == start
    assert period_start(datetime(day.year, day.month, day.day, 23, 59, tzinfo=timezone.utc), period) == start


def test_next_period_wraps_the_year():
    assert next_period(date(2024, 12, 1), "month") == date(2025, 1, 1)
    assert next_period(date(2024, 10, 1), "quarter") == date(2025, 1, 1)
    assert next_period(date(2024, 12, 30), "week") == date(2025, 1, 6)


def test_unknown_period_or_weighting_is_refused():
    with pytest.raises(ValueError, match="period"):
        compute_trend_points(ROWS, period="year")
    with pytest.raises(ValueError, match="weighting"):
        compute_trend_points(ROWS, weighting="likes")


# --- whole points -------------------------------------------------------------------------

def test_monthly_counts_with_an_empty_month_between():
    points = compute_trend_points(ROWS, "month", "count")
    assert [p.period_start for p in points] == [date(2025, 1, 1), date(2025, 2, 1), date(2025, 3, 1)]
    assert [p.count for p in points] == [6, 0, 1]  # the undated model is in no period


def test_january_by_count():
    jan = compute_trend_points(ROWS, "month", "count")[0]
    assert jan.weight_total == 6
    # a, b GQA; c MHA; d a hybrid whose attention layers use GQA; e MLA; f attention-free.
    # Kinds among the five with attention layers: GQA a, b, d; MHA c; MLA e.
    assert jan.attn_count == 5
    assert jan.shares == pytest.approx({"MHA": 1 / 5, "MQA": 0, "GQA": 3 / 5, "MLA": 1 / 5})
    assert sum(jan.shares.values()) == pytest.approx(1)
    # Stack types among all six: attention a, b, c, e; hybrid d; attention-free f.
    assert jan.stack_shares == pytest.approx({"attention": 4 / 6, "hybrid": 1 / 6, "attention-free": 1 / 6})
    assert jan.weight_unknown == jan.encoder_only == jan.uncertain == 0 and not jan.thin
    # G over c, a, b, d = [1, 4, 8, 32]: boundaries at 1, 2, 3 -> 2.5, 6, 20; one of four above 16
    assert jan.g_count == 4
    assert (jan.g_p25, jan.g_median, jan.g_p75) == (2.5, 6, 20)
    assert jan.share_g_over_16 == 0.25
    # KV over d, a, e, b, c = [500, 1000, 2000, 3000, 8000] (f's 0 left out): target 2.5 -> 2000
    assert jan.kv_count == 5
    assert jan.kv_median == 2000
    by_size = {cls: (s.count, s.kv_median) for cls, s in jan.kv_by_size.items()}
    assert by_size == {"<3B": (1, 8000), "3-15B": (1, 1000), "15-80B": (1, 3000), ">80B": (1, 2000),
                       "unknown": (1, 500)}


def test_january_by_downloads():
    jan = compute_trend_points(ROWS, "month", "downloads")[0]
    assert jan.count == 6
    assert jan.weight_total == 200  # 10 + 30 + 0 + 60 + 100 + 0
    # with attention layers: a 10, b 30, c 0, d 60 (GQA) and e 100 (MLA); W = 200
    assert jan.shares == pytest.approx({"MHA": 0, "MQA": 0, "GQA": 100 / 200, "MLA": 100 / 200})
    assert jan.stack_shares == pytest.approx({"attention": 140 / 200, "hybrid": 60 / 200, "attention-free": 0})
    # G pairs with weight: (4, 10), (8, 30), (32, 60); W = 100, cumulative 10, 40, 100
    # q=.25 -> 25 -> 8; q=.5 -> 50 -> 32; q=.75 -> 32. The MHA model (0 downloads) weighs nothing.
    assert (jan.g_p25, jan.g_median, jan.g_p75) == (8, 32, 32)
    assert jan.share_g_over_16 == pytest.approx(0.6)
    assert jan.g_count == 4  # counts stay counts
    # KV: 500 (60), 1000 (10), 2000 (100), 3000 (30): W = 200, target 100 -> cumulative 170 -> 2000
    assert jan.kv_median == 2000
    assert jan.kv_by_size["<3B"].count == 1 and jan.kv_by_size["<3B"].kv_median is None  # weight 0


def test_empty_period_has_no_statistics():
    feb = compute_trend_points(ROWS, "month", "count")[1]
    assert feb.count == 0 and feb.weight_total == 0 and feb.g_count == 0 and feb.kv_count == 0
    assert set(feb.shares) == set(ATTENTION_KINDS) and all(v is None for v in feb.shares.values())
    assert set(feb.stack_shares) == set(STACKS) and all(v is None for v in feb.stack_shares.values())
    assert feb.thin
    assert feb.g_median is None and feb.share_g_over_16 is None and feb.kv_median is None
    assert set(feb.kv_by_size) == set(SIZE_CLASSES)


def test_period_whose_models_have_no_downloads_has_no_weighted_statistics():
    rows = [row("o/x", (2025, 5, 1), "GQA", g=4, kv=100), row("o/y", (2025, 5, 2), "MHA", g=1, kv=400)]
    (point,) = compute_trend_points(rows, "month", "downloads")
    assert point.count == 2 and point.weight_total == 0
    assert all(v is None for v in point.shares.values())
    assert point.g_median is None and point.share_g_over_16 is None and point.kv_median is None


def test_quarter_merges_january_and_march():
    (q1,) = compute_trend_points(ROWS, "quarter", "count")
    assert q1.period_start == date(2025, 1, 1) and q1.count == 7
    # G = [1, 4, 8, 8, 32]: W = 5, target 2.5 -> cumulative 3 -> 8
    assert q1.g_median == 8


def test_weeks():
    points = compute_trend_points(ROWS, "week", "count")
    assert points[0].period_start == date(2024, 12, 30)  # 2 and 3 January 2025
    assert points[0].count == 2
    assert points[-1].period_start == date(2025, 2, 24) and points[-1].count == 1  # Sat 1 March
    assert sum(p.count for p in points) == 7
    assert all((b.period_start - a.period_start).days == 7 for a, b in zip(points, points[1:]))


def test_order_of_rows_does_not_matter():
    shuffled = ROWS[:]
    random.Random(3).shuffle(shuffled)
    assert compute_trend_points(shuffled, "month", "downloads") == compute_trend_points(ROWS, "month", "downloads")


def test_no_rows_no_points():
    assert compute_trend_points([], "month", "count") == []
    assert compute_trend_points([row("o/u", None)], "month", "count") == []


def test_columns_from_query_values_match_columns_from_rows():
    from observatory.core.trends import TrendColumns, day_ordinals

    dated = [r for r in ROWS if r.created_at is not None]
    from_rows = TrendColumns.from_rows(ROWS)
    from_values = TrendColumns.from_values(
        days=day_ordinals([r.created_at.date().isoformat() for r in dated]),  # as SQLite's date() gives them
        kinds=[r.attention_kind for r in dated], hybrids=[r.is_hybrid for r in dated],
        group_sizes=[r.group_size for r in dated], kv=[r.kv_bytes_per_token for r in dated],
        num_parameters=[r.num_parameters for r in dated], downloads=[r.downloads for r in dated])
    for name in ("day", "attn", "stack", "size", "downloads"):
        assert getattr(from_rows, name).tolist() == getattr(from_values, name).tolist()
    assert from_rows.attn.tolist() == [ATTENTION_KINDS.index(k) if k in ATTENTION_KINDS else -1
                                       for k in ("GQA", "GQA", "MHA", "GQA", "MLA", "none", "GQA")]
    assert from_rows.stack.tolist() == [STACKS.index(s) for s in ("attention", "attention", "attention", "hybrid",
                                                                   "attention", "attention-free", "attention")]
    assert from_rows.size.tolist() == [SIZE_CLASSES.index(c) for c in
                                       ("3-15B", "15-80B", "<3B", "unknown", ">80B", "<3B", "15-80B")]
    assert day_ordinals([date(2025, 1, 3)]).tolist() == day_ordinals(["2025-01-03"]).tolist() == \
        [date(2025, 1, 3).toordinal()]


def test_both_weightings_at_once_equal_one_at_a_time():
    from observatory.core.trends import TrendColumns, trend_series

    both = trend_series(TrendColumns.from_rows(ROWS), "week")
    assert both["count"] == compute_trend_points(ROWS, "week", "count")
    assert both["downloads"] == compute_trend_points(ROWS, "week", "downloads")


# --- who is counted: unknown weights, encoder-only, uncertain, thin periods -------------------

def test_unknown_downloads_weigh_nothing_and_are_counted_as_left_out():
    rows = [row("o/x", (2025, 5, 1), "GQA", g=4, kv=100, downloads=None),
            row("o/y", (2025, 5, 2), "MHA", g=1, kv=400, downloads=30),
            row("o/z", (2025, 5, 3), "MHA", g=1, kv=400, downloads=0)]
    (point,) = compute_trend_points(rows, "month", "downloads")
    assert point.count == 3 and point.weight_total == 30
    assert point.weight_unknown == 1  # o/x; o/z's 0 is a known 0
    assert point.shares["MHA"] == 1 and point.shares["GQA"] == 0
    (by_count,) = compute_trend_points(rows, "month", "count")
    assert by_count.weight_unknown == 0 and by_count.shares["GQA"] == pytest.approx(1 / 3)


def test_encoder_only_and_uncertain_models_are_counted_apart():
    rows = [row("o/bert", (2025, 5, 1), "MHA", g=1, kv=None, encoder_only=True),
            row("o/odd", (2025, 5, 2), "GQA", g=8, kv=9000, uncertain=True),
            row("o/both", (2025, 5, 2), "GQA", g=8, kv=9000, uncertain=True, encoder_only=True),
            row("o/ok", (2025, 5, 3), "GQA", g=4, kv=100)]
    (point,) = compute_trend_points(rows, "month", "count")
    assert (point.count, point.encoder_only, point.uncertain) == (1, 2, 1)
    assert point.shares["GQA"] == 1 and point.g_median == 4 and point.kv_median == 100 and point.g_count == 1


def test_thin_is_fewer_than_thin_n_counted_models():
    rows = [row(f"o/m{i}", (2025, 5, 1 + i), "GQA", g=4, kv=100) for i in range(THIN_N)]
    (full,) = compute_trend_points(rows, "month", "count")
    (thin,) = compute_trend_points(rows[1:], "month", "count")
    assert not full.thin and thin.thin


def test_family_downloads_weighting():
    rows = [row("o/base", (2025, 5, 1), "GQA", g=4, kv=100, downloads=10, family_downloads=1010),
            row("o/other", (2025, 5, 2), "MHA", g=1, kv=400, downloads=990, family_downloads=990)]
    (point,) = compute_trend_points(rows, "month", "family_downloads")
    assert point.weight_total == 2000 and point.shares["GQA"] == pytest.approx(1010 / 2000)


# --- populations ------------------------------------------------------------------------------

POP_ROWS = [
    row("lab/big", (2025, 1, 1), params=7_000_000_000, relation="original"),
    row("lab/small", (2025, 1, 1), params=500_000_000, relation="original"),
    row("lab/unsized", (2025, 1, 1), params=None, relation="original"),
    row("hf-internal-testing/tiny", (2025, 1, 1), params=2_000_000_000, relation="original", is_test_repo=True),
    row("fan/ft", (2025, 1, 1), params=7_000_000_000, relation="finetune"),
    row("fan/q", (2025, 1, 1), params=7_000_000_000, relation="quantized"),
    row("fan/unknown", (2025, 1, 1), params=7_000_000_000, relation=None),
]


@pytest.mark.parametrize("lineage, min_params, expected", [
    ("originals", 1e9, {"lab/big"}),
    ("originals", None, {"lab/big", "lab/small", "lab/unsized"}),
    ("derivatives", None, {"fan/ft", "fan/q"}),
    ("derivatives", 1e10, set()),
    ("all", None, {r.model_id for r in POP_ROWS}),
    ("all", 1e9, {"lab/big", "hf-internal-testing/tiny", "fan/ft", "fan/q", "fan/unknown"}),
])
def test_populations_rows_and_columns_agree(lineage, min_params, expected):
    assert {r.model_id for r in POP_ROWS if in_population(r, lineage, min_params)} == expected
    mask = population_mask(TrendColumns.from_rows(POP_ROWS), lineage, min_params)
    assert {r.model_id for r, keep in zip(POP_ROWS, mask) if keep} == expected


def test_unknown_population_is_refused():
    with pytest.raises(ValueError, match="population"):
        population_mask(TrendColumns.from_rows(POP_ROWS), "everything", None)


@pytest.mark.parametrize("months, period", [
    ([5, 5, 5], "month"),  # median 5
    ([1, 2, 9, 9], "month"),  # median (2 + 9) / 2 = 5.5
    ([0, 0, 5, 6, 7], "month"),  # empty months count: median 5
    ([0, 0, 0, 6, 7], "quarter"),  # median 0
    ([1, 2, 3, 9, 9], "quarter"),  # median 3
    ([], "quarter"),
])
def test_default_period_needs_a_median_month_of_thin_n(months, period):
    assert THIN_N == 5
    assert default_period(months) == period


# --- filling a TP = 8 node ------------------------------------------------------------------

def test_share_filling_a_tp8_node_by_hand():
    day = (2025, 5, 5)
    rows = [
        row("t/k8", day, "GQA", g=8, kv=1, kv_tp_max=8, downloads=10),  # fills: 1 head per rank
        row("t/k16", day, "GQA", g=4, kv=1, kv_tp_max=16, downloads=10),  # fills: 2 heads per rank
        row("t/k4", day, "GQA", g=8, kv=1, kv_tp_max=4, downloads=30),  # replicated twice at TP = 8
        row("t/k12", day, "GQA", g=4, kv=1, kv_tp_max=4, downloads=0),  # K = 12 >= 8, but 8 does not divide it
        row("t/mqa", day, "MQA", g=32, kv=1, kv_tp_max=1, downloads=0),  # replicated 8 times
        row("t/mla", day, "MLA", kv=1, downloads=50),  # fills with data-parallel attention
        row("t/unknown", day, "GQA", g=4, kv=1, downloads=1000),  # stored before kv_tp_max: not judged
        row("t/rwkv", day, "none", kv=0, downloads=0),  # no attention: not judged
    ]
    (point,) = compute_trend_points(rows, "quarter")
    assert point.tp8_count == 6 and not point.tp8_thin
    assert point.share_tp8_fill == pytest.approx(3 / 6)  # k8, k16, mla
    assert point.share_tp8_mla == pytest.approx(1 / 6)
    # By downloads: (10 + 10 + 50) / (10 + 10 + 30 + 0 + 0 + 50) = 0.7; the unknown model is not judged.
    (by_downloads,) = compute_trend_points(rows, "quarter", "downloads")
    assert by_downloads.share_tp8_fill == pytest.approx(0.7) and by_downloads.share_tp8_mla == pytest.approx(0.5)


def test_tp8_share_is_unknown_without_judged_models():
    (point,) = compute_trend_points([row("t/x", (2025, 5, 5), "GQA", g=4, kv=1)], "month")
    assert point.tp8_count == 0 and point.share_tp8_fill is None and point.share_tp8_mla is None and point.tp8_thin
