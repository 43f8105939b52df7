"""The overview's headlines: each comes from the newest quarter whose value rests on at least THIN_N
models, with the floor applied to that value's own n (issue 22), never from a thin last quarter."""

from __future__ import annotations

from datetime import date

from observatory.core.trends import THIN_N, TrendPoint
from observatory.web.pages.home import headlines


def point(start: date, count: int, g_count: int, kv_count: int, g_median: float = 8.0) -> TrendPoint:
    return TrendPoint(period="quarter", period_start=start, weighting="count", count=count, weight_total=count,
                      shares={"GQA": 0.75, "MLA": 0.25, "MHA": 0.0, "MQA": 0.0}, g_count=g_count, g_p25=None,
                      g_median=g_median, g_p75=None, share_g_over_16=0.0, kv_count=kv_count, kv_median=1000.0,
                      attn_count=count)


def test_a_thin_last_quarter_is_passed_over_and_named():
    quarters = [point(date(2025, 4, 1), 12, 9, 12, g_median=6.0), point(date(2025, 7, 1), 3, 2, 3, g_median=64.0)]
    got = headlines(quarters)
    for name in ("kinds", "g", "kv"):
        assert got[name]["quarter"] == "2025-Q2" and got[name]["skipped_thin"] == "2025-Q3", name
    assert got["g"]["g_median"] == 6.0  # not the thin quarter's 64


def test_the_floor_applies_to_the_n_of_the_value_shown():
    # The last quarter holds enough models, but too few of them have a G (MLA models have none):
    # its share headline stands, its median G does not.
    quarters = [point(date(2025, 4, 1), 10, 8, 10, g_median=6.0),
                point(date(2025, 7, 1), THIN_N + 1, THIN_N - 1, THIN_N + 1, g_median=16.0)]
    got = headlines(quarters)
    assert (got["kinds"]["quarter"], got["kinds"]["n"], got["kinds"]["skipped_thin"]) == ("2025-Q3", THIN_N + 1, None)
    assert (got["g"]["quarter"], got["g"]["g_median"], got["g"]["skipped_thin"]) == ("2025-Q2", 6.0, "2025-Q3")


def test_the_year_before_must_meet_the_floor_too():
    quarters = [point(date(2024, 4, 1), 20, 2, 20), point(date(2025, 4, 1), 20, 20, 20)]
    got = headlines(quarters)
    assert got["kinds"]["year_before"]["quarter"] == "2024-Q2"
    assert got["g"]["year_before"] is None  # two models with a G a year before: not quoted


def test_no_quarter_meets_the_floor():
    assert headlines([point(date(2025, 1, 1), 2, 1, 2)]) == {"kinds": None, "g": None, "kv": None}
    assert headlines([]) == {"kinds": None, "g": None, "kv": None}
