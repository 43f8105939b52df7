"""Listing models newest-first: ``GET /api/models`` page by page, under the crawler's policy.

The pages are fetched here rather than by ``HfApi.list_models``, whose paging retries through
huggingface_hub's ``http_backoff``: it sleeps whatever ``Retry-After`` says (plus 1 s) with no cap
and no way to stop it, so a 429 with ``Retry-After: 100000`` on the listing froze the crawler
and its process (issue 14). The request is the one ``list_models`` sends (same query, same
headers, one request per page, the next page from the ``Link`` header, hub-api.md §1.2-1.3),
each item is parsed by huggingface_hub's own ``ModelInfo``, and every page goes through
``policy.send``. A next-page link to another host is refused, as a redirect would be.

``expand`` names every field we read: with ``expand`` the Hub returns only ``id`` plus the
listed properties (hub-api.md §1.5), so leaving one out silently yields ``None``. ``siblings``
tells us whether a repo has a config.json at all (no request wasted on repos without one);
``sha`` pins the commit whose config we fetch and tells us whether anything changed.

No ``limit`` is sent unless asked for: the Hub's own page size is used, and the crawler stops
paging itself, at its mark (the listing is lazy: a page is requested only when reached).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

import httpx2
from huggingface_hub.errors import HfHubHTTPError
from huggingface_hub.hf_api import ModelInfo
from huggingface_hub.utils import hf_raise_for_status, parse_datetime

from observatory.hub.files import hub_headers
from observatory.hub.policy import RateLimited, RedirectRefused, same_origin, send
from observatory.hub.ratelimit import server_wait
from observatory.settings import Settings

# baseModels and safetensors (lineage and the parameter count) cost nothing extra: listing fields.
EXPAND = ["createdAt", "lastModified", "sha", "siblings", "gated", "downloads", "likes", "tags",
          "pipeline_tag", "library_name", "baseModels", "safetensors"]
# Read from the raw item, not through ModelInfo: huggingface_hub raises KeyError on a safetensors
# object missing either key, which would end the whole page; we keep a malformed value as unknown.
RAW_KEYS = ("baseModels", "safetensors")

class ListingError(ValueError):
    """A listing page that is not what the Hub sends: not a JSON list of models."""


# How the Hub can end a listing that is no bug of ours: refusals, broken pages, links elsewhere,
# timeouts and dropped connections that outlasted the retries.
LISTING_FAILURES = (HfHubHTTPError, ListingError, RedirectRefused, httpx2.TimeoutException, httpx2.TransportError)

SortKey = Literal["created_at", "last_modified", "downloads"]


@dataclass(frozen=True)
class Listed:
    """One listing entry, reduced to what the crawler uses. ``id`` is still untrusted."""

    id: str
    created_at: datetime | None
    last_modified: datetime | None
    sha: str | None
    files: tuple[str, ...] | None  # None when the listing did not say
    gated: str  # "false" | "auto" | "manual"
    downloads: int | None  # None: the listing did not say
    likes: int | None
    tags: tuple[str, ...]
    pipeline_tag: str | None
    library_name: str | None
    base_models_raw: Any = None  # the listing's baseModels value, untrusted (None: no base declared)
    safetensors_raw: Any = None  # the listing's safetensors value, untrusted (None: not given)

    @property
    def facts(self) -> tuple[Any, Any]:
        """What ``crawler.store.update_facts`` reads: the lineage and parameter-count values."""
        return self.base_models_raw, self.safetensors_raw

    @property
    def has_config(self) -> bool | None:
        return None if self.files is None else "config.json" in self.files

    def model_fields(self) -> dict:
        """The HubModel columns this entry sets; "hub" marks the row as crawled (crawled data wins
        over the bundled snapshot, which then leaves the row's fields alone)."""
        return {
            "source": "hub",
            "created_at": self.created_at,
            "last_modified": self.last_modified,
            "downloads": self.downloads,
            "likes": self.likes,
            "tags": list(self.tags),
            "pipeline_tag": self.pipeline_tag,
            "library_name": self.library_name,
            "gated": self.gated,
        }


DATE_KEYS = ("createdAt", "lastModified")


def from_item(item: dict) -> Listed:
    """One raw listing item: the lineage fields kept raw, the rest parsed by huggingface_hub.

    The item is data, not a contract: a date that does not parse is unknown (huggingface_hub
    would raise and end the page), and an entry that ``ModelInfo`` cannot read at all is kept as
    its id alone, which the crawler then skips or fails for that entry only."""
    raw = {key: item.get(key) for key in RAW_KEYS}
    rest = {k: v for k, v in item.items() if k not in RAW_KEYS}
    for key in DATE_KEYS:
        if key in rest and not _parses_as_date(rest[key]):
            rest[key] = None
    try:
        if not isinstance(rest["id"], str):
            raise TypeError("the id is not a string")
        listed = from_model_info(ModelInfo(**{"siblings": None, **rest}))
    except (TypeError, ValueError, AttributeError, KeyError):
        listed = Listed(id=str(item["id"]), created_at=None, last_modified=None, sha=None, files=None,
                        gated="false", downloads=None, likes=None, tags=(), pipeline_tag=None, library_name=None)
    return replace(listed, base_models_raw=raw["baseModels"], safetensors_raw=raw["safetensors"])


def _parses_as_date(value) -> bool:
    if value is None:
        return True
    try:
        parse_datetime(value)
    except (TypeError, ValueError, AttributeError):
        return False
    return True


def from_model_info(info: ModelInfo) -> Listed:
    files = None if info.siblings is None else tuple(s.rfilename for s in info.siblings)
    gated = info.gated
    return Listed(
        id=info.id,
        created_at=info.created_at,
        last_modified=info.last_modified,
        sha=info.sha if isinstance(info.sha, str) else None,
        files=files,
        gated="false" if gated in (None, False) else str(gated)[:20],
        downloads=_count(info.downloads),
        likes=_count(info.likes),
        tags=tuple(str(t)[:100] for t in (info.tags or ()))[:200],
        pipeline_tag=_text(info.pipeline_tag),
        library_name=_text(info.library_name),
    )


# list_models' names for the sort keys (hf_api.py, list_models).
_SORT_PARAM = {"created_at": "createdAt", "last_modified": "lastModified", "downloads": "downloads"}


def list_params(sort: SortKey, *, author: str | None = None, hub_filter: list[str] | None = None,
                limit: int | None = None, expand: list[str] | None = None) -> dict:
    """The query ``HfApi.list_models`` builds for these arguments, key for key and in its order."""
    params: dict = {}
    if hub_filter:
        params["filter"] = list(hub_filter)
    if author:
        params["author"] = author
    params["sort"] = _SORT_PARAM[sort]
    if limit is not None:
        params["limit"] = limit
    params["expand"] = list(expand or EXPAND)
    return params


def list_newest(settings: Settings, sort: SortKey, *, author: str | None = None,
                hub_filter: list[str] | None = None, limit: int | None = None,
                expand: list[str] | None = None) -> Iterator[Listed]:
    """Models newest-first by ``sort`` (the Hub always sorts descending); lazy, page by page.

    ``limit`` is the page size and the most items yielded. Raises ``policy.RateLimited``,
    ``policy.HubUnreachable``, ``policy.RedirectRefused``, huggingface_hub's HTTP errors for
    other refusals, and ``transport.Cancelled`` when asked to stop.
    """
    url: str | None = f"{settings.hf_endpoint.rstrip('/')}/api/models"
    params: dict | None = list_params(sort, author=author, hub_filter=hub_filter, limit=limit, expand=expand)
    headers = hub_headers(settings)
    yielded = 0
    while url is not None:
        items, url = send(settings, url, lambda r: _page(settings, r), headers=headers, params=params)
        params = None  # the next link carries the query
        for item in items:
            if limit is not None and yielded >= limit:
                return
            yielded += 1
            yield from_item(item)


def _page(settings: Settings, response: httpx2.Response) -> tuple[list[dict], str | None]:
    """One listing page's items and the next page's URL (None on the last page)."""
    if response.status_code == 429:
        # The retries are spent and the Hub still says "too many": end the run, come back later.
        raise RateLimited(server_wait(429, response.headers)[1] or settings.hub_backoff_max_s)
    response.read()
    hf_raise_for_status(response)
    try:
        items = response.json()
    except ValueError as exc:
        raise ListingError(f"the listing page is not JSON: {exc}") from None
    except RecursionError:  # json's recursive decoder on a page of [[[[...]]]]: a broken page, not a bug
        raise ListingError("the listing page is nested too deeply to be a list of models") from None
    if not isinstance(items, list) or not all(isinstance(i, dict) and "id" in i for i in items):
        raise ListingError("the listing page is not a JSON list of models")
    link = response.links.get("next", {}).get("url")
    if link is None:
        return items, None
    next_url = response.url.join(link)
    if not same_origin(settings, next_url):
        raise RedirectRefused(f"the listing's next page is on another host ({next_url.scheme}://{next_url.host}); "
                              f"only {settings.hf_endpoint} is followed")
    return items, str(next_url)


def _count(value) -> int | None:
    """A count the listing gave, or None (unknown) when it gave none or nonsense."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text(value) -> str | None:
    return value[:100] if isinstance(value, str) and value else None
