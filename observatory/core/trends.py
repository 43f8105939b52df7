"""Trend aggregation: plain rows in, one point per period out (pure: no database, no clock).

Definitions (the methodology page quotes these):

- **Population** is whatever rows the caller passes in, narrowed by ``population_mask`` /
  ``in_population`` to a lineage population: ``originals`` (relation original, not a test
  repo, at least ``min_params`` parameters, known or estimated; 1e9 by default), ``derivatives``
  (finetunes, quantizations, adapters, merges) or ``all``. A model is counted in the period
  that contains its ``created_at`` (UTC). Rows without ``created_at`` are skipped: they have no
  period. Periods between the first and the last one that hold no model are returned with
  ``count == 0`` and every statistic ``None``, so a chart shows a gap rather than joining across it.
- **Who is counted.** Encoder-only models (BERT and kin) never decode: they are counted apart
  (``encoder_only``) and in no statistic. Geometries marked ``uncertain`` (an unknown layer type
  counted as a full KV layer) are counted apart too (``uncertain``). ``count`` is the rest: the
  decoders a point's statistics describe. A point with ``count < THIN_N`` is **thin**: pages
  draw it hollow and leave it out of headline numbers, and alert rules never judge it.
- **Periods** start on the 1st of the month (``month``), the Monday of the ISO week (``week``)
  or the 1st of January/April/July/October (``quarter``).
- **Weighting.** ``count``: every model weighs 1. ``downloads``: a model weighs its Hub download
  count (the 30-day figure at the last refresh, not the downloads it had in that period).
  ``family_downloads``: a model weighs its own downloads plus those of every repository that
  names it as a base (its finetunes, quantizations, adapters and merges): the ecosystem's vote.
  A model whose weight is unknown (no download count: snapshot entries) weighs nothing and is
  counted in ``weight_unknown``; a statistic whose weights sum to 0 is ``None``.
- **Attention kind and stack type are two questions.** ``shares`` gives the attention kind of
  the attention layers (MHA, MQA, GQA, MLA) among models that have attention layers, hybrids
  included (a hybrid whose attention layers use GQA counts as GQA); ``attn_count`` is that
  denominator. ``stack_shares`` gives the stack type among all counted models: ``attention``
  (every mixing layer attends), ``hybrid`` (attention mixed with linear attention, Mamba,
  convolution, ...) or ``attention-free`` (no layer attends: pure SSM/RNN).
- **G** = query heads / KV heads, defined for MHA (1), MQA (H) and GQA; MLA and attention-free
  models have none and are left out of the G statistics. ``share_g_over_16`` is the weighted
  share of models *with a G* whose G is strictly greater than 16.
- **Quantiles** (also medians) are weighted and treat a weight w as w copies of the value, so
  "half of all downloads go to models with G at or below the median": with sorted values
  x_1..x_n, weights w_i, total W and cumulative C_k = w_1 + ... + w_k, the q-quantile is the
  first x_k with C_k >= q*W, averaged with x_{k+1} when C_k == q*W exactly (numpy's
  ``averaged_inverted_cdf``; the median of [1, 2] is 1.5, of [1, 1, 1, 2] is 1).
- **KV bytes per token** is the bf16 cache of one token over all KV layers (``kvcache``),
  taken over the models that keep a per-token cache (attention-free models, 0 bytes, are left
  out, as they are of G); ``kv_by_size`` gives its median per parameter-size class, classes by
  total parameters (disclosed, else estimated from the config):
  ``<3B`` [0, 3e9), ``3-15B`` [3e9, 15e9), ``15-80B`` [15e9, 80e9), ``>80B`` [80e9, inf),
  ``unknown`` when the count is not known.
- **Filling a TP = 8 node** (``share_tp8_fill``): among models with attention layers whose KV heads
  are known (``tp8_count``), the share whose heads shard over the 8 ranks of one node with no
  replication: every KV layer's K divisible by 8 (``kv_tp_max`` >= 8; see ``core.deployment``), or
  MLA, whose latent is stored once per sequence when attention runs data-parallel.
  ``share_tp8_mla`` is the MLA part of it. K >= 8 that 8 does not divide (K = 12, 20) does not
  fill the node: vLLM and Megatron-LM refuse that degree.
- **Default period**: the finest of month and quarter whose median period (empty ones
  included, from the first to the last) holds at least ``THIN_N`` models; else quarter.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import date, datetime, timedelta

import numpy as np

from observatory.core.deployment import NODE_TP

PERIODS = ("month", "week", "quarter")
WEIGHTINGS = ("count", "downloads", "family_downloads")
ATTENTION_KINDS = ("MHA", "MQA", "GQA", "MLA")
STACKS = ("attention", "hybrid", "attention-free")
# What an alert rule may watch the share of: an attention kind, or a stack type.
SHARE_KEYS = (*ATTENTION_KINDS, "hybrid", "attention-free")
SIZE_CLASSES = ("<3B", "3-15B", "15-80B", ">80B", "unknown")
G_TIPPING_POINT = 16
THIN_N = 5  # fewer models than this in a period: drawn hollow, never headlined or alerted on

POPULATIONS = ("originals", "all", "derivatives")
RELATIONS = ("original", "finetune", "quantized", "adapter", "merge")
DERIVED_RELATIONS = RELATIONS[1:]
ORIGINALS_MIN_PARAMS = 1_000_000_000

_SIZE_BOUNDS = ((3e9, "<3B"), (15e9, "3-15B"), (80e9, "15-80B"))


@dataclass(frozen=True, slots=True)
class TrendRow:
    """One model as the trend aggregation sees it (its current geometry only)."""

    model_id: str
    author: str | None
    model_type: str | None
    created_at: datetime | date | None
    attention_kind: str
    is_hybrid: bool
    group_size: float | None
    kv_bytes_per_token: int | None
    num_parameters: int | None  # disclosed, else estimated from the config; None: unknown
    downloads: int | None  # None: unknown
    encoder_only: bool = False
    uncertain: bool = False
    relation: str | None = None  # RELATIONS; None: unknown
    is_test_repo: bool = False
    family_downloads: int | None = None  # own downloads + those of every repo naming it as a base
    kv_tp_max: int | None = None  # largest TP degree sharding every KV layer's heads evenly; None: MLA/unknown


@dataclass(frozen=True, slots=True)
class SizeClassStat:
    count: int
    kv_median: float | None


@dataclass(frozen=True)
class TrendPoint:
    """The aggregate of one period. ``count`` is the number of models the statistics describe
    (decoders with a trusted geometry); ``weight_total`` the sum of their weights."""

    period: str
    period_start: date
    weighting: str
    count: int
    weight_total: float
    shares: dict[str, float | None]  # attention kind among models with attention layers
    g_count: int
    g_p25: float | None
    g_median: float | None
    g_p75: float | None
    share_g_over_16: float | None
    kv_count: int
    kv_median: float | None
    kv_by_size: dict[str, SizeClassStat] = field(default_factory=dict)
    attn_count: int = 0  # models with attention layers: the denominator of ``shares``
    stack_shares: dict[str, float | None] = field(default_factory=dict)
    weight_unknown: int = 0  # counted models whose weight is unknown (left out of weighted statistics)
    encoder_only: int = 0  # encoder-only models of the period, counted apart
    uncertain: int = 0  # uncertain geometries of the period, counted apart
    tp8_count: int = 0  # models with attention layers whose KV heads are known (MLA included)
    share_tp8_fill: float | None = None  # of those, the share filling a TP = 8 node without replication
    share_tp8_mla: float | None = None  # the MLA part of that share (it needs data-parallel attention)

    @property
    def thin(self) -> bool:
        return self.count < THIN_N

    @property
    def tp8_thin(self) -> bool:
        return self.tp8_count < THIN_N


def attention_stack(attention_kind: str, is_hybrid: bool) -> str:
    """The stack type of a model (see the module docstring)."""
    if attention_kind not in ATTENTION_KINDS:
        return "attention-free"
    return "hybrid" if is_hybrid else "attention"


def describe_kind(attention_kind: str, is_hybrid: bool) -> str:
    """One label for a person: "GQA", "GQA hybrid" or "attention-free"."""
    stack = attention_stack(attention_kind, is_hybrid)
    return stack if stack == "attention-free" else attention_kind + (" hybrid" if stack == "hybrid" else "")


def fills_tp8_node(row: TrendRow) -> bool:
    """One model's part in ``share_tp8_fill``: MLA, or every KV layer's K divisible by NODE_TP."""
    return row.attention_kind == "MLA" or (row.kv_tp_max or 0) >= NODE_TP


def size_class(num_parameters: int | None) -> str:
    if num_parameters is None or num_parameters <= 0:
        return "unknown"
    for bound, name in _SIZE_BOUNDS:
        if num_parameters < bound:
            return name
    return ">80B"


def in_population(row: TrendRow, lineage: str, min_params: float | None) -> bool:
    """Whether a row belongs to a lineage population (see the module docstring)."""
    if lineage == "originals" and (row.relation != "original" or row.is_test_repo):
        return False
    if lineage == "derivatives" and row.relation not in DERIVED_RELATIONS:
        return False
    if min_params:
        return row.num_parameters is not None and row.num_parameters >= min_params
    return True


def period_start(when: datetime | date, period: str) -> date:
    day = when.date() if isinstance(when, datetime) else when
    if period == "month":
        return day.replace(day=1)
    if period == "week":
        return day - timedelta(days=day.weekday())
    if period == "quarter":
        return day.replace(month=(day.month - 1) // 3 * 3 + 1, day=1)
    raise ValueError(f"unknown period {period!r}; expected one of {', '.join(PERIODS)}")


def period_label(start: date, period: str) -> str:
    """How the pages, the API and alert messages name a period: 2024-Q3, 2024-07, or a week's first day."""
    if period == "quarter":
        return f"{start.year}-Q{(start.month - 1) // 3 + 1}"
    if period == "week":
        return start.isoformat()
    return f"{start.year}-{start.month:02d}"


def next_period(start: date, period: str) -> date:
    if period == "week":
        return start + timedelta(days=7)
    months = 1 if period == "month" else 3
    month0 = start.month - 1 + months
    return date(start.year + month0 // 12, month0 % 12 + 1, 1)


def _quantiles(values: np.ndarray, weights: np.ndarray, qs: Sequence[float]) -> list[float | None]:
    """Weighted quantiles (see the module docstring) of parallel arrays; ``None`` when the
    weights sum to 0."""
    keep = weights > 0
    if not keep.any():
        return [None for _ in qs]
    values, weights = values[keep], weights[keep]
    order = np.argsort(values, kind="stable")
    values, cumulative = values[order], np.cumsum(weights[order])
    total, last = cumulative[-1], len(values) - 1
    out: list[float | None] = []
    for q in qs:
        target = q * total
        k = min(int(np.searchsorted(cumulative, target, side="left")), last)
        if k > 0 and math.isclose(cumulative[k - 1], target, rel_tol=1e-12):
            k -= 1  # float round-off put the boundary one step late
        if math.isclose(cumulative[k], target, rel_tol=1e-12) and k < last:
            out.append(float(values[k] + values[k + 1]) / 2)
        else:
            out.append(float(values[k]))
    return out


def weighted_quantiles(pairs: Sequence[tuple[float, float]], qs: Sequence[float]) -> list[float | None]:
    """Weighted quantiles of (value, weight) pairs (see the module docstring); ``None`` when the
    weights sum to 0."""
    if not pairs:
        return [None for _ in qs]
    values, weights = zip(*pairs)
    return _quantiles(np.asarray(values, dtype=float), np.asarray(weights, dtype=float), qs)


def _floats(values: Sequence[float | None]) -> np.ndarray:
    return np.asarray([np.nan if v is None else v for v in values], dtype=float).reshape(-1)


def _flags(values: Sequence[bool] | None, n: int) -> np.ndarray:
    return np.zeros(n, dtype=bool) if values is None else np.asarray(values, dtype=bool).reshape(-1)


@dataclass(frozen=True)
class TrendColumns:
    """Dated rows as parallel arrays, the form the aggregation works on (a million models
    aggregate in seconds). Build with ``from_rows`` or, from a query, ``from_values``."""

    day: np.ndarray  # int64: proleptic ordinal (date.toordinal) of the UTC creation day
    attn: np.ndarray  # int64: index into ATTENTION_KINDS; -1 without attention layers
    stack: np.ndarray  # int64: index into STACKS
    group_size: np.ndarray  # float64: NaN where the model has no G
    kv: np.ndarray  # float64: KV bytes per token; NaN where unknown or no per-token cache
    params: np.ndarray  # float64: parameters (disclosed, else estimated); NaN where unknown
    size: np.ndarray  # int64: index into SIZE_CLASSES
    downloads: np.ndarray  # float64, >= 0; NaN where unknown
    family_downloads: np.ndarray  # float64, >= 0; NaN where unknown
    relation: np.ndarray  # int64: index into RELATIONS; -1 where unknown
    test_repo: np.ndarray  # bool
    encoder_only: np.ndarray  # bool
    uncertain: np.ndarray  # bool
    kv_tp_max: np.ndarray  # float64: NaN where unknown (MLA, no KV layers, not derived yet)

    def __len__(self) -> int:
        return len(self.day)

    def take(self, index: np.ndarray) -> TrendColumns:
        return TrendColumns(*(getattr(self, f.name)[index] for f in fields(self)))

    @classmethod
    def from_values(cls, *, days: Sequence[int], kinds: Sequence[str], hybrids: Sequence[bool],
                    group_sizes: Sequence[float | None], kv: Sequence[int | None],
                    num_parameters: Sequence[int | None], downloads: Sequence[int | None],
                    family_downloads: Sequence[int | None] | None = None,
                    relations: Sequence[str | None] | None = None, test_repos: Sequence[bool] | None = None,
                    encoder_only: Sequence[bool] | None = None,
                    uncertain: Sequence[bool] | None = None,
                    kv_tp_max: Sequence[int | None] | None = None) -> TrendColumns:
        """Columns from per-model values (``days`` as ordinals, every model dated)."""
        n = len(kinds)
        kinds_arr = np.asarray(kinds, dtype=object).reshape(-1)
        attn = np.full(n, -1, dtype=np.int64)
        for i, name in enumerate(ATTENTION_KINDS):
            attn[kinds_arr == name] = i
        stack = np.where(attn < 0, STACKS.index("attention-free"),
                         np.where(_flags(hybrids, n), STACKS.index("hybrid"), STACKS.index("attention")))
        params = _floats(num_parameters)
        size = np.digitize(params, [bound for bound, _ in _SIZE_BOUNDS]).astype(np.int64)
        size[~(params > 0)] = SIZE_CLASSES.index("unknown")  # NaN, 0 or negative
        kv_arr = _floats(kv)
        kv_arr[kv_arr <= 0] = np.nan
        rel = np.full(n, -1, dtype=np.int64)
        if relations is not None:
            rel_arr = np.asarray(relations, dtype=object).reshape(-1)
            for i, name in enumerate(RELATIONS):
                rel[rel_arr == name] = i
        return cls(
            day=np.asarray(days, dtype=np.int64).reshape(-1), attn=attn, stack=stack.astype(np.int64),
            group_size=_floats(group_sizes), kv=kv_arr, params=params, size=size,
            downloads=np.clip(_floats(downloads), 0, None),
            family_downloads=np.clip(_floats(family_downloads if family_downloads is not None else [None] * n),
                                     0, None),
            relation=rel, test_repo=_flags(test_repos, n), encoder_only=_flags(encoder_only, n),
            uncertain=_flags(uncertain, n),
            kv_tp_max=_floats(kv_tp_max if kv_tp_max is not None else [None] * n),
        )

    @classmethod
    def from_rows(cls, rows: Iterable[TrendRow]) -> TrendColumns:
        """Columns of the rows that have a creation date (the others belong to no period)."""
        dated = [r for r in rows if r.created_at is not None]
        return cls.from_values(
            days=[_day(r.created_at).toordinal() for r in dated], kinds=[r.attention_kind for r in dated],
            hybrids=[r.is_hybrid for r in dated], group_sizes=[r.group_size for r in dated],
            kv=[r.kv_bytes_per_token for r in dated], num_parameters=[r.num_parameters for r in dated],
            downloads=[r.downloads for r in dated], family_downloads=[r.family_downloads for r in dated],
            relations=[r.relation for r in dated], test_repos=[r.is_test_repo for r in dated],
            encoder_only=[r.encoder_only for r in dated], uncertain=[r.uncertain for r in dated],
            kv_tp_max=[r.kv_tp_max for r in dated],
        )


def population_mask(cols: TrendColumns, lineage: str, min_params: float | None) -> np.ndarray:
    """Which columns' models belong to a lineage population (``in_population`` on arrays)."""
    if lineage not in POPULATIONS:
        raise ValueError(f"unknown population {lineage!r}; expected one of {', '.join(POPULATIONS)}")
    keep = np.ones(len(cols), dtype=bool)
    if lineage == "originals":
        keep &= (cols.relation == RELATIONS.index("original")) & ~cols.test_repo
    elif lineage == "derivatives":
        keep &= cols.relation >= 1
    if min_params:
        keep &= cols.params >= min_params  # NaN compares False: unknown size is not "at least"
    return keep


def _day(when: datetime | date) -> date:
    return when.date() if isinstance(when, datetime) else when


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


def day_ordinals(days: Sequence[str | date]) -> np.ndarray:
    """Day ordinals (``date.toordinal``) of ISO ``YYYY-MM-DD`` strings or dates/datetimes."""
    if len(days) and isinstance(days[0], str):
        return np.array(days, dtype="datetime64[D]").astype(np.int64) + _EPOCH_ORDINAL
    return np.asarray([_day(d).toordinal() for d in days], dtype=np.int64)


def period_codes(days: np.ndarray, period: str) -> np.ndarray:
    """Consecutive integers per period: weeks since 0001-01-01 (a Monday), months or quarters since 1970."""
    if period == "week":
        return (days - 1) // 7
    months = (days - _EPOCH_ORDINAL).astype("datetime64[D]").astype("datetime64[M]").astype(np.int64)
    return months if period == "month" else months // 3


def code_start(code: int, period: str) -> date:
    if period == "week":
        return date.fromordinal(code * 7 + 1)
    month0 = code if period == "month" else code * 3
    return date(1970 + month0 // 12, month0 % 12 + 1, 1)


def _ratio(part: float, whole: float) -> float | None:
    return float(part / whole) if whole > 0 else None


def _weights(cols: TrendColumns, weighting: str) -> np.ndarray:
    """Per-model weights; NaN where the weight is unknown."""
    if weighting == "downloads":
        return cols.downloads
    if weighting == "family_downloads":
        return cols.family_downloads
    return np.ones(len(cols))


def _aggregate(cols: TrendColumns, period: str, start: date, weighting: str) -> TrendPoint:
    encoder = cols.encoder_only
    uncertain = cols.uncertain & ~encoder
    cols = cols.take(np.flatnonzero(~encoder & ~uncertain))
    raw = _weights(cols, weighting)
    unknown = np.isnan(raw)
    w = np.where(unknown, 0.0, raw)
    total = float(w.sum())
    stack_weight = np.bincount(cols.stack, weights=w, minlength=len(STACKS))
    attends = cols.attn >= 0
    attn_weight = np.bincount(cols.attn[attends], weights=w[attends], minlength=len(ATTENTION_KINDS))
    attn_total = float(w[attends].sum())
    has_g = ~np.isnan(cols.group_size)
    g, g_w = cols.group_size[has_g], w[has_g]
    g_p25, g_median, g_p75 = _quantiles(g, g_w, (0.25, 0.5, 0.75))
    has_kv = ~np.isnan(cols.kv)
    kv, kv_w, kv_size = cols.kv[has_kv], w[has_kv], cols.size[has_kv]
    (kv_median,) = _quantiles(kv, kv_w, (0.5,))
    mla = cols.attn == ATTENTION_KINDS.index("MLA")
    judged = attends & (mla | ~np.isnan(cols.kv_tp_max))
    fills = judged & (mla | (cols.kv_tp_max >= NODE_TP))  # NaN compares False
    judged_weight = float(w[judged].sum())
    by_size = {}
    for i, cls in enumerate(SIZE_CLASSES):
        in_class = kv_size == i
        by_size[cls] = SizeClassStat(int(in_class.sum()), _quantiles(kv[in_class], kv_w[in_class], (0.5,))[0])
    return TrendPoint(
        period=period,
        period_start=start,
        weighting=weighting,
        count=len(cols),
        weight_total=total,
        shares={kind: _ratio(attn_weight[i], attn_total) for i, kind in enumerate(ATTENTION_KINDS)},
        g_count=len(g),
        g_p25=g_p25,
        g_median=g_median,
        g_p75=g_p75,
        share_g_over_16=_ratio(g_w[g > G_TIPPING_POINT].sum(), g_w.sum()),
        kv_count=len(kv),
        kv_median=kv_median,
        kv_by_size=by_size,
        attn_count=int(attends.sum()),
        stack_shares={stack: _ratio(stack_weight[i], total) for i, stack in enumerate(STACKS)},
        weight_unknown=int(unknown.sum()),
        encoder_only=int(encoder.sum()),
        uncertain=int(uncertain.sum()),
        tp8_count=int(judged.sum()),
        share_tp8_fill=_ratio(w[fills].sum(), judged_weight),
        share_tp8_mla=_ratio(w[judged & mla].sum(), judged_weight),
    )


def _empty(period: str, start: date, weighting: str) -> TrendPoint:
    return TrendPoint(
        period=period, period_start=start, weighting=weighting, count=0, weight_total=0.0,
        shares=dict.fromkeys(ATTENTION_KINDS), g_count=0, g_p25=None, g_median=None, g_p75=None,
        share_g_over_16=None, kv_count=0, kv_median=None,
        kv_by_size={cls: SizeClassStat(0, None) for cls in SIZE_CLASSES},
        stack_shares=dict.fromkeys(STACKS),
    )


def _check(period: str, weightings: Iterable[str]) -> None:
    if period not in PERIODS:
        raise ValueError(f"unknown period {period!r}; expected one of {', '.join(PERIODS)}")
    for weighting in weightings:
        if weighting not in WEIGHTINGS:
            raise ValueError(f"unknown weighting {weighting!r}; expected one of {', '.join(WEIGHTINGS)}")


def _groups(cols: TrendColumns, codes: np.ndarray) -> dict[int, TrendColumns]:
    """The columns split by period code (one ``take`` per code present)."""
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    bounds = [*np.flatnonzero(np.diff(ordered)) + 1, len(ordered)]
    groups, first = {}, 0
    for end in bounds:
        groups[int(ordered[first])] = cols.take(order[first:end])
        first = end
    return groups


def period_points(cols: TrendColumns, period: str, codes: Iterable[int],
                  weightings: Sequence[str] = WEIGHTINGS) -> dict[str, dict[int, TrendPoint]]:
    """For each weighting, the point of each period code in ``codes`` (an empty point where no
    model of ``cols`` falls), keyed by code. Codes come from ``period_codes``; ``cols`` must hold
    every model of those periods (others are ignored)."""
    _check(period, weightings)
    groups = _groups(cols, period_codes(cols.day, period)) if len(cols) else {}
    out: dict[str, dict[int, TrendPoint]] = {weighting: {} for weighting in weightings}
    for code in codes:
        start, group = code_start(code, period), groups.get(code)
        for weighting in weightings:
            out[weighting][code] = (_aggregate(group, period, start, weighting) if group is not None
                                    else _empty(period, start, weighting))
    return out


def trend_series(cols: TrendColumns, period: str, weightings: Sequence[str] = WEIGHTINGS) -> dict[str, list[TrendPoint]]:
    """For each weighting, one point per period from the first to the last, empty periods included."""
    _check(period, weightings)
    if not len(cols):
        return {weighting: [] for weighting in weightings}
    codes = period_codes(cols.day, period)
    by_code = period_points(cols, period, range(int(codes.min()), int(codes.max()) + 1), weightings)
    return {weighting: list(points.values()) for weighting, points in by_code.items()}


def default_period(month_counts: Sequence[int]) -> str:
    """Month when the median month (empty ones included, first to last) holds at least THIN_N
    models; else quarter, the coarsest period offered."""
    return "month" if month_counts and float(np.median(month_counts)) >= THIN_N else "quarter"


def group_by_period(rows: Iterable[TrendRow], period: str) -> dict[date, list[TrendRow]]:
    """Rows keyed by the start of their period (rows without ``created_at`` dropped)."""
    _check(period, ())
    groups: dict[date, list[TrendRow]] = defaultdict(list)
    for row in rows:
        if row.created_at is not None:
            groups[period_start(row.created_at, period)].append(row)
    return groups


def points_from_groups(groups: dict[date, list[TrendRow]], period: str, weighting: str) -> list[TrendPoint]:
    """The points of rows already grouped by ``group_by_period`` (same as ``compute_trend_points``)."""
    return compute_trend_points([row for rows in groups.values() for row in rows], period, weighting)


def compute_trend_points(rows: Iterable[TrendRow], period: str = "month", weighting: str = "count") -> list[TrendPoint]:
    """The trend series of ``rows``: one ``TrendPoint`` per period, oldest first."""
    _check(period, (weighting,))
    return trend_series(TrendColumns.from_rows(rows), period, (weighting,))[weighting]
