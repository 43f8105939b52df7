"""The shared write path: revisions keyed by (model, sha), geometry per revision, nothing lost."""

from __future__ import annotations

import json

import pytest
from sqlmodel import select

from observatory.core.geometry import PARSER_VERSION
from observatory.core.repo_ids import InvalidRepoId
from observatory.store.db import session_scope
from observatory.store.ingest import record_config, rederive, upsert_model
from observatory.store.tables import ConfigRevision, GeometryRow, HubModel

LLAMA = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
         "num_key_value_heads": 8, "num_hidden_layers": 32}


def test_record_config_derives_geometry_and_is_idempotent(engine):
    with session_scope(engine) as s:
        upsert_model(s, "org/llama-ish", downloads=5)
        rev, created = record_config(s, "org/llama-ish", json.dumps(LLAMA), "a" * 40)
        assert created
        rev_id = rev.id
    with session_scope(engine) as s:
        again, created = record_config(s, "org/llama-ish", json.dumps(LLAMA), "a" * 40)
        assert not created and again.id == rev_id
        geoms = s.exec(select(GeometryRow)).all()
        assert len(geoms) == 1
        g = geoms[0]
        assert (g.attention_kind, g.num_query_heads, g.num_kv_heads, g.group_size, g.head_dim) == ("GQA", 32, 8, 4, 128)
        assert g.kv_elements_per_token == 2 * 8 * 128 * 32
        assert g.kv_bytes_per_token_bf16 == 131072
        assert g.sources["num_kv_heads"] == "num_key_value_heads"
        assert s.get(HubModel, "org/llama-ish").current_revision_id == rev_id


def test_new_sha_keeps_history_and_moves_current(engine):
    changed = dict(LLAMA, num_key_value_heads=4)
    with session_scope(engine) as s:
        upsert_model(s, "org/m")
        first, _ = record_config(s, "org/m", json.dumps(LLAMA), "1" * 40)
        second, _ = record_config(s, "org/m", json.dumps(changed), "2" * 40)
    with session_scope(engine) as s:
        revs = s.exec(select(ConfigRevision).where(ConfigRevision.model_id == "org/m")).all()
        assert {r.sha for r in revs} == {"1" * 40, "2" * 40}
        assert s.get(HubModel, "org/m").current_revision_id == second.id
        current = s.exec(select(GeometryRow).where(GeometryRow.revision_id == second.id)).one()
        assert current.num_kv_heads == 4 and current.group_size == 8


@pytest.mark.parametrize(
    "raw, message",
    [("not json at all", "JSON"), ("[1, 2]", "object"), ('{"model_type": "llama"}', "no layer count"),
     (json.dumps(dict(LLAMA, num_key_value_heads=64)), "exceeds"), ("", "empty")],
)
def test_unparseable_config_is_kept_verbatim_with_its_error(engine, raw, message):
    with session_scope(engine) as s:
        upsert_model(s, "org/bad")
        rev, created = record_config(s, "org/bad", raw, "b" * 40)
    with session_scope(engine) as s:
        stored = s.get(ConfigRevision, rev.id)
        assert stored.raw_text == raw
        assert stored.parse_status == "error"
        assert message.lower() in stored.parse_error.lower()
        assert "\n" not in stored.parse_error
        assert s.exec(select(GeometryRow)).all() == []


def test_hostile_model_id_is_refused(engine):
    with session_scope(engine) as s:
        with pytest.raises(InvalidRepoId):
            upsert_model(s, "<script>alert(1)</script>")


def test_rederive_reparses_old_and_failed_revisions(engine):
    with session_scope(engine) as s:
        upsert_model(s, "org/m")
        rev, _ = record_config(s, "org/m", json.dumps(LLAMA), "1" * 40)
        row = s.exec(select(GeometryRow)).one()
        row.parser_version = 0
        row.num_kv_heads = 999  # a stale value the new parser must replace
    with session_scope(engine) as s:
        assert rederive(s) == 1
    with session_scope(engine) as s:
        row = s.exec(select(GeometryRow)).one()
        assert row.num_kv_heads == 8 and row.revision_id == rev.id
        assert rederive(s) == 0


def test_start_up_rederives_stale_geometry_in_batches(engine):
    from observatory.store.rederive import rederive_stale

    with session_scope(engine) as s:
        for i in range(3):
            upsert_model(s, f"org/m{i}")
            record_config(s, f"org/m{i}", json.dumps(LLAMA), str(i) * 40)
        upsert_model(s, "org/broken")
        record_config(s, "org/broken", "{not json", "b" * 40)
        for row in s.exec(select(GeometryRow)):
            row.parser_version = 0
    assert rederive_stale(engine, batch=2) == 3  # the three stale geometries, in two transactions
    with session_scope(engine) as s:
        assert {r.parser_version for r in s.exec(select(GeometryRow))} == {PARSER_VERSION}
        broken = s.exec(select(ConfigRevision).where(ConfigRevision.model_id == "org/broken")).one()
        assert broken.parse_status == "error" and broken.raw_text == "{not json"  # kept, never lost
    assert rederive_stale(engine, batch=2) == 0  # nothing left to do
