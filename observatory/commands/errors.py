"""One line on failure, never a traceback; ``--debug`` shows it (issue 21, finding 7).

``OneLineGroup`` is the ``observatory`` command group: any exception a command lets out becomes
one ``Error: ...`` line saying what is wrong with what (``describe``), and exit status 1. With
``--debug`` (before or after the command's name) the traceback is printed instead, including
the one behind a message a command already made (``raise ClickException(...) from None`` keeps
it as ``__context__``). Log records below a command lose their tracebacks too unless debugging,
so a crawl that fails on a full disk prints its reason once, not a stack per batch.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
import traceback

import click

DEBUG_KEY = "observatory.debug"

# SQLite's own words (sqlite3 errors) -> what they mean for the store.
_SQLITE_MEANINGS = (
    (("database disk image is malformed", "file is not a database", "file is encrypted"),
     "the store is damaged or not an SQLite database; restore it from a backup or move it aside"),
    (("readonly database", "read-only"), "the store is read-only here; give this user write access to the file "
                                         "and its directory, or point OBSERVATORY_DATABASE_URL elsewhere"),
    (("database or disk is full",), "the disk holding the store is full; free space and run it again "
                                    "(what was committed is kept)"),
    (("unable to open database file",), "the store cannot be opened (missing directory or no permission)"),
    (("disk i/o error",), "the disk holding the store failed a read or write"),
)


def one_line(text: str, limit: int = 500) -> str:
    return " ".join(str(text).split())[:limit]


def describe(exc: BaseException) -> str:
    """What went wrong, for a person, in one line."""
    from alembic.util import CommandError
    from sqlalchemy.exc import DBAPIError

    from observatory.store.integrity import StoreCorrupt

    if isinstance(exc, StoreCorrupt):
        return one_line(exc)
    driver_error = exc.orig if isinstance(exc, DBAPIError) else exc if isinstance(exc, sqlite3.Error) else None
    if driver_error is not None:
        said = one_line(driver_error)
        for needles, meaning in _SQLITE_MEANINGS:
            if any(needle in said.lower() for needle in needles):
                return f"{meaning} ({said})"
        return f"database error: {said}"
    if isinstance(exc, CommandError):
        return ("the store's schema history does not match this version of the observatory "
                f"(wrongly migrated, or made by a newer version): {one_line(exc)}")
    if isinstance(exc, RecursionError):
        return "input nested too deeply to read (RecursionError)"
    if isinstance(exc, OSError) and exc.strerror:
        return one_line(f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror)
    return one_line(f"{type(exc).__name__}: {exc}")


class _NoTraceback(logging.Formatter):
    def formatException(self, ei) -> str:  # noqa: N802 (logging's name)
        return ""

    def format(self, record: logging.LogRecord) -> str:
        record.exc_text = None
        text = super().format(record)
        record.exc_text = None  # another handler (--debug, a file) formats its own
        return text


def _quiet_tracebacks() -> None:
    """Log records still print (WARNING and up, as before), without their stacks."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_NoTraceback("%(message)s"))
    logging.lastResort = handler


_LAST_RESORT = logging.lastResort


def enable_debug(ctx: click.Context, _param, value: bool) -> None:
    if value:
        ctx.meta[DEBUG_KEY] = True
        logging.lastResort = _LAST_RESORT  # given after the command's name: stacks back on


def debug_option() -> click.Option:
    return click.Option(["--debug"], is_flag=True, expose_value=False, is_eager=True, callback=enable_debug,
                        help="Show the full traceback when something fails.")


class OneLineGroup(click.Group):
    """The top-level group: ``--debug`` on it and on every command, one line on any failure."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        _add_debug(cmd)
        super().add_command(cmd, name)

    def invoke(self, ctx: click.Context):
        if not ctx.meta.get(DEBUG_KEY):
            _quiet_tracebacks()
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            if ctx.meta.get(DEBUG_KEY) and exc.__context__ is not None:
                traceback.print_exception(exc.__context__, file=sys.stderr)
            raise
        except (click.exceptions.Exit, click.Abort, KeyboardInterrupt, SystemExit):
            raise
        except Exception as exc:
            if ctx.meta.get(DEBUG_KEY):
                raise
            raise click.ClickException(describe(exc)) from None


def _add_debug(cmd: click.Command) -> None:
    if not any(p.name == "debug" for p in cmd.params):
        cmd.params.append(debug_option())
    if isinstance(cmd, click.Group):
        for sub in cmd.commands.values():
            _add_debug(sub)
