"""The crawler against a stand-in Hub, through the real huggingface_hub client: what ends up stored."""

from __future__ import annotations

from datetime import timedelta

import pytest
from crawler_support import (
    LLAMA,
    LONG_AGO,
    assert_stored_exactly_once,
    failures,
    geometries,
    model,
    revisions_by_model,
    runs,
    scope_state,
)

from observatory.crawler.health import crawler_health
from observatory.crawler.run import CrawlBusy, crawl
from observatory.crawler.scope import ScopeMismatch, build_scope
from observatory.crawler.stats import refresh_popular
from observatory.store import lease
from observatory.store.db import session_scope
from observatory.testing.hub_standin import HubStandin, populate


@pytest.fixture
def mixed_hub(hub):
    """25 LM repos an hour old, plus repos the default scope must skip without a request."""
    ids = populate(hub, 25)
    hub.add_repo("gguf/only-weights", None, files={"model.gguf": b"GGUF"})
    hub.add_repo("art/diffusion", {"_class_name": "UNet"}, pipeline_tag="text-to-image", library_name="diffusers")
    hub.add_repo("meta/gated", LLAMA, gated="manual")
    return ids


def test_first_crawl_stores_every_in_scope_model_and_nothing_else(engine, hub, hub_settings, mixed_hub):
    run = crawl(engine, hub_settings, since=LONG_AGO)

    assert_stored_exactly_once(engine, hub, mixed_hub)
    stored = revisions_by_model(engine)
    assert "gguf/only-weights" not in stored and "art/diffusion" not in stored
    assert model(engine, "art/diffusion") is None
    # Every stored config became a geometry; the model row carries listing metadata, aware UTC.
    first = model(engine, mixed_hub[0])
    assert first.sha == hub.repos[mixed_hub[0]].sha
    assert first.created_at.tzinfo is not None and first.created_at.utcoffset() == timedelta(0)
    assert first.created_at == hub.repos[mixed_hub[0]].created_at
    assert first.pipeline_tag == "text-generation" and first.downloads == hub.repos[mixed_hub[0]].downloads
    assert first.current_revision_id == stored[mixed_hub[0]][0].id
    assert len(geometries(engine, mixed_hub[0])) == 1
    # Gated and anonymous: recorded without a request.
    assert failures(engine)["meta/gated"].reason == "gated"
    assert hub.counts["resolve_get"] == 25 and hub.counts["resolve_head"] == 0
    # The run is stored with its summary and cost.
    assert run.status == "ok" and (run.new, run.changed, run.failed) == (25, 0, 1)
    assert run.failures_by_reason == {"gated": 1}
    assert run.stats["skipped_by_reason"]["no_config_file"] == 1
    assert run.stats["skipped_by_reason"]["out_of_scope"] == 1
    assert run.requests == hub.counts["resolve_get"] + hub.counts["listing"]
    assert [r.id for r in runs(engine)] == [run.id]
    assert scope_state(engine).created_mark == max(r.created_at for r in hub.repos.values())


def test_recrawl_with_nothing_changed_fetches_no_config(engine, hub, hub_settings, mixed_hub):
    crawl(engine, hub_settings, since=LONG_AGO)
    hub.reset_counts()

    run = crawl(engine, hub_settings)

    assert hub.counts["resolve_get"] == 0 and hub.counts["resolve_head"] == 0
    assert hub.counts["listing"] <= 2  # one page per pass, both stop at their mark
    assert (run.new, run.changed, run.failed) == (0, 0, 0)
    assert run.requests == hub.counts["listing"]


def test_changed_sha_fetches_new_revision_and_keeps_the_old(engine, hub, hub_settings):
    ids = populate(hub, 12)
    crawl(engine, hub_settings, since=LONG_AGO)
    old_sha = hub.repos[ids[3]].sha
    hub.update_repo(ids[3], {**LLAMA, "num_key_value_heads": 4})
    hub.reset_counts()

    run = crawl(engine, hub_settings)

    revs = sorted(revisions_by_model(engine)[ids[3]], key=lambda r: r.id)
    assert [r.sha for r in revs] == [old_sha, hub.repos[ids[3]].sha]
    current = model(engine, ids[3])
    assert current.current_revision_id == revs[1].id and current.sha == revs[1].sha
    kv_heads = {g.revision_id: g.num_kv_heads for g in geometries(engine, ids[3])}
    assert kv_heads == {revs[0].id: 64, revs[1].id: 4}  # geometry history: both revisions derived
    assert run.changed == 1 and run.new == 0
    assert hub.counts["resolve_get"] == 1


def test_model_created_while_paging_is_stored_by_the_next_run(engine, hub, hub_settings):
    ids = populate(hub, 30)
    created = []

    def create_once(page: int) -> None:
        if page == 1 and not created:
            created.append(hub.add_repo("late/arrival", LLAMA).id)

    hub.on_listing_page = create_once
    crawl(engine, hub_settings, since=LONG_AGO)
    hub.on_listing_page = None
    mark_after_first = scope_state(engine).created_mark
    crawl(engine, hub_settings)

    assert_stored_exactly_once(engine, hub, ids + created)
    assert mark_after_first < hub.repos["late/arrival"].created_at <= scope_state(engine).created_mark


def test_max_models_bounds_a_first_run_and_later_runs_continue_above_it(engine, hub, hub_settings):
    ids = populate(hub, 30)  # newest last
    run = crawl(engine, hub_settings, since=LONG_AGO, max_models=7)

    assert run.new == 7 and set(revisions_by_model(engine)) == set(ids[-7:])
    state = scope_state(engine)
    assert state.created_mark == hub.repos[ids[-1]].created_at
    newer = [hub.add_repo(f"new/m{i}", LLAMA).id for i in range(3)]
    crawl(engine, hub_settings)
    assert set(revisions_by_model(engine)) == set(ids[-7:] + newer)


def test_a_later_run_cut_short_leaves_the_mark_until_the_gap_is_filled(engine, hub, hub_settings):
    populate(hub, 5)
    crawl(engine, hub_settings, since=LONG_AGO)
    mark = scope_state(engine).created_mark
    newer = [hub.add_repo(f"new/m{i}", LLAMA).id for i in range(12)]

    crawl(engine, hub_settings, max_models=5)
    assert scope_state(engine).created_mark == mark  # 7 new models below the top are not stored yet
    crawl(engine, hub_settings, max_models=5)
    assert scope_state(engine).created_mark == mark
    crawl(engine, hub_settings, max_models=5)

    assert_stored_exactly_once(engine, hub, newer)
    assert scope_state(engine).created_mark == hub.repos[newer[-1]].created_at


def test_since_bounds_the_first_run(engine, hub, hub_settings):
    ids = populate(hub, 20, step_s=3600)  # one an hour, newest an hour ago
    since = hub.repos[ids[-5]].created_at

    crawl(engine, hub_settings, since=since)

    assert set(revisions_by_model(engine)) == set(ids[-5:])
    assert scope_state(engine).floor == since


def test_scope_filters_and_a_reused_name_with_other_filters_is_refused(engine, hub, hub_settings, mixed_hub):
    everything = build_scope("all")
    run = crawl(engine, hub_settings, scope=everything, since=LONG_AGO)
    assert "art/diffusion" in revisions_by_model(engine)  # kept verbatim though it has no attention geometry
    assert run.new == 25 and run.failures_by_reason == {"gated": 1, "unparseable_geometry": 1}

    with pytest.raises(ScopeMismatch, match="other filters"):
        crawl(engine, hub_settings, scope=build_scope("all", min_downloads=5))
    only_org3 = build_scope("org3", author="org3")
    hub.reset_counts()
    crawl(engine, hub_settings, scope=only_org3, since=LONG_AGO)
    listings = [path for _method, path in hub.log if path.startswith("/api/models")]
    assert listings and all("author=org3" in path for path in listings)  # filtered by the Hub


def test_second_crawler_is_refused_while_the_lease_is_held(engine, hub, hub_settings):
    populate(hub, 3)
    assert lease.acquire(engine, "crawl", "elsewhere:1:other", 60)

    with pytest.raises(CrawlBusy):
        crawl(engine, hub_settings, since=LONG_AGO)
    assert runs(engine) == [] and hub.counts["listing"] == 0

    lease.release(engine, "crawl", "elsewhere:1:other")
    assert crawl(engine, hub_settings, since=LONG_AGO).new == 3


def test_hub_faithful_redirect_costs_two_resolver_requests(engine, settings, hub_settings):
    with HubStandin(page_size=10, redirect_resolve=True) as redirecting:
        ids = populate(redirecting, 6)
        crawl(engine, hub_settings.model_copy(update={"hf_endpoint": redirecting.url}), since=LONG_AGO)
        assert_stored_exactly_once(engine, redirecting, ids)
        assert redirecting.counts["resolve_get"] == 2 * len(ids)
        assert redirecting.counts["resolve_head"] == 0


def test_health_reports_last_success_lag_and_open_failures(engine, hub, hub_settings, mixed_hub):
    with session_scope(engine) as session:
        empty = crawler_health(session)
    assert empty["last_run"] is None and empty["lag_seconds"] is None and empty["failures_by_reason"] == {}

    run = crawl(engine, hub_settings, since=LONG_AGO)
    with session_scope(engine) as session:
        health = crawler_health(session)

    assert health["last_run"]["id"] == run.id and health["last_run"]["status"] == "ok"
    assert health["last_success_at"] == run.finished_at.isoformat()
    newest = max(r.created_at for r in hub.repos.values())
    assert health["newest_created_at"] == newest.isoformat()
    assert 0 <= health["lag_seconds"] < 3600
    assert health["failures_by_reason"] == {"gated": 1} and health["failures_retrying"] == 0
    assert health["running"] is False


def test_stats_refresh_updates_popular_models_downloads_and_likes(engine, hub, hub_settings):
    ids = populate(hub, 15)
    crawl(engine, hub_settings, since=LONG_AGO)
    for rank, repo_id in enumerate(ids[:5]):
        hub.set_stats(repo_id, downloads=1_000_000 - rank, likes=500 + rank)
    hub.reset_counts()

    result = refresh_popular(engine, hub_settings.model_copy(update={"stats_refresh_top_n": 5}))

    assert result == {"listed": 5, "updated": 5, "requests": 1, "error": None}
    assert hub.counts == {"listing": 1}
    for rank, repo_id in enumerate(ids[:5]):
        stored = model(engine, repo_id)
        assert (stored.downloads, stored.likes) == (1_000_000 - rank, 500 + rank)
        assert stored.stats_refreshed_at is not None
    assert model(engine, ids[6]).stats_refreshed_at is None



def test_crawling_a_snapshot_model_makes_the_hub_data_win(engine, hub, hub_settings):
    from observatory.catalog.snapshot import load_entries, load_snapshot

    load_snapshot(engine)
    entry = next(e for e in load_entries() if e.provenance == "verbatim")
    hub.add_repo(entry.id, {**LLAMA, "num_key_value_heads": 2})

    crawl(engine, hub_settings, since=LONG_AGO)
    again = load_snapshot(engine)

    crawled = model(engine, entry.id)
    assert crawled.source == "hub" and crawled.created_at == hub.repos[entry.id].created_at
    revs = sorted(revisions_by_model(engine)[entry.id], key=lambda r: r.id)
    assert [r.sha for r in revs] == [entry.sha, hub.repos[entry.id].sha]  # the snapshot's kept as history
    assert crawled.current_revision_id == revs[1].id  # and a reload does not put it back in front
    assert again["crawled_models_kept"] >= 1
