"""Write path shared by the crawler and the snapshot: a config.json becomes a revision and a geometry.

A revision is keyed by (model, sha) so recording the same file twice is a no-op: a crawl
that is killed and restarted, or a snapshot loaded again, stores everything exactly once.
Files that fail to parse are kept verbatim with their error, so nothing fetched is lost and
a better parser can re-derive them later (``rederive``).
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, select

from observatory import kvcache
from observatory.geometry import PARSER_VERSION, ConfigError, Geometry, parse_config_text, parse_geometry
from observatory.repo_ids import validate_repo_id
from observatory.tables import ConfigRevision, GeometryRow, HubModel, utcnow


def upsert_model(session: Session, model_id: str, **fields) -> HubModel:
    """Insert or update a HubModel; only the given fields change."""
    validate_repo_id(model_id)
    model = session.get(HubModel, model_id)
    if model is None:
        model = HubModel(id=model_id, author=model_id.split("/")[0] if "/" in model_id else None)
        session.add(model)
    for key, value in fields.items():
        setattr(model, key, value)
    model.updated_at = utcnow()
    session.flush()
    return model


def geometry_row(geom: Geometry, *, revision_id: int, model_id: str) -> GeometryRow:
    mla = geom.mla
    return GeometryRow(
        revision_id=revision_id,
        model_id=model_id,
        parser_version=PARSER_VERSION,
        model_type=geom.model_type,
        architectures=list(geom.architectures),
        attention_kind=geom.attention_kind,
        is_hybrid=geom.is_hybrid,
        num_query_heads=geom.num_query_heads,
        num_kv_heads=geom.num_kv_heads,
        group_size=geom.group_size,
        head_dim=geom.head_dim,
        v_head_dim=geom.v_head_dim,
        num_layers=geom.num_layers,
        kv_layers=geom.kv_layers,
        sliding_window=geom.sliding_window,
        sliding_layers=geom.sliding_layers,
        chunked=geom.chunked,
        hidden_size=geom.hidden_size,
        kv_lora_rank=mla.kv_lora_rank if mla else None,
        qk_rope_head_dim=mla.qk_rope_head_dim if mla else None,
        qk_nope_head_dim=mla.qk_nope_head_dim if mla else None,
        q_lora_rank=mla.q_lora_rank if mla else None,
        kv_elements_per_token=geom.kv_elements_per_token,
        kv_bytes_per_token_bf16=kvcache.bytes_per_token(geom, "bf16"),
        sources=dict(geom.sources),
        warnings=list(geom.warnings),
    )


def derive(raw_text: str) -> tuple[Geometry | None, str | None]:
    """Parse a raw config; return (geometry, None) or (None, one-line error)."""
    try:
        return parse_geometry(parse_config_text(raw_text)), None
    except ConfigError as exc:
        return None, str(exc)[:1000]


def record_config(
    session: Session,
    model_id: str,
    raw_text: str,
    sha: str,
    *,
    provenance: str = "verbatim",
    source: str | None = None,
    fetched_at: datetime | None = None,
) -> tuple[ConfigRevision, bool]:
    """Store one config revision and its geometry; returns (revision, created).

    The model row must exist. The newest recorded revision becomes the model's current one.
    """
    existing = session.exec(
        select(ConfigRevision).where(ConfigRevision.model_id == model_id, ConfigRevision.sha == sha)
    ).first()
    if existing is not None:
        return existing, False
    geom, error = derive(raw_text)
    revision = ConfigRevision(
        model_id=model_id,
        sha=sha,
        raw_text=raw_text,
        fetched_at=fetched_at or utcnow(),
        provenance=provenance,
        source=source,
        parse_status="ok" if error is None else "error",
        parse_error=error,
    )
    session.add(revision)
    session.flush()
    if geom is not None:
        session.add(geometry_row(geom, revision_id=revision.id, model_id=model_id))
    model = session.get(HubModel, model_id)
    if model is not None:
        model.current_revision_id = revision.id
        model.updated_at = utcnow()
    session.flush()
    return revision, True


def rederive(session: Session) -> int:
    """Re-parse revisions whose geometry came from an older parser (or failed); returns count."""
    changed = 0
    revisions = session.exec(select(ConfigRevision)).all()
    for revision in revisions:
        row = session.exec(select(GeometryRow).where(GeometryRow.revision_id == revision.id)).first()
        if row is not None and row.parser_version >= PARSER_VERSION:
            continue
        geom, error = derive(revision.raw_text)
        if row is not None:
            session.delete(row)
            session.flush()
        revision.parse_status = "ok" if error is None else "error"
        revision.parse_error = error
        if geom is not None:
            session.add(geometry_row(geom, revision_id=revision.id, model_id=revision.model_id))
        changed += 1
    session.flush()
    return changed
