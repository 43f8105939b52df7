"""``observatory serve`` as a user runs it: a real process on a free 127.0.0.1 port, a fresh data
directory, no network. (The browser suite drives the single-worker server in depth.)"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from observatory.commands.serve import serve

CLI = [sys.executable, "-c", "from observatory.cli import main; main()"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env(data_dir: Path) -> dict:
    return {**os.environ, "OBSERVATORY_DATA_DIR": str(data_dir), "OBSERVATORY_DATABASE_URL": "",
            "HF_ENDPOINT": f"http://127.0.0.1:{_free_port()}", "OBSERVATORY_HUB_MAX_RETRIES": "0",
            # the schedule runs (leadership among the workers) but never crawls the unreachable Hub
            "OBSERVATORY_CRAWL_INTERVAL_S": "0", "NO_PROXY": "127.0.0.1,localhost"}


def _wait_ready(proc: subprocess.Popen, url: str, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"serve exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    pytest.fail(f"serve did not answer within {timeout}s: {log.read_text()[-2000:]}")


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def test_several_workers_share_one_prepared_store(tmp_path):
    data_dir = tmp_path / "data"
    port = _free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([*CLI, "serve", "--port", str(port), "--workers", "2", "--log-level", "warning"],
                                env=_env(data_dir), stdout=out, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_ready(proc, base + "/", log)
        for _ in range(6):  # requests land on both workers
            for path in ("/", "/models.json", "/trends.json?period=quarter", "/api/v1/models?size=1"):
                assert httpx.get(base + path, timeout=10).status_code == 200, path
        with sqlite3.connect(data_dir / "observatory.db") as db:
            # the snapshot was loaded once, before the workers started
            assert db.execute("select count(*) from hub_model").fetchone()[0] >= 150
            assert db.execute("select count(*) from config_revision").fetchone()[0] == \
                db.execute("select count(*) from hub_model").fetchone()[0]
        text = log.read_text()
        assert "Traceback" not in text and "ERROR" not in text, text[-2000:]
        assert "workers: 2" in text
    finally:
        _stop(proc)


def test_port_in_use_is_one_clear_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([*CLI, "serve", "--port", str(port)], env=_env(tmp_path / "data"),
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
