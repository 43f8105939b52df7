"""``observatory oracle``: transformers' second opinion on the stored configs."""

from __future__ import annotations

import json

import click

from observatory.settings import get_settings
from observatory.store.db import get_engine, read_session, upgrade


@click.group("oracle")
def oracle() -> None:
    """transformers' reading of stored configs beside ours (agree, disagree, unsupported, failed)."""


@oracle.command("check")
@click.option("--all", "every", is_flag=True,
              help="Re-read every current config revision, not only those never read or read by another "
                   "transformers version.")
@click.option("--limit", type=click.IntRange(1, 10**7), default=None, help="At most this many revisions.")
@click.option("--bundled", is_flag=True,
              help="Read the bundled config files (catalog/data/configs) instead of the store, and store nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the per-model_type table as JSON.")
def check_command(every: bool, limit: int | None, bundled: bool, as_json: bool) -> None:
    """Build each due config with transformers on the meta device, in bounded child processes.

    Each config gets oracle_time_limit_s and each child oracle_memory_limit_mb (settings); a config
    that hangs, crashes or exhausts memory is recorded as failed with its reason. Never remote code,
    never a fetch: the configs come from the store. Prints the verdicts per model_type.
    """
    from observatory.oracle.check import OracleUnavailable, check
    from observatory.store.queries.oracle import status_table

    settings = get_settings()
    done = [0]

    def progress(_outcome) -> None:
        done[0] += 1
        if not as_json and done[0] % 25 == 0:
            click.echo(f"  ... {done[0]} read", err=True)

    if bundled:
        _check_bundled(settings, as_json, progress)
        return
    upgrade(settings.resolved_database_url)
    engine = get_engine(settings)

    try:
        report = check(engine, settings, every=every, limit=limit, progress=progress)
    except OracleUnavailable as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        raise click.ClickException("interrupted: what was read so far is stored") from None
    with read_session(engine) as session:
        table = status_table(session)
    if as_json:
        click.echo(json.dumps({"report": report.line(), "model_types": table}))
        return
    click.echo(report.line())
    click.echo(format_table(table))


def _check_bundled(settings, as_json: bool, progress) -> None:
    from observatory.catalog.snapshot import CONFIGS_DIR
    from observatory.oracle.check import (
        OracleUnavailable,
        check_files,
        installed_transformers,
        table_of,
    )

    paths = sorted(CONFIGS_DIR.glob("*.json"))
    try:
        version = installed_transformers()
        results = check_files(paths, settings, progress=progress)
    except OracleUnavailable as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        raise click.ClickException("interrupted") from None
    table = table_of(results)
    if as_json:
        click.echo(json.dumps({"transformers": version, "files": results, "model_types": table}))
        return
    click.echo(f"oracle (transformers {version}) over {len(results)} bundled config files")
    click.echo(format_table(table))
    for r in results:
        if r["status"] in ("disagree", "failed"):
            click.echo(f"  {r['status']:<9} {r['file']}: {r['reason']}")


def format_table(table: list[dict]) -> str:
    header = f"{'model_type':<28} {'configs':>7} {'agree':>6} {'disagree':>8} {'unsupported':>11} {'failed':>6}"
    lines = [header, "-" * len(header)]
    totals = dict.fromkeys(("configs", "agree", "disagree", "unsupported", "failed"), 0)
    for row in table:
        lines.append(f"{row['model_type'] or '(none)':<28} {row['configs']:>7} {row['agree']:>6} {row['disagree']:>8}"
                     f" {row['unsupported']:>11} {row['failed']:>6}")
        for key in totals:
            totals[key] += row[key]
    lines.append("-" * len(header))
    lines.append(f"{'all':<28} {totals['configs']:>7} {totals['agree']:>6} {totals['disagree']:>8}"
                 f" {totals['unsupported']:>11} {totals['failed']:>6}")
    return "\n".join(lines)
