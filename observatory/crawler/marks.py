"""Where a pass stops and how its marks move (pure).

A scope's ``created_mark`` is a high-water mark: every in-scope model created in
``[floor, created_mark]`` is stored (or has its failure recorded). A run lists newest-first and
stops below the mark; only a pass that got all the way down moves the mark, to the newest
``createdAt`` it saw, and only after everything it fetched is committed. A pass cut short
(killed, rate limited, out of budget) leaves the mark where it was, so the next run reads the
same range again and skips what is already stored.

A date beyond the crawl's own clock (plus a tolerance for clock skew) is the listing's word, not
a fact: the model is stored with it, but it never moves a mark (a repo dated 2030 would otherwise
hold every later model back until 2030) nor bounds a pass (``trusted``).

The stop is ``overlap`` below the mark: the Hub's listing is an index that can show a repo
late, with a ``createdAt`` older than repos already listed. Re-reading a margin costs listing
entries only; they are skipped by sha without a request.
"""

from __future__ import annotations

from datetime import datetime, timedelta


def created_stop(*, mark: datetime | None, floor: datetime | None, since: datetime | None,
                 default_since: datetime, overlap: timedelta) -> datetime:
    """The createdAt below which this pass stops listing.

    ``since`` (from the command line) bounds a first run and, when older than the scope's
    ``floor``, extends coverage backwards; it never moves the stop above the mark, which would
    leave a gap. A ``since`` inside the covered range ``[floor, mark]`` changes nothing: those
    models are stored, and a routine ``--since 7d`` would otherwise re-list the whole covered
    range on every run (issue 26). A scope with no floor (stored before floors were kept) reads
    back to ``since`` once; the pass then records it as the floor.
    A first run interrupted before it finished keeps the bound it started with (``floor``).
    """
    if mark is not None:
        stop = mark - overlap
        if floor is not None:  # the overlap never reaches below what the scope covers
            stop = max(stop, floor)
        if since is not None and (floor is None or since < floor):
            return min(stop, since)
        return stop
    if since is not None:
        return since
    return floor if floor is not None else default_since


def modified_stop(mark: datetime | None, overlap: timedelta) -> datetime | None:
    """The lastModified below which the change pass stops; None: no change pass yet."""
    return None if mark is None else mark - overlap


def advance(mark: datetime | None, top: datetime | None) -> datetime | None:
    """A mark never moves backwards."""
    if mark is None:
        return top
    if top is None:
        return mark
    return max(mark, top)


def extend_floor(floor: datetime | None, stop: datetime | None) -> datetime | None:
    if floor is None:
        return stop
    if stop is None:
        return floor
    return min(floor, stop)


def below(value: datetime | None, stop: datetime | None) -> bool:
    """True when a listed date is older than the stop (entries without a date never stop a pass)."""
    return value is not None and stop is not None and value < stop


def trusted(value: datetime | None, horizon: datetime) -> datetime | None:
    """``value`` if it can move a mark: not after ``horizon`` (the crawl's clock plus a tolerance)."""
    return None if value is None or value > horizon else value
