"""The price history of hosted inference: ``observatory/catalog/data/prices.json``, checked on load.

Every row names its provider, model, whether the weights are open, the USD price per million
input and output tokens, its date with what that date is of (``date_kind``: the day the price took
effect, or only a day a page listed it) and how that was established, and the page it was read
from. The file states its currency and unit once; loading refuses any other.
"""

from __future__ import annotations

from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any

from observatory.catalog.files import read_json

PRICES_PATH = Path(__file__).parent / "data" / "prices.json"
CURRENCY = "USD"
UNIT = "per 1,000,000 tokens"
DATE_KINDS = ("took effect", "listed")


class PriceDataError(ValueError):
    """The price file is malformed; the message names the row and field."""


def _need(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise PriceDataError(f"{where}: {message}")


def parse_prices(data: Any) -> dict:
    """Check a decoded price file; rows come back sorted by date, with ``date`` as a ``date``."""
    _need(isinstance(data, dict), "prices", "must be an object with currency, unit and rows")
    _need(data.get("currency") == CURRENCY, "prices", f"currency must be {CURRENCY!r}, got {data.get('currency')!r}")
    _need(data.get("unit") == UNIT, "prices", f"unit must be {UNIT!r}, got {data.get('unit')!r}")
    rows = data.get("rows")
    _need(isinstance(rows, list) and rows, "prices", "'rows' must be a non-empty list")
    seen: set[str] = set()
    out = []
    for index, row in enumerate(rows):
        where = f"row #{index}"
        _need(isinstance(row, dict), where, "not an object")
        where = f"row {row.get('id', index)!r}"
        for field in ("id", "provider", "model", "date_basis", "source_url", "source_note"):
            _need(isinstance(row.get(field), str) and row[field].strip(), where, f"{field} is required")
        _need(row["id"] not in seen, where, "duplicate id")
        seen.add(row["id"])
        _need(row["source_url"].startswith("https://"), where, "source_url must be https://")
        _need(isinstance(row.get("open_weights"), bool), where, "open_weights must be true or false")
        _need(row.get("date_kind") in DATE_KINDS, where, f"date_kind must be one of {', '.join(DATE_KINDS)}")
        for field in ("usd_per_1m_input", "usd_per_1m_output"):
            value = row.get(field)
            _need(isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 10_000, where,
                  f"{field} must be a positive number of USD per 1M tokens, got {value!r}")
        try:
            day = date.fromisoformat(row.get("date"))
        except (TypeError, ValueError):
            raise PriceDataError(f"{where}: date must be an ISO date, got {row.get('date')!r}") from None
        out.append({"price_basis": None, **row, "date": day, "currency": CURRENCY, "unit": UNIT})
    out.sort(key=lambda r: (r["date"], r["id"]))
    return {"currency": CURRENCY, "unit": UNIT, "description": data.get("description", ""), "rows": out}


@lru_cache
def load_prices(path: Path = PRICES_PATH) -> dict:
    return parse_prices(read_json(path, PriceDataError, "price history"))
