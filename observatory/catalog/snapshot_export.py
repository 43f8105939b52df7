"""The bundled snapshot as a citable dataset: CSV, JSON, or a Frictionless Data Package.

One row per model: who released it and when (with the date's source), its parameter count (with
its kind and source, and our estimate from the config), the attention geometry and KV-cache cost
derived from its config.json, and where that config came from (repository, path, commit). The
configs themselves travel in ``configs/``, byte for byte. ``datapackage.json`` describes every
column with its type, unit and meaning (https://specs.frictionlessdata.io/). Reads no database.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from observatory.catalog.snapshot import SNAPSHOT_PATH, SnapshotEntry, load_entries
from observatory.core import kvcache
from observatory.core.geometry import PARSER_VERSION
from observatory.core.trends import attention_stack
from observatory.store.ingest import derive, parameter_estimate

FORMATS = ("csv", "json", "datapackage")
NAME = "gqa-observatory-snapshot"
LICENSE_NOTE = ("The table is the GQA Observatory's (Apache-2.0, like the project). Each config.json is the "
                "publisher's file, as copied from the public repository named in its row.")


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # Table Schema type
    description: str
    unit: str | None = None


COLUMNS = (
    Column("id", "string", "Hugging Face repository id of the model"),
    Column("organisation", "string", "The lab that released it"),
    Column("family", "string", "Model family"),
    Column("release_date", "date", "Release date (UTC day)"),
    Column("release_date_confidence", "string", "high: the source states the day; medium: month or repo date; low"),
    Column("release_date_source", "string", "Where the release date comes from (URL or repository@commit)"),
    Column("release_date_kind", "string", "What the release date is the date of: announcement, paper, repository "
                                          "commit, hub upload, third-party report, or unsourced"),
    Column("num_parameters", "integer", "Published total parameter count; empty when none was found", "parameters"),
    Column("num_parameters_kind", "string", "Where num_parameters comes from: safetensors total, index file, weights "
                                            "file size, model card, paper, announcement, model name, third-party "
                                            "report, or config estimate (num_parameters empty)"),
    Column("num_parameters_source", "string", "Where the published count comes from"),
    Column("params_estimate", "integer", "Total parameters estimated from the config (observatory.core.params)",
           "parameters"),
    Column("active_parameters", "integer", "Mixture-of-experts: published parameters used per token", "parameters"),
    Column("active_params_estimate", "integer", "Parameters used per token, estimated from the config", "parameters"),
    Column("model_type", "string", "The config's model_type"),
    Column("attention_kind", "string", "MHA, MQA, GQA, MLA, or none (no attention layer)"),
    Column("stack", "string", "attention, hybrid (attention mixed with SSM/linear/conv layers) or attention-free"),
    Column("encoder_only", "boolean", "An encoder-only model: it never decodes, so it keeps no KV cache"),
    Column("is_encoder_decoder", "boolean", "An encoder-decoder: KV figures are the decoder's self-attention"),
    Column("num_query_heads", "integer", "Query heads H", "heads"),
    Column("num_kv_heads", "integer", "Key/value heads K (MLA: the declared, logical count)", "heads"),
    Column("group_size", "number", "G = H / K; empty for MLA and attention-free models", "query heads per KV head"),
    Column("head_dim", "integer", "Query/key head dimension (MLA: nope + rope)", "elements"),
    Column("v_head_dim", "integer", "Value head dimension", "elements"),
    Column("num_layers", "integer", "Decoder layers", "layers"),
    Column("kv_layers", "integer", "Layers holding a per-token KV cache", "layers"),
    Column("sliding_window", "integer", "Sliding-window size, where declared", "tokens"),
    Column("sliding_layers", "integer", "Layers on which the window binds", "layers"),
    Column("kv_lora_rank", "integer", "MLA latent rank", "elements"),
    Column("qk_rope_head_dim", "integer", "MLA decoupled RoPE dimension", "elements"),
    Column("kv_elements_per_token", "integer", "KV-cache elements one token adds, all KV layers, full context",
           "elements"),
    Column("kv_bytes_per_token_bf16", "integer", "The same in bytes at bf16 (vLLM's sizing convention)", "bytes"),
    Column("mha_kv_bytes_per_token_bf16", "integer", "The MHA counterfactual (K = H) of the same model", "bytes"),
    Column("uncertain", "boolean", "An unknown layer type was counted as a full KV layer (an upper bound)"),
    Column("provenance", "string", "verbatim (the cited file, byte for byte), transcribed (rebuilt from code, page "
                                   "text or a corrected copy; hub_check says whether the bytes are proven the Hub's), "
                                   "or reconstructed (published geometry, no copy found)"),
    Column("config_file", "string", "The config, relative to the package (empty for reconstructed entries)"),
    Column("config_sha256", "string", "sha256 of the config file's bytes"),
    Column("config_source", "string", "URL of the copied file at its commit, or where the geometry was published"),
    Column("source_repo", "string", "GitHub repository the config was copied from"),
    Column("source_path", "string", "Path of the config in that repository"),
    Column("source_commit", "string", "Commit the config was copied at"),
    Column("source_sha256", "string", "sha256 of the cited file at source_commit, recorded from the source; a "
                                      "verbatim copy's config_sha256 equals it"),
    Column("copy", "string", "What the copied bytes are beside the Hub's own file (edited or re-saved copies say so)"),
    Column("hub_sha256", "string", "sha256 of the Hub's config.json at hub_revision, from the public list in "
                                   "dinoml/model-configs-rs corpus/report-repositories.json"),
    Column("hub_revision", "string", "The Hub revision hub_sha256 is of"),
    Column("hub_check", "string", "match: config_sha256 equals hub_sha256; differs: it does not; empty: no Hub hash "
                                  "listed"),
    Column("relation", "string", "original, or how the repo derives from base_models (finetune, quantized, ...), by "
                                 "the crawler's lineage rules"),
    Column("base_models", "string", "The repos it derives from (semicolon-separated)"),
    Column("same_architecture_as", "string", "Other entries with a byte-identical config (semicolon-separated)"),
    Column("searched", "string", "Reconstructed entries: where a real copy was looked for"),
    Column("notes", "string", "Anything a careful reader needs"),
    Column("parser_version", "integer", "Version of the geometry parser that derived these columns"),
)
FIELDS = tuple(c.name for c in COLUMNS)


def config_path(entry: SnapshotEntry) -> str | None:
    return f"configs/{entry.config_file}" if entry.config_file else None


def row(entry: SnapshotEntry) -> dict:
    """One model's row (plain values; None where unknown)."""
    derived = derive(entry.raw_text)
    geom = derived.geometry
    total, active = parameter_estimate(derived.config) if derived.config is not None else (None, None)
    mha = kvcache.mha_counterfactual(geom) if geom is not None else None
    lineage = entry.lineage()
    out = {
        "id": entry.id, "organisation": entry.organisation, "family": entry.family,
        "release_date": entry.release_date.isoformat(), "release_date_confidence": entry.release_date_confidence,
        "release_date_source": entry.release_date_source, "num_parameters": entry.num_parameters,
        "num_parameters_kind": entry.num_parameters_kind, "num_parameters_source": entry.num_parameters_source,
        "params_estimate": total, "active_parameters": entry.active_parameters,
        "active_params_estimate": active if active != total else None,
        "provenance": entry.provenance, "config_file": config_path(entry),
        "config_sha256": entry.sha256,
        "config_source": entry.source, "source_repo": entry.source_repo, "source_path": entry.source_path,
        "source_commit": entry.source_commit, "source_sha256": entry.source_sha256, "copy": entry.copy,
        "hub_sha256": entry.hub_sha256, "hub_revision": entry.hub_revision, "hub_check": entry.hub_check,
        "release_date_kind": entry.release_date_kind, "relation": lineage.relation,
        "base_models": ";".join(lineage.base_models) or None,
        "same_architecture_as": ";".join(entry.same_architecture_as) or None, "searched": entry.searched,
        "notes": entry.notes, "parser_version": PARSER_VERSION,
    }
    if geom is not None:
        group = geom.group_size
        out.update(
            model_type=geom.model_type, attention_kind=geom.attention_kind,
            stack=attention_stack(geom.attention_kind, geom.is_hybrid), encoder_only=geom.encoder_only,
            is_encoder_decoder=geom.is_encoder_decoder, num_query_heads=geom.num_query_heads,
            num_kv_heads=geom.num_kv_heads, group_size=int(group) if group and group.is_integer() else group,
            head_dim=geom.head_dim, v_head_dim=geom.v_head_dim, num_layers=geom.num_layers,
            kv_layers=geom.kv_layers, sliding_window=geom.sliding_window, sliding_layers=geom.sliding_layers,
            kv_lora_rank=geom.mla.kv_lora_rank if geom.mla else None,
            qk_rope_head_dim=geom.mla.qk_rope_head_dim if geom.mla else None,
            kv_elements_per_token=geom.kv_elements_per_token,
            kv_bytes_per_token_bf16=kvcache.bytes_per_token(geom, "bf16"),
            mha_kv_bytes_per_token_bf16=kvcache.bytes_per_token(mha, "bf16"), uncertain=geom.uncertain)
    return {name: out.get(name) for name in FIELDS}


def rows(path: Path | None = None) -> list[dict]:
    return [row(entry) for entry in load_entries(path)]


def _csv_text(table: list[dict]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    for r in table:
        writer.writerow({k: "" if v is None else str(v).lower() if isinstance(v, bool) else v for k, v in r.items()})
    return buffer.getvalue()


def descriptor(count: int) -> dict:
    """``datapackage.json``: the package, its one table and every column's type, unit and meaning."""
    fields = []
    for c in COLUMNS:
        field = {"name": c.name, "type": c.type, "description": c.description}
        if c.unit:
            field["unit"] = c.unit  # not a core Table Schema property; kept as the column's unit
        fields.append(field)
    return {
        "name": NAME,
        "title": "GQA Observatory: notable open language models and what their attention caches",
        "description": (f"{count} notable open-weight language models (2018 to 2026) with their config.json, release "
                        "date and parameter count (each with its source), and the attention geometry and KV-cache "
                        "cost derived from the config. Units: bytes are decimal (GB = 10^9); KV sizes follow "
                        "vLLM (GQA caches 2·K·d elements per token per layer, MLA kv_lora_rank + "
                        "qk_rope_head_dim). " + LICENSE_NOTE),
        "homepage": "https://github.com/gqa-observatory/gqa-observatory",
        "version": f"parser-{PARSER_VERSION}",
        "licenses": [{"name": "Apache-2.0", "path": "https://www.apache.org/licenses/LICENSE-2.0",
                      "title": "Apache License 2.0"}],
        "resources": [{
            "name": "models",
            "path": "models.csv",
            "format": "csv",
            "mediatype": "text/csv",
            "encoding": "utf-8",
            "schema": {"fields": fields, "primaryKey": ["id"]},
        }],
    }


def export(out_dir: Path, fmt: str, path: Path | None = None) -> list[Path]:
    """Write the dataset in ``fmt`` into ``out_dir`` (created); return the files written."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    entries = load_entries(path)
    table = [row(entry) for entry in entries]
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    if fmt == "json":
        target = out_dir / "models.json"
        target.write_text(json.dumps({"fields": FIELDS, "models": table}, indent=1, ensure_ascii=False) + "\n",
                          encoding="utf-8")
    else:
        target = out_dir / "models.csv"
        target.write_text(_csv_text(table), encoding="utf-8")
    written.append(target)
    if fmt == "datapackage":
        target = out_dir / "datapackage.json"
        target.write_text(json.dumps(descriptor(len(table)), indent=1) + "\n", encoding="utf-8")
        written.append(target)
    configs = out_dir / "configs"
    configs.mkdir(exist_ok=True)
    for entry in entries:
        if entry.config_file:
            target = configs / entry.config_file
            target.write_bytes(entry.raw_text.encode("utf-8"))
            written.append(target)
    return written


@lru_cache(maxsize=1)
def bundled_zip(snapshot_mtime: float) -> bytes:
    """The data package of the bundled snapshot as one zip (built once per snapshot file version)."""
    entries = load_entries()
    table = [row(entry) for entry in entries]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"{NAME}/models.csv", _csv_text(table))
        archive.writestr(f"{NAME}/datapackage.json", json.dumps(descriptor(len(table)), indent=1) + "\n")
        for entry in entries:
            if entry.config_file:
                archive.writestr(f"{NAME}/configs/{entry.config_file}", entry.raw_text.encode("utf-8"))
    return buffer.getvalue()


def bundled_zip_bytes() -> bytes:
    return bundled_zip(SNAPSHOT_PATH.stat().st_mtime)
