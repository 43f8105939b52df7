"""What ``observatory crawl`` shows while it runs: a bar on a terminal, progress lines otherwise.

A backfill against the real Hub runs for hours at the request budget, so both say how far the
pass has come (by date: the listing has no count), its rate, and the projected time left
(``crawler.projection``): the larger of the pace so far and what the request budget allows.
Lines go to stderr every ``LINE_EVERY_S`` seconds and as each pass's listing begins (so the
first line, with the projection, comes after one chunk of the listing): a log or a CI job
shows what the bar shows.
"""

from __future__ import annotations

import sys
import time

import click

from observatory.crawler.projection import duration, project
from observatory.hub.ratelimit import plan_limits, plan_name
from observatory.settings import Settings

LINE_EVERY_S = 30.0


class CrawlProgress:
    def __init__(self, settings: Settings, *, enabled: bool = True, stream=None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.started = time.monotonic()
        limits = plan_limits(settings.hub_plan, bool(settings.hf_token), settings.hub_quota)
        self.budget = {bucket: n / settings.hub_quota_window_s for bucket, n in limits.items()}
        self.plan = plan_name(settings.hub_plan, bool(settings.hf_token))
        self.last_line = float("-inf")
        self.last_pass = None
        self.bar = None
        if enabled and _is_terminal(self.stream):
            from tqdm import tqdm

            self.bar = tqdm(desc="crawl", unit=" listed", file=self.stream, dynamic_ncols=True)

    def update(self, counts: dict) -> None:
        if not self.enabled:
            return
        p = project(counts, time.monotonic() - self.started, self.budget)
        if self.bar is not None:
            if p.listed_total is not None:
                self.bar.total = p.listed_total
            self.bar.update(counts["seen"] - self.bar.n)
            self.bar.set_postfix_str(f"new {counts['new']} changed {counts['changed']} failed {counts['failed']}"
                                     f" left ~{duration(p.remaining_s)} ({p.bound})", refresh=False)
            return
        now = time.monotonic()
        if counts.get("at") is None:
            return
        if counts.get("pass") != self.last_pass or now - self.last_line >= LINE_EVERY_S:
            self.last_line, self.last_pass = now, counts.get("pass")
            click.echo(self.line(counts, p), file=self.stream)

    def line(self, counts: dict, p) -> str:
        share = f" (~{p.fraction:.0%} of the span down to {counts['stop']:%Y-%m-%d %H:%M})" if p.fraction else ""
        requests = sum((counts.get("requests") or {}).values())
        per = f", {requests / counts['seen']:.2f} per listed" if counts["seen"] else ""
        bound = (f"at the {self.plan} request budget" if p.bound == "budget" else "at the pace so far")
        return (f"crawl {counts.get('pass', '')}: listed {counts['seen']:,}{share}, new {counts['new']:,}, "
                f"changed {counts['changed']:,}, failed {counts['failed']:,}; {p.rate:,.1f} listed/s; "
                f"requests {requests:,}{per}; projected ~{duration(p.remaining_s)} left {bound}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
