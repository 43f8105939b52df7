"""Listing models newest-first through ``HfApi.list_models``.

``expand`` names every field we read: with ``expand`` the Hub returns only ``id`` plus the
listed properties (hub-api.md §1.5), so leaving one out silently yields ``None``. ``siblings``
tells us whether a repo has a config.json at all (no request wasted on repos without one);
``sha`` pins the commit whose config we fetch and tells us whether anything changed.

No ``limit`` is passed: huggingface_hub sends it as the page size *and* stops the whole
iteration after that many items (``islice``), so the Hub's own page size is used and the
crawler stops paging itself, at its mark.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from huggingface_hub import HfApi
from huggingface_hub.hf_api import ModelInfo

from observatory.settings import Settings

EXPAND = ["createdAt", "lastModified", "sha", "siblings", "gated", "downloads", "likes", "tags",
          "pipeline_tag", "library_name"]

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


def hub_api(settings: Settings) -> HfApi:
    # Explicit endpoint and token: huggingface_hub reads HF_ENDPOINT once at import time, and an
    # implicit token from disk must never be sent where the settings did not ask for one.
    return HfApi(endpoint=settings.hf_endpoint.rstrip("/"), token=settings.hf_token or False,
                 library_name="gqa-observatory")


def list_newest(settings: Settings, sort: SortKey, *, author: str | None = None,
                hub_filter: list[str] | None = None, limit: int | None = None,
                expand: list[str] | None = None) -> Iterator[Listed]:
    """Models newest-first by ``sort`` (the Hub always sorts descending); lazy, page by page."""
    items = hub_api(settings).list_models(
        sort=sort, expand=expand or EXPAND, author=author or None, filter=hub_filter or None, limit=limit,
    )
    for info in items:
        yield from_model_info(info)


def _count(value) -> int | None:
    """A count the listing gave, or None (unknown) when it gave none or nonsense."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text(value) -> str | None:
    return value[:100] if isinstance(value, str) and value else None
