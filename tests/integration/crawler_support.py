"""Helpers shared by the crawler tests: read the store back after a crawl."""

from __future__ import annotations

from datetime import datetime, timezone

from sqlmodel import Session, select

from observatory.crawler.tables import CrawlFailure, CrawlScope
from observatory.store.tables import ConfigRevision, CrawlRun, GeometryRow, HubModel

LONG_AGO = datetime(2000, 1, 1, tzinfo=timezone.utc)

LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
         "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32}


def rows(engine, table, *where):
    with Session(engine) as session:
        return list(session.exec(select(table).where(*where)))


def revisions_by_model(engine) -> dict[str, list[ConfigRevision]]:
    out: dict[str, list[ConfigRevision]] = {}
    for rev in rows(engine, ConfigRevision):
        out.setdefault(rev.model_id, []).append(rev)
    return out


def failures(engine) -> dict[str, CrawlFailure]:
    return {f.model_id: f for f in rows(engine, CrawlFailure)}


def scope_state(engine, name: str = "default") -> CrawlScope | None:
    with Session(engine) as session:
        return session.get(CrawlScope, name)


def model(engine, model_id: str) -> HubModel | None:
    with Session(engine) as session:
        return session.get(HubModel, model_id)


def runs(engine) -> list[CrawlRun]:
    return rows(engine, CrawlRun)


def geometries(engine, model_id: str) -> list[GeometryRow]:
    return rows(engine, GeometryRow, GeometryRow.model_id == model_id)


def assert_stored_exactly_once(engine, hub, ids) -> None:
    """Every id has one revision, at the sha the stand-in serves now, with the served bytes."""
    by_model = revisions_by_model(engine)
    for repo_id in ids:
        revs = by_model.get(repo_id, [])
        assert len(revs) == 1, f"{repo_id}: {len(revs)} revisions"
        repo = hub.repos[repo_id]
        assert revs[0].sha == repo.sha
        assert revs[0].raw_text.encode() == repo.files["config.json"]
