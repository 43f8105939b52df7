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

import bisect
import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

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
    downloads: int


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


def weighted_quantiles(pairs: Sequence[tuple[float, float]], qs: Sequence[float]) -> list[float | None]:
    """Weighted quantiles of (value, weight) pairs (see the module docstring); ``None`` when the
    weights sum to 0."""
    items = sorted((v, w) for v, w in pairs if w > 0)
    if not items:
        return [None for _ in qs]
    cumulative = list(itertools.accumulate(w for _, w in items))
    total = cumulative[-1]
    out: list[float | None] = []
    for q in qs:
        target = q * total
        k = bisect.bisect_left(cumulative, target)
        k = min(k, len(items) - 1)
        if k > 0 and math.isclose(cumulative[k - 1], target, rel_tol=1e-12):
            k -= 1  # float round-off put the boundary one step late
        if math.isclose(cumulative[k], target, rel_tol=1e-12) and k + 1 < len(items):
            out.append((items[k][0] + items[k + 1][0]) / 2)
        else:
            out.append(float(items[k][0]))
    return out


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole > 0 else None


def _aggregate(period: str, start: date, weighting: str, rows: Sequence[TrendRow]) -> TrendPoint:
    by_downloads = weighting == "downloads"
    kind_weight: dict[str, float] = dict.fromkeys(KIND_BUCKETS, 0.0)
    g_pairs: list[tuple[float, float]] = []
    kv_pairs: list[tuple[float, float]] = []
    kv_by_class: dict[str, list[tuple[float, float]]] = defaultdict(list)
    class_counts: dict[str, int] = dict.fromkeys(SIZE_CLASSES, 0)
    total = 0.0
    g_over = 0.0
    for row in rows:
        w = float(max(row.downloads, 0)) if by_downloads else 1.0
        total += w
        kind_weight[kind_bucket(row.attention_kind, row.is_hybrid)] += w
        if row.group_size is not None:
            g_pairs.append((row.group_size, w))
            if row.group_size > G_TIPPING_POINT:
                g_over += w
        if row.kv_bytes_per_token:  # None (unknown) or 0 (no per-token cache) stay out
            kv_pairs.append((row.kv_bytes_per_token, w))
            cls = size_class(row.num_parameters)
            kv_by_class[cls].append((row.kv_bytes_per_token, w))
            class_counts[cls] += 1
    g_p25, g_median, g_p75 = weighted_quantiles(g_pairs, (0.25, 0.5, 0.75))
    (kv_median,) = weighted_quantiles(kv_pairs, (0.5,))
    g_weight = sum(w for _, w in g_pairs)
    return TrendPoint(
        period=period,
        period_start=start,
        weighting=weighting,
        count=len(rows),
        weight_total=total,
        shares={kind: _ratio(kind_weight[kind], total) for kind in KIND_BUCKETS},
        g_count=len(g_pairs),
        g_p25=g_p25,
        g_median=g_median,
        g_p75=g_p75,
        share_g_over_16=_ratio(g_over, g_weight),
        kv_count=len(kv_pairs),
        kv_median=kv_median,
        kv_by_size={
            cls: SizeClassStat(class_counts[cls], weighted_quantiles(kv_by_class[cls], (0.5,))[0])
            for cls in SIZE_CLASSES
        },
    )


def _empty(period: str, start: date, weighting: str) -> TrendPoint:
    return TrendPoint(
        period=period, period_start=start, weighting=weighting, count=0, weight_total=0.0,
        shares=dict.fromkeys(KIND_BUCKETS), g_count=0, g_p25=None, g_median=None, g_p75=None,
        share_g_over_16=None, kv_count=0, kv_median=None,
        kv_by_size={cls: SizeClassStat(0, None) for cls in SIZE_CLASSES},
    )


def group_by_period(rows: Iterable[TrendRow], period: str) -> dict[date, list[TrendRow]]:
    """Rows keyed by the start of their period (rows without ``created_at`` dropped)."""
    if period not in PERIODS:
        raise ValueError(f"unknown period {period!r}; expected one of {', '.join(PERIODS)}")
    groups: dict[date, list[TrendRow]] = defaultdict(list)
    for row in rows:
        if row.created_at is not None:
            groups[period_start(row.created_at, period)].append(row)
    return groups


def points_from_groups(groups: dict[date, list[TrendRow]], period: str, weighting: str) -> list[TrendPoint]:
    """One point per period from the first to the last group, empty periods included."""
    if weighting not in WEIGHTINGS:
        raise ValueError(f"unknown weighting {weighting!r}; expected one of {', '.join(WEIGHTINGS)}")
    if not groups:
        return []
    points = []
    start, last = min(groups), max(groups)
    while start <= last:
        rows = groups.get(start)
        points.append(_aggregate(period, start, weighting, rows) if rows else _empty(period, start, weighting))
        start = next_period(start, period)
    return points


def compute_trend_points(rows: Iterable[TrendRow], period: str = "month", weighting: str = "count") -> list[TrendPoint]:
    """The trend series of ``rows``: one ``TrendPoint`` per period, oldest first."""
    return points_from_groups(group_by_period(rows, period), period, weighting)
