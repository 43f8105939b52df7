"""Write path shared by the crawler and the snapshot: a config.json becomes a revision and a geometry.

A revision is keyed by (model, sha) so recording the same file twice is a no-op: a crawl
that is killed and restarted, or a snapshot loaded again, stores everything exactly once.
Files that fail to parse are kept verbatim with their error, so nothing fetched is lost and
a better parser can re-derive them later (``rederive``).

Writes are batched (``upsert_models``, ``record_configs``): the crawler stores a page of
results per transaction, and building one ORM object per row costs more than fetching the
config did. The one-row helpers are the batch functions called with one row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import insert, update
from sqlalchemy.orm import attributes
from sqlmodel import Session, col, select

from observatory.core import kvcache
from observatory.core.deployment import max_even_tp
from observatory.core.geometry import (
    PARSER_VERSION,
    ConfigError,
    Geometry,
    parse_config_text,
    parse_geometry,
)
from observatory.core.lineage import geometry_fingerprint, quantization
from observatory.core.params import estimate_parameters
from observatory.core.repo_ids import validate_repo_id
from observatory.store.db import batches
from observatory.store.tables import ConfigRevision, GeometryRow, HubModel, utcnow


@dataclass(frozen=True)
class ConfigItem:
    """One config.json to record for a model that is already stored."""

    model_id: str
    raw_text: str
    sha: str
    provenance: str = "verbatim"  # or "reconstructed"
    source: str | None = None
    fetched_at: datetime | None = None


@dataclass(frozen=True)
class Recorded:
    revision_id: int
    created: bool
    parse_status: str  # "ok" | "error"
    parse_error: str | None


def upsert_models(session: Session, rows: Mapping[str, Mapping]) -> None:
    """Insert or update HubModels by id; only the given fields of existing rows change."""
    for model_id in rows:
        validate_repo_id(model_id)
    now = utcnow()
    existing = {model_id for batch in batches(rows)
                for model_id in session.exec(select(HubModel.id).where(col(HubModel.id).in_(batch)))}
    new = [
        {"downloads": None, "likes": None, "tags": [], "source": "hub", "first_seen_at": now,
         "author": _author(model_id), "author_key": (_author(model_id) or "").lower() or None,
         **fields, "id": model_id, "updated_at": now}
        for model_id, fields in rows.items() if model_id not in existing
    ]
    if new:
        session.execute(insert(HubModel), new)
    update_model_rows(session, {model_id: {**rows[model_id], "updated_at": now} for model_id in existing})


def _author(model_id: str) -> str | None:
    return model_id.split("/")[0] if "/" in model_id else None


def upsert_model(session: Session, model_id: str, **fields) -> HubModel:
    """Insert or update one HubModel; only the given fields change."""
    upsert_models(session, {model_id: fields})
    return session.get(HubModel, model_id, populate_existing=True)


@dataclass(frozen=True)
class Derived:
    """What one config.json yields: its geometry (None with ``error`` when it cannot be read)
    and the facts read beside it."""

    geometry: Geometry | None
    config: dict | None
    error: str | None

    @property
    def quantization(self) -> tuple[str | None, int | None]:
        return quantization(self.config, []) if self.config is not None else (None, None)


def parameter_estimate(cfg: dict) -> tuple[int | None, int | None]:
    """Total and active parameters estimated from the config; (None, None) when it cannot say."""
    try:
        estimate = estimate_parameters(cfg)
    except ConfigError:
        return None, None
    return estimate.total, estimate.active


def geometry_values(geom: Geometry, cfg: dict, *, revision_id: int, model_id: str) -> dict:
    """The ``geometry`` row for a derived Geometry, as column values."""
    mla = geom.mla
    total, active = parameter_estimate(cfg)
    return dict(
        encoder_only=getattr(geom, "encoder_only", False),
        is_encoder_decoder=getattr(geom, "is_encoder_decoder", False),
        cross_kv_elements_per_source_token=getattr(geom, "cross_kv_elements_per_source_token", None) or None,
        uncertain=getattr(geom, "uncertain", False),
        fingerprint=geometry_fingerprint(geom, cfg),
        params_estimate=total,
        active_params_estimate=active,
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
        kv_tp_max=max_even_tp(geom),
        sources=dict(geom.sources),
        warnings=list(geom.warnings),
        derived_at=utcnow(),
    )


def derive(raw_text: str) -> Derived:
    """Parse a raw config into its geometry, or say in one line why it cannot be read."""
    cfg = None
    try:
        cfg = parse_config_text(raw_text)
        return Derived(parse_geometry(cfg), cfg, None)
    except ConfigError as exc:
        return Derived(None, cfg, str(exc)[:1000])


def record_configs(session: Session, items: Iterable[ConfigItem]) -> list[Recorded]:
    """Store config revisions and their geometry; one result per item, in order.

    The models must exist. A (model, sha) already stored is left as it is; the newest
    recorded revision of each model becomes its current one.
    """
    items = list(items)
    stored = {
        (model_id, sha): Recorded(rev_id, False, status, error)
        for rev_id, model_id, sha, status, error in session.exec(
            select(ConfigRevision.id, ConfigRevision.model_id, ConfigRevision.sha,
                   ConfigRevision.parse_status, ConfigRevision.parse_error)
            .where(col(ConfigRevision.model_id).in_({i.model_id for i in items}))
        )
    }
    fresh: dict[tuple[str, str], tuple[ConfigItem, Derived]] = {}
    for item in items:
        key = (item.model_id, item.sha)
        if key not in stored and key not in fresh:
            fresh[key] = (item, derive(item.raw_text))
    if fresh:
        now = utcnow()
        returned = session.execute(
            insert(ConfigRevision).returning(ConfigRevision.id, sort_by_parameter_order=True),
            [
                dict(model_id=item.model_id, sha=item.sha, raw_text=item.raw_text,
                     fetched_at=item.fetched_at or now, provenance=item.provenance, source=item.source,
                     parse_status="ok" if d.error is None else "error", parse_error=d.error)
                for item, d in fresh.values()
            ],
        ).scalars().all()
        geometries = []
        for rev_id, (key, (item, d)) in zip(returned, fresh.items()):
            stored[key] = Recorded(rev_id, True, "ok" if d.error is None else "error", d.error)
            if d.geometry is not None:
                geometries.append(geometry_values(d.geometry, d.config, revision_id=rev_id, model_id=item.model_id))
        if geometries:
            session.execute(insert(GeometryRow), geometries)
        current = {key[0]: (stored[key].revision_id, d) for key, (_item, d) in fresh.items()}  # later items win
        update_model_rows(session, {
            model_id: {"current_revision_id": rev_id, "updated_at": now,
                       **dict(zip(("quant_method", "quant_bits"), d.quantization))}
            for model_id, (rev_id, d) in current.items()})
    return [stored[(item.model_id, item.sha)] for item in items]


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
    """Store one config revision and its geometry; returns (revision, created)."""
    item = ConfigItem(model_id, raw_text, sha, provenance, source, fetched_at)
    recorded = record_configs(session, [item])[0]
    return session.get(ConfigRevision, recorded.revision_id), recorded.created


def update_model_rows(session: Session, values_by_id: Mapping[str, Mapping]) -> None:
    """UPDATE HubModels by primary key, one executemany per set of columns.

    Bulk UPDATEs bypass the identity map, so objects already loaded are kept in step by hand.
    """
    by_columns: dict[tuple[str, ...], list[dict]] = {}
    for model_id, values in values_by_id.items():
        by_columns.setdefault(tuple(sorted(values)), []).append({**values, "id": model_id})
    for rows in by_columns.values():
        session.execute(update(HubModel), rows)
    for model_id, values in values_by_id.items():
        obj = session.identity_map.get(session.identity_key(HubModel, model_id))
        if obj is not None:
            for name, value in values.items():
                attributes.set_committed_value(obj, name, value)


def stale_revision_ids(session: Session) -> list[int]:
    """Revisions whose geometry an older parser derived, and those that failed to parse and now
    parse differently (a new rule reads them). Only reads: the failed ones (few) are parsed here,
    so a store with nothing to redo is never written to, nor its write lock taken."""
    outdated = select(ConfigRevision.id).join(GeometryRow, GeometryRow.revision_id == ConfigRevision.id).where(
        GeometryRow.parser_version < PARSER_VERSION)
    failed = select(ConfigRevision.id, ConfigRevision.raw_text, ConfigRevision.parse_error).outerjoin(
        GeometryRow, GeometryRow.revision_id == ConfigRevision.id).where(
        # "ok" always comes with a geometry row ("ok" | "error"); the index on parse_status keeps a store
        # without failures from reading every revision here
        ConfigRevision.parse_status == "error", GeometryRow.id.is_(None))
    retry = [rev_id for rev_id, raw_text, error in session.exec(failed) if not _fails_as_before(derive(raw_text), error)]
    return sorted([*session.exec(outdated), *retry])


def _fails_as_before(d: Derived, error: str | None) -> bool:
    return d.error is not None and d.error == error


def rederive(session: Session, ids: Iterable[int] | None = None) -> int:
    """Re-parse revisions whose geometry came from an older parser (or failed); returns count.

    ``ids`` limits it to those revisions (``stale_revision_ids`` in batches, for big stores).
    """
    changed = 0
    ids = stale_revision_ids(session) if ids is None else list(ids)
    for revision in session.exec(select(ConfigRevision).where(col(ConfigRevision.id).in_(ids))):
        row = session.exec(select(GeometryRow).where(GeometryRow.revision_id == revision.id)).first()
        if row is not None and row.parser_version >= PARSER_VERSION:
            continue
        d = derive(revision.raw_text)
        if row is None and _fails_as_before(d, revision.parse_error):
            continue  # still unreadable, for the same reason: nothing changed
        if row is not None:
            session.delete(row)
            session.flush()
        revision.parse_status = "ok" if d.error is None else "error"
        revision.parse_error = d.error
        if d.geometry is not None:
            session.add(GeometryRow(**geometry_values(d.geometry, d.config, revision_id=revision.id,
                                                      model_id=revision.model_id)))
        changed += 1
    session.flush()
    return changed
