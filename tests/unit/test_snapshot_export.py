"""The snapshot exported as a citable dataset: every format, validated as a Frictionless data
package by the frictionless library itself, and the rows agree with the bundled data."""

from __future__ import annotations

import csv
import hashlib
import json

import pytest
from click.testing import CliRunner

from observatory.catalog.snapshot import load_entries
from observatory.catalog.snapshot_export import COLUMNS, FIELDS, export
from observatory.cli import main

frictionless = pytest.importorskip("frictionless", reason="frictionless validates the package (test extra)")
ENTRIES = load_entries()


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    out = tmp_path_factory.mktemp("package")
    export(out, "datapackage")
    return out


def test_the_data_package_validates(package):
    report = frictionless.validate(str(package / "datapackage.json"))
    assert report.valid, report.flatten(["rowNumber", "fieldName", "message"])[:5]
    descriptor = json.loads((package / "datapackage.json").read_text())
    fields = descriptor["resources"][0]["schema"]["fields"]
    assert [f["name"] for f in fields] == list(FIELDS)
    assert all(f["description"] for f in fields)
    assert {f["name"]: f.get("unit") for f in fields}["kv_bytes_per_token_bf16"] == "bytes"


def test_one_row_per_model_and_the_configs_byte_for_byte(package):
    with (package / "models.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["id"] for r in rows] == [e.id for e in ENTRIES]
    by_id = {e.id: e for e in ENTRIES}
    for r in rows:
        entry = by_id[r["id"]]
        if entry.config_file:
            data = (package / r["config_file"]).read_bytes()
            assert data == entry.raw_text.encode("utf-8") and hashlib.sha256(data).hexdigest() == r["config_sha256"]
            assert r["config_source"].endswith(f"/blob/{entry.source_commit}/{entry.source_path}")
        else:
            assert r["provenance"] == "reconstructed" and r["config_file"] == "" and r["searched"]
        assert r["release_date_source"] and r["organisation"]


def test_unknown_is_empty_never_zero(package):
    with (package / "models.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    mla = next(r for r in rows if r["id"] == "deepseek-ai/DeepSeek-V3")
    assert mla["group_size"] == "" and mla["attention_kind"] == "MLA" and mla["kv_bytes_per_token_bf16"] == "70272"
    free = next(r for r in rows if r["attention_kind"] == "none")
    assert free["num_query_heads"] == "" and free["kv_bytes_per_token_bf16"] == "0"


@pytest.mark.parametrize("fmt, table", [("csv", "models.csv"), ("json", "models.json")])
def test_plain_formats(tmp_path, fmt, table):
    written = export(tmp_path, fmt)
    assert (tmp_path / table) in written and not (tmp_path / "datapackage.json").exists()
    if fmt == "json":
        doc = json.loads((tmp_path / table).read_text())
        assert doc["fields"] == list(FIELDS) and len(doc["models"]) == len(ENTRIES)
        llama = next(m for m in doc["models"] if m["id"] == "meta-llama/Llama-2-70b-hf")
        assert (llama["group_size"], llama["kv_bytes_per_token_bf16"]) == (8, 327_680)


def test_the_command_line(tmp_path):
    result = CliRunner().invoke(main, ["snapshot", "export", "--format", "datapackage", "--json", str(tmp_path / "x")])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["configs"] == sum(1 for e in ENTRIES if e.config_file)
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    result = CliRunner().invoke(main, ["snapshot", "export", str(blocked)])
    assert result.exit_code != 0 and "is a file" in result.output  # refused before anything is written
    result = CliRunner().invoke(main, ["snapshot", "export", str(blocked / "inside")])
    assert result.exit_code != 0 and "cannot write" in result.output
    result = CliRunner().invoke(main, ["snapshot", "export", "--format", "xlsx", str(tmp_path / "y")])
    assert result.exit_code != 0 and "xlsx" in result.output


def test_every_column_is_described():
    assert len({c.name for c in COLUMNS}) == len(COLUMNS)
    assert all(c.type in ("string", "integer", "number", "boolean", "date") for c in COLUMNS)
