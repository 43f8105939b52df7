"""A stand-in Hugging Face Hub on 127.0.0.1 for tests and benchmarks.

A real threaded HTTP/1.1 server that the unmodified ``huggingface_hub`` client can be pointed
at (``endpoint=stand_in.url``), speaking the subset of the Hub's API in hub-api.md §5:

- ``GET /api/models``: ``sort`` (createdAt, lastModified, downloads, likes; always descending),
  ``limit`` (page size, at most 1000), an opaque keyset ``cursor``, repeated ``expand`` (400 on
  an unknown value), ``full``, ``config``, ``author``, ``filter``, ``pipeline_tag``, ``search``;
  the next page in an ABSOLUTE ``Link: <...>; rel="next"`` header (the client needs absolute).
- ``GET /api/models/{repo}`` and ``.../revision/{rev}``: model_info.
- ``HEAD``/``GET /{repo}/resolve/{rev}/{file}``: the true ``Content-Length`` on HEAD too,
  a quoted git-blob ``ETag``, ``X-Repo-Commit``, ``X-Error-Code`` on every error; optionally the
  Hub's 307 to ``/api/resolve-cache/models/{repo}/{commit}/{file}`` (``redirect_resolve=True``).
- ``RateLimit``/``RateLimit-Policy`` headers and real 429s when a per-bucket ``quota`` is set;
  ``latency_s`` delays every answer, standing in for the round trip to the real Hub.

Faults are injected with ``add_fault`` (status, headers, delay, a body dripped byte by byte, how
many times, which repo) and
``on_listing_page`` (a hook run after each listing page is served: create a repo mid-crawl).
``counts`` tells how many requests of each kind were served.

Run standalone for benchmarks: ``python -m observatory.testing.hub_standin --repos 5000``
prints the URL and serves until SIGTERM; ``GET /_standin/counts``, ``POST /_standin/reset``
and ``POST /_standin/touch?n=N`` (give N repos a new commit) control it over HTTP.
"""

from __future__ import annotations

import argparse
import base64
import bisect
import hashlib
import json
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

EXPANDABLE = frozenset({
    "author", "baseModels", "cardData", "childrenModelCount", "config", "createdAt", "disabled",
    "downloads", "downloadsAllTime", "evalResults", "gated", "gguf", "inference",
    "inferenceProviderMapping", "lastModified", "library_name", "likes", "mask_token", "model-index",
    "pipeline_tag", "private", "resourceGroup", "safetensors", "sha", "siblings", "spaces", "tags",
    "transformersInfo", "trendingScore", "usedStorage", "widgetData",
})
DEFAULT_FIELDS = ("likes", "trendingScore", "private", "downloads", "tags", "pipeline_tag", "library_name",
                  "createdAt")
SORTS = {"createdAt": "created_at", "lastModified": "last_modified", "downloads": "downloads", "likes": "likes"}
MAX_PAGE = 1000


def hub_date(value: datetime) -> str:
    """The Hub's date format; the client requires the trailing Z."""
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def git_blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Repo:
    id: str
    created_at: datetime
    last_modified: datetime
    sha: str
    files: dict[str, bytes]
    history: dict[str, dict[str, bytes]] = field(default_factory=dict)  # every commit's files
    gated: bool | str = False
    downloads: int = 0
    likes: int = 0
    tags: list[str] = field(default_factory=list)
    pipeline_tag: str | None = "text-generation"
    library_name: str | None = "transformers"
    # As the Hub lists them, e.g. {"relation": "quantized", "models": [{"_id": "...", "id": "org/base"}]}
    # and {"parameters": {"BF16": n}, "total": n}; None: the key is absent (no declared base, no
    # readable safetensors). Tests may store any value here, malformed ones included.
    base_models: object = None
    safetensors: object = None
    # Listing keys served verbatim instead of the repo's own value (a hostile Hub: "createdAt":
    # "soon", "tags": 7); the repo keeps its place in the order by its real dates.
    overrides: dict = field(default_factory=dict)

    def item(self, keys) -> dict:
        """The listing/model_info JSON for these keys (plus _id and id); as on the Hub, a repo with
        no declared base or no safetensors metadata has no baseModels or safetensors key."""
        out = {"_id": hashlib.md5(self.id.encode()).hexdigest()[:24], "id": self.id}
        for key in keys:
            if key in ("baseModels", "safetensors") and self._value(key) is None:
                continue
            out[key] = self._value(key)
        return out

    def _config_subset(self) -> dict | None:
        """What the Hub shows of config.json in listings: a few keys, {} for any file it cannot read
        (not JSON, not UTF-8, nested deeper than the parser goes)."""
        config = self.files.get("config.json")
        if config is None:
            return None
        try:
            parsed = json.loads(config)
        except (ValueError, RecursionError):
            return {}
        return {k: parsed[k] for k in ("architectures", "model_type") if isinstance(parsed, dict) and k in parsed}

    def _value(self, key: str):
        if key in self.overrides:
            return self.overrides[key]
        if key == "config":
            return self._config_subset()
        return {
            "createdAt": hub_date(self.created_at), "lastModified": hub_date(self.last_modified), "sha": self.sha,
            "siblings": [{"rfilename": name} for name in sorted(self.files)], "gated": self.gated,
            "downloads": self.downloads, "likes": self.likes, "tags": self.tags, "pipeline_tag": self.pipeline_tag,
            "library_name": self.library_name, "private": False, "disabled": False, "trendingScore": 0,
            "author": self.id.split("/")[0] if "/" in self.id else None, "modelId": self.id,
            "baseModels": self.base_models, "safetensors": self.safetensors,
        }.get(key)


@dataclass
class Fault:
    """Applied to the next ``times`` matching requests (-1: all of them)."""

    kind: str  # listing | model_info | resolve | any
    status: int | None = 503  # None: only the delay, then answer normally
    repo: str | None = None
    times: int = 1
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    drip_s: float = 0.0  # send the body one byte at a time, this far apart (a slow-drip server)


def _cursor_encode(key) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


def _cursor_decode(text: str):
    padded = text + "=" * (-len(text) % 4)
    return json.loads(base64.urlsafe_b64decode(padded.encode()))


class HubStandin:
    def __init__(self, *, page_size: int = MAX_PAGE, redirect_resolve: bool = False,
                 quota: dict[str, int] | None = None, window_s: int = 300,
                 approved_tokens: tuple[str, ...] = (), latency_s: float = 0.0) -> None:
        self.page_size = page_size
        self.latency_s = latency_s  # added to every API/resolver answer: a WAN round trip
        self.redirect_resolve = redirect_resolve
        self.quota = quota or {}  # bucket -> requests per window
        self.window_s = window_s
        self.approved_tokens = set(approved_tokens)
        self.repos: dict[str, Repo] = {}
        self.faults: list[Fault] = []
        self.on_listing_page: Callable[[int], None] | None = None
        self.counts: Counter[str] = Counter()
        self.log: list[tuple[str, str]] = []  # (method, path?query) of every request
        self._lock = threading.RLock()
        self._order: dict[str, list] = {}
        self._window_start = time.monotonic()
        self._used: Counter[str] = Counter()
        self._pages_served = 0
        self._last_now: datetime | None = None
        self._server: ThreadingHTTPServer | None = None

    # -- content ------------------------------------------------------------------------------

    def add_repo(self, repo_id: str, config=None, *, created_at: datetime | None = None,
                 files: dict[str, bytes] | None = None, **fields) -> Repo:
        """A repo with ``config`` (dict, str or bytes; None: no config.json) and other ``files``."""
        with self._lock:
            now = _ms(created_at) if created_at else self._now()
            content = dict(files or {})
            if config is not None:
                content["config.json"] = _as_bytes(config)
            content.setdefault(".gitattributes", b"*.bin filter=lfs\n")
            sha = self._commit_sha(repo_id, content)
            repo = Repo(id=repo_id, created_at=now, last_modified=_ms(fields.pop("last_modified", None) or now), sha=sha,
                        files=content, history={sha: content}, **fields)
            self.repos[repo_id] = repo
            self._order.clear()
            return repo

    def update_repo(self, repo_id: str, config=None, *, files: dict[str, bytes] | None = None,
                    at: datetime | None = None) -> Repo:
        """A new commit: new sha and lastModified; the old commit stays resolvable."""
        with self._lock:
            repo = self.repos[repo_id]
            content = dict(repo.files if files is None else files)
            if config is not None:
                content["config.json"] = _as_bytes(config)
            repo.files = content
            repo.sha = self._commit_sha(repo_id, content)
            repo.history[repo.sha] = content
            repo.last_modified = _ms(at) if at else self._now()
            self._order.clear()
            return repo

    def set_stats(self, repo_id: str, *, downloads: int | None = None, likes: int | None = None) -> None:
        with self._lock:
            repo = self.repos[repo_id]
            repo.downloads = repo.downloads if downloads is None else downloads
            repo.likes = repo.likes if likes is None else likes
            self._order.clear()

    def remove_repo(self, repo_id: str) -> None:
        with self._lock:
            self.repos.pop(repo_id, None)
            self._order.clear()

    def add_fault(self, kind: str, status: int | None = 503, **kw) -> Fault:
        fault = Fault(kind=kind, status=status, **kw)
        with self._lock:
            self.faults.append(fault)
        return fault

    def reset_counts(self) -> None:
        with self._lock:
            self.counts.clear()
            self.log.clear()

    def _now(self) -> datetime:
        # Strictly increasing (1 ms apart at least), so repos created in one instant keep an order.
        now = _ms(datetime.now(timezone.utc))
        if self._last_now is not None and now <= self._last_now:
            now = self._last_now + timedelta(milliseconds=1)
        self._last_now = now
        return now

    def _commit_sha(self, repo_id: str, content: dict[str, bytes]) -> str:
        digest = hashlib.sha1(repo_id.encode())
        for name in sorted(content):
            digest.update(name.encode() + b"\0" + content[name])
        digest.update(str(time.monotonic_ns()).encode())
        return digest.hexdigest()

    # -- server -------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self, port: int = 0) -> HubStandin:
        standin = self

        class Handler(_Handler):
            hub = standin

        self._server = _Server(("127.0.0.1", port), Handler)
        threading.Thread(target=self._server.serve_forever, name="hub-standin", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> HubStandin:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- behaviour used by the handler --------------------------------------------------------

    def take_fault(self, kind: str, repo: str | None) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.times != 0 and fault.kind in (kind, "any") and (fault.repo is None or fault.repo == repo):
                    if fault.times > 0:
                        fault.times -= 1
                    return fault
        return None

    def ratelimit(self, bucket: str) -> tuple[bool, dict[str, str]]:
        """(allowed, headers) for one request in ``bucket`` under a fixed window."""
        quota = self.quota.get(bucket)
        if quota is None:
            return True, {}
        with self._lock:
            elapsed = time.monotonic() - self._window_start
            if elapsed >= self.window_s:
                self._window_start, self._used, elapsed = time.monotonic(), Counter(), 0.0
            self._used[bucket] += 1
            remaining = quota - self._used[bucket]
        reset = max(0, int(self.window_s - elapsed + 0.999))
        headers = {"RateLimit": f'"{bucket}";r={max(0, remaining)};t={reset}',
                   "RateLimit-Policy": f'"fixed window";"{bucket}";q={quota};w={self.window_s}'}
        return remaining >= 0, headers

    def ordered(self, sort: str) -> list:
        """(key, id) ascending for a sort; read backwards for the Hub's descending order."""
        with self._lock:
            if sort not in self._order:
                attr = SORTS[sort]
                keys = []
                for repo in self.repos.values():
                    value = getattr(repo, attr)
                    keys.append((value.timestamp() if isinstance(value, datetime) else value, repo.id))
                self._order[sort] = sorted(keys)
            return self._order[sort]

    def page_served(self) -> None:
        with self._lock:
            self._pages_served += 1
            number = self._pages_served
        if self.on_listing_page is not None:
            self.on_listing_page(number)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request, client_address) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError, TimeoutError)):
            return  # the client gave up first (a timeout test): nothing to report
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the Hub
    disable_nagle_algorithm = True  # headers and body are two writes; Nagle would stall the second
    hub: HubStandin

    def log_message(self, *args) -> None:
        pass

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_GET(self) -> None:
        self._dispatch(head=False)

    def do_POST(self) -> None:
        self._head, self._limit_headers = False, {}
        parts = urlsplit(self.path)
        if parts.path == "/_standin/reset":
            self.hub.reset_counts()
            return self._send(200, b"{}")
        if parts.path == "/_standin/touch":
            count = int(parse_qs(parts.query).get("n", ["1"])[0])
            ids = sorted(self.hub.repos)[:count]
            for repo_id in ids:
                repo = self.hub.repos[repo_id]
                config = json.loads(repo.files["config.json"]) if "config.json" in repo.files else {}
                config["_revision"] = config.get("_revision", 0) + 1
                self.hub.update_repo(repo_id, config)
            return self._send(200, json.dumps({"touched": len(ids)}).encode())
        self._error(404, "RepoNotFound", "no such control route")

    # -- routing ------------------------------------------------------------------------------

    def _dispatch(self, head: bool) -> None:
        self._head, self._limit_headers = head, {}  # one handler serves many keep-alive requests
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        with self.hub._lock:
            self.hub.log.append((self.command, self.path))
        if path == "/_standin/counts":
            return self._send(200, json.dumps(dict(self.hub.counts)).encode())
        if path in ("/api/models", "/api/models/"):
            return self._guarded("listing", None, "api", lambda: self._listing(query))
        if path.startswith("/api/resolve-cache/models/"):
            segments = path.removeprefix("/api/resolve-cache/models/").split("/")
            repo_id, rest = _split_repo(segments)
            return self._guarded("resolve", repo_id, "resolvers",
                                 lambda: self._resolve(repo_id, rest[0] if rest else "", "/".join(rest[1:]), cache=True))
        if path.startswith("/api/models/"):
            segments = path.removeprefix("/api/models/").split("/")
            rev = None
            if "revision" in segments:
                at = segments.index("revision")
                segments, rev = segments[:at], "/".join(segments[at + 1:])
            repo_id = "/".join(segments)
            return self._guarded("model_info", repo_id, "api", lambda: self._model_info(repo_id, rev))
        segments = path.lstrip("/").split("/")
        if "resolve" in segments[1:3]:
            at = segments.index("resolve")
            repo_id, rev, filename = "/".join(segments[:at]), segments[at + 1], "/".join(segments[at + 2:])
            return self._guarded("resolve", repo_id, "resolvers", lambda: self._resolve(repo_id, rev, filename))
        self._error(404, None, "not found")

    def _guarded(self, kind: str, repo_id: str | None, bucket: str, answer: Callable[[], None]) -> None:
        counted = f"{kind}_{self.command.lower()}" if kind == "resolve" else kind
        with self.hub._lock:
            self.hub.counts[counted] += 1
        if self.hub.latency_s:
            time.sleep(self.hub.latency_s)
        fault = self.hub.take_fault(kind, repo_id)
        if fault is not None:
            if fault.delay:
                time.sleep(fault.delay)
            if fault.status is not None:
                with self.hub._lock:
                    self.hub.counts["faults"] += 1
                body = fault.body if fault.body is not None else json.dumps({"error": f"injected {fault.status}"}).encode()
                return self._send(fault.status, body, fault.headers, drip_s=fault.drip_s)
        allowed, self._limit_headers = self.hub.ratelimit(bucket)
        if not allowed:
            with self.hub._lock:
                self.hub.counts["rate_limited"] += 1
            return self._error(429, None, f"you have reached your '{bucket}' rate limit")
        answer()

    # -- endpoints ----------------------------------------------------------------------------

    def _listing(self, query: dict[str, list[str]]) -> None:
        hub = self.hub
        sort = (query.get("sort") or ["createdAt"])[0]
        if sort not in SORTS:
            return self._error(400, None, f"unknown sort {sort!r}")
        expand = query.get("expand", [])
        unknown = [e for e in expand if e not in EXPANDABLE]
        if unknown:
            return self._error(400, None, f'"expand" must be one of {sorted(EXPANDABLE)}; got {unknown}')
        try:
            limit = min(MAX_PAGE, int((query.get("limit") or [hub.page_size])[0]))
            cursor = _cursor_decode(query["cursor"][0]) if "cursor" in query else None
        except (ValueError, TypeError):
            return self._error(400, None, "bad limit or cursor")
        if limit <= 0:
            return self._error(400, None, "limit must be positive")
        if expand:
            keys = list(dict.fromkeys(expand))
        else:
            keys = list(DEFAULT_FIELDS) + ["modelId"]
            if query.get("full") == ["true"]:
                keys += ["lastModified", "sha", "siblings", "author", "gated", "disabled"]
            if query.get("config") == ["true"]:
                keys.append("config")
        ordered = hub.ordered(sort)
        index = len(ordered) if cursor is None else bisect.bisect_left(ordered, tuple(cursor))
        page, last_key = [], None
        with hub._lock:
            while index > 0 and len(page) < limit:
                index -= 1
                key = ordered[index]
                repo = hub.repos.get(key[1])
                if repo is None or not _matches(repo, query):
                    continue
                page.append(repo.item(keys))
                last_key = key
        more = index > 0 and last_key is not None and len(page) == limit
        headers = {}
        if more:
            params = [(k, v) for k, values in query.items() if k != "cursor" for v in values]
            params.append(("cursor", _cursor_encode(list(last_key))))
            headers["Link"] = f'<{hub.url}/api/models?{urlencode(params)}>; rel="next"'
        self._send(200, json.dumps(page).encode(), headers, content_type="application/json; charset=utf-8")
        hub.page_served()

    def _model_info(self, repo_id: str, rev: str | None) -> None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._error(404, "RepoNotFound", "Repository not found")
        if rev not in (None, "main", repo.sha) and rev not in repo.history:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        keys = ["author", "sha", "createdAt", "lastModified", "private", "gated", "disabled", "downloads",
                "likes", "tags", "pipeline_tag", "library_name", "config", "siblings", "modelId"]
        self._send(200, json.dumps(repo.item(keys)).encode(), content_type="application/json; charset=utf-8")

    def _resolve(self, repo_id: str, rev: str, filename: str, cache: bool = False) -> None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            return self._error(404, "RepoNotFound", "Repository not found")
        if repo.gated:
            auth = self.headers.get("Authorization", "")
            if not auth:
                return self._error(401, "GatedRepo", f"Access to model {repo_id} is restricted. Please log in.")
            if auth.removeprefix("Bearer ") not in self.hub.approved_tokens:
                return self._error(403, "GatedRepo", f"Access to model {repo_id} is restricted and you are not in the authorized list.")
        commit = repo.sha if rev == "main" else rev
        files = repo.history.get(commit)
        if files is None:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        data = files.get(filename)
        if data is None:
            return self._error(404, "EntryNotFound", f"{filename} does not exist on {rev}", {"X-Repo-Commit": commit})
        etag = f'"{git_blob_sha(data)}"'
        headers = {"X-Repo-Commit": commit, "ETag": etag}
        if self.hub.redirect_resolve and not cache:
            location = (f"/api/resolve-cache/models/{quote(repo_id)}/{commit}/{quote(filename)}"
                        f"?etag={quote(etag)}")
            return self._send(307, b"", {**headers, "Location": location})
        if self.headers.get("If-None-Match") == etag:
            return self._send(304, b"", headers)
        content_type = "application/json" if filename.endswith(".json") else "application/octet-stream"
        self._send(200, data, headers, content_type=content_type)

    # -- responses ----------------------------------------------------------------------------

    def _error(self, status: int, code: str | None, message: str, extra: dict | None = None) -> None:
        headers = {"X-Error-Message": message, **(extra or {})}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, json.dumps({"error": message}).encode(), headers)

    def _send(self, status: int, body: bytes, headers: dict | None = None,
              content_type: str = "application/json", drip_s: float = 0.0) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))  # the true size, on HEAD too
        for name, value in {**getattr(self, "_limit_headers", {}), **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if getattr(self, "_head", False) or not body:
            return
        if not drip_s:
            self.wfile.write(body)
            return
        self.wfile.flush()
        for i in range(len(body)):
            time.sleep(drip_s)
            self.wfile.write(body[i:i + 1])
            self.wfile.flush()


def _split_repo(segments: list[str]) -> tuple[str, list[str]]:
    """Repo id (one or two segments) and the rest, for resolve-cache paths: {repo}/{commit}/{file}."""
    if len(segments) >= 3 and len(segments[1]) != 40:
        return "/".join(segments[:2]), segments[2:]
    return segments[0], segments[1:]


def _matches(repo: Repo, query: dict[str, list[str]]) -> bool:
    author = query.get("author", [None])[0]
    if author and not repo.id.startswith(author + "/"):
        return False
    for tag in query.get("filter", []):
        if tag not in repo.tags and tag != repo.library_name and tag != repo.pipeline_tag:
            return False
    pipeline = query.get("pipeline_tag", [None])[0]
    if pipeline and repo.pipeline_tag != pipeline:
        return False
    search = query.get("search", [None])[0]
    return not search or search.lower() in repo.id.lower()


def _ms(value: datetime) -> datetime:
    """The Hub's dates carry milliseconds; keep only those so what is stored is what is served."""
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def _as_bytes(config) -> bytes:
    if isinstance(config, bytes):
        return config
    if isinstance(config, str):
        return config.encode()
    return json.dumps(config, indent=2).encode()


# -- synthetic population -------------------------------------------------------------------

def synthetic_config(i: int) -> dict:
    """A plausible decoder config; index ``i`` varies heads, KV heads, layers and family."""
    heads = (16, 32, 40, 64)[i % 4]
    kv = (heads, 8, 4, 1)[(i // 4) % 4]
    head_dim = 128
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": heads * head_dim, "intermediate_size": heads * head_dim * 3,
        "num_attention_heads": heads, "num_key_value_heads": kv, "num_hidden_layers": 16 + (i % 5) * 8,
        "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "vocab_size": 32000 + i,
        "torch_dtype": "bfloat16",
    }


def populate(hub: HubStandin, count: int, *, start: datetime | None = None, step_s: float = 60.0,
             prefix: str = "org", lineage: bool = False) -> list[str]:
    """``count`` LM repos created ``step_s`` apart, newest at ``start`` (default: an hour ago).

    ``lineage``: list ``baseModels`` and ``safetensors`` as the Hub does for a mix of repos: of
    every five, an original with safetensors, a finetune and a quantization of earlier repos, a
    merge of two, and an original of the ``.bin`` era (no safetensors).
    """
    newest = start or datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=1)
    ids = []
    for i in range(count):
        created = newest - timedelta(seconds=step_s * (count - 1 - i))
        repo_id = f"{prefix}{i % 50}/model-{i}"
        facts = _synthetic_lineage(i, ids) if lineage else {}
        hub.add_repo(repo_id, synthetic_config(i), created_at=created, last_modified=created,
                     downloads=(i * 37) % 1000, likes=i % 17, tags=["transformers", "llama"], **facts)
        ids.append(repo_id)
    return ids


def _synthetic_lineage(i: int, earlier: list[str]) -> dict:
    kind = i % 5 if len(earlier) >= 3 else 0
    relation, back = {1: ("finetune", [1]), 2: ("quantized", [2]), 3: ("merge", [1, 3])}.get(kind, (None, []))
    return {
        "base_models": relation and {"relation": relation, "models": [{"id": earlier[-b]} for b in back]},
        "safetensors": None if kind == 4 else {"parameters": {"BF16": 1_000_000_000 + i}, "total": 1_000_000_000 + i},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a stand-in Hub on 127.0.0.1 until SIGTERM.")
    parser.add_argument("--repos", type=int, default=1000, help="synthetic LM repos to create")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--redirect", action="store_true", help="answer resolve with the Hub's 307")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay added to every answer")
    args = parser.parse_args(argv)
    hub = HubStandin(redirect_resolve=args.redirect, latency_s=args.latency_ms / 1000)
    populate(hub, args.repos, lineage=True)
    hub.start(args.port)
    print(hub.url, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    hub.stop()


if __name__ == "__main__":
    main()
