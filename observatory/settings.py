"""All configuration in one place, read from the environment.

Observatory settings use the ``OBSERVATORY_`` prefix; the Hub endpoint and token keep the
standard ``HF_ENDPOINT`` / ``HF_TOKEN`` names so the same shell works for ``huggingface_hub``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATA_DIR = Path.home() / ".local" / "share" / "gqa-observatory"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="OBSERVATORY_", extra="ignore")

    # Where the SQLite file (and other local state) lives unless database_url says otherwise.
    data_dir: Path = DEFAULT_DATA_DIR
    # Empty means "SQLite file observatory.db inside data_dir"; any SQLAlchemy URL works
    # (postgresql+psycopg://... when one machine is not enough).
    database_url: str = ""

    hf_endpoint: str = Field(
        default="https://huggingface.co",
        validation_alias=AliasChoices("HF_ENDPOINT", "OBSERVATORY_HF_ENDPOINT"),
    )
    hf_token: str | None = Field(
        default=None, validation_alias=AliasChoices("HF_TOKEN", "OBSERVATORY_HF_TOKEN")
    )

    # Web service
    host: str = "127.0.0.1"
    port: int = 8000
    base_url: str = ""  # public URL used in feeds and alert links; empty = derive from request
    # Load the bundled snapshot automatically when the store holds no models yet.
    autoload_snapshot: bool = True
    # Finish the start-up work (snapshot, re-derivation, trends, first alert evaluation) before the
    # first request; `observatory serve` turns it off so workers answer at once and SIGTERM stays live.
    startup_blocking: bool = True

    # Alerts (observatory/alerts). A still-firing alert is notified again after this long;
    # 0 = never repeat.
    alert_repeat_interval_s: float = 7 * 24 * 3600
    # Evaluate the built-in rules (rules.BUILT_IN_RULES) for the public feed, subscribed or not.
    alert_builtin_rules: bool = True
    # Webhook delivery: time limits of one attempt (Standard Webhooks suggests 15-30 s).
    # webhook_timeout_s bounds the whole exchange, from connect to the last byte read, however
    # slowly the receiver answers; a connect gets webhook_connect_timeout_s of it at most.
    webhook_timeout_s: float = 15.0
    webhook_connect_timeout_s: float = 5.0
    # Delays after the 1st, 2nd, ... failed attempt (about 17 h in all); jittered by +/- the
    # fraction below. A delivery failing after the last one is given up.
    webhook_retry_schedule_s: list[float] = [5, 300, 1800, 7200, 18000, 36000]
    webhook_retry_jitter: float = 0.2
    webhook_max_retry_after_s: float = 24 * 3600  # cap on a receiver's Retry-After
    webhook_max_response_bytes: int = 64 * 1024
    # A claimed delivery whose sender died is retried after this long (same webhook-id). The
    # lease is renewed before each attempt and is never shorter than twice the longest attempt
    # (DNS + webhook_timeout_s) plus 10 s (webhooks.lease_s), so it cannot run out mid-send.
    webhook_lease_s: float = 120.0
    webhook_workers: int = 4  # parallel sends in one delivery pass
    alert_delivery_interval_s: float = 10.0  # scheduler job sending deliveries that came due
    # After a crawl, deliveries are sent for at most this long (plus one attempt in flight); the
    # rest go out with the delivery job or the next crawl. 0 = leave all of them to the job.
    crawl_delivery_budget_s: float = 10.0
    # Abuse limits for anonymous writes. Creating a subscription without an owner token takes a
    # token from a bucket per client network (kept in the store, shared by every worker): an IPv4
    # address, or an IPv6 /64 (one host's allocation), at most subscribe_burst at once, refilled
    # at subscribe_per_hour. Then one from a bucket shared by all clients: at most
    # subscribe_global_per_hour new owners an hour (as a burst, too), whatever their addresses.
    subscribe_burst: int = 10
    subscribe_per_hour: float = 20.0
    subscribe_global_per_hour: float = 200.0
    # Webhook endpoints that never received a delivery plus e-mail addresses not yet confirmed,
    # over all subscriptions; at this many, new ones are refused until some are verified.
    max_unverified_endpoints: int = 1000
    # Resolving a webhook's host name: at most this long, this many lookups at once, and the
    # answer (or the failure) reused for this long.
    webhook_dns_timeout_s: float = 2.0
    webhook_dns_concurrency: int = 4
    webhook_dns_cache_s: float = 60.0
    # Only loopback targets may be allowed, and only for tests; private ranges never are.
    allow_loopback_webhooks: bool = False
    allow_http_webhooks: bool = False  # plain http targets (tests); https otherwise
    # Ports a webhook URL may use (None = any); loopback test targets may use any port.
    webhook_allowed_ports: list[int] | None = [443, 80, 8080, 8443]
    # E-mail through SMTP; no host = no e-mail channel.
    smtp_host: str | None = None
    smtp_port: int = 25
    smtp_username: str | None = None
    smtp_password: str | None = None
    smtp_starttls: bool = False
    smtp_ssl: bool = False
    smtp_from: str = "GQA Observatory <alerts@localhost>"
    smtp_timeout_s: float = 10.0

    # Hub access (observatory/hub). Timeouts and waits are in seconds; tests shrink them.
    # Every Hub request (listing pages and config files) goes through observatory.hub.policy.
    hub_timeout_s: float = 20.0  # longest silence while waiting for headers or for the next bytes
    hub_connect_timeout_s: float = 5.0  # to open a connection; past it the Hub counts as unreachable
    # One request in all: connect, headers and body together (a server dripping bytes ends here).
    hub_deadline_s: float = 60.0
    hub_max_retries: int = 4  # retries of one request on 408/429/5xx, timeouts, dropped connections
    # One request with all its retries and back-off (not counting waits the Hub asks for, which
    # hub_max_wait_s bounds): past this it is a timeout, retried by a later run.
    hub_request_budget_s: float = 120.0
    hub_backoff_base_s: float = 1.0  # first backoff after a 5xx/timeout; doubles per retry
    hub_backoff_max_s: float = 60.0
    # Longest RateLimit/Retry-After waits sat out for one request; a longer one ends the run as
    # "rate_limited", and the scheduler's next crawl waits until the time the Hub named.
    hub_max_wait_s: float = 600.0
    # The request budget: at most the Hub's published quota per bucket (api, resolvers, pages) in
    # any hub_quota_window_s (hub-docs rate-limits.md: 5-minute windows). "auto" takes the
    # anonymous limits without hf_token and the free account's with one; name your plan (pro,
    # team, enterprise, enterprise_plus) for more, or "unlimited" for a mirror. hub_quota
    # overrides single buckets, e.g. {"resolvers": 1500} to leave room for other clients.
    # A request whose slot is further off than hub_max_wait_s ends the run as "rate_limited".
    hub_plan: Literal["auto", "unlimited", "anonymous", "free", "pro", "team", "enterprise",
                      "enterprise_plus"] = "auto"
    hub_quota: dict[str, int] = {}
    hub_quota_window_s: float = 300.0
    hub_max_config_bytes: int = 2_000_000  # a bigger config.json is refused unread
    # Redirects are followed only within HF_ENDPOINT's own origin and to these hosts (https),
    # the Hub's hosts and the CDN hosts it uses for resolve (hub-docs, models-downloading.md).
    # Any other Location is refused and recorded as the failure "redirect_refused".
    hub_redirect_hosts: list[str] = [
        "huggingface.co", "hf.co",
        "cdn-lfs.hf.co", "cdn-lfs-us-1.hf.co", "cdn-lfs-eu-1.hf.co",
        "cdn-lfs.huggingface.co", "cdn-lfs-us-1.huggingface.co", "cdn-lfs-eu-1.huggingface.co",
        "cas-bridge.xethub.hf.co", "cas-bridge.xethub-eu.hf.co", "us.aws.cdn.hf.co", "us.gcp.cdn.hf.co",
    ]
    # Crawler (observatory/crawler)
    crawl_concurrency: int = 8  # config fetches in flight; the Hub's resolver quota is the real bound
    crawl_first_run_days: float = 2.0  # a scope's first run looks back this far unless --since says
    crawl_overlap_s: float = 900.0  # re-read this much below a mark: the listing index can lag
    # A listed date later than the crawl's clock plus this is stored but never moves a mark.
    crawl_future_tolerance_s: float = 900.0
    crawl_max_models: int | None = None  # per scheduled run; None = no bound
    # A run's time budget: past it the run stops as if asked to (what was fetched is stored, the
    # marks stay put, the next run resumes) and is stored as timed_out. None = no bound.
    crawl_max_run_s: float | None = 3600.0
    crawl_retry_batch: int = 500  # transient failures retried per run
    crawl_retry_base_s: float = 600.0  # first retry delay of a transient failure; doubles per attempt
    crawl_retry_max_s: float = 86_400.0
    crawl_max_attempts: int = 8  # then a transient failure is given up (reason kept)
    # A crawl lease not renewed for this long is free again. Renewed as results are stored, so it
    # must outlast the longest wait the Hub can impose (hub_max_wait_s) plus a batch.
    crawl_lease_ttl_s: float = 900.0
    # Before a crawl writes, SQLite's checks of the file and the tables it writes, for at most this
    # long (store/integrity.py); a damaged store refuses the crawl.
    store_check_budget_s: float = 10.0
    # Scheduler (observatory/scheduler.py)
    scheduler_enabled: bool = True  # `observatory serve` runs the schedule in-process
    scheduler_lease_ttl_s: float = 60.0  # leadership lapses this long after its holder stops
    # On SIGTERM/SIGINT running jobs are asked to stop and get this long to finish; then the
    # process exits anyway (a crawl stops within a second; what it fetched is stored).
    scheduler_shutdown_grace_s: float = 5.0
    crawl_interval_s: int = 1800
    stats_refresh_interval_s: int = 6 * 3600  # downloads/likes of popular models
    stats_refresh_top_n: int = 5000  # how many of the most downloaded models the refresh reads
    # Scheduled spot-benchmarks of new models run only when enabled: they keep the CPUs busy.
    bench_schedule_enabled: bool = False
    bench_interval_s: int = 6 * 3600  # how often, once enabled; 0 = off
    # Spot-benchmarks (observatory/bench): what the scheduled job runs, kept small so a CPU finishes
    # in seconds. "Notable" = at least this many downloads, or a model from the bundled snapshot.
    bench_job_limit: int = 3  # models per scheduled run
    bench_min_downloads: int = 1000
    bench_context: int = 4096
    bench_batch: int = 1
    bench_repeats: int = 5
    # The oracle (observatory/oracle): transformers re-reads every stored config in child processes,
    # apart from the crawl. Each config gets oracle_time_limit_s; each child oracle_memory_limit_mb of
    # address space (RLIMIT_AS; torch alone maps ~0.7 GB). A failed config is recorded, never retried
    # until transformers or the parser changes. 0 workers or interval turns the background runs off.
    oracle_enabled: bool = True  # after each crawl that stored something, and on the schedule
    oracle_workers: int = Field(default=1, ge=0, le=16)
    oracle_time_limit_s: float = Field(default=120.0, gt=0, le=3600)
    oracle_memory_limit_mb: int = Field(default=4096, ge=1024, le=1 << 20)
    oracle_interval_s: int = 6 * 3600  # the schedule's sweep for unchecked or stale revisions
    oracle_batch: int = Field(default=200, ge=1, le=10_000)  # revisions per scheduled or after-crawl run

    # Exports (observatory/web/export_limits.py, export_package.py). A CSV export is one keyset
    # page of at most queries.MAX_PAGE_SIZE rows, like the JSON pages; at most this many run at
    # once per client network and over all clients in one web process (past either, a 429).
    api_export_per_client: int = 2
    api_export_concurrency: int = 4
    # Every stored model at once is a prebuilt data package, rebuilt when a download finds it
    # older than this.
    api_export_package_max_age_s: float = 3600.0

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'observatory.db'}"


@lru_cache
def get_settings() -> Settings:
    return Settings()
