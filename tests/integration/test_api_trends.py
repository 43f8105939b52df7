"""/api/v1/trends in-process on a real store: precomputed series equal the pure aggregation of
the store's rows (read back with plain sqlite3), on-demand populations likewise, CSV, errors."""

from __future__ import annotations

import csv
import io
from dataclasses import asdict
from datetime import date

import pytest
from api_testdata import SPECS, built_store, family_downloads, in_lineage, oracle_rows
from fastapi.testclient import TestClient

from observatory.core.trends import PERIODS, WEIGHTINGS, TrendRow, compute_trend_points
from observatory.settings import Settings
from observatory.store.trends import STANDARD_THRESHOLDS
from observatory.web.app import create_app


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    settings, engine = built_store(tmp_path_factory.mktemp("api-trends"), refresh=True)
    yield settings, engine
    engine.dispose()


@pytest.fixture(scope="module")
def client(store):
    with TestClient(create_app(store[0])) as c:
        yield c


def oracle_trend_rows(settings, *, min_downloads=0, author=None, model_type=None, population="originals",
                      min_params=None) -> list[TrendRow]:
    from datetime import datetime

    rows = oracle_rows(settings.resolved_database_url.removeprefix("sqlite:///"))
    family = family_downloads(rows)
    out = []
    for r in rows:
        if r["attention_kind"] is None or min_downloads and (r["downloads"] or 0) < min_downloads:  # unknown: no
            continue
        if author is not None and (r["author"] or "").lower() != author.lower() or \
                model_type is not None and r["model_type"] != model_type:
            continue
        if not in_lineage(r, population, min_params):
            continue
        created = datetime.fromisoformat(r["created_at"]) if r["created_at"] else None
        out.append(TrendRow(r["id"], r["author"], r["model_type"], created, r["attention_kind"],
                            bool(r["is_hybrid"]), r["group_size"], r["kv_bytes_per_token"], r["params"],
                            r["downloads"], family_downloads=family[r["id"]], kv_tp_max=r["kv_tp_max"]))
    return out


def expected_points(settings, period, weighting, **population) -> list[dict]:
    """What the API must say, from the oracle rows (read with plain sqlite3)."""
    rows = oracle_trend_rows(settings, **population)
    out = []
    for p in compute_trend_points(rows, period, weighting):
        d = asdict(p)
        d.pop("period"), d.pop("weighting")
        d["period_start"] = p.period_start.isoformat()
        d["thin"] = p.thin
        d["tp8_thin"] = p.tp8_thin
        out.append(d)
    return out


@pytest.mark.parametrize("weighting", WEIGHTINGS)
@pytest.mark.parametrize("period", PERIODS)
@pytest.mark.parametrize("threshold", STANDARD_THRESHOLDS)
@pytest.mark.parametrize("population", ["originals", "all", "derivatives"])
def test_precomputed_series_equal_the_pure_aggregation(client, store, period, weighting, threshold, population):
    r = client.get("/api/v1/trends", params={"period": period, "weighting": weighting, "min_downloads": threshold,
                                             "population": population})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["precomputed"] is True and body["computed_at"]
    assert body["population"]["key"] == population + ("" if threshold == 0 else f";min_downloads={threshold}")
    assert body["points"] == expected_points(store[0], period, weighting, min_downloads=threshold,
                                             population=population)
    assert body["points"] or population == "derivatives" and threshold == 100_000


def _populations_by_hand() -> tuple[set, set, list]:
    """The fixture's populations from its specs (not from the store)."""
    dated = [s for s in SPECS if s.created and s.config != "broken"]
    originals = {s.id for s in dated if s.relation == "original" and not s.id.startswith("fans/tiny")
                 and s.params is not None and s.params >= 1e9}
    derivatives = {s.id for s in dated if s.relation in ("finetune", "quantized")}
    return originals, derivatives, dated


def test_the_fixture_has_every_kind_of_member():
    originals, derivatives, _ = _populations_by_hand()
    assert derivatives == {"fans/llama-70b-chat-ft", "fans/llama-70b-awq"}
    assert "fans/tiny-random-llama" not in originals and "gamma/mamba-130m" not in originals
    assert len(originals) == 14  # a known number, so the counts below are not vacuous


def test_population_counts(client):
    originals, derivatives, dated = _populations_by_hand()
    totals = {}
    for population in ("originals", "all", "derivatives"):
        points = client.get("/api/v1/trends", params={"period": "quarter", "population": population}).json()["points"]
        totals[population] = sum(p["count"] for p in points)
    # "broken" has no geometry and the undated model no period; everything else counts somewhere
    assert totals == {"originals": len(originals), "all": len(dated), "derivatives": len(derivatives)}


def test_family_downloads_add_the_derivatives(client):
    # alpha/llama-70b (2024-Q2, 900,000) plus its finetune's 40,000; the AWQ copy's count is unknown.
    body = client.get("/api/v1/trends", params={"period": "quarter", "weighting": "family_downloads",
                                                 "since": "2024-04-01", "until": "2024-06-30"}).json()
    by_count = client.get("/api/v1/trends", params={"period": "quarter", "weighting": "downloads",
                                                    "since": "2024-04-01", "until": "2024-06-30"}).json()
    (q2,), (q2_plain,) = body["points"], by_count["points"]
    assert q2["weight_total"] - q2_plain["weight_total"] == 40_000
    assert q2["weight_unknown"] == q2_plain["weight_unknown"] == 1  # delta/unknown-downloads


@pytest.mark.parametrize("population", [
    {"author": "alpha"}, {"author": "ALPHA"}, {"author": "gamma", "min_downloads": 1000}, {"model_type": "llama"},
    {"min_downloads": 999}, {"author": "nobody"}, {"min_params": 5e10}, {"population": "all", "min_params": 1e10},
])
def test_other_populations_are_computed_on_demand(client, store, population):
    body = client.get("/api/v1/trends", params={"period": "quarter", "weighting": "downloads", **population}).json()
    assert body["precomputed"] is False and body["computed_at"] is None
    assert body["points"] == expected_points(store[0], "quarter", "downloads", **population)
    assert (body["points"] == []) == (population.get("author") == "nobody")


def test_hand_checked_quarter(client):
    # 2023 Q1: alpha/llama-7b (G 4) and alpha/llama-13b (MHA, G 1), 5000 downloads each.
    body = client.get("/api/v1/trends", params={"period": "quarter", "until": "2023-03-31"}).json()
    (q1,) = body["points"]
    assert q1["period_start"] == "2023-01-01" and q1["count"] == 2 and q1["thin"] is True
    assert q1["shares"] == {"MHA": 0.5, "MQA": 0.0, "GQA": 0.5, "MLA": 0.0}
    assert q1["stack_shares"] == {"attention": 1.0, "hybrid": 0.0, "attention-free": 0.0}
    assert (q1["g_p25"], q1["g_median"], q1["g_p75"]) == (1.0, 2.5, 4.0)
    # per token: 32 layers x 8 x 256 x 2 = 131072 and 32 x 32 x 256 x 2 = 524288
    assert q1["kv_median"] == (131072 + 524288) / 2
    assert q1["kv_by_size"]["3-15B"] == {"count": 2, "kv_median": (131072 + 524288) / 2}


def test_since_and_until_select_whole_periods(client):
    everything = client.get("/api/v1/trends", params={"period": "month"}).json()["points"]
    some = client.get("/api/v1/trends", params={"period": "month", "since": "2024-04-18",
                                                 "until": "2024-09-30"}).json()["points"]
    assert [p["period_start"] for p in some] == [f"2024-{m:02d}-01" for m in range(4, 10)]
    assert some == [p for p in everything if "2024-04-01" <= p["period_start"] <= "2024-09-01"]
    assert client.get("/api/v1/trends", params={"since": "2030-01-01"}).json()["points"] == []


def test_empty_months_are_listed(client):
    points = client.get("/api/v1/trends", params={"period": "month"}).json()["points"]
    starts = [date.fromisoformat(p["period_start"]) for p in points]
    assert starts[0] == date(2023, 2, 1) and starts[-1] == date(2025, 9, 1)
    assert len(starts) == 32  # every month from Feb 2023 to Sep 2025
    empty = [p for p in points if p["count"] == 0]
    assert empty and all(p["g_median"] is None and p["shares"]["GQA"] is None for p in empty)


@pytest.mark.parametrize("path, extra", [("/api/v1/trends.csv", {}), ("/api/v1/trends", {"format": "csv"})])
def test_csv(client, path, extra):
    params = {"period": "quarter", "weighting": "count", **extra}
    r = client.get(path, params=params)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert "attachment" in r.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(r.text)))
    points = client.get("/api/v1/trends", params={"period": "quarter"}).json()["points"]
    assert [row["period_start"] for row in rows] == [p["period_start"] for p in points]
    first = rows[0]
    assert int(first["count"]) == points[0]["count"]
    assert float(first["share_GQA"]) == points[0]["shares"]["GQA"]
    assert {"g_median", "share_g_over_16", "kv_median", "kv_median_<3B", "kv_median_>80B"} <= set(first)


@pytest.mark.parametrize("params, message", [
    ({"period": "year"}, "period"),
    ({"weighting": "likes"}, "weighting"),
    ({"min_downloads": -1}, "min_downloads"),
    ({"min_downloads": "lots"}, "min_downloads"),
    ({"since": "2025-02-30"}, "since"),
    ({"since": "2025-03-01", "until": "2025-01-01"}, "since (2025-03-01) is after until (2025-01-01)"),
    ({"author": "x" * 101}, "author"),
    ({"model_type": ""}, "model_type"),
    ({"format": "xlsx"}, "format"),
    ({"population": "everyone"}, "population"),
    ({"min_params": -1}, "min_params"),
    ({"weighting": "family"}, "weighting"),
])
def test_bad_parameters(client, params, message):
    r = client.get("/api/v1/trends", params=params)
    assert r.status_code == 422
    body = r.json()
    assert body["ok"] is False and body["status"] == 422 and message in body["error"]


@pytest.mark.parametrize("path", ["/api/v1/trends", "/api/v1/trends.csv", "/trends", "/trends.json"])
def test_unknown_parameters_are_refused_with_the_allowed_names(client, path):
    r = client.get(path, params={"limit": 2, "period": "month"})
    assert r.status_code == 400
    if path.startswith("/api") or path.endswith(".json"):
        body = r.json()
        assert body["ok"] is False and body["status"] == 400
        assert "unknown query parameter 'limit'" in body["error"] and "population" in body["error"]


def test_period_defaults_to_the_finest_with_five_models_per_median_period(client):
    body = client.get("/api/v1/trends", params={"population": "all"}).json()
    assert body["period_chosen"] is True
    # 19 dated models over 32 months: the median month is empty, so quarters it is
    assert body["period"] == "quarter"
    assert client.get("/api/v1/trends", params={"period": "month"}).json()["period_chosen"] is False


def test_stale_store_is_refreshed_at_start_up(tmp_path):
    settings, engine = built_store(tmp_path)  # no refresh: the precomputed table is empty
    engine.dispose()
    with TestClient(create_app(settings)) as c:
        body = c.get("/api/v1/trends").json()
    assert body["precomputed"] is True and body["points"]


def test_empty_store(tmp_path):
    settings = Settings(data_dir=tmp_path, autoload_snapshot=False)
    with TestClient(create_app(settings)) as c:
        body = c.get("/api/v1/trends").json()
        assert body["ok"] is True and body["points"] == []
        assert c.get("/api/v1/models").json()["rows"] == []
