"""Reads of models: the list and one model, for the JSON API and the HTML pages.

- ``list_models(session, ModelListParams) -> Page``: the filterable, sortable model list with
  keyset pagination (Datasette style: an opaque ``next`` token, never an offset);
  ``iter_models`` follows the pages (the data package of every model, web/export_package.py).
- ``read_model(session, model_id) -> StoredModel | None``: what the store holds of one model
  (``web.api.models`` adds the estimates and benchmarks); ``get_revision`` for a raw config download.

Sessions that only read should come from ``db.read_only(engine)`` (``deps.ReadSessionDep``):
they neither wait for nor block a crawl's write transaction.

Every model is listed with its *current* geometry (``hub_model.current_revision_id``); a model
whose config failed to parse is listed with empty geometry fields. SQL is built from SQLAlchemy
expressions only; user values are always bound parameters.

Pagination: rows are ordered by (sort column, id), both in the requested direction, with rows
whose sort value is NULL (no geometry, no creation date) after all others in either direction.
The token encodes the sort, the direction and the (value, id) of the last row shown, so the
next page starts strictly after it even while new models arrive; a token that does not decode,
or that was issued for another sort, raises ``InvalidPageToken`` (a 400 in the API).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time as time_module
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from functools import lru_cache
from typing import Annotated, Any, Literal

import sqlalchemy as sa
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    model_validator,
)
from sqlmodel import Session

from observatory.core.config_dialects import ConfigError
from observatory.core.geometry import Geometry
from observatory.core.params import estimate_parameters
from observatory.store.ingest import Derived, derive
from observatory.store.memo import BoundedCache
from observatory.store.queries.oracle import check_of
from observatory.store.tables import ConfigRevision, GeometryRow, HubModel
from observatory.store.trend_tables import DerivativeStats

MAX_PAGE_SIZE = 500
DEFAULT_PAGE_SIZE = 50
ATTENTION_KINDS = ("MHA", "MQA", "GQA", "MLA", "none")
_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _iso_day(value: Any) -> Any:
    # pydantic's lax date parsing takes "0" or "1700000000" as Unix times; a query string date
    # must be written YYYY-MM-DD.
    if isinstance(value, str) and not _ISO_DAY.fullmatch(value):
        raise ValueError("dates are written YYYY-MM-DD")
    return value


IsoDate = Annotated[date, BeforeValidator(_iso_day)]

SortKey = Literal["created_at", "downloads", "group_size", "kv_bytes_per_token", "id"]
AttentionKind = Literal["MHA", "MQA", "GQA", "MLA", "none"]
RELATIONS = ("original", "finetune", "quantized", "adapter", "merge")
Relation = Literal["original", "finetune", "quantized", "adapter", "merge"]


def _whole_if_integral(value: float | None) -> float | int | None:
    """G = H/K is a whole number for every real model: 8, not 8.0, in JSON and CSV."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


GroupSize = Annotated[int | float | None, BeforeValidator(_whole_if_integral)]


def comma_list(value: Any) -> Any:
    """``kind=MLA,GQA`` means the same as ``kind=MLA&kind=GQA``."""
    items = value if isinstance(value, list) else [value] if isinstance(value, str) else value
    if not isinstance(items, list):
        return value
    # Empty parts stay, so "kind=" and "kind=MLA," are refused as they were before commas.
    return [part.strip() for item in items for part in (item.split(",") if isinstance(item, str) else [item])]




_M = HubModel.__table__.c
_G = GeometryRow.__table__.c
# sort key -> (column, tie-breaker equal to hub_model.id on rows where the column is not NULL)
_SORT_COLUMNS: dict[str, tuple[sa.ColumnElement, sa.ColumnElement]] = {
    "created_at": (_M.created_at, _M.id),
    "downloads": (_M.downloads, _M.id),
    # Geometry sorts break ties on geometry.model_id so the (column, model_id) index serves them.
    "group_size": (_G.group_size, _G.model_id),
    "kv_bytes_per_token": (_G.kv_bytes_per_token_bf16, _G.model_id),
    "id": (_M.id, _M.id),
}
_NULLABLE_SORTS = {"created_at", "downloads", "group_size", "kv_bytes_per_token"}
_TOKEN_VERSION = 1


class InvalidPageToken(ValueError):
    """The ``next`` token is malformed or belongs to another sort order."""


class ModelListParams(BaseModel):
    """Filters, sort and page of the model list. Every filter is optional; they combine with AND.

    Dates are inclusive UTC days. ``q`` matches anywhere in the repo id, case-insensitively
    (``%`` and ``_`` are literal; a substring search reads every id, ~0.5 s on a million
    models). ``kind`` lists attention kinds to keep (any of them). Build it from a query string
    with ``ModelListParams.model_validate({...})``; a ``ValidationError`` names the bad field.
    """

    model_config = ConfigDict(extra="ignore")

    kind: Annotated[list[AttentionKind], BeforeValidator(comma_list)] = Field(
        default_factory=list, max_length=5,
        description="Attention kinds to keep (any of; repeat the parameter or separate with commas): "
                    "MHA, MQA, GQA, MLA, none")
    relation: Annotated[list[Relation], BeforeValidator(comma_list)] = Field(
        default_factory=list, max_length=5,
        description="Relations to a base model to keep (any of; repeatable or comma-separated): "
                    + ", ".join(RELATIONS))
    min_params: float | None = Field(None, ge=0, le=1e15, description=(
        "At least this many parameters: the disclosed count (safetensors total, or a published figure), "
        "else the estimate from the config; models with neither are left out"))
    hybrid: bool | None = Field(None, description="Only hybrids (true) or only non-hybrids (false)")
    g_min: float | None = Field(None, ge=0, le=1_000_000, description="Smallest group size G = H/K")
    g_max: float | None = Field(None, ge=0, le=1_000_000, description="Largest group size G = H/K")
    author: str | None = Field(None, min_length=1, max_length=100,
                               description="Organisation (repo id prefix), in any case, as on the Hub")
    model_type: str | None = Field(None, min_length=1, max_length=100,
                                   description="Architecture family, the config's model_type")
    created_from: IsoDate | None = Field(None, description="Created on or after this day (UTC)")
    created_to: IsoDate | None = Field(None, description="Created on or before this day (UTC)")
    min_downloads: int | None = Field(None, ge=0, le=10**15, description="At least this many downloads (30 days)")
    q: str | None = Field(None, min_length=1, max_length=200, description="Text to find in the repo id")
    sort: SortKey = Field("created_at", description="Sort column")
    order: Literal["asc", "desc"] = Field("desc", description="Sort direction; rows without a value come last")
    size: int = Field(DEFAULT_PAGE_SIZE, ge=1, le=MAX_PAGE_SIZE, description="Rows per page")
    next: str | None = Field(None, min_length=1, max_length=1000, description="Token from the previous page")

    @model_validator(mode="after")
    def _ranges(self) -> ModelListParams:
        if self.g_min is not None and self.g_max is not None and self.g_min > self.g_max:
            raise ValueError(f"g_min ({self.g_min}) is greater than g_max ({self.g_max})")
        if self.created_from and self.created_to and self.created_from > self.created_to:
            raise ValueError(f"created_from ({self.created_from}) is after created_to ({self.created_to})")
        return self


class ModelSummary(BaseModel):
    """One row of the model list: the model and its current geometry (None where unknown)."""

    id: str
    author: str | None
    created_at: datetime | None
    downloads: int | None = Field(description="Hub downloads over the last 30 days; null when unknown")
    likes: int | None
    num_parameters: int | None = Field(description="Disclosed total: the safetensors total or a published figure")
    parameters_source: str | None = Field(description="safetensors, published, or config (an estimate)")
    active_parameters: int | None = Field(description="Mixture-of-experts models: parameters one token uses")
    relation: str | None = Field(description="original, finetune, quantized, adapter or merge; null when unknown")
    base_models: list[str] | None
    source: str
    model_type: str | None
    attention_kind: str | None
    is_hybrid: bool | None
    num_query_heads: int | None
    num_kv_heads: int | None
    group_size: GroupSize
    head_dim: int | None
    num_layers: int | None
    kv_layers: int | None
    sliding_window: int | None
    kv_bytes_per_token: int | None = Field(description="KV cache bytes per token at bf16, all layers")


# Columns of ModelSummary, in order (also the CSV header).
SUMMARY_FIELDS = tuple(ModelSummary.model_fields)
# Parameters as a reader wants them: disclosed, else the config estimate (and say which).
PARAMS = sa.func.coalesce(_M.num_parameters, _G.params_estimate)
_SUMMARY_COLUMNS = [
    _M.id, _M.author, _M.created_at, _M.downloads, _M.likes, PARAMS.label("num_parameters"),
    sa.case((_M.num_parameters.is_not(None), sa.func.coalesce(_M.parameters_source, "published")),
            (_G.params_estimate.is_not(None), "config"), else_=None).label("parameters_source"),
    sa.func.coalesce(_M.active_parameters, _G.active_params_estimate).label("active_parameters"),
    _M.relation, _M.base_models, _M.source,
    _G.model_type, _G.attention_kind, _G.is_hybrid, _G.num_query_heads, _G.num_kv_heads,
    _G.group_size, _G.head_dim, _G.num_layers, _G.kv_layers, _G.sliding_window,
    _G.kv_bytes_per_token_bf16.label("kv_bytes_per_token"),
]


_SUMMARIES = TypeAdapter(list[ModelSummary])  # one call validates a whole page


class Page(BaseModel):
    rows: list[ModelSummary]
    next: str | None = Field(description="Token for the following page; null on the last page")


# --- tokens -------------------------------------------------------------------------------

def _encode_value(sort: str, value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).isoformat()
    return value


def _decode_value(sort: str, value: Any) -> Any:
    if value is None:
        return None
    if sort == "created_at":
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value)
            except ValueError:
                parsed = None
            if parsed is not None and parsed.tzinfo is not None:
                return parsed
    elif sort in ("downloads", "kv_bytes_per_token"):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif sort == "group_size":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif sort == "id":
        if isinstance(value, str):
            return value
    raise InvalidPageToken(f"next token holds a value that does not fit sort={sort}")


def encode_token(sort: str, order: str, value: Any, model_id: str) -> str:
    payload = [_TOKEN_VERSION, sort, order, _encode_value(sort, value), model_id]
    raw = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_token(token: str, sort: str, order: str) -> tuple[Any, str]:
    """(sort value, id) of the last row shown; value None means 'inside the NULL tail'."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        payload = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidPageToken("next token is not one this API issued") from None
    if not (isinstance(payload, list) and len(payload) == 5 and payload[0] == _TOKEN_VERSION
            and isinstance(payload[4], str)):
        raise InvalidPageToken("next token is not one this API issued")
    _, token_sort, token_order, value, model_id = payload
    if (token_sort, token_order) != (sort, order):
        raise InvalidPageToken(
            f"next token was issued for sort={token_sort}&order={token_order}, not sort={sort}&order={order}"
        )
    if value is None and sort not in _NULLABLE_SORTS:
        raise InvalidPageToken(f"next token holds a value that does not fit sort={sort}")
    return _decode_value(sort, value), model_id


# --- the list -----------------------------------------------------------------------------

def _day_start(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=timezone.utc)


# Index choice (SQLite, whose planner has no statistics unless someone runs ANALYZE): a filter
# on an indexed geometry column (kind, family, G) would otherwise drive the query through its
# own index and then sort every match, which for a common value ("GQA", "llama") means sorting
# hundreds of thousands of rows. When each such filter matches at least this many rows, they
# are applied while walking the sort column's index instead, which finds a page after about
# size / selectivity rows; a rare value keeps its index and its few matches are sorted.
_SELECTIVE_ROWS = 10_000


def _no_index(column: sa.ColumnElement) -> sa.ColumnElement:
    """The same value, but not one SQLite can look up through an index on the column."""
    if isinstance(getattr(column.type, "impl", column.type), sa.String):  # sqlmodel's AutoString decorates String
        return column.op("||", return_type=column.type)(sa.literal("", sa.String))
    return column + 0


def _indexed_geometry_filters(params: ModelListParams) -> dict[str, list]:
    """Filters on indexed geometry columns, by column name, as (column -> condition) builders."""
    filters: dict[str, list] = {}
    if params.kind:
        filters["attention_kind"] = [lambda c: c.in_(params.kind)]
    if params.g_min is not None:
        filters.setdefault("group_size", []).append(lambda c: c >= params.g_min)
    if params.g_max is not None:
        filters.setdefault("group_size", []).append(lambda c: c <= params.g_max)
    if params.model_type is not None:
        filters["model_type"] = [lambda c: c == params.model_type]
    return filters


# (engine url, column, filter values, threshold) -> (is selective, monotonic time probed). How many rows a
# filter matches changes slowly and only steers the plan, never the answer, so it is probed at
# most once per _PROBE_TTL_S per process.
_PROBES: dict[tuple, tuple[bool, float]] = {}
_PROBE_TTL_S = 300.0
_PROBES_MAX = 1024


def _probe_key(session: Session, name: str, params: ModelListParams) -> tuple:
    values = {"attention_kind": tuple(sorted(params.kind)), "group_size": (params.g_min, params.g_max),
              "model_type": params.model_type}[name]
    return (str(session.get_bind().url), name, values, _SELECTIVE_ROWS)


def _geometry_filters_are_selective(session: Session, params: ModelListParams, sort_column: str) -> bool:
    """Whether some indexed geometry filter (other than on the sort column) matches few rows;
    each probe reads at most _SELECTIVE_ROWS entries of one index and no table rows."""
    now = time_module.monotonic()
    for name, builders in _indexed_geometry_filters(params).items():
        if name == sort_column:
            continue
        key = _probe_key(session, name, params)
        cached = _PROBES.get(key)
        if cached is not None and now - cached[1] < _PROBE_TTL_S:
            selective = cached[0]
        else:
            column = _G[name]
            probe = (sa.select(sa.literal(1)).select_from(GeometryRow.__table__)
                     .where(*(build(column) for build in builders)).limit(_SELECTIVE_ROWS))
            found = session.execute(sa.select(sa.func.count()).select_from(probe.subquery())).scalar_one()
            selective = found < _SELECTIVE_ROWS
            if len(_PROBES) >= _PROBES_MAX:
                _PROBES.clear()
            _PROBES[key] = (selective, now)
        if selective:
            return True
    return False


def _bind_values(params: ModelListParams) -> dict[str, Any]:
    """Values for the bind parameters of ``_page_statement``."""
    values: dict[str, Any] = {
        "kind": list(params.kind), "hybrid": params.hybrid, "g_min": params.g_min, "g_max": params.g_max,
        "relation": list(params.relation), "min_params": params.min_params,
        "author": params.author.lower() if params.author else None, "model_type": params.model_type,
        "min_downloads": params.min_downloads,
        "created_from": _day_start(params.created_from) if params.created_from else None,
        # the day after, exclusive; the calendar's last day bounds nothing (and has no day after)
        "created_to": _day_start(params.created_to + timedelta(days=1))
        if params.created_to and params.created_to < date.max else None,
        # matched with LIKE ... ESCAPE '/': the user's % and _ are literal
        "q": params.q.replace("/", "//").replace("%", "/%").replace("_", "/_") if params.q is not None else None,
    }
    return {k: v for k, v in values.items() if v not in (None, [])}


@lru_cache(maxsize=512)
def _page_statement(sort: str, desc: bool, tail: bool, cursor: bool, filters: frozenset[str],
                    unindexed: frozenset[str]) -> sa.Select:
    """One page query, its values left as bind parameters, built once per shape: ``filters``
    names the filters present, ``tail`` selects the rows whose sort value is NULL, ``cursor``
    adds the keyset condition (after the row ``after_value``, ``after_id``)."""
    column, tie = _SORT_COLUMNS[sort]

    def geo(name: str) -> sa.ColumnElement:
        return _no_index(_G[name]) if name in unindexed else _G[name]

    p = sa.bindparam
    conditions = {
        "kind": lambda: geo("attention_kind").in_(p("kind", expanding=True)),
        "hybrid": lambda: _G.is_hybrid == p("hybrid"),
        "g_min": lambda: geo("group_size") >= p("g_min"),
        "g_max": lambda: geo("group_size") <= p("g_max"),
        "model_type": lambda: geo("model_type") == p("model_type"),
        "author": lambda: _M.author_key == p("author"),  # the Hub matches organisations in any case
        "created_from": lambda: _M.created_at >= p("created_from"),
        "created_to": lambda: _M.created_at < p("created_to"),
        "min_downloads": lambda: _M.downloads >= p("min_downloads"),
        "relation": lambda: _M.relation.in_(p("relation", expanding=True)),
        "min_params": lambda: PARAMS >= p("min_params"),
        "q": lambda: _M.id.icontains(p("q"), escape="/"),
    }
    query = (
        sa.select(*_SUMMARY_COLUMNS)
        .select_from(HubModel.__table__)
        .outerjoin(GeometryRow.__table__, _G.revision_id == _M.current_revision_id)
        .where(*(build() for name, build in conditions.items() if name in filters))
    )
    if tail:  # NULL sort values, in id order
        query = query.where(column.is_(None))
        if cursor:
            query = query.where(_M.id < p("after_id") if desc else _M.id > p("after_id"))
        return query.order_by(_M.id.desc() if desc else _M.id.asc()).limit(p("limit"))
    if sort in _NULLABLE_SORTS:
        query = query.where(column.is_not(None))
    if sort == "id":
        if cursor:
            query = query.where(column < p("after_id") if desc else column > p("after_id"))
        return query.order_by(column.desc() if desc else column.asc()).limit(p("limit"))
    if cursor:
        after = sa.tuple_(column, tie)
        bound = sa.tuple_(p("after_value", type_=column.type), p("after_id", type_=_M.id.type))
        query = query.where(after < bound if desc else after > bound)
    order_by = [column.desc(), tie.desc()] if desc else [column.asc(), tie.asc()]
    return query.order_by(*order_by).limit(p("limit"))


def list_models(session: Session, params: ModelListParams) -> Page:
    """One page of models matching ``params``; raises InvalidPageToken for a bad ``next``."""
    column, _ = _SORT_COLUMNS[params.sort]
    desc = params.order == "desc"
    cursor = decode_token(params.next, params.sort, params.order) if params.next else None
    unindexed = frozenset()
    if not _geometry_filters_are_selective(session, params, column.name):
        unindexed = frozenset(_indexed_geometry_filters(params)) - {column.name}
    values = _bind_values(params)
    filters = frozenset(values)
    limit = params.size + 1  # one extra row says whether a next page exists
    conn = session.connection()  # Core rows: the ORM layer adds nothing to a plain select
    rows: list[sa.Row] = []

    # Rows with a sort value, in (column, id) order; then the NULL tail in id order.
    if cursor is None or cursor[0] is not None:
        statement = _page_statement(params.sort, desc, False, cursor is not None, filters, unindexed)
        after = {"after_value": cursor[0], "after_id": cursor[1]} if cursor else {}
        rows = list(conn.execute(statement, {**values, **after, "limit": limit}))
    if params.sort in _NULLABLE_SORTS and len(rows) < limit:
        in_tail = cursor is not None and cursor[0] is None
        statement = _page_statement(params.sort, desc, True, in_tail, filters, unindexed)
        after = {"after_id": cursor[1]} if in_tail else {}
        rows.extend(conn.execute(statement, {**values, **after, "limit": limit - len(rows)}))

    more = len(rows) > params.size
    rows = rows[: params.size]
    next_token = None
    if more:
        last = rows[-1]._mapping
        next_token = encode_token(params.sort, params.order, last[params.sort], last["id"])
    return Page(rows=_SUMMARIES.validate_python([r._asdict() for r in rows]), next=next_token)


def iter_models(session: Session, params: ModelListParams, max_rows: int | None = None) -> Iterator[ModelSummary]:
    """Every row of the query from ``params.next`` on, following the keyset pages (for CSV
    exports); stops after ``max_rows`` rows when given."""
    params = params.model_copy(update={"size": MAX_PAGE_SIZE})
    emitted = 0
    while True:
        page = list_models(session, params)
        for row in page.rows:
            if max_rows is not None and emitted >= max_rows:
                return
            emitted += 1
            yield row
        if not page.next:
            return
        params = params.model_copy(update={"next": page.next})


# --- one model ----------------------------------------------------------------------------

class ModelInfo(BaseModel):
    """The Hub facts about one model (or the snapshot's stand-ins for them)."""

    id: str
    author: str | None
    created_at: datetime | None
    last_modified: datetime | None
    sha: str | None
    downloads: int | None = Field(description="Hub downloads over the last 30 days, at the last refresh;"
                                              " null when unknown (snapshot models)")
    likes: int | None
    pipeline_tag: str | None
    library_name: str | None
    tags: list[str]
    gated: str | None
    num_parameters: int | None = Field(description="Disclosed total: the safetensors total or a published figure")
    parameters_source: str | None = Field(description="Where num_parameters came from: safetensors or published")
    active_parameters: int | None = Field(description="Mixture-of-experts models: the published active count")
    weight_dtypes: dict | None = Field(description="Parameters per safetensors dtype, from the listing")
    relation: str | None = Field(description="original, finetune, quantized, adapter or merge; null when unknown")
    base_models: list[str] | None = Field(description="The base model(s) the Hub lists")
    quant_method: str | None = Field(description="quantization_config.quant_method of the current config")
    quant_bits: int | None
    is_test_repo: bool
    lineage_warnings: list[str] | None
    organisation: str | None
    snapshot_meta: dict | None = Field(description="Snapshot entries: family, the sources of the release date, "
                                                   "parameter count and config, and notes")
    source: str = Field(description='"hub" (crawled) or "snapshot" (bundled notable-model snapshot)')
    release_date_confidence: str | None
    first_seen_at: datetime
    updated_at: datetime
    stats_refreshed_at: datetime | None


class ProvenanceItem(BaseModel):
    """Where one geometry value came from."""

    field: str
    value: Any = None
    source: str = Field(description="The config key path it was read from, or the rule that produced it")
    kind: Literal["disclosed", "derived", "default", "other"] = Field(
        description="disclosed: read from the config; derived: computed from other values; "
        "default: the family's default because the config is silent")


class OracleDetail(BaseModel):
    """transformers' reading of the current config, beside ours (``observatory.oracle``)."""

    status: Literal["agree", "disagree", "unsupported", "failed"] = Field(
        description="agree; disagree (the geometry is then uncertain: out of trends and headlines); unsupported "
                    "(remote code, or an architecture transformers lacks); failed (the oracle hung, crashed, ran "
                    "out of memory or raised: the reason says which)")
    reason: str | None = Field(description="disagree: every differing value, ours then transformers'; else why")
    transformers_version: str | None = Field(description="The transformers version that read the config")
    parser_version: int | None = Field(description="The parser version of the geometry it was compared with")
    differences: list[str] = Field(description="Deliberate differences (named, tested) the agreement relies on")
    query_heads: int | None
    layers: list[list[int]] | None = Field(
        description="Per cached layer, per generated token: [layer, K heads, K head dim, V heads, V head dim]")
    cross_layers: list[list[int]] | None = Field(
        description="Encoder-decoders, per source token: [layer, K heads, K head dim, V heads, V head dim]")
    elements_per_token: int | None = Field(description="K and V elements one generated token adds, all layers")
    cross_elements_per_source_token: int | None
    parameters: int | None = Field(description="Parameters of what transformers built (base model: no LM head, "
                                               "no vision or audio tower)")
    our_parameters: int | None = Field(description="Our estimate of that same part, for comparison")
    checked_at: datetime


class GeometryDetail(BaseModel):
    """The current geometry, as stored (and as the trends count it)."""

    revision_id: int
    parser_version: int
    derived_at: datetime
    model_type: str | None
    architectures: list[str]
    attention_kind: str
    is_hybrid: bool
    num_query_heads: int | None
    num_kv_heads: int | None
    group_size: GroupSize
    head_dim: int | None
    v_head_dim: int | None
    num_layers: int | None
    kv_layers: int | None
    sliding_window: int | None
    sliding_layers: int
    encoder_only: bool = Field(description="An encoder-only model (BERT and kin): no decode cache")
    is_encoder_decoder: bool
    cross_kv_elements_per_source_token: int | None = Field(
        description="Encoder-decoders: cross-attention cache elements per source token, all decoder layers")
    uncertain: bool = Field(description="Kept out of trends and headlines: an unknown layer type was counted as a "
                                        "full KV layer (an upper bound), or transformers reads the config otherwise")
    fingerprint: str | None = Field(description="Architecture fingerprint: identical architectures share it")
    params_estimate: int | None = Field(description="Total parameters estimated from the config")
    active_params_estimate: int | None
    params_scope: str | None = Field(None, description='What params_estimate covers: "whole checkpoint", or'
                                     ' "language model only" when the checkpoint holds towers it leaves out')
    params_uncounted: list[str] = Field(default_factory=list,
                                        description="Config sections whose weights params_estimate leaves out")
    chunked: bool
    hidden_size: int | None
    kv_lora_rank: int | None
    qk_rope_head_dim: int | None
    qk_nope_head_dim: int | None
    q_lora_rank: int | None
    kv_elements_per_token: int | None
    kv_bytes_per_token_bf16: int | None
    layer_kinds: list[str] | None = Field(None, description="Per layer: full, sliding, chunked, linear, ...")
    warnings: list[str]
    provenance: list[ProvenanceItem]
    oracle: OracleDetail | None = Field(None, description="transformers' reading beside ours; null until it ran")


class RevisionInfo(BaseModel):
    """One stored config.json; the raw text downloads from ``config_url``."""

    id: int
    sha: str
    fetched_at: datetime
    provenance: str = Field(description='"verbatim" (a real config.json) or "reconstructed" (published geometry)')
    source: str | None
    parse_status: str
    parse_error: str | None
    is_current: bool
    size_chars: int
    config_url: str


MAX_SIBLINGS = 20  # sibling ids a model record names


class ArchitectureInfo(BaseModel):
    fingerprint: str
    first_seen: bool = Field(description="True when this is the earliest stored model with this architecture")
    siblings: int = Field(description="Other stored models with the same fingerprint")
    sibling_ids: list[str] = Field(description=f"Up to {MAX_SIBLINGS} of them, earliest first")


class DerivativeCounts(BaseModel):
    finetune: int
    quantized: int
    adapter: int
    merge: int
    downloads: int = Field(description="Summed 30-day downloads of the derivatives whose count is known")
    downloads_unknown: int = Field(description="Derivatives whose download count is unknown")
    computed_at: datetime


def config_url(revision_id: int) -> str:
    return f"/api/v1/revisions/{revision_id}/config.json"


def _provenance_kind(source: str) -> str:
    prefix, sep, _ = source.partition(":")
    if not sep or not prefix.isalpha():
        return "disclosed"
    return prefix if prefix in ("derived", "default") else "other"


def _provenance(row: GeometryRow, geom: Geometry | None) -> list[ProvenanceItem]:
    stored = row.model_dump()
    derived = geom.to_dict() if geom is not None else {}
    items = []
    for name, source in (row.sources or {}).items():
        head, _, tail = name.partition(".")
        if name in stored:
            value = stored[name]
        elif tail and isinstance(derived.get(head), dict):
            value = derived[head].get(tail)
        else:
            value = derived.get(name)
        if isinstance(value, tuple):
            value = list(value)  # per-layer lists: the page folds them ("(linear ×3, full) ×12")
        items.append(ProvenanceItem(field=name, value=value, source=str(source), kind=_provenance_kind(str(source))))
    # Values no config states directly: say how they are computed.
    rules = {
        "attention_kind": "derived:MLA if kv_lora_rank, else K == H -> MHA, K == 1 -> MQA, else GQA",
        "group_size": "derived:num_query_heads/num_kv_heads",
        "kv_elements_per_token": "derived:sum over KV layers of K*(head_dim+v_head_dim), or the MLA latent",
        "kv_bytes_per_token_bf16": "derived:kv_elements_per_token*2",
    }
    for name, rule in rules.items():
        if name not in (row.sources or {}) and stored.get(name) is not None:
            items.append(ProvenanceItem(field=name, value=stored[name], source=rule, kind="derived"))
    return items


def current_derived(session: Session, model: HubModel) -> tuple[GeometryRow | None, Derived | None]:
    """The stored geometry row of the model's current revision, and that revision's config parsed
    again (its ``geometry`` for the KV and roofline arithmetic, its ``config`` for estimates)."""
    if model.current_revision_id is None:
        return None, None
    row = session.execute(
        sa.select(GeometryRow).where(GeometryRow.revision_id == model.current_revision_id)
    ).scalar_one_or_none()
    raw = session.execute(
        sa.select(ConfigRevision.raw_text).where(ConfigRevision.id == model.current_revision_id)
    ).scalar_one_or_none()
    return row, (derive(raw) if raw is not None and row is not None else None)


def current_geometry(session: Session, model: HubModel) -> tuple[GeometryRow | None, Geometry | None]:
    """The stored geometry row of the model's current revision, and the same config parsed
    again into a ``Geometry`` (None where it does not parse)."""
    row, derived = current_derived(session, model)
    return row, derived.geometry if derived is not None else None


@dataclass(frozen=True)
class StoredModel:
    """One model as the store holds it: its Hub facts, current geometry (as stored, and parsed
    again for arithmetic), every config revision, its architecture siblings and derivatives.
    ``estimate_key`` names everything the estimates derived from it depend on in the store (the
    store, the geometry row and when it was derived, the parameter counts): equal keys, equal
    estimates."""

    model: HubModel
    row: GeometryRow | None
    geom: Geometry | None
    info: ModelInfo
    geometry: GeometryDetail | None
    revisions: list[RevisionInfo]
    architecture: ArchitectureInfo | None
    derivatives: DerivativeCounts | None
    estimate_key: tuple | None = None

    @property
    def parameters(self) -> tuple[int | None, int | None]:
        return model_parameters(self.model, self.row)

    @property
    def has_cache(self) -> bool:
        return has_cache(self.geom)


@dataclass(frozen=True)
class _Parsed:
    """A current revision parsed again, with the geometry detail built from it."""

    geom: Geometry | None
    geometry: GeometryDetail


# A revision's text never changes and its geometry row changes only with a new derived_at, so a
# parse is kept per (store, revision, sha, derived_at); the model page then reads no config text.
# ~35 KB each (config dict, geometry, detail): 512 in ~18 MB per worker.
_PARSED: BoundedCache[_Parsed] = BoundedCache(512)


def _parsed(session: Session, store: str, row: GeometryRow, sha: str | None) -> _Parsed:
    def compute() -> _Parsed:
        raw = session.execute(sa.select(ConfigRevision.raw_text).where(ConfigRevision.id == row.revision_id)
                              ).scalar_one_or_none()
        derived = derive(raw) if raw is not None else None
        geom = derived.geometry if derived is not None else None
        scope = _params_scope(derived.config if derived is not None else None) if row.params_estimate else None
        return _Parsed(geom, GeometryDetail(**row.model_dump(exclude={"id", "model_id", "sources"}),
                                            layer_kinds=list(geom.layer_kinds) if geom is not None else None,
                                            provenance=_provenance(row, geom),
                                            params_scope=scope[0] if scope else None,
                                            params_uncounted=list(scope[1]) if scope else []))
    return _PARSED.get((store, row.revision_id, sha, row.id, row.derived_at, row.parser_version), compute)


def _revision_info(r, current_id: int | None) -> RevisionInfo:
    return RevisionInfo(id=r.id, sha=r.sha, fetched_at=r.fetched_at, provenance=r.provenance, source=r.source,
                        parse_status=r.parse_status, parse_error=r.parse_error, is_current=r.id == current_id,
                        size_chars=r.size_chars or 0, config_url=config_url(r.id))


@lru_cache(maxsize=1)
def _model_query() -> sa.Select:
    """``read_model``'s one query, built once (building and keying it cost more than running it)."""
    c = ConfigRevision.__table__.c
    current = ConfigRevision.__table__.alias("current")
    revision_count = sa.select(sa.func.count()).where(c.model_id == HubModel.id).scalar_subquery()
    return (
        sa.select(HubModel, GeometryRow, DerivativeStats, current.c.id, current.c.sha, current.c.fetched_at,
                  current.c.provenance, current.c.source, current.c.parse_status, current.c.parse_error,
                  sa.func.length(current.c.raw_text).label("size_chars"), revision_count.label("revision_count"))
        .select_from(HubModel)
        .outerjoin(GeometryRow, GeometryRow.revision_id == HubModel.current_revision_id)
        .outerjoin(current, current.c.id == HubModel.current_revision_id)
        .outerjoin(DerivativeStats, DerivativeStats.model_id == HubModel.id)
        .where(HubModel.id == sa.bindparam("model_id"))
    )


def read_model(session: Session, model_id: str) -> StoredModel | None:
    """The model page's stored data, or None when the store has no such model. ``model_id`` must be
    validated by the caller (``repo_ids.validate_repo_id``).

    One query reads the model, its current geometry, its current revision's facts, its
    derivative counts and how many revisions it has; the revision list is read only for a model
    with more than its current one, the siblings only for a fingerprinted geometry."""
    c = ConfigRevision.__table__.c
    found = session.execute(_model_query(), {"model_id": model_id}).first()
    if found is None:
        return None
    model, row = found.HubModel, found.GeometryRow
    if found.id is not None and found.revision_count == 1:
        revisions = [_revision_info(found, model.current_revision_id)]
    elif found.revision_count == 0:
        revisions = []
    else:
        revisions = [
            _revision_info(r, model.current_revision_id)
            for r in session.execute(
                sa.select(c.id, c.sha, c.fetched_at, c.provenance, c.source, c.parse_status, c.parse_error,
                          sa.func.length(c.raw_text).label("size_chars"))
                .where(c.model_id == model_id)
                .order_by(c.fetched_at.desc(), c.id.desc())
            )
        ]
    store = str(session.get_bind().url)
    parsed = _parsed(session, store, row, found.sha) if row is not None and found.id is not None else None
    geometry = parsed.geometry if parsed else None
    if geometry is not None:
        geometry = _with_oracle(session, row.revision_id, geometry)
    stats = found.DerivativeStats
    key = None
    if row is not None and parsed is not None:
        key = (store, row.revision_id, found.sha, row.id, row.derived_at, row.parser_version,
               model_parameters(model, row))
    return StoredModel(
        model=model, row=row, geom=parsed.geom if parsed else None,
        info=ModelInfo.model_validate(model.model_dump()),
        geometry=geometry,
        revisions=revisions,
        architecture=_architecture(session, model_id, row.fingerprint) if row is not None and row.fingerprint else None,
        derivatives=DerivativeCounts.model_validate(stats.model_dump()) if stats is not None else None,
        estimate_key=key,
    )


def _with_oracle(session: Session, revision_id: int, geometry: GeometryDetail) -> GeometryDetail:
    """The detail with the oracle's verdict; a disagreement makes it uncertain, with a warning naming
    both values. Read on every request: the oracle writes verdicts apart from the geometry row."""
    check = check_of(session, revision_id)
    if check is None:
        return geometry
    oracle = OracleDetail.model_validate(check.model_dump())
    update: dict = {"oracle": oracle}
    if oracle.status == "disagree":
        update.update(uncertain=True, warnings=[*geometry.warnings, oracle_warning(oracle)])
    return geometry.model_copy(update=update)


def oracle_warning(oracle: OracleDetail) -> str:
    who = " ".join(filter(None, ("transformers", oracle.transformers_version)))
    return (f"{who} reads this config otherwise: {oracle.reason}; "
            "the geometry is uncertain and left out of trends and headlines until a rule or a listed difference "
            "explains it")


def _params_scope(cfg: dict | None) -> tuple[str, tuple[str, ...]] | None:
    """What the stored estimate covers, read from the config again (pure and quick; not stored)."""
    if cfg is None:
        return None
    try:
        estimate = estimate_parameters(cfg)
    except ConfigError:
        return None
    return estimate.scope, estimate.uncounted


def model_parameters(model: HubModel, row: GeometryRow | None) -> tuple[int | None, int | None]:
    """(total, active) parameters: disclosed where known, else estimated from the config."""
    total = model.num_parameters if model.num_parameters is not None else (row.params_estimate if row else None)
    active = model.active_parameters if model.active_parameters is not None else (
        row.active_params_estimate if row else None)
    return total, active if active != total else None


def _architecture(session: Session, model_id: str, fingerprint: str) -> ArchitectureInfo:
    """Stored models whose current geometry has the same fingerprint, earliest first."""
    query = (sa.select(_M.id, _M.created_at).select_from(HubModel.__table__)
             .join(GeometryRow.__table__, _G.revision_id == _M.current_revision_id)
             .where(_G.fingerprint == fingerprint))
    rows = session.execute(query.order_by(_M.created_at.is_(None), _M.created_at, _M.id)
                           .limit(MAX_SIBLINGS + 1)).all()
    total = session.execute(sa.select(sa.func.count()).select_from(query.subquery())).scalar_one()
    ids = [r.id for r in rows]
    return ArchitectureInfo(fingerprint=fingerprint, first_seen=bool(ids) and ids[0] == model_id,
                            siblings=total - 1, sibling_ids=[i for i in ids if i != model_id][:MAX_SIBLINGS])


def not_found_message(session: Session, model_id: str) -> str:
    """The 404 text for a model id, naming the closest stored ids when there are any."""
    near = similar_ids(session, model_id)
    hint = f"; did you mean {', '.join(near)}?" if near else ""
    return f"no model {model_id!r} in the store{hint}"


def similar_ids(session: Session, model_id: str, limit: int = 5) -> list[str]:
    """Stored ids a reader probably meant: the same name under any organisation (``gpt2`` ->
    ``openai-community/gpt2``), else ids containing the name. For 404 hints only."""
    name = model_id.rsplit("/", 1)[-1].lower()[:100]
    if not name:
        return []
    escaped = name.replace("/", "//").replace("%", "/%").replace("_", "/_")
    exact = session.execute(sa.select(_M.id).where(sa.func.lower(_M.id).like("%/" + escaped, escape="/"))
                            .order_by(_M.id).limit(limit)).scalars().all()
    if exact:
        return list(exact)
    return list(session.execute(sa.select(_M.id).where(_M.id.icontains(escaped, escape="/"))
                                .order_by(sa.func.length(_M.id), _M.id).limit(limit)).scalars().all())


def has_cache(geom: Geometry | None) -> bool:
    """The geometry keeps a per-token cache (some attention layer with K/V)."""
    return geom is not None and geom.kv_layers > 0 and geom.kv_elements_per_token > 0


def get_revision(session: Session, revision_id: int) -> ConfigRevision | None:
    """One stored config revision (with its verbatim text), or None."""
    return session.get(ConfigRevision, revision_id)


