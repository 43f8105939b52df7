"""The research table: quality against KV-cache compression as the papers report it.

The data is ``observatory/catalog/data/research.json`` (every row with its paper, table and page); this
module checks it and adds what the site derives from it, labelled as derived:

- ``quality`` (the value shown): the paper's own aggregate, else the mean of the listed scores;
- ``kv_bytes_per_token``: as printed, else the printed element count x 2 bytes (16-bit);
- ``kv_ratio``: KV per token over the baseline row's (1 for a baseline);
- ``quality_change``: (quality - baseline) / baseline, signed so that positive is better
  (perplexity falls when quality rises).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from observatory.catalog.files import read_json

RESEARCH_PATH = Path(__file__).parent / "data" / "research.json"
ELEMENT_BYTES = 2  # the papers' caches are 16-bit


class ResearchDataError(ValueError):
    """The research file is malformed; the message names the row and field."""


def _need(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise ResearchDataError(f"{where}: {message}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def parse_research(data: Any) -> dict:
    """Check a decoded research file and return papers and rows with the derived fields."""
    _need(isinstance(data, dict), "research", "must be an object with 'papers' and 'rows'")
    papers, rows = data.get("papers"), data.get("rows")
    _need(isinstance(papers, dict) and papers, "research", "'papers' must be a non-empty object")
    _need(isinstance(rows, list) and rows, "research", "'rows' must be a non-empty list")
    for key, paper in papers.items():
        for field in ("short", "title", "authors", "url"):
            _need(isinstance(paper.get(field), str) and paper[field], f"paper {key!r}", f"{field} is required")
        _need(paper["url"].startswith("https://"), f"paper {key!r}", "url must be https://")
        _need(isinstance(paper.get("year"), int), f"paper {key!r}", "year must be an integer")
    by_id: dict[str, dict] = {}
    for index, row in enumerate(rows):
        where = f"row #{index}"
        _need(isinstance(row, dict), where, "not an object")
        where = f"row {row.get('id', index)!r}"
        for field in ("id", "paper", "table", "variant", "attention", "baseline", "setting"):
            _need(isinstance(row.get(field), str) and row[field], where, f"{field} is required")
        _need(row["id"] not in by_id, where, "duplicate id")
        _need(row["paper"] in papers, where, f"paper {row['paper']!r} is not in 'papers'")
        page = row.get("page")
        _need((isinstance(page, int) and page > 0) or (page is None and row.get("page_note")), where,
              "page must be a positive integer, or null with a page_note saying why")
        quality = row.get("quality")
        _need(isinstance(quality, dict) and isinstance(quality.get("metric"), str), where, "quality.metric is required")
        _need(quality.get("value") is None or _number(quality["value"]), where, "quality.value must be a number or null")
        _need(isinstance(quality.get("higher_is_better"), bool), where, "quality.higher_is_better must be true or false")
        scores = row.get("scores")
        _need(isinstance(scores, dict) and all(_number(v) for v in scores.values()), where,
              "scores must map names to numbers")
        kv = row.get("kv")
        _need(isinstance(kv, dict) and isinstance(kv.get("basis"), str) and kv["basis"], where, "kv.basis is required")
        for field in ("bytes_per_token", "elements_per_token"):
            _need(kv.get(field) is None or (_number(kv[field]) and kv[field] > 0), where,
                  f"kv.{field} must be a positive number or null")
        by_id[row["id"]] = row
    for row in rows:
        _need(row["baseline"] in by_id, f"row {row['id']!r}", f"baseline {row['baseline']!r} is not a row")
    return {"description": data.get("description", ""), "papers": papers,
            "rows": [_derive(row, by_id[row["baseline"]], papers[row["paper"]]) for row in rows]}


def _quality(row: dict) -> tuple[float | None, bool]:
    """(value, derived): the paper's aggregate, else the mean of the scores."""
    value = row["quality"].get("value")
    if value is not None:
        return value, False
    scores = list(row["scores"].values())
    return (sum(scores) / len(scores), True) if scores else (None, False)


def _kv_bytes(row: dict) -> int | float | None:
    kv = row["kv"]
    if kv.get("bytes_per_token") is not None:
        return kv["bytes_per_token"]
    if kv.get("elements_per_token") is not None:
        return kv["elements_per_token"] * ELEMENT_BYTES
    return None


def _derive(row: dict, baseline: dict, paper: dict) -> dict:
    quality, derived = _quality(row)
    base_quality, _ = _quality(baseline)
    kv_bytes, base_bytes = _kv_bytes(row), _kv_bytes(baseline)
    if row is baseline:
        ratio = 1.0
    else:
        ratio = kv_bytes / base_bytes if kv_bytes is not None and base_bytes else None
    change = 0.0 if row is baseline and quality is not None else None
    if change is None and quality is not None and base_quality:
        change = (quality - base_quality) / base_quality * (1 if row["quality"]["higher_is_better"] else -1)
    return {"page_note": None, "speed": None, **row, "paper_short": paper["short"], "paper_title": paper["title"], "paper_url": paper["url"], "paper_year": paper["year"],
            "quality_value": quality, "quality_derived": derived, "quality_metric": row["quality"]["metric"],
            "quality_n": len(row["scores"]) if derived else row["quality"].get("n"),
            "kv_bytes_per_token": kv_bytes, "kv_ratio": ratio, "quality_change": change}


@lru_cache
def load_research(path: Path = RESEARCH_PATH) -> dict:
    return parse_research(read_json(path, ResearchDataError, "research table"))
