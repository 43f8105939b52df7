"""``observatory serve`` as a user runs it: a real process on a free 127.0.0.1 port, a fresh data
directory, no network. (The browser suite drives the single-worker server in depth.)"""

from __future__ import annotations

import http.client
import socket
import sqlite3
import statistics
import subprocess
import time
from urllib.parse import urlsplit

import httpx
import pytest
from uvicorn.importer import import_from_string

from observatory.commands.serve import serve, uvicorn_options
from observatory.testing.server import CLI, offline_env, running_server
from observatory.web.tcp import NoDelayHttpToolsProtocol

# The schedule runs (leadership among the workers) but never crawls the unreachable Hub.
NO_CRAWL = {"OBSERVATORY_CRAWL_INTERVAL_S": "0"}


def keep_alive_latencies(url: str, path: str, n: int = 25) -> list[float]:
    """Seconds per request on one keep-alive connection, as a browser or API client sends them."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    times = []
    try:
        for _ in range(n):
            started = time.perf_counter()
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            assert response.status == 200
            times.append(time.perf_counter() - started)
    finally:
        conn.close()
    return times


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.slow
def test_workers_share_one_prepared_store_and_answer_without_delay(tmp_path, workers):
    data_dir = tmp_path / "data"
    with running_server(data_dir, "--workers", workers, "--log-level", "warning",
                        env=offline_env(data_dir, **NO_CRAWL)) as server:
        for _ in range(6):  # requests land on every worker
            for path in ("/", "/models.json", "/trends.json?period=quarter", "/api/v1/models?size=1"):
                assert httpx.get(server.url + path, timeout=10).status_code == 200, path
        # Nagle's algorithm against the client's delayed ACK held every response of a worker
        # process back ~40 ms; with TCP_NODELAY a small answer takes about a millisecond.
        assert statistics.median(keep_alive_latencies(server.url, "/api/v1/hardware/h100-sxm")) < 0.02
        with sqlite3.connect(data_dir / "observatory.db") as db:
            # the snapshot was loaded once, before the workers started
            models = db.execute("select count(*) from hub_model").fetchone()[0]
            assert models >= 150
            assert db.execute("select count(*) from config_revision").fetchone()[0] == models
        text = server.log_text()
        assert "Traceback" not in text and "ERROR" not in text, text[-2000:]
        assert f"workers: {workers}" in text


@pytest.mark.parametrize("workers", [1, 4])
def test_every_worker_count_sets_tcp_nodelay(workers):
    options = uvicorn_options("127.0.0.1", 8000, workers, "info")
    assert options["workers"] == workers
    assert import_from_string(options["http"]) is NoDelayHttpToolsProtocol


def test_port_in_use_is_one_clear_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([*CLI, "serve", "--port", str(port)], env=offline_env(tmp_path / "data"),
                                capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [f"Error: 127.0.0.1:{port} is already in use; choose another --port"]
    assert not (tmp_path / "data" / "observatory.db").exists()  # nothing prepared for a server that cannot start


def test_serve_help_lists_its_options():
    from click.testing import CliRunner

    result = CliRunner().invoke(serve, ["--help"])
    assert result.exit_code == 0
    for option in ("--host", "--port", "--workers", "--no-scheduler"):
        assert option in result.output
    bad = CliRunner().invoke(serve, ["--workers", "0"])
    assert bad.exit_code == 2 and "--workers" in bad.output
