"""Fetching one repo's ``config.json`` at a known commit.

Strategy, chosen deliberately (hub-api.md §2.1-2.4): one GET on
``{endpoint}/{repo}/resolve/{sha}/config.json`` through huggingface_hub's session, redirects
followed. On the real Hub that is 2 resolver requests (307 to ``/api/resolve-cache/...``, then
200); on a stand-in that answers directly, 1. ``hf_hub_download(revision=sha)`` would cost 2-3
(an extra HEAD), write a cache we never read again (the text goes into the store), silently
return a stale cached file when the HEAD meets a 429/5xx/timeout, and not retry a 5xx on its GET.
The sha comes from the listing and pins the content, so no freshness check is needed at all.

Requests go through ``policy.send`` (deadline, retries, rate-limit waits, vetted redirects);
this module reads the answer: the body up to a size cap, and a reason for every failure.
Errors are classified by huggingface_hub's own ``hf_raise_for_status`` (the ``X-Error-Code``
header decides: GatedRepo, EntryNotFound, RepoNotFound, RevisionNotFound).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import httpx2
from huggingface_hub.errors import (
    DisabledRepoError,
    GatedRepoError,
    HfHubHTTPError,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import build_hf_headers, hf_raise_for_status

from observatory.hub.policy import RETRY_STATUSES, HubUnreachable, RedirectRefused, send
from observatory.settings import Settings

_ERROR_BODY_LIMIT = 64_000  # read at most this much of an error body for its message


@dataclass(frozen=True)
class Fetched:
    """A config.json's text, or why there is none."""

    text: str | None = None
    reason: str | None = None  # None on success
    transient: bool = False
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


def config_url(endpoint: str, repo_id: str, sha: str) -> str:
    return f"{endpoint.rstrip('/')}/{quote(repo_id, safe='/')}/resolve/{quote(sha, safe='')}/config.json"


def hub_headers(settings: Settings) -> dict[str, str]:
    # token=False when none is configured: never send a token picked up implicitly from disk.
    return build_hf_headers(token=settings.hf_token or False, library_name="gqa-observatory")


def fetch_config(settings: Settings, repo_id: str, sha: str) -> Fetched:
    """GET one config.json at ``sha``; retries transient errors within the run, then gives a reason.

    Raises ``policy.RateLimited`` (stop the run) and ``transport.Cancelled`` (stopping).
    """
    url = config_url(settings.hf_endpoint, repo_id, sha)
    try:
        return send(settings, url, lambda r: _answer(r, settings.hub_max_config_bytes), headers=hub_headers(settings))
    except RedirectRefused as exc:
        return Fetched(reason="redirect_refused", detail=_short(str(exc)))
    except HubUnreachable as exc:
        return Fetched(reason="connection_error", transient=True, detail=_short(str(exc)))
    except httpx2.TimeoutException as exc:
        return Fetched(reason="timeout", transient=True, detail=_short(f"{type(exc).__name__}: {exc}"))
    except httpx2.TransportError as exc:
        return Fetched(reason="connection_error", transient=True, detail=_short(str(exc)))


def _answer(response: httpx2.Response, cap: int) -> Fetched:
    if response.status_code == 200:
        return _read_body(response, cap)
    return _classify_error(response)


def _read_body(response: httpx2.Response, cap: int) -> Fetched:
    declared = response.headers.get("Content-Length")
    if declared and declared.isdigit() and int(declared) > cap:
        return Fetched(reason="too_large", detail=f"Content-Length {declared} > {cap} bytes")
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > cap:
            return Fetched(reason="too_large", detail=f"body over {cap} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        return Fetched(text=raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return Fetched(reason="not_json", detail=f"not UTF-8 (bad byte at offset {exc.start})")


def _classify_error(response: httpx2.Response) -> Fetched:
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) <= _ERROR_BODY_LIMIT:
        response.read()  # so huggingface_hub can quote the server's message
    try:
        hf_raise_for_status(response)
    except GatedRepoError as exc:  # before RepositoryNotFoundError: it is a subclass
        return Fetched(reason="gated", detail=_short(exc.server_message or str(exc)))
    except RemoteEntryNotFoundError:
        return Fetched(reason="missing_config", detail="config.json not in this commit")
    except RevisionNotFoundError:
        return Fetched(reason="revision_missing", detail="commit no longer on the Hub")
    except DisabledRepoError:
        return Fetched(reason="disabled", detail="repository disabled")
    except RepositoryNotFoundError:
        return Fetched(reason="repo_missing", detail="repository not found (deleted or private)")
    except HfHubHTTPError as exc:
        status = response.status_code
        return Fetched(reason=f"http_{status}", transient=status in RETRY_STATUSES or status >= 500,
                       detail=_short(exc.server_message or str(exc)))
    status = response.status_code
    return Fetched(reason=f"http_{status}", transient=status in RETRY_STATUSES or status >= 500)


def _short(text: str | None) -> str | None:
    if text is None:
        return None
    text = " ".join(str(text).split())
    return text if len(text) <= 400 else text[:397] + "..."
