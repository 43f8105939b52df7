"""Trend aggregation: plain rows in, one point per period out (pure: no database, no clock).

Definitions (the methodology page quotes these):

- **Population** is whatever rows the caller passes in; a model is counted in the period that
  contains its ``created_at`` (UTC). Rows without ``created_at`` are skipped: they have no period.
- **Periods** start on the 1st of the month (``month``), the Monday of the ISO week (``week``)
  or the 1st of January/April/July/October (``quarter``). Periods between the first and the
  last one that hold no model are returned with ``count == 0`` and every statistic ``None``, so
  a chart shows a gap rather than joining across it.
- **Weighting.** ``count``: every model weighs 1. ``downloads``: a model weighs its Hub
  download count (the 30-day figure at the last refresh, not the downloads it had in that
  period); models with 0 downloads weigh nothing, and a statistic whose weights sum to 0 is
  ``None``.
- **Kind buckets** partition the models, so the six shares sum to 1:
  ``none`` if the model has no attention layers at all (pure SSM/RNN); otherwise ``hybrid`` if
  its attention layers are mixed with non-attention layers (linear attention, Mamba, ...);
  otherwise its attention kind ``MHA``, ``MQA``, ``GQA`` or ``MLA``. A hybrid is therefore never
  counted as GQA in the shares, but its attention layers still have a group size, so it does
  count in the G statistics and in the KV statistics (its cache holds only attention layers).
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
  total parameters:
  ``<3B`` [0, 3e9), ``3-15B`` [3e9, 15e9), ``15-80B`` [15e9, 80e9), ``>80B`` [80e9, inf),
  ``unknown`` when the count is not known.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from datetime import date, datetime, timedelta

import numpy as np

PERIODS = ("month", "week", "quarter")
WEIGHTINGS = ("count", "downloads")
KIND_BUCKETS = ("MHA", "MQA", "GQA", "MLA", "hybrid", "none")
SIZE_CLASSES = ("<3B", "3-15B", "15-80B", ">80B", "unknown")
G_TIPPING_POINT = 16

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
    num_parameters: int | None
    downloads: int | None  # None: unknown


@dataclass(frozen=True, slots=True)
class SizeClassStat:
    count: int
    kv_median: float | None


@dataclass(frozen=True)
class TrendPoint:
    """The aggregate of one period. ``count`` is always the number of models; ``weight_total``
    is the sum of weights (equal to ``count`` when weighting by count)."""

    period: str
    period_start: date
    weighting: str
    count: int
    weight_total: float
    shares: dict[str, float | None]
    g_count: int
    g_p25: float | None
    g_median: float | None
    g_p75: float | None
    share_g_over_16: float | None
    kv_count: int
    kv_median: float | None
    kv_by_size: dict[str, SizeClassStat] = field(default_factory=dict)


def kind_bucket(attention_kind: str, is_hybrid: bool) -> str:
    """The one share bucket a model counts in (see the module docstring)."""
    if attention_kind == "none":
        return "none"
    if is_hybrid:
        return "hybrid"
    return attention_kind if attention_kind in KIND_BUCKETS else "none"


def size_class(num_parameters: int | None) -> str:
    if num_parameters is None or num_parameters <= 0:
        return "unknown"
    for bound, name in _SIZE_BOUNDS:
        if num_parameters < bound:
            return name
    return ">80B"


def period_start(when: datetime | date, period: str) -> date:
    day = when.date() if isinstance(when, datetime) else when
    if period == "month":
        return day.replace(day=1)
    if period == "week":
        return day - timedelta(days=day.weekday())
    if period == "quarter":
        return day.replace(month=(day.month - 1) // 3 * 3 + 1, day=1)
    raise ValueError(f"unknown period {period!r}; expected one of {', '.join(PERIODS)}")


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


@dataclass(frozen=True)
class TrendColumns:
    """Dated rows as parallel arrays, the form the aggregation works on (a million models
    aggregate in seconds). Build with ``from_rows`` or, from a query, ``from_values``."""

    day: np.ndarray  # int64: proleptic ordinal (date.toordinal) of the UTC creation day
    bucket: np.ndarray  # int64: index into KIND_BUCKETS
    group_size: np.ndarray  # float64: NaN where the model has no G
    kv: np.ndarray  # float64: KV bytes per token; NaN where unknown or no per-token cache
    size: np.ndarray  # int64: index into SIZE_CLASSES
    downloads: np.ndarray  # float64, >= 0; NaN where unknown (weighs nothing)

    def __len__(self) -> int:
        return len(self.day)

    def take(self, index: np.ndarray) -> TrendColumns:
        return TrendColumns(*(getattr(self, f.name)[index] for f in fields(self)))

    @classmethod
    def from_values(cls, *, days: Sequence[int], kinds: Sequence[str], hybrids: Sequence[bool],
                    group_sizes: Sequence[float | None], kv: Sequence[int | None],
                    num_parameters: Sequence[int | None], downloads: Sequence[int | None]) -> TrendColumns:
        """Columns from per-model values (``days`` as ordinals, every model dated)."""
        kinds_arr = np.asarray(kinds, dtype=object)
        bucket = np.full(len(kinds_arr), KIND_BUCKETS.index("none"), dtype=np.int64)
        for i, name in enumerate(KIND_BUCKETS[:4]):  # MHA, MQA, GQA, MLA
            bucket[kinds_arr == name] = i
        bucket[np.asarray(hybrids, dtype=bool) & (kinds_arr != "none")] = KIND_BUCKETS.index("hybrid")
        params = np.asarray([np.nan if p is None else p for p in num_parameters], dtype=float)
        size = np.digitize(params, [bound for bound, _ in _SIZE_BOUNDS]).astype(np.int64)
        size[~(params > 0)] = SIZE_CLASSES.index("unknown")  # NaN, 0 or negative
        kv_arr = np.asarray([np.nan if v is None else v for v in kv], dtype=float)
        kv_arr[kv_arr <= 0] = np.nan
        return cls(
            day=np.asarray(days, dtype=np.int64).reshape(-1), bucket=bucket,
            group_size=np.asarray([np.nan if g is None else g for g in group_sizes], dtype=float).reshape(-1),
            kv=kv_arr.reshape(-1), size=size.reshape(-1),
            downloads=np.clip(np.asarray([np.nan if d is None else d for d in downloads], dtype=float), 0,
                              None).reshape(-1),
        )

    @classmethod
    def from_rows(cls, rows: Iterable[TrendRow]) -> TrendColumns:
        """Columns of the rows that have a creation date (the others belong to no period)."""
        dated = [r for r in rows if r.created_at is not None]
        return cls.from_values(
            days=[_day(r.created_at).toordinal() for r in dated], kinds=[r.attention_kind for r in dated],
            hybrids=[r.is_hybrid for r in dated], group_sizes=[r.group_size for r in dated],
            kv=[r.kv_bytes_per_token for r in dated], num_parameters=[r.num_parameters for r in dated],
            downloads=[r.downloads for r in dated],
        )


def _day(when: datetime | date) -> date:
    return when.date() if isinstance(when, datetime) else when


_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


def day_ordinals(days: Sequence[str | date]) -> np.ndarray:
    """Day ordinals (``date.toordinal``) of ISO ``YYYY-MM-DD`` strings or dates/datetimes."""
    if len(days) and isinstance(days[0], str):
        return np.array(days, dtype="datetime64[D]").astype(np.int64) + _EPOCH_ORDINAL
    return np.asarray([_day(d).toordinal() for d in days], dtype=np.int64)


def _period_codes(days: np.ndarray, period: str) -> np.ndarray:
    """Consecutive integers per period: weeks since 0001-01-01 (a Monday), months or quarters since 1970."""
    if period == "week":
        return (days - 1) // 7
    months = (days - _EPOCH_ORDINAL).astype("datetime64[D]").astype("datetime64[M]").astype(np.int64)
    return months if period == "month" else months // 3


def _code_start(code: int, period: str) -> date:
    if period == "week":
        return date.fromordinal(code * 7 + 1)
    month0 = code if period == "month" else code * 3
    return date(1970 + month0 // 12, month0 % 12 + 1, 1)


def _ratio(part: float, whole: float) -> float | None:
    return float(part / whole) if whole > 0 else None


def _aggregate(cols: TrendColumns, period: str, start: date, weighting: str) -> TrendPoint:
    w = np.nan_to_num(cols.downloads) if weighting == "downloads" else np.ones(len(cols))
    total = float(w.sum())
    kind_weight = np.bincount(cols.bucket, weights=w, minlength=len(KIND_BUCKETS))
    has_g = ~np.isnan(cols.group_size)
    g, g_w = cols.group_size[has_g], w[has_g]
    g_p25, g_median, g_p75 = _quantiles(g, g_w, (0.25, 0.5, 0.75))
    has_kv = ~np.isnan(cols.kv)
    kv, kv_w, kv_size = cols.kv[has_kv], w[has_kv], cols.size[has_kv]
    (kv_median,) = _quantiles(kv, kv_w, (0.5,))
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
        shares={kind: _ratio(kind_weight[i], total) for i, kind in enumerate(KIND_BUCKETS)},
        g_count=len(g),
        g_p25=g_p25,
        g_median=g_median,
        g_p75=g_p75,
        share_g_over_16=_ratio(g_w[g > G_TIPPING_POINT].sum(), g_w.sum()),
        kv_count=len(kv),
        kv_median=kv_median,
        kv_by_size=by_size,
    )


def _empty(period: str, start: date, weighting: str) -> TrendPoint:
    return TrendPoint(
        period=period, period_start=start, weighting=weighting, count=0, weight_total=0.0,
        shares=dict.fromkeys(KIND_BUCKETS), g_count=0, g_p25=None, g_median=None, g_p75=None,
        share_g_over_16=None, kv_count=0, kv_median=None,
        kv_by_size={cls: SizeClassStat(0, None) for cls in SIZE_CLASSES},
    )


def _check(period: str, weightings: Iterable[str]) -> None:
    if period not in PERIODS:
        raise ValueError(f"unknown period {period!r}; expected one of {', '.join(PERIODS)}")
    for weighting in weightings:
        if weighting not in WEIGHTINGS:
            raise ValueError(f"unknown weighting {weighting!r}; expected one of {', '.join(WEIGHTINGS)}")


def trend_series(cols: TrendColumns, period: str, weightings: Sequence[str] = WEIGHTINGS) -> dict[str, list[TrendPoint]]:
    """For each weighting, one point per period from the first to the last, empty periods included."""
    _check(period, weightings)
    out: dict[str, list[TrendPoint]] = {weighting: [] for weighting in weightings}
    if not len(cols):
        return out
    codes = _period_codes(cols.day, period)
    order = np.argsort(codes, kind="stable")
    ordered = codes[order]
    bounds = [*np.flatnonzero(np.diff(ordered)) + 1, len(ordered)]
    groups, first = {}, 0
    for end in bounds:
        groups[int(ordered[first])] = cols.take(order[first:end])
        first = end
    for code in range(int(ordered[0]), int(ordered[-1]) + 1):
        start, group = _code_start(code, period), groups.get(code)
        for weighting in weightings:
            out[weighting].append(_aggregate(group, period, start, weighting) if group is not None
                                  else _empty(period, start, weighting))
    return out


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
