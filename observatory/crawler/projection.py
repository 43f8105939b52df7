"""How far a crawl pass has come and how long the rest should take (pure).

The listing is read newest-first with no count of what lies below, so the fraction done is read
from dates: how much of the span from the first listed ``createdAt`` down to the pass's stop the
listing has passed. Models are not spread evenly over time (the Hub grows), so the fraction is
an estimate, and so is everything that follows from it; the output says "~".

The remaining time is the larger of two bounds: the pace so far, and the request budget (the
quota per window, ``hub.ratelimit.QUOTA``), which a first backfill reaches within minutes: a
pace measured in the first window's burst would otherwise promise far too much.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# Below this share of the span passed, an extrapolation is noise (the first chunk of a backfill
# to 2022 is a few minutes of a four-year span): no projection is shown ("—") rather than a wild one.
MIN_FRACTION = 0.01

# The request kinds hub.session counts, by the Hub's rate-limit bucket they are charged to.
KIND_BUCKET = {"listing": "api", "model_info": "api", "config": "resolvers", "other": "pages"}


@dataclass(frozen=True)
class Projection:
    fraction: float | None  # of the pass's date span passed; None: not known yet
    listed_total: int | None  # entries the whole pass should list
    rate: float  # listed per second so far
    remaining_s: float | None  # projected seconds left; None: not known yet
    bound: str  # what the projection is bound by: "pace" or "budget"


def project(counts: dict, elapsed_s: float, budget: dict[str, float | None]) -> Projection:
    """``counts`` as ``crawler.run`` reports them (seen, new, changed, failed, requests by kind,
    and the pass's ``first``, ``at`` and ``stop`` dates); ``budget``: requests per second allowed,
    by the Hub's bucket (api, resolvers, pages), None where unbounded."""
    seen = counts.get("seen", 0)
    rate = seen / elapsed_s if elapsed_s > 0 else 0.0
    fraction = _fraction(counts.get("first"), counts.get("at"), counts.get("stop"))
    if fraction is None or fraction < MIN_FRACTION or seen == 0:
        return Projection(fraction, None, rate, None, "pace")
    listed_total = max(seen, round(seen / fraction))
    left = listed_total - seen
    pace_s = left / rate if rate > 0 else None
    # At the budget: the requests still to make, at the measured cost per listed entry.
    made: dict[str, int] = {}
    for kind, n in (counts.get("requests") or {}).items():
        made[KIND_BUCKET.get(kind, "pages")] = made.get(KIND_BUCKET.get(kind, "pages"), 0) + n
    budget_s = 0.0
    for bucket, n in made.items():
        if allowed := budget.get(bucket):
            budget_s = max(budget_s, n / seen * left / allowed)
    if pace_s is None or budget_s > pace_s:
        return Projection(fraction, listed_total, rate, budget_s, "budget")
    return Projection(fraction, listed_total, rate, pace_s, "pace")


def _fraction(first: datetime | None, at: datetime | None, stop: datetime | None) -> float | None:
    if first is None or at is None or stop is None or first <= stop:
        return None
    return min(1.0, max(0.0, (first - at) / (first - stop))) or None


def duration(seconds: float | None) -> str:
    """3d04h, 5h02m, 12m30s, 45s; "—" when unknown."""
    if seconds is None:
        return "—"
    s = round(seconds)
    days, s = divmod(s, 86_400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{s:02d}s" if minutes else f"{s}s"
