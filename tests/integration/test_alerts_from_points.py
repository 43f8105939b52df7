"""Trend rules judged from the stored series and one period's models give exactly the result
of judging them on every model of the population, as evaluation did before (issue 26)."""

from __future__ import annotations

from api_testdata import Spec, add_model
from sqlmodel import Session, select

from observatory.alerts import rules as R
from observatory.alerts.evaluate import _Inputs, evaluate, load_dialect_rows, spec_of
from observatory.alerts.tables import Alert, AlertRule
from observatory.core.trends import THIN_N
from observatory.settings import Settings
from observatory.store.trends import ensure_trends, load_trend_rows

B = 1_000_000_000
RULES = [
    ("median_g_shift", {"min_models": THIN_N}),
    ("median_g_shift", {"min_models": THIN_N, "compare": "baseline", "weighting": "downloads"}),
    ("kind_share", {"kind": "MLA", "direction": "above", "threshold": 0.2}),
    ("kind_share", {"kind": "MHA", "direction": "below", "threshold": 0.3, "weighting": "family_downloads"}),
    ("g_over_16_share", {"direction": "above", "threshold": 0.1}),
    ("tp8_fill_share", {"direction": "below", "threshold": 0.9}),
    ("kind_share", {"kind": "hybrid", "direction": "above", "threshold": 0.01, "period": "quarter"}),
]
POPULATIONS = [None, {"lineage": "all"}, {"lineage": "all", "min_downloads": 1000}, {"author": "lab"}]


def month(engine, m: int, configs: list[str], start: int = 0) -> None:
    for i, config in enumerate(configs):
        add_model(engine, Spec(f"lab/m{m:02d}-{start + i:03d}", config, (2025, m, 1 + i % 27), 100 * i, 7 * B),
                  sha=f"s{m}")


def judged_both_ways(engine) -> list[R.RuleResult]:
    results = []
    with Session(engine) as session:
        inputs = _Inputs(session)
        assert inputs.fresh  # the precomputed points are read
        for kind, params in RULES:
            for population in POPULATIONS:
                spec = R.make_rule(kind, params, population)
                from_points = R.judge_trend_points(spec, inputs.trend_points(spec), inputs.period_rows(spec))
                from_rows = R.evaluate_trend_rule(spec, load_trend_rows(session, spec.population))
                assert from_points == from_rows, (kind, params, population)
                results.append(from_points)
    return results


def test_trend_rules_judge_the_same_from_points_as_from_rows(engine, tmp_path):
    month(engine, 1, ["g4"] * (THIN_N + 2))
    month(engine, 2, ["g4"] * 20 + ["mha"] * 15)
    month(engine, 3, ["mla"] * 12 + ["g32"] * 12 + ["g8"] * 10 + ["hybrid"] * 2)
    ensure_trends(engine)
    results = judged_both_ways(engine)
    assert any(f.state == "fire" for r in results for f in r.findings)  # the comparison covers firing
    assert sum(r.judged for r in results) >= len(RULES)

    settings = Settings(data_dir=tmp_path, database_url=str(engine.url))
    report = evaluate(engine, settings)
    assert report.rules == 7  # the built-in ones

    # A crawl: more models in the last month and a new one, then the same comparison.
    month(engine, 3, ["mha"] * 20, start=100)
    month(engine, 4, ["g4"] * (THIN_N + 1))
    ensure_trends(engine)
    judged_both_ways(engine)


def test_the_dialect_rule_reads_only_what_changed_and_fires_what_a_full_reading_would(engine, tmp_path):

    month(engine, 1, ["g4"] * 6 + ["mha"] * 3)
    settings = Settings(data_dir=tmp_path, database_url=str(engine.url))
    first = evaluate(engine, settings)
    assert first.absorbed >= 2 and not first.fired  # history, not news

    # A crawl: new kinds, an unparsable config, and more of a kind already seen.
    month(engine, 2, ["mla", "hybrid", "broken", "g4", "mha"])
    with Session(engine) as session:
        rule = session.exec(select(AlertRule).where(AlertRule.kind == "new_dialect")).one()
        spec, since = spec_of(rule), rule.last_evaluated_at
        known = set(session.exec(select(Alert.fingerprint).where(Alert.rule_id == rule.id)))
        full = R.evaluate_dialect_rule(spec, load_dialect_rows(session))
        expected = {R.fingerprint(rule.rule_key, f.labels) for f in full.findings} - known
        changed = load_dialect_rows(session, since)
        assert len(changed) == 5 < len(load_dialect_rows(session))  # only the crawl's models are read
    report = evaluate(engine, settings)
    fired = {note["fingerprint"] for note in report.fired if note["kind"] == "new_dialect"}
    assert fired == expected and len(expected) == 3  # MLA, hybrid, the parse failure


def test_the_release_rule_reads_only_changed_groups_and_fires_what_a_full_reading_would(engine, tmp_path):
    def release(author: str, day: int, configs: list[str], tag: str) -> None:
        for i, config in enumerate(configs):
            add_model(engine, Spec(f"{author}/{tag}-{i}", config, (2025, 5, day), 10, 7 * B), sha=tag)

    release("lab", 1, ["g4", "g4"], "a")
    release("lab", 8, ["g8"], "b")  # a change: history once absorbed
    release("quiet", 2, ["mha"], "c")
    release("quiet", 9, ["g4"], "d")
    settings = Settings(data_dir=tmp_path, database_url=str(engine.url))
    assert evaluate(engine, settings).absorbed >= 2

    release("lab", 20, ["mla", "g8"], "e")  # lab breaks with its previous release; quiet is not touched
    with Session(engine) as session:
        rule = session.exec(select(AlertRule).where(AlertRule.kind == "release_changed")).one()
        spec, since = spec_of(rule), rule.last_evaluated_at
        known = set(session.exec(select(Alert.fingerprint).where(Alert.rule_id == rule.id)))
        full = R.evaluate_release_rule(spec, load_trend_rows(session, spec.population))
        expected = {R.fingerprint(rule.rule_key, f.labels) for f in full.findings} - known
        rows = _Inputs(session).release_rows(spec, since)
        assert {r.author for r in rows} == {"lab"} and len(rows) == 5  # the changed group, all of it
    report = evaluate(engine, settings)
    fired = {note["fingerprint"] for note in report.fired if note["kind"] == "release_changed"}
    assert fired == expected and len(expected) == 1
