"""Resolving a webhook's host: bounded in time and in lookups at once, and cached briefly."""

from __future__ import annotations

import threading

import pytest

from observatory.alerts.ssrf import BoundedResolver, UnsafeURL, vet_url


class Resolver:
    """A name service that answers at once, or hangs until released; counts its lookups."""

    def __init__(self, hang: bool = False) -> None:
        self.calls: list[str] = []
        self.release = threading.Event()
        self.hang = hang

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        if self.hang:
            self.release.wait(30)
        if host.endswith(".invalid"):
            raise OSError("Name or service not known")
        return ["93.184.215.14"]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_answers_and_failures_are_cached_for_cache_s():
    names, clock = Resolver(), Clock()
    bounded = BoundedResolver(timeout_s=1, concurrency=2, cache_s=60, resolve=names, clock=clock)
    assert bounded("hooks.example", 443) == ["93.184.215.14"]
    assert bounded("hooks.example", 443) == ["93.184.215.14"]
    for _ in range(2):
        with pytest.raises(OSError, match="not known"):
            bounded("nothing.invalid", 443)
    assert names.calls == ["hooks.example", "nothing.invalid"]
    clock.now += 61
    bounded("hooks.example", 443)
    assert names.calls[-1] == "hooks.example" and len(names.calls) == 3


def test_a_hanging_name_server_costs_at_most_timeout_s_and_a_slot():
    names = Resolver(hang=True)
    bounded = BoundedResolver(timeout_s=0.2, concurrency=1, cache_s=60, resolve=names)
    try:
        with pytest.raises(OSError, match="no answer within 0.2 s"):
            bounded("slow.example", 443)
        # Its lookup still holds the only slot: the next name is refused without a lookup.
        with pytest.raises(OSError, match="too many host name lookups"):
            bounded("other.example", 443)
        assert names.calls == ["slow.example"]
        with pytest.raises(UnsafeURL, match="does not resolve .no answer within"):
            vet_url("https://slow.example/hook", resolver=bounded)  # the failure is cached: no new lookup
        assert names.calls == ["slow.example"]
    finally:
        names.release.set()
