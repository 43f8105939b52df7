"""Provenance of the bundled data (issue 22): every verbatim copy is its cited file, byte for byte;
the manifest is generated from the snapshot; the Hub check says what it can prove; re-uploads are
derivatives by the crawler's own lineage rules, and the same weights count once among the originals."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest

from observatory.catalog.manifest import COLUMNS, MANIFEST_PATH, manifest_text
from observatory.catalog.snapshot import CONFIGS_DIR, SnapshotError, load_entries, load_fixtures
from observatory.core.geometry import parse_config_text, parse_geometry
from observatory.core.lineage import NATIVE_LOW_PRECISION, classify
from observatory.core.trends import period_label

ENTRIES = load_entries()
BY_ID = {e.id: e for e in ENTRIES}
FIXTURES = load_fixtures()


def sha256_of(name: str) -> str:
    return hashlib.sha256((CONFIGS_DIR / name).read_bytes()).hexdigest()


# -- the bytes -----------------------------------------------------------------------------------

def test_every_verbatim_copy_has_the_sha256_recorded_from_its_source():
    verbatim = [e for e in ENTRIES if e.provenance == "verbatim"]
    assert len(verbatim) == 372
    mismatched = [e.id for e in verbatim if sha256_of(e.config_file) != e.source_sha256]
    assert mismatched == []


def test_every_copied_file_records_its_source_hash_and_fixtures_are_copies_too():
    assert all(e.source_sha256 for e in ENTRIES if e.config_file)
    assert len(FIXTURES) == 12  # issue 20 added Moonshine (prefixed keys) and CSM (backbone + depth decoder)
    assert all(sha256_of(f.file) == f.source_sha256 for f in FIXTURES)


def test_the_audited_records_point_at_what_they_hold():
    # Qwen3-32B: the 729-byte file is the cited path at this commit, not at dc5c4d5a (re-indented, 787 bytes).
    assert BY_ID["Qwen/Qwen3-32B"].source_commit == "522319bedb18e873f8134425df09e786e43f504f"
    # DeepSeek-V3 ships its own config (transformers 4.33.1), no longer R1's (4.46.3); they are not one file.
    v3, r1 = BY_ID["deepseek-ai/DeepSeek-V3"], BY_ID["deepseek-ai/DeepSeek-R1"]
    assert json.loads(v3.raw_text)["transformers_version"] == "4.33.1"
    assert json.loads(r1.raw_text)["transformers_version"] == "4.46.3"
    assert v3.raw_text != r1.raw_text and not v3.same_architecture_as
    assert parse_geometry(parse_config_text(v3.raw_text)).kv_elements_per_token == \
        parse_geometry(parse_config_text(r1.raw_text)).kv_elements_per_token
    # gpt-oss-20b: the Hub's file, final newline included.
    oss = BY_ID["openai/gpt-oss-20b"]
    assert oss.raw_text.endswith("}\n") and oss.hub_check == "match" and oss.copy.startswith("the Hub file")


def test_a_copy_called_the_hub_file_is_never_contradicted_by_the_hub_hash():
    for entry in ENTRIES:
        if entry.copy and entry.copy.startswith("the Hub file"):
            assert entry.hub_check != "differs", entry.id
    checks = Counter(e.hub_check for e in ENTRIES)
    assert checks["match"] >= 150 and checks["match"] + checks["differs"] + checks[None] == len(ENTRIES)


def test_copies_we_corrected_by_a_newline_are_transcribed_and_are_the_hubs_bytes():
    for model_id in ("THUDM/glm-4-9b-hf", "mistralai/Ministral-8B-Instruct-2410", "Qwen/Qwen3-30B-A3B-Instruct-2507"):
        entry = BY_ID[model_id]
        assert entry.provenance == "transcribed" and entry.sha256 != entry.source_sha256
        assert entry.hub_check == "match", model_id


# -- the manifest ---------------------------------------------------------------------------------

def test_the_manifest_is_what_the_snapshot_generates():
    assert MANIFEST_PATH.read_text(encoding="utf-8") == manifest_text(), \
        "configs/MANIFEST.tsv is stale: run `observatory snapshot manifest`"


def test_every_bundled_file_has_exactly_one_manifest_row_with_an_entry():
    lines = MANIFEST_PATH.read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t") == list(COLUMNS)
    rows = [dict(zip(COLUMNS, line.split("\t"))) for line in lines[1:]]
    files = sorted(p.name for p in CONFIGS_DIR.glob("*.json"))
    assert sorted(r["file"] for r in rows) == files
    owners = {e.config_file: e.id for e in ENTRIES if e.config_file} | {f.file: f.model_id for f in FIXTURES}
    assert all(owners[r["file"]] == r["model_id"] for r in rows)


def test_a_manifest_that_disagrees_with_the_snapshot_is_caught(tmp_path):
    # The generated text changes with the snapshot: a record edited in snapshot.json alone shows up
    # as a stale manifest, never as two files that quietly disagree.
    doc = json.loads((CONFIGS_DIR.parent / "snapshot.json").read_text(encoding="utf-8"))
    entry = next(m for m in doc["models"] if m["id"] == "Qwen/Qwen3-32B")
    entry["release_date"] = "2025-05-01"
    (tmp_path / "configs").symlink_to(CONFIGS_DIR)
    (tmp_path / "snapshot.json").write_text(json.dumps(doc), encoding="utf-8")
    assert manifest_text(tmp_path / "snapshot.json") != MANIFEST_PATH.read_text(encoding="utf-8")


def test_a_bad_fixture_is_refused(tmp_path):
    doc = json.loads((CONFIGS_DIR.parent / "snapshot.json").read_text(encoding="utf-8"))
    doc["fixtures"][0]["source_sha256"] = "0" * 64
    (tmp_path / "configs").symlink_to(CONFIGS_DIR)
    (tmp_path / "snapshot.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(SnapshotError, match=r"fixtures\[0\].*not the source's"):
        load_fixtures(tmp_path / "snapshot.json")


# -- lineage --------------------------------------------------------------------------------------

NINE = {  # the NVFP4 and FP8 checkpoints the audit found counted as originals, and their bases
    "nvidia/DeepSeek-V4-Flash-NVFP4": ("deepseek-ai/DeepSeek-V4-Flash",),
    "nvidia/Qwen3.6-27B-NVFP4": ("Qwen/Qwen3.6-27B",),
    "nvidia/GLM-5.3-NVFP4": ("zai-org/GLM-5.3",),
    "nvidia/Kimi-K2.7-Code-NVFP4": (),
    "nvidia/NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4": (),
    "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8": ("nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16",),
    "zai-org/GLM-4.7-FP8": ("zai-org/GLM-4.7",),
    "poolside/Laguna-XS.2-FP8": ("poolside/Laguna-XS.2",),
    "poolside/Laguna-S-2.1-FP8": (),
}
CONVERSIONS = {  # transformers-format twins another organisation published of a lab's weights
    "deepseek-community/Janus-Pro-7B": ("deepseek-ai/Janus-Pro-7B",),
    "deepseek-community/deepseek-vl-7b-base": ("deepseek-ai/deepseek-vl-7b-base",),
    "mistral-community/pixtral-12b": ("mistralai/Pixtral-12B-2409",),
}


@pytest.mark.parametrize("model_id", sorted(NINE))
def test_the_nine_reuploads_are_quantized_derivatives(model_id):
    lineage = BY_ID[model_id].lineage()
    assert (lineage.relation, lineage.base_models) == ("quantized", NINE[model_id])


@pytest.mark.parametrize("model_id", sorted(NINE))
def test_the_crawler_reaches_the_same_verdict(model_id):
    # The rule is the crawler's: the listing's baseModels where the Hub gives one, and with none
    # the conversion tag in the name, whatever the config declares (FP8 included).
    entry, cfg = BY_ID[model_id], json.loads(BY_ID[model_id].raw_text)
    crawled = classify(model_id, entry.base_models, cfg, entry.num_parameters)
    unlisted = classify(model_id, None, cfg, entry.num_parameters)
    assert crawled == entry.lineage()
    assert unlisted.relation == "quantized"
    if unlisted.quant_method in (None, *NATIVE_LOW_PRECISION):  # the config alone would not say so: the name does
        assert any("conversion tag" in w for w in unlisted.warnings), model_id


@pytest.mark.parametrize("model_id", sorted(CONVERSIONS))
def test_format_conversions_of_another_labs_weights_are_derivatives(model_id):
    lineage = BY_ID[model_id].lineage()
    assert (lineage.relation, lineage.base_models) == ("finetune", CONVERSIONS[model_id])


def test_labs_own_low_precision_releases_stay_original():
    for model_id in ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V4-Flash", "openai/gpt-oss-20b",
                     "moonshotai/Kimi-K2.5", "microsoft/bitnet-b1.58-2B-4T"):
        lineage = BY_ID[model_id].lineage()
        assert lineage.relation == "original" and lineage.quant_method, model_id


def test_a_quantization_block_copied_from_a_mirror_is_not_the_originals():
    lineage = BY_ID["CohereLabs/c4ai-command-r-plus"].lineage()  # config of a GPTQ mirror
    assert (lineage.relation, lineage.quant_method) == ("original", None)
    assert BY_ID["CohereLabs/c4ai-command-r-plus"].model_fields()["relation"] == "original"


def test_no_reupload_counts_as_an_original():
    originals = [e for e in ENTRIES if e.lineage().relation == "original"]
    assert not set(NINE) & {e.id for e in originals}
    assert len(ENTRIES) - len(originals) == len(NINE) + len(CONVERSIONS)


def test_the_same_weights_count_once_in_a_period():
    # 2026-Q2 held DeepSeek-V4-Flash twice (the lab's repo and NVIDIA's NVFP4 copy); the copies made
    # up the quarter's MQA share. Among the originals each set of weights is one model.
    quarter = [e for e in ENTRIES if period_label(e.created_at, "quarter") == "2026-Q2"
               and e.lineage().relation == "original"]
    ids = {e.id for e in quarter}
    assert "deepseek-ai/DeepSeek-V4-Flash" in ids and "nvidia/DeepSeek-V4-Flash-NVFP4" not in ids
    kinds = Counter(parse_geometry(parse_config_text(e.raw_text)).attention_kind for e in quarter)
    assert kinds["MQA"] == 3  # V4-Flash, V4-Pro, Gemma 4 E2B: each once
