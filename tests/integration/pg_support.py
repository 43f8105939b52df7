"""A throwaway PostgreSQL server for the tests marked ``postgres``.

``OBSERVATORY_TEST_POSTGRES_URL`` names an existing server instead (a role that may CREATE
DATABASE, e.g. ``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``). Otherwise the
session starts its own from the Debian binaries (``initdb``/``pg_ctl``) on a data directory in a
temporary folder, listening on 127.0.0.1 at a free port, with durability off (fsync etc.) since
nothing there outlives the session. PostgreSQL refuses to run as root, so as root it runs as the
``postgres`` user. Each test gets its own database, copied from a template already migrated to
every head, so tests stay independent and do not pay for the migrations each time.

The server runs in a zone far from UTC on purpose: code that leans on the session time zone
(``date(timestamptz)``, naive datetimes) gives different answers there and the tests notice.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import make_url

from observatory.testing.server import free_port

URL_ENV = "OBSERVATORY_TEST_POSTGRES_URL"
SERVER_TIME_ZONE = "Pacific/Kiritimati"  # UTC+14: a created_at late in a UTC day falls on the next date here
_OS_USER = "postgres"
_START_TIMEOUT_S = 60


class PostgresUnavailable(Exception):
    """No server can be had here; the reason says why (tests skip with it)."""


def _bin_dir() -> Path:
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").is_file() and (candidate / "pg_ctl").is_file():
            return candidate
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    raise PostgresUnavailable("PostgreSQL server binaries (initdb, pg_ctl) not found; "
                              f"install postgresql or set {URL_ENV}")


def _run_as() -> tuple[list[str], int | None, int | None]:
    """The command prefix and uid/gid that PostgreSQL's tools must run as."""
    if os.geteuid() != 0:
        return [], None, None
    try:
        user = pwd.getpwnam(_OS_USER)
    except KeyError:
        raise PostgresUnavailable(f"running as root and there is no {_OS_USER!r} user to run PostgreSQL as") from None
    runuser = shutil.which("runuser")
    if runuser is None:
        raise PostgresUnavailable("running as root and runuser(1) is missing")
    return [runuser, "-u", _OS_USER, "--"], user.pw_uid, user.pw_gid


@contextmanager
def local_server() -> Iterator[str]:
    """Start a private server; yield a superuser URL to its ``postgres`` database; stop and delete it."""
    bin_dir = _bin_dir()
    prefix, uid, gid = _run_as()
    # Not under pytest's tmp_path: that lives in a 0700 folder of root that postgres cannot enter.
    root = Path(tempfile.mkdtemp(prefix="observatory-pg-"))
    if uid is not None:
        os.chown(root, uid, gid)
    data, log = root / "data", root / "server.log"
    port = free_port()

    def tool(*args: str, timeout: float = _START_TIMEOUT_S) -> None:
        done = subprocess.run([*prefix, str(bin_dir / args[0]), *args[1:]], capture_output=True, text=True,
                              timeout=timeout, cwd=root)
        if done.returncode != 0:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise PostgresUnavailable(f"{args[0]} failed ({done.returncode}): {done.stderr.strip()[-2000:]}\n{tail}")

    options = " ".join([
        "-c listen_addresses=127.0.0.1", f"-p {port}", f"-c unix_socket_directories={root}",
        "-F", "-c synchronous_commit=off", "-c full_page_writes=off",  # -F: fsync off
        f"-c timezone={SERVER_TIME_ZONE}", "-c max_connections=60", "-c shared_buffers=32MB",
    ])
    try:
        tool("initdb", "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
             "--locale=C", "--no-sync")
        tool("pg_ctl", "-D", str(data), "-l", str(log), "-w", "-t", str(_START_TIMEOUT_S), "-o", options, "start")
    except (OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(root, ignore_errors=True)
        raise PostgresUnavailable(f"could not start PostgreSQL: {exc}") from exc
    except PostgresUnavailable:
        shutil.rmtree(root, ignore_errors=True)
        raise
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        try:
            tool("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop", timeout=30)
        finally:
            shutil.rmtree(root, ignore_errors=True)


@contextmanager
def server_url() -> Iterator[str]:
    """An admin URL: the one in ``OBSERVATORY_TEST_POSTGRES_URL``, else a private server's."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise PostgresUnavailable("psycopg is not installed (pip install -e '.[test]')") from None
    given = os.environ.get(URL_ENV)
    if given:
        yield given
        return
    with local_server() as url:
        yield url


def _admin_execute(admin_url: str, *statements: str) -> None:
    import psycopg

    url = make_url(admin_url)
    with psycopg.connect(host=url.host, port=url.port, user=url.username, password=url.password,
                         dbname=url.database or "postgres", autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def create_database(admin_url: str, template: str | None = None) -> str:
    """A new, empty (or copied from ``template``) database; returns its URL.

    Byte-order collation ("C"), as SQLite compares text, whatever the server's default: the tests
    compare orders by repo id with SQLite's.
    """
    name = f"observatory_test_{uuid.uuid4().hex[:12]}"
    source = f"TEMPLATE {template}" if template else "TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"
    _admin_execute(admin_url, f"CREATE DATABASE {name} {source}")
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_database(admin_url: str, url: str) -> None:
    _admin_execute(admin_url, f"DROP DATABASE IF EXISTS {make_url(url).database} WITH (FORCE)")
