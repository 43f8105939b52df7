"""A year of crawls in which the ecosystem shifts; exactly these alerts fire and resolve.

Every model goes through the real write path (``upsert_model`` + ``record_config`` with a real-
looking config.json), so kinds and G come from the geometry parser. The built-in rules run:
median G moved by >= 2, MLA share >= 20 %, MHA share <= 5 %, G > 16 share >= 10 %, a release
that changes G or kind, a new kind or unknown dialect.
"""

from __future__ import annotations

import json

from alert_support import (  # noqa: F401  (alert_settings is a fixture)
    Receiver,
    add_model,
    alert_settings,
    broken_config,
    day,
    gqa_config,
    mha_config,
    mla_config,
    subscribe,
    unknown_layer_config,
)
from sqlmodel import Session, select

from observatory.alerts.delivery import deliver_pending
from observatory.alerts.evaluate import evaluate
from observatory.alerts.tables import Alert, AlertEvent


def crawl_month(engine, month: int, *, gqa4: int = 0, gqa8: int = 0, mla: int = 0, mha: int = 2,
                acme: int | None = None) -> None:
    """One month of releases: GQA G=4 / G=8 from one-off organisations, MLA from deepx, MHA from
    oldco (each of those keeps its own kind), and optionally one release by acme with G=acme."""
    d = iter(range(1, 29))
    for i in range(gqa4):
        add_model(engine, f"o{month}-{i}/gqa4", gqa_config(4), day(2025, month, next(d)))
    for i in range(gqa8):
        add_model(engine, f"p{month}-{i}/gqa8", gqa_config(8), day(2025, month, next(d)))
    for i in range(mla):
        add_model(engine, f"deepx/v{month}-{i}", mla_config(), day(2025, month, next(d)))
    for i in range(mha):
        add_model(engine, f"oldco/m{month}-{i}", mha_config(), day(2025, month, next(d)))
    if acme is not None:
        add_model(engine, f"acme/g{acme}-{month}", gqa_config(acme), day(2025, month, next(d)))


def step(engine, settings) -> dict[str, list[tuple]]:
    """Evaluate, then again on the same data (which must record nothing new); returns what changed."""
    report = evaluate(engine, settings)
    again = evaluate(engine, settings)
    assert (again.fired, again.resolved, again.repeated, again.deliveries) == ([], [], [], 0)

    def keys(notes):
        return sorted((n["kind"], tuple(sorted(n["labels"].items()))) for n in notes)

    return {"fired": keys(report.fired), "resolved": keys(report.resolved), "absorbed": report.absorbed}


MLA = ("kind_share", ())
KIND_MLA = ("new_dialect", (("value", "MLA"), ("what", "kind")))


def test_the_ecosystem_shifts(engine, alert_settings):
    settings = alert_settings.model_copy(update={"alert_builtin_rules": True})
    with Receiver() as rx:
        # Someone subscribes to the built-in MLA rule over a webhook.
        subscribe(engine, settings, rx.url)

        # Crawl 1: two ordinary months (GQA G=4 and some MHA); acme releases at G=4. History only.
        crawl_month(engine, 1, gqa4=8, acme=4)
        crawl_month(engine, 2, gqa4=8, acme=4)
        first = step(engine, settings)
        assert first["fired"] == [] and first["resolved"] == []
        assert first["absorbed"] == 2  # the kinds already present (GQA, MHA) are history, not news

        # Crawl 2: a burst of MLA (3 of 10 with the 2 MHA models) and acme moves from G=4 to G=8.
        crawl_month(engine, 3, gqa4=4, mla=3, acme=8)
        assert step(engine, settings) == {"fired": sorted([
            MLA,
            KIND_MLA,
            ("release_changed", (("group", "acme"), ("release", "2025-03-10"))),
        ]), "resolved": [], "absorbed": 0}
        with Session(engine) as session:
            fired = {a.summary for a in session.exec(select(Alert).where(Alert.baseline.is_(False))).all()}
        assert any(s.startswith("Organisation acme released acme/g8-3 (GQA, G=8)") for s in fired)

        # Crawls 3-4: the MLA share wobbles inside the hysteresis band (18.2 %, then 20 %): no flapping.
        crawl_month(engine, 4, gqa4=6, mla=2, acme=8)  # 2 of 11 = 18.2 %; acme stays at G=8
        assert step(engine, settings) == {"fired": [], "resolved": [], "absorbed": 0}
        crawl_month(engine, 5, gqa4=6, mla=2)  # 2 of 10 = 20 %
        assert step(engine, settings) == {"fired": [], "resolved": [], "absorbed": 0}

        # Crawl 5: the share falls below 18 %: resolved, once. An unknown layer type shows up.
        crawl_month(engine, 6, gqa4=8, mla=2)  # 2 of 13 with the model below = 15.4 %
        add_model(engine, "lab/zigzag-1", unknown_layer_config(), day(2025, 6, 28))
        got = step(engine, settings)
        assert got["resolved"] == [MLA]
        assert got["fired"] == [("new_dialect", (("value", "zigzag_attention"), ("what", "layer_type")))]

        # Crawl 6: back to 20 %, up from June's 15.4 %: a crossing, so MLA fires again. zigzag-2's unknown
        # layer type makes its geometry uncertain, so it is counted apart (2 of 10, not 2 of 11); the same
        # unknown layer type again is not news; a config that cannot be parsed is.
        crawl_month(engine, 7, gqa4=6, mla=2)  # 2 of 10 (the broken config has no geometry)
        add_model(engine, "lab/zigzag-2", unknown_layer_config(), day(2025, 7, 27))
        add_model(engine, "lab/broken", broken_config(), day(2025, 7, 28))
        assert step(engine, settings) == {
            "fired": sorted([MLA, ("new_dialect", (("value", "lab/broken"), ("what", "parse_error")))]),
            "resolved": [], "absorbed": 0}

        # Crawl 7: the median G jumps from 4 to 8 (most new models at G=8); MLA stays at 20 %: no new crossing.
        crawl_month(engine, 8, gqa8=6, mla=2)
        assert step(engine, settings) == {
            "fired": [("median_g_shift", (("period", "2025-08"),))], "resolved": [], "absorbed": 0}

        # Crawl 8: September is as August: the August shift resolves, nothing else changes.
        crawl_month(engine, 9, gqa8=6, mla=2)
        assert step(engine, settings) == {
            "fired": [], "resolved": [("median_g_shift", (("period", "2025-08"),))], "absorbed": 0}

        deliver_pending(engine, settings)
        requests = rx.wait_for(3)

    # The MLA subscriber heard exactly: fired, resolved, fired again.
    types = [json.loads(r["body"])["type"] for r in requests]
    assert types == ["alert.firing", "alert.resolved", "alert.firing"]
    assert len(requests) == 3

    with Session(engine) as session:
        alerts = session.exec(select(Alert).where(Alert.baseline.is_(False))).all()
        states = sorted((a.status, a.summary.split(" (")[0][:40]) for a in alerts)
        events = session.exec(select(AlertEvent)).all()
    # Rules that never fired: MHA share (never <= 5 %) and G > 16 share (no model has G > 16).
    assert not any("MHA" in s for _, s in states) and not any("G > 16" in s for _, s in states)
    assert len(events) == 9  # 7 firings (2 MLA, release, kind, layer type, parse error, shift) + 2 resolutions


def test_history_is_absorbed_even_if_the_store_was_empty_at_first(engine, alert_settings):
    settings = alert_settings.model_copy(update={"alert_builtin_rules": True})
    assert evaluate(engine, settings).absorbed == 0  # nothing to see yet
    crawl_month(engine, 1, gqa4=4, mla=1, acme=4)
    crawl_month(engine, 2, gqa4=4, mla=1, acme=8)  # a release change, but in the first data seen
    first = step(engine, settings)
    assert ("release_changed", (("group", "acme"), ("release", "2025-02-08"))) not in first["fired"]
    assert first["absorbed"] == 4  # kinds GQA, MLA, MHA and acme's change are history
    crawl_month(engine, 3, gqa4=4, mla=1, acme=16)
    assert ("release_changed", (("group", "acme"), ("release", "2025-03-08"))) in step(engine, settings)["fired"]
