"""A bounded pool of oracle children, each config under a time limit and every child under a memory limit.

``read_configs`` hands configs to at most ``workers`` child processes (``observatory.oracle.child``)
and yields one ``Outcome`` per config, in the calling thread, as they come back. A child answers
one config at a time; importing torch and transformers costs seconds, so a child serves many
configs, and only one that hangs (no answer within ``time_limit_s``: killed), crashes (its exit
status and the last line it wrote to stderr) or exhausts its memory limit is replaced. Each of
those is an outcome ``failed`` with its reason; nothing a config does can stall the caller beyond
its time limit, and ``should_stop`` is polled several times a second.
"""

from __future__ import annotations

import json
import os
import queue
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass

from observatory.oracle.child import MEMORY_ENV
from observatory.oracle.reading import Reading

POLL_S = 0.2  # how often a waiting worker looks at should_stop
STARTUP_LIMIT_S = 300.0  # importing torch and transformers on a busy machine; a child slower than this failed


@dataclass(frozen=True)
class Outcome:
    key: Hashable
    status: str  # read | unsupported | failed
    reading: Reading | None = None
    reason: str | None = None
    transformers: str | None = None  # the version that read it (None when no child got that far)


class _ChildGone(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Stopped(Exception):
    pass


class _Child:
    """One running child: its pipes, the file its stderr goes to, the transformers version it reported."""

    def __init__(self, memory_limit_bytes: int, should_stop: Callable[[], bool]) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - the child's lifetime; close() closes it
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
               "TOKENIZERS_PARALLELISM": "false", MEMORY_ENV: str(memory_limit_bytes)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "observatory.oracle.child"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr, env=env, start_new_session=True)  # its own group: a kill reaches what it spawned
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.process.stdout, selectors.EVENT_READ)
        self.buffer = b""
        try:
            ready = self.receive(STARTUP_LIMIT_S, should_stop, what="start (import torch and transformers)")
        except BaseException:  # stopped or dead while starting: no one else holds this child to close it
            self.close()
            raise
        self.version = ready.get("transformers")

    def receive(self, limit_s: float, should_stop: Callable[[], bool], what: str) -> dict:
        deadline = time.monotonic() + limit_s
        while b"\n" not in self.buffer:
            if should_stop():
                raise _Stopped
            left = deadline - time.monotonic()
            if left <= 0:
                raise _ChildGone(f"time limit: no answer within {limit_s:g} s to {what}; the child was killed")
            if self.selector.select(min(POLL_S, left)):
                chunk = os.read(self.process.stdout.fileno(), 65536)
                if not chunk:
                    raise _ChildGone(self._death())
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def send(self, message: dict) -> None:
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise _ChildGone(self._death()) from None

    def _death(self) -> str:
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        if code is not None and code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        tail = self._stderr_tail()
        return f"crash: the oracle's child {how}" + (f" ({tail})" if tail else "")

    def _stderr_tail(self) -> str:
        try:
            self.stderr.seek(0, os.SEEK_END)
            size = self.stderr.tell()
            self.stderr.seek(max(0, size - 2000))
            lines = [ln.strip() for ln in self.stderr.read().decode(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return lines[-1][:300] if lines else ""

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.process.kill()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for stream in (self.process.stdin, self.process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self.selector.close()
        self.stderr.close()


def read_configs(configs: Iterable[tuple[Hashable, dict]], *, workers: int = 1, time_limit_s: float = 60.0,
                 memory_limit_bytes: int = 4 << 30, should_stop: Callable[[], bool] = lambda: False,
                 ) -> Iterator[Outcome]:
    """Yield an Outcome for every (key, config dict), as the children finish them (any order).

    Stops early, without an outcome for the configs left, once ``should_stop()`` is true; every
    child is gone when the generator ends (or is closed)."""
    jobs: queue.Queue = queue.Queue()
    for item in configs:
        jobs.put(item)
    if jobs.empty():
        return
    results: queue.Queue = queue.Queue()
    stop = threading.Event()

    def stopping() -> bool:
        return stop.is_set() or should_stop()

    workers_ = [_Worker(memory_limit_bytes, time_limit_s, stopping) for _ in range(max(1, min(workers, jobs.qsize())))]
    threads = [threading.Thread(target=w.run, args=(jobs, results), name=f"oracle-{i}", daemon=True)
               for i, w in enumerate(workers_)]
    for thread in threads:
        thread.start()
    running = len(threads)
    try:
        while running:
            try:
                outcome = results.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if outcome is None:
                running -= 1
            else:
                yield outcome
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)


class _Worker:
    """One thread's loop: take a config, hand it to this worker's child (started on demand), report."""

    def __init__(self, memory_limit_bytes: int, time_limit_s: float, stopping: Callable[[], bool]) -> None:
        self.memory_limit_bytes = memory_limit_bytes
        self.time_limit_s = time_limit_s
        self.stopping = stopping
        self.child: _Child | None = None
        self.version: str | None = None

    def run(self, jobs: queue.Queue, results: queue.Queue) -> None:
        try:
            while not self.stopping():
                try:
                    key, raw = jobs.get_nowait()
                except queue.Empty:
                    return
                results.put(self.one(key, raw))
        except _Stopped:
            return
        finally:
            self.drop()
            results.put(None)  # this worker is done

    def one(self, key: Hashable, raw: dict) -> Outcome:
        try:
            if self.child is None:
                self.child = _Child(self.memory_limit_bytes, self.stopping)
                self.version = self.child.version
            self.child.send({"id": 0, "config": raw})
            answer = self.child.receive(self.time_limit_s, self.stopping, what="this config")
        except _ChildGone as gone:
            self.drop()
            return Outcome(key, "failed", reason=gone.reason, transformers=self.version)
        except _Stopped:
            self.drop()
            raise
        if answer.get("status") == "failed" and str(answer.get("reason", "")).startswith("memory limit"):
            self.drop()  # it exits after a MemoryError: the next config gets a fresh child
        if answer.get("status") == "read":
            return Outcome(key, "read", reading=Reading.from_dict(answer["reading"]), transformers=self.version)
        return Outcome(key, answer.get("status", "failed"), reason=answer.get("reason"), transformers=self.version)

    def drop(self) -> None:
        if self.child is not None:
            self.child.close()
            self.child = None
