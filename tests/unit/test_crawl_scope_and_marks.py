"""Pure parts of the crawler: which entries are in scope, where a pass stops, failure backoff."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from observatory.crawler import marks
from observatory.crawler.failures import RetryPolicy, next_state
from observatory.crawler.scope import (
    PRESETS,
    Scope,
    ScopeMismatch,
    build_scope,
    check_definition,
)
from observatory.hub.listing import Listed

T = datetime(2026, 6, 1, tzinfo=timezone.utc)
HOUR = timedelta(hours=1)
ENTRY = Listed(id="org/m", created_at=T, last_modified=T, sha="a" * 40, files=("config.json", "README.md"),
               gated="false", downloads=10, likes=1, tags=("transformers",), pipeline_tag="text-generation",
               library_name="transformers")


@pytest.mark.parametrize(("changes", "reason"), [
    ({}, None),
    ({"files": ("model.gguf",)}, "no_config_file"),
    ({"files": None}, None),  # the listing did not say: try it
    ({"pipeline_tag": "text-to-image"}, "out_of_scope"),
    ({"pipeline_tag": None}, "out_of_scope"),
    ({"pipeline_tag": "image-text-to-text"}, None),
])
def test_default_scope_is_language_models_with_a_config(changes, reason):
    assert Scope().skip_reason(replace(ENTRY, **changes)) == reason


def test_scope_options():
    assert build_scope("all").skip_reason(replace(ENTRY, pipeline_tag=None)) is None
    assert build_scope("x", libraries=("mlx",)).skip_reason(ENTRY) == "out_of_scope"
    assert build_scope("x", min_downloads=11).skip_reason(ENTRY) == "out_of_scope"
    assert build_scope("x", pipeline_tags=("fill-mask",)).skip_reason(replace(ENTRY, pipeline_tag="fill-mask")) is None
    assert build_scope("new-name").definition() == PRESETS["default"].definition()


def test_a_scope_name_reused_with_other_filters_is_refused():
    check_definition(Scope(), Scope().definition())
    check_definition(Scope(), None)
    with pytest.raises(ScopeMismatch, match="min_downloads"):
        check_definition(build_scope("default", min_downloads=5), Scope().definition())


def test_listing_entry_normalises_untrusted_fields():
    from huggingface_hub.hf_api import ModelInfo

    info = ModelInfo(id="org/m", createdAt="2026-06-01T00:00:00.000Z", sha=None, gated="manual",
                     downloads=-3, likes=None, siblings=None, pipeline_tag="x" * 300, tags=None)
    from observatory.hub.listing import from_model_info

    entry = from_model_info(info)
    assert entry.created_at == T and entry.gated == "manual" and entry.downloads is None and entry.likes is None  # unknown, not 0
    assert entry.files is None and entry.has_config is None and len(entry.pipeline_tag) == 100 and entry.tags == ()
    assert from_model_info(ModelInfo(id="a/b", gated=False)).gated == "false"


def test_first_run_stops_at_since_or_the_default_window():
    assert marks.created_stop(mark=None, floor=None, since=T, default_since=T - HOUR, overlap=HOUR) == T
    assert marks.created_stop(mark=None, floor=None, since=None, default_since=T - HOUR, overlap=HOUR) == T - HOUR
    # An interrupted first run keeps the bound it started with.
    assert marks.created_stop(mark=None, floor=T - 5 * HOUR, since=None, default_since=T, overlap=HOUR) == T - 5 * HOUR


def test_later_runs_stop_an_overlap_below_the_mark_but_not_below_the_floor():
    assert marks.created_stop(mark=T, floor=None, since=None, default_since=T, overlap=HOUR) == T - HOUR
    assert marks.created_stop(mark=T, floor=T - 10 * HOUR, since=None, default_since=T, overlap=HOUR) == T - HOUR
    assert marks.created_stop(mark=T, floor=T - HOUR / 4, since=None, default_since=T, overlap=HOUR) == T - HOUR / 4
    # --since older than the mark backfills; newer than the mark it cannot open a gap.
    assert marks.created_stop(mark=T, floor=T, since=T - 9 * HOUR, default_since=T, overlap=HOUR) == T - 9 * HOUR
    assert marks.created_stop(mark=T, floor=T, since=T + HOUR, default_since=T, overlap=HOUR) == T
    # A since inside the covered range [floor, mark] re-lists nothing (issue 26: a routine
    # --since 7d read the whole covered range on every run).
    assert marks.created_stop(mark=T, floor=T - 10 * HOUR, since=T - 5 * HOUR, default_since=T, overlap=HOUR) == T - HOUR
    assert marks.created_stop(mark=T, floor=T - 10 * HOUR, since=T - 10 * HOUR, default_since=T,
                              overlap=HOUR) == T - HOUR
    assert marks.created_stop(mark=T, floor=None, since=T - 5 * HOUR, default_since=T, overlap=HOUR) == T - 5 * HOUR


def test_marks_only_move_forward_and_floors_only_back():
    assert marks.advance(None, T) == T and marks.advance(T, None) == T
    assert marks.advance(T, T - HOUR) == T and marks.advance(T, T + HOUR) == T + HOUR
    assert marks.extend_floor(T, T - HOUR) == T - HOUR and marks.extend_floor(T, T + HOUR) == T
    assert marks.extend_floor(None, T) == T
    assert marks.modified_stop(None, HOUR) is None and marks.modified_stop(T, HOUR) == T - HOUR
    assert marks.below(T - HOUR, T) and not marks.below(T, T) and not marks.below(None, T)
    assert not marks.below(T, None)


POLICY = RetryPolicy(base_s=60, max_s=600, max_attempts=5)


def test_transient_failures_back_off_exponentially_then_give_up():
    delays = []
    attempts = 0
    for _ in range(4):
        state = next_state(previous_attempts=attempts, same_sha=attempts > 0, transient=True, now=T, policy=POLICY)
        attempts = state.attempts
        delays.append((state.next_attempt_at - T).total_seconds())
    assert delays == [60, 120, 240, 480]
    last = next_state(previous_attempts=attempts, same_sha=True, transient=True, now=T, policy=POLICY)
    assert last.gave_up and not last.transient and last.next_attempt_at is None and last.attempts == 5


def test_permanent_failures_wait_for_a_new_commit_and_a_new_commit_starts_over():
    permanent = next_state(previous_attempts=0, same_sha=False, transient=False, now=T, policy=POLICY)
    assert not permanent.transient and permanent.next_attempt_at is None
    fresh = next_state(previous_attempts=4, same_sha=False, transient=True, now=T, policy=POLICY)
    assert fresh.attempts == 1 and fresh.transient
    capped = next_state(previous_attempts=3, same_sha=True, transient=True,
                        now=T, policy=RetryPolicy(base_s=60, max_s=100, max_attempts=10))
    assert capped.next_attempt_at == T + timedelta(seconds=100)


def test_a_lease_holder_is_dead_only_if_it_ran_here_and_its_process_is_gone():
    import os

    from observatory.store.lease import _HOST, holder_is_dead, new_holder

    assert not holder_is_dead(new_holder())  # this very process
    assert not holder_is_dead(f"{_HOST}:{os.getppid()}:abc")  # alive
    assert holder_is_dead(f"{_HOST}:999999999:abc")  # no such pid
    assert not holder_is_dead("another-host:999999999:abc")  # cannot tell: wait for the TTL
    assert not holder_is_dead("garbage")
