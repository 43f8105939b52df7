"""``observatory snapshot``: the bundled notable-model snapshot (load, list, export it; regenerate its manifest)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from observatory.catalog.snapshot import SnapshotError, load_entries, load_snapshot
from observatory.settings import get_settings
from observatory.store.db import get_engine, upgrade

_FILE_OPTION = click.option(
    "--file",
    "path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="A snapshot manifest other than the bundled one (its config files in ./configs beside it).",
)


@click.group()
def snapshot() -> None:
    """The bundled snapshot of notable open models (2019-2026)."""


@snapshot.command("load")
@_FILE_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
def load_command(path: Path | None, as_json: bool) -> None:
    """Load the snapshot into the database (idempotent; crawled Hub data is never overwritten)."""
    settings = get_settings()
    try:
        load_entries(path)  # validate before creating or migrating the database
        upgrade(settings.resolved_database_url)
        summary = load_snapshot(get_engine(settings), path)
    except SnapshotError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps(summary, sort_keys=True))
        return
    click.echo(
        f"snapshot: {summary['entries']} models ({summary['models_added']} added, {summary['models_updated']} updated, "
        f"{summary['models_unchanged']} unchanged, {summary['crawled_models_kept']} crawled kept); "
        f"{summary['revisions_added']} revisions added; {summary['parse_errors']} parse errors"
    )
    for error in summary["errors"]:
        click.echo(f"  parse error in {error['id']}: {error['error']}", err=True)


@snapshot.command("list")
@_FILE_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array, one object per model.")
def list_command(path: Path | None, as_json: bool) -> None:
    """List the models in the snapshot with their attention geometry (reads no database)."""
    from observatory.core import kvcache
    from observatory.store.ingest import derive

    try:
        entries = load_entries(path)
    except SnapshotError as exc:
        raise click.ClickException(str(exc)) from None
    rows = []
    for entry in entries:
        derived = derive(entry.raw_text)
        geom, error = derived.geometry, derived.error
        rows.append(
            {
                "id": entry.id,
                "family": entry.family,
                "release_date": entry.release_date.isoformat(),
                "release_date_confidence": entry.release_date_confidence,
                "provenance": entry.provenance,
                "source": entry.source,
                "attention_kind": geom.attention_kind if geom else None,
                "num_query_heads": geom.num_query_heads if geom else None,
                "num_kv_heads": geom.num_kv_heads if geom else None,
                "head_dim": geom.head_dim if geom else None,
                "kv_layers": geom.kv_layers if geom else None,
                "kv_cache_bytes_per_token": kvcache.bytes_per_token(geom, "bf16") if geom else None,
                "error": error,
            }
        )
    if as_json:
        click.echo(json.dumps(rows))
        return
    click.echo(
        f"{'released':<10}  {'model':<48} {'kind':<5} {'H':>4} {'K':>4} {'d':>4} {'KV/tok bf16':>12}  provenance"
    )
    for row in rows:
        kv = f"{row['kv_cache_bytes_per_token']:,}" if row["kv_cache_bytes_per_token"] is not None else "error"
        click.echo(
            f"{row['release_date']:<10}  {row['id'][:48]:<48} {row['attention_kind'] or '-':<5} "
            f"{_num(row['num_query_heads']):>4} {_num(row['num_kv_heads']):>4} {_num(row['head_dim']):>4} "
            f"{kv:>12}  {row['provenance']}"
        )


@snapshot.command("export")
@_FILE_OPTION
@click.option("--format", "fmt", type=click.Choice(["csv", "json", "datapackage"]), default="datapackage",
              show_default=True, help="csv: models.csv; json: models.json; datapackage: models.csv with a "
                                      "Frictionless datapackage.json. The configs go in configs/ either way.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as one JSON object.")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
def export_command(path: Path | None, fmt: str, as_json: bool, out_dir: Path) -> None:
    """Export the snapshot as a citable dataset into OUT_DIR (reads no database)."""
    from observatory.catalog.snapshot_export import export

    try:
        written = export(out_dir, fmt, path)
    except SnapshotError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write to {out_dir}: {exc.strerror or exc}") from None
    configs = sum(1 for p in written if p.parent.name == "configs")
    if as_json:
        click.echo(json.dumps({"ok": True, "format": fmt, "directory": str(out_dir), "files": len(written),
                               "configs": configs}))
        return
    click.echo(f"{fmt}: {len(written) - configs} table file(s) and {configs} configs in {out_dir}")


@snapshot.command("manifest")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when configs/MANIFEST.tsv is not what "
                                            "snapshot.json generates.")
def manifest_command(check: bool) -> None:
    """Regenerate configs/MANIFEST.tsv from snapshot.json (the one record of where each file came from)."""
    from observatory.catalog.manifest import MANIFEST_PATH, manifest_text, write_manifest

    try:
        if check:
            current = MANIFEST_PATH.read_text(encoding="utf-8") if MANIFEST_PATH.exists() else ""
            if current != manifest_text():
                raise click.ClickException(f"{MANIFEST_PATH} differs from what snapshot.json generates; "
                                           "run `observatory snapshot manifest`")
            click.echo(f"{MANIFEST_PATH}: up to date")
            return
        changed = write_manifest()
    except SnapshotError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write {MANIFEST_PATH}: {exc.strerror or exc}") from None
    click.echo(f"{MANIFEST_PATH}: {'written' if changed else 'unchanged'}")


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)
