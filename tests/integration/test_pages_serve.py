"""``observatory serve`` as a user runs it: a real process on a free 127.0.0.1 port, a fresh data
directory, no network. (The browser suite drives the single-worker server in depth.)"""

from __future__ import annotations

import socket
import sqlite3
import subprocess

import httpx

from observatory.commands.serve import serve
from observatory.testing.server import CLI, offline_env, running_server

# The schedule runs (leadership among the workers) but never crawls the unreachable Hub.
NO_CRAWL = {"OBSERVATORY_CRAWL_INTERVAL_S": "0"}


def test_several_workers_share_one_prepared_store(tmp_path):
    data_dir = tmp_path / "data"
    with running_server(data_dir, "--workers", "2", "--log-level", "warning",
                        env=offline_env(data_dir, **NO_CRAWL)) as server:
        for _ in range(6):  # requests land on both workers
            for path in ("/", "/models.json", "/trends.json?period=quarter", "/api/v1/models?size=1"):
                assert httpx.get(server.url + path, timeout=10).status_code == 200, path
        with sqlite3.connect(data_dir / "observatory.db") as db:
            # the snapshot was loaded once, before the workers started
            models = db.execute("select count(*) from hub_model").fetchone()[0]
            assert models >= 150
            assert db.execute("select count(*) from config_revision").fetchone()[0] == models
        text = server.log_text()
        assert "Traceback" not in text and "ERROR" not in text, text[-2000:]
        assert "workers: 2" in text


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
