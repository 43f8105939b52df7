"""``data/configs/MANIFEST.tsv``: every bundled config file and where it came from, generated.

The manifest is a reader's table, not a second record: ``snapshot.json`` holds the provenance
(its models and its fixtures) and ``manifest_text`` writes this file from it, so the two cannot
disagree. ``observatory snapshot manifest`` rewrites it; ``--check`` fails when the committed
file is not what the snapshot generates (the tests run the same comparison).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from observatory.catalog.snapshot import CONFIGS_DIR, SnapshotEntry, SnapshotFixture, load_entries, load_fixtures

MANIFEST_PATH = CONFIGS_DIR / "MANIFEST.tsv"
COLUMNS = ("file", "model_id", "role", "provenance", "source_repo", "source_path", "source_commit", "source_sha256",
           "sha256", "hub_check", "hub_revision", "release_date", "release_date_kind", "relation", "base_models",
           "copy")


def _entry_row(entry: SnapshotEntry) -> dict:
    lineage = entry.lineage()
    return {
        "file": entry.config_file, "model_id": entry.id, "role": "snapshot model", "provenance": entry.provenance,
        "source_repo": entry.source_repo, "source_path": entry.source_path, "source_commit": entry.source_commit,
        "source_sha256": entry.source_sha256, "sha256": entry.sha256, "hub_check": entry.hub_check,
        "hub_revision": entry.hub_revision, "release_date": entry.release_date.isoformat(),
        "release_date_kind": entry.release_date_kind, "relation": lineage.relation,
        "base_models": ";".join(lineage.base_models), "copy": entry.copy,
    }


def _fixture_row(fixture: SnapshotFixture) -> dict:
    return {
        "file": fixture.file, "model_id": fixture.model_id, "role": "parser test fixture", "provenance": "verbatim",
        "source_repo": fixture.source_repo, "source_path": fixture.source_path,
        "source_commit": fixture.source_commit, "source_sha256": fixture.source_sha256,
        "sha256": fixture.source_sha256, "copy": fixture.copy,
    }


def _cell(value: object) -> str:
    # One line per file: a tab or newline in free text would split the row for a reader using cut.
    return "" if value is None else " ".join(str(value).split())


def manifest_text(path: Path | None = None, configs_dir: Path | None = None) -> str:
    """The manifest ``snapshot.json`` implies: one row per bundled file, sorted by file name."""
    rows = [_entry_row(e) for e in load_entries(path, configs_dir) if e.config_file]
    rows += [_fixture_row(f) for f in load_fixtures(path, configs_dir)]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, delimiter="\t", lineterminator="\n",
                            quoting=csv.QUOTE_NONE, quotechar=None)
    writer.writeheader()
    for row in sorted(rows, key=lambda r: r["file"]):
        writer.writerow({name: _cell(row.get(name)) for name in COLUMNS})
    return buffer.getvalue()


def write_manifest(target: Path = MANIFEST_PATH) -> bool:
    """Write the generated manifest; True when the file changed."""
    text = manifest_text()
    old = target.read_text(encoding="utf-8") if target.exists() else None
    if old == text:
        return False
    target.write_text(text, encoding="utf-8")
    return True
