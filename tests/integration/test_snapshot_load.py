"""Loading the bundled snapshot into a real SQLite store: idempotent, never over crawled data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlmodel import Session, select

from observatory.catalog.snapshot import (
    SnapshotError,
    ensure_snapshot,
    load_entries,
    load_snapshot,
)
from observatory.store.db import session_scope
from observatory.store.ingest import record_config, upsert_model
from observatory.store.tables import ConfigRevision, GeometryRow, HubModel

ENTRIES = load_entries()
OBSERVATORY = Path(sys.executable).with_name("observatory")


def _counts(engine) -> dict:
    with Session(engine) as s:
        return {
            table.__name__: s.exec(select(func.count()).select_from(table)).one()
            for table in (HubModel, ConfigRevision, GeometryRow)
        }


def _state(engine) -> list[tuple]:
    with Session(engine) as s:
        models = s.exec(select(HubModel).order_by(HubModel.id)).all()
        return [(m.id, m.current_revision_id, m.updated_at, m.created_at, m.tags) for m in models]


def _geometry(engine, model_id) -> GeometryRow:
    with Session(engine) as s:
        model = s.get(HubModel, model_id)
        return s.exec(select(GeometryRow).where(GeometryRow.revision_id == model.current_revision_id)).one()


def test_load_twice_changes_nothing(engine):
    first = load_snapshot(engine)
    n = len(ENTRIES)
    assert first["models_added"] == n and first["revisions_added"] == n
    assert first["parse_errors"] == 0 and first["errors"] == []
    assert _counts(engine) == {"HubModel": n, "ConfigRevision": n, "GeometryRow": n}
    before = _state(engine)

    second = load_snapshot(engine)
    assert second["models_added"] == second["models_updated"] == second["revisions_added"] == 0
    assert second["models_unchanged"] == n
    assert _counts(engine) == {"HubModel": n, "ConfigRevision": n, "GeometryRow": n}
    assert _state(engine) == before  # same revision ids, not even updated_at moved


def test_loaded_rows_carry_snapshot_facts(engine):
    load_snapshot(engine)
    with Session(engine) as s:
        llama = s.get(HubModel, "meta-llama/Llama-2-70b-hf")
        assert llama.source == "snapshot" and llama.author == "meta-llama"
        assert llama.created_at.replace(tzinfo=timezone.utc) == datetime(2023, 7, 18, tzinfo=timezone.utc)
        assert llama.downloads is None and llama.likes is None  # unknown, never 0
        assert llama.pipeline_tag == "text-generation" and "snapshot" in llama.tags
        assert llama.release_date_confidence == "high"
        revision = s.get(ConfigRevision, llama.current_revision_id)
        assert revision.provenance == "verbatim" and revision.source.startswith("https://github.com/")
        assert revision.sha.startswith("snapshot-v1:")

        llama30 = s.get(HubModel, "huggyllama/llama-30b")
        revision = s.get(ConfigRevision, llama30.current_revision_id)
        assert revision.provenance == "reconstructed"
        assert revision.source == "https://huggingface.co/huggyllama/llama-30b/blob/main/config.json"
        assert json.loads(revision.raw_text)["num_attention_heads"] == 52
        assert llama30.relation == "original" and llama30.organisation == "Meta"
        assert llama30.snapshot_meta["searched"] and llama30.snapshot_meta["release_date_source"]

        gpt2 = s.get(HubModel, "openai-community/gpt2-large")  # rebuilt, and proven byte-exact by the Hub's sha256
        revision = s.get(ConfigRevision, gpt2.current_revision_id)
        assert revision.provenance == "transcribed" and json.loads(revision.raw_text)["n_head"] == 20
        assert gpt2.snapshot_meta["hub_check"] == "match"
        assert gpt2.snapshot_meta["sha256"] == gpt2.snapshot_meta["hub_sha256"]

        nvfp4 = s.get(HubModel, "nvidia/DeepSeek-V4-Flash-NVFP4")  # another organisation's copy of a lab's weights
        assert (nvfp4.relation, nvfp4.base_models) == ("quantized", ["deepseek-ai/DeepSeek-V4-Flash"])
        plus = s.get(HubModel, "CohereLabs/c4ai-command-r-plus")  # config taken from a GPTQ mirror
        assert (plus.relation, plus.quant_method) == ("original", None)

        assert s.exec(select(func.count()).where(HubModel.downloads.is_not(None))).one() == 0  # unknown
        phi4 = s.get(HubModel, "microsoft/phi-4")
        assert "\r\n" in s.get(ConfigRevision, phi4.current_revision_id).raw_text

    llama_geom = _geometry(engine, "meta-llama/Llama-2-70b-hf")
    assert (llama_geom.attention_kind, llama_geom.num_query_heads, llama_geom.num_kv_heads) == ("GQA", 64, 8)
    assert llama_geom.group_size == 8 and llama_geom.kv_bytes_per_token_bf16 == 2 * 163_840

    v3 = _geometry(engine, "deepseek-ai/DeepSeek-V3")
    assert (v3.attention_kind, v3.kv_lora_rank, v3.qk_rope_head_dim, v3.kv_layers) == ("MLA", 512, 64, 61)
    assert v3.kv_elements_per_token == 576 * 61 and v3.group_size is None

    jamba = _geometry(engine, "ai21labs/Jamba-v0.1")
    assert jamba.is_hybrid and jamba.kv_layers == 4

    with Session(engine) as s:
        kinds = set(s.exec(select(GeometryRow.attention_kind)).all())
    assert kinds == {"MHA", "MQA", "GQA", "MLA", "none"}


@pytest.mark.slow
def test_crawled_models_keep_their_hub_data(engine):
    hub_time = datetime(2023, 7, 19, 12, 0, tzinfo=timezone.utc)
    with session_scope(engine) as s:
        # Crawled with a real config: the snapshot must add nothing for it.
        upsert_model(s, "meta-llama/Llama-2-70b-hf", source="hub", downloads=123, created_at=hub_time, sha="abc")
        crawled, _ = record_config(s, "meta-llama/Llama-2-70b-hf", '{"num_attention_heads": 64}', "abc")
        # Listed by a crawl but its config not fetched yet: the snapshot fills the gap, Hub fields stay.
        upsert_model(s, "openai-community/gpt2-large", source="hub", downloads=7, created_at=hub_time)

    summary = load_snapshot(engine)
    assert summary["crawled_models_kept"] == 2 and summary["revisions_skipped"] == 1
    assert summary["models_added"] == len(ENTRIES) - 2
    with Session(engine) as s:
        llama = s.get(HubModel, "meta-llama/Llama-2-70b-hf")
        assert (llama.source, llama.downloads, llama.sha) == ("hub", 123, "abc")
        assert llama.created_at.replace(tzinfo=timezone.utc) == hub_time
        assert llama.current_revision_id == crawled.id
        assert s.exec(select(ConfigRevision).where(ConfigRevision.model_id == llama.id)).all() == [crawled]

        gpt2 = s.get(HubModel, "openai-community/gpt2-large")
        assert (gpt2.source, gpt2.downloads) == ("hub", 7)
        assert gpt2.created_at.replace(tzinfo=timezone.utc) == hub_time
        assert s.get(ConfigRevision, gpt2.current_revision_id).provenance == "transcribed"

    # And it stays that way on a second load.
    again = load_snapshot(engine)
    assert again["revisions_added"] == 0 and again["crawled_models_kept"] == 2


def _write_manifest(tmp_path: Path, heads_kv: int, date: str = "2024-01-02") -> Path:
    entry = {
        "id": "org/tiny",
        "organisation": "Org",
        "family": "Test",
        "release_date": date,
        "release_date_confidence": "medium",
        "release_date_source": "https://example.org/tiny",
        "release_date_kind": "announcement",
        "num_parameters_kind": "config estimate",
        "provenance": "reconstructed",
        "source": "https://huggingface.co/org/tiny/blob/main/config.json",
        "searched": "nowhere: a test entry",
        "config": {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 8,
                   "num_key_value_heads": heads_kv, "num_hidden_layers": 4},
    }
    (tmp_path / "configs").mkdir(exist_ok=True)
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"snapshot_version": 2, "models": [entry]}), encoding="utf-8")
    return path


def test_edited_entry_becomes_a_new_revision(engine, tmp_path):
    load_snapshot(engine, _write_manifest(tmp_path, heads_kv=8))
    first = _geometry(engine, "org/tiny")
    assert first.attention_kind == "MHA"

    summary = load_snapshot(engine, _write_manifest(tmp_path, heads_kv=2))
    assert summary["revisions_added"] == 1 and summary["models_added"] == 0
    second = _geometry(engine, "org/tiny")
    assert (second.attention_kind, second.num_kv_heads) == ("GQA", 2)
    assert second.revision_id != first.revision_id

    # Reverting the edit brings the earlier revision back as current, without a third row.
    summary = load_snapshot(engine, _write_manifest(tmp_path, heads_kv=8))
    assert summary["revisions_added"] == 0
    assert _geometry(engine, "org/tiny").revision_id == first.revision_id
    assert _counts(engine)["ConfigRevision"] == 2

    summary = load_snapshot(engine, _write_manifest(tmp_path, heads_kv=8, date="2024-02-03"))
    assert summary["models_updated"] == 1
    with Session(engine) as s:
        created = s.get(HubModel, "org/tiny").created_at.replace(tzinfo=timezone.utc)
    assert created == datetime(2024, 2, 3, tzinfo=timezone.utc)


def test_bad_manifest_loads_nothing(engine, tmp_path):
    path = _write_manifest(tmp_path, heads_kv=8)
    doc = json.loads(path.read_text())
    doc["models"].append({**doc["models"][0], "id": "org/other", "release_date": "yesterday"})
    path.write_text(json.dumps(doc))
    with pytest.raises(SnapshotError, match="org/other"):
        load_snapshot(engine, path)
    assert _counts(engine) == {"HubModel": 0, "ConfigRevision": 0, "GeometryRow": 0}


@pytest.mark.slow
def test_ensure_snapshot_loads_only_into_an_empty_store(engine, settings):
    assert ensure_snapshot(engine, settings) is None  # autoload off in the test settings
    assert _counts(engine)["HubModel"] == 0

    on = settings.model_copy(update={"autoload_snapshot": True})
    summary = ensure_snapshot(engine, on)
    assert summary["models_added"] == len(ENTRIES)
    assert ensure_snapshot(engine, on) is None
    assert _counts(engine)["HubModel"] == len(ENTRIES)


# --------------------------------------------------------------------------- the command line


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OBSERVATORY_")}
    env["OBSERVATORY_DATA_DIR"] = str(tmp_path / "data")
    return subprocess.run(
        [str(OBSERVATORY), "snapshot", *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_cli_load_prepares_the_database_and_is_idempotent(tmp_path):
    first = _run(tmp_path, "load", "--json")
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    assert summary["models_added"] == len(ENTRIES) and summary["parse_errors"] == 0
    assert (tmp_path / "data" / "observatory.db").exists()

    second = _run(tmp_path, "load")
    assert second.returncode == 0, second.stderr
    assert second.stdout.count("\n") == 1
    assert f"{len(ENTRIES)} models (0 added, 0 updated, {len(ENTRIES)} unchanged" in second.stdout
    assert "0 revisions added; 0 parse errors" in second.stdout


def test_cli_bad_manifest_is_one_line_on_stderr(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{oops", encoding="utf-8")
    result = _run(tmp_path, "load", "--file", str(bad))
    assert result.returncode != 0
    assert result.stdout == ""
    assert result.stderr.strip().count("\n") == 0 and "not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data" / "observatory.db").exists()  # refused before touching the store


def test_cli_list_json(tmp_path):
    result = _run(tmp_path, "list", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert len(rows) == len(ENTRIES)
    v3 = next(r for r in rows if r["id"] == "deepseek-ai/DeepSeek-V3")
    assert v3["attention_kind"] == "MLA" and v3["kv_cache_bytes_per_token"] == 2 * 576 * 61
    assert all(r["error"] is None for r in rows)
    assert not (tmp_path / "data").exists()  # listing reads no database


@pytest.mark.slow
def test_pages_say_where_the_bundled_snapshot_ends_on_the_embedded_default(engine, settings):
    from datetime import date

    from fastapi.testclient import TestClient

    from observatory.store.db import read_session
    from observatory.store.queries.counts import snapshot_end
    from observatory.web.app import create_app

    load_snapshot(engine)
    newest = max(e.release_date for e in ENTRIES)
    with read_session(engine) as s:
        assert snapshot_end(s) == newest == date(2026, 8, 17)
    app_settings = settings.model_copy(update={"scheduler_enabled": False})
    with TestClient(create_app(app_settings)) as client:
        for path in ("/", "/trends"):
            assert "The bundled snapshot ends in August 2026" in client.get(path).text, path
        home = client.get("/index.json").json()
        assert home["snapshot_end"] == "2026-08-17"
        # Each headline rests on at least five models, from a quarter that holds them (not a thin last one).
        for name in ("kinds", "g", "kv"):
            assert home["headlines"][name]["n"] >= home["thin_n"], name
        thin = [q for q in home["quarters"] if q["thin"]]
        assert not {q["label"] for q in thin} & {home["headlines"][n]["quarter"] for n in ("kinds", "g", "kv")}

    with session_scope(engine) as s:  # one crawled model: the store is no longer the snapshot alone
        upsert_model(s, "org/crawled", source="hub", created_at=datetime(2026, 9, 1, tzinfo=timezone.utc))
    with read_session(engine) as s:
        assert snapshot_end(s) is None
