"""``observatory serve`` as a real process on a free 127.0.0.1 port, for tests and benchmarks.

The server gets a fresh data directory and a Hub endpoint on a closed local port (nothing is
reachable: crawls fail at once), and is stopped however the caller's block ends.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def offline_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a server on ``data_dir`` that can reach no Hub."""
    return {
        **os.environ,
        "OBSERVATORY_DATA_DIR": str(data_dir),
        "OBSERVATORY_DATABASE_URL": "",
        "HF_ENDPOINT": f"http://127.0.0.1:{free_port()}",  # nothing listens there
        "OBSERVATORY_HUB_MAX_RETRIES": "0",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        # The scheduled oracle would spend a core on child processes during the test; its own tests run it.
        "OBSERVATORY_ORACLE_ENABLED": "false",
        **extra,
    }


CLI = [sys.executable, "-c", "from observatory.cli import main; main()"]


class ServerFailed(RuntimeError):
    """The server exited or did not answer in time; the message ends with its log."""


@dataclass
class Server:
    url: str
    process: subprocess.Popen
    log: Path

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def running_server(data_dir: Path, *args: str, env: dict[str, str] | None = None,
                   timeout: float = 90.0) -> Iterator[Server]:
    """Start ``observatory serve --port <free> *args`` and wait until ``/`` answers 200."""
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = data_dir.parent / f"serve-{port}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [*CLI, "serve", "--host", "127.0.0.1", "--port", str(port), *args],
            env=env if env is not None else offline_env(data_dir), stdout=out, stderr=subprocess.STDOUT,
        )
    server = Server(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise ServerFailed(f"observatory serve exited with {process.returncode}:\n{server.log_text()[-3000:]}")
            try:
                if httpx.get(server.url + "/", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise ServerFailed(f"observatory serve did not answer within {timeout:.0f}s:\n{server.log_text()[-3000:]}")
            time.sleep(0.3)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
