"""The bundled snapshot's data: coverage, provenance, and the geometry each entry parses to."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from datetime import date

import pytest

from observatory.catalog.snapshot import (
    CONFIGS_DIR,
    PARAMETER_KINDS,
    RELEASE_DATE_KINDS,
    SHA_PREFIX,
    SNAPSHOT_PATH,
    SnapshotError,
    load_entries,
    reconstructed_text,
)
from observatory.core.geometry import parse_config_text, parse_geometry
from observatory.core.repo_ids import is_valid_repo_id

RAW = json.loads(SNAPSHOT_PATH.read_text(encoding="utf-8"))["models"]
ENTRIES = load_entries()
BY_ID = {entry.id: entry for entry in ENTRIES}
BY_RAW = {raw["id"]: raw for raw in RAW}
GEOMETRY = {entry.id: parse_geometry(parse_config_text(entry.raw_text)) for entry in ENTRIES}

# The notable models the snapshot promises, by real Hub id: one or more per family the issue names.
REQUIRED_IDS = [
    # 2019-2022
    "openai-community/gpt2", "openai-community/gpt2-xl", "EleutherAI/gpt-j-6b", "EleutherAI/gpt-neox-20b",
    "facebook/opt-1.3b", "facebook/opt-30b", "bigscience/bloom",
    # Falcon, Llama 1 and 2, Code Llama
    "tiiuae/falcon-7b", "tiiuae/falcon-40b", "tiiuae/falcon-180B",
    "huggyllama/llama-7b", "huggyllama/llama-13b", "huggyllama/llama-30b", "huggyllama/llama-65b",
    "meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-13b-hf", "meta-llama/Llama-2-70b-hf",
    "codellama/CodeLlama-7b-hf", "codellama/CodeLlama-34b-Instruct-hf",
    # Llama 3.x and 4
    "meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-70B", "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-405B", "meta-llama/Llama-3.2-1B-Instruct", "meta-llama/Llama-3.3-70B-Instruct",
    "meta-llama/Llama-4-Scout-17B-16E-Instruct", "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    # Mistral
    "mistralai/Mistral-7B-v0.1", "mistralai/Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x22B-Instruct-v0.1",
    "mistralai/Mistral-Nemo-Instruct-2407", "mistralai/Mistral-Small-24B-Base-2501",
    "mistralai/Mistral-Large-Instruct-2407",
    # Qwen 1 .. 3.5
    "Qwen/Qwen-7B-Chat", "Qwen/Qwen-72B", "Qwen/Qwen1.5-7B-Chat", "Qwen/Qwen2-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct",
    "Qwen/Qwen3-32B", "Qwen/Qwen3-235B-A22B", "Qwen/Qwen3-Next-80B-A3B-Instruct", "Qwen/Qwen3.5-397B-A17B",
    "Qwen/Qwen3.5-9B",
    # Gemma, Phi
    "google/gemma-2b", "google/gemma-7b", "google/gemma-2-9b", "google/gemma-3-1b-it", "google/gemma-3-27b-it",
    "microsoft/phi-2", "microsoft/Phi-3-mini-128k-instruct", "microsoft/Phi-3.5-mini-instruct", "microsoft/phi-4",
    # DeepSeek, Kimi
    "deepseek-ai/deepseek-llm-7b-chat", "deepseek-ai/deepseek-llm-67b-base", "deepseek-ai/DeepSeek-V2",
    "deepseek-ai/DeepSeek-V2-Lite", "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1",
    "moonshotai/Kimi-K2-Instruct",
    # GLM, MiniCPM, Yi, Cohere, gpt-oss, OLMo
    "THUDM/chatglm2-6b", "THUDM/chatglm3-6b", "THUDM/glm-4-9b-hf", "zai-org/GLM-4.5", "zai-org/GLM-4.7-FP8",
    "openbmb/MiniCPM-V", "openbmb/MiniCPM3-4B", "01-ai/Yi-6B-Chat", "01-ai/Yi-34B",
    "CohereLabs/c4ai-command-r-v01", "CohereLabs/c4ai-command-r-plus",
    "openai/gpt-oss-20b", "openai/gpt-oss-120b",
    "allenai/OLMo-7B-hf", "allenai/OLMo-2-1124-7B", "allenai/Olmo-3.1-32B-Instruct",
    # Hybrids
    "ai21labs/Jamba-v0.1", "nvidia/Nemotron-H-8B-Base-8K", "LiquidAI/LFM2-1.2B", "MiniMaxAI/MiniMax-Text-01-hf",
]

# Published geometry of reconstructed entries (and a few verbatim anchors):
# id -> (kind, H, K, head_dim, kv_layers, KV elements per token over all KV layers)
KNOWN = {
    "openai-community/gpt2": ("MHA", 12, 12, 64, 12, 2 * 12 * 64 * 12),
    "bigscience/bloom": ("MHA", 112, 112, 128, 70, 2 * 112 * 128 * 70),
    "huggyllama/llama-65b": ("MHA", 64, 64, 128, 80, 2 * 64 * 128 * 80),
    "tiiuae/falcon-7b": ("MQA", 71, 1, 64, 32, 2 * 1 * 64 * 32),
    "tiiuae/falcon-40b": ("GQA", 128, 8, 64, 60, 2 * 8 * 64 * 60),
    "bigcode/starcoder": ("MQA", 48, 1, 128, 40, 2 * 1 * 128 * 40),
    "THUDM/chatglm2-6b": ("GQA", 32, 2, 128, 28, 2 * 2 * 128 * 28),
    "meta-llama/Llama-2-13b-hf": ("MHA", 40, 40, 128, 40, 2 * 40 * 128 * 40),
    "meta-llama/Llama-2-70b-hf": ("GQA", 64, 8, 128, 80, 163_840),
    "mistralai/Mistral-7B-v0.1": ("GQA", 32, 8, 128, 32, 2 * 8 * 128 * 32),
    "deepseek-ai/deepseek-llm-67b-base": ("GQA", 64, 8, 128, 95, 2 * 8 * 128 * 95),
    "google/gemma-2b": ("MQA", 8, 1, 256, 18, 2 * 1 * 256 * 18),
    "google/gemma-2-27b": ("GQA", 32, 16, 128, 46, 2 * 16 * 128 * 46),
    "databricks/dbrx-base": ("GQA", 48, 8, 128, 40, 2 * 8 * 128 * 40),
    "CohereLabs/c4ai-command-r-v01": ("MHA", 64, 64, 128, 40, 2 * 64 * 128 * 40),
    "mistralai/Mistral-Nemo-Instruct-2407": ("GQA", 32, 8, 128, 40, 2 * 8 * 128 * 40),
    "meta-llama/Llama-3.1-405B": ("GQA", 128, 8, 128, 126, 2 * 8 * 128 * 126),
    "meta-llama/Llama-3.2-11B-Vision-Instruct": ("GQA", 32, 8, 128, 32, 2 * 8 * 128 * 32),
    "deepseek-ai/DeepSeek-V2": ("MLA", 128, 128, 192, 60, (512 + 64) * 60),
    "deepseek-ai/DeepSeek-V2-Lite": ("MLA", 16, 16, 192, 27, (512 + 64) * 27),
    "deepseek-ai/DeepSeek-V3": ("MLA", 128, 128, 192, 61, 576 * 61),
    "openbmb/MiniCPM3-4B": ("MLA", 40, 40, 96, 62, (256 + 32) * 62),
    "zai-org/GLM-5": ("MLA", 64, 64, 256, 78, 44_928),
    "ai21labs/Jamba-v0.1": ("GQA", 32, 8, 128, 4, 2 * 8 * 128 * 4),
    "MiniMaxAI/MiniMax-Text-01-hf": ("GQA", 64, 8, 128, 10, 2 * 8 * 128 * 10),
    "nvidia/Nemotron-H-8B-Base-8K": ("GQA", 32, 8, 128, 4, 2 * 8 * 128 * 4),
    "LiquidAI/LFM2-1.2B": ("GQA", 32, 8, 64, 6, 2 * 8 * 64 * 6),
    "Qwen/Qwen3-Next-80B-A3B-Instruct": ("GQA", 16, 2, 256, 12, 2 * 2 * 256 * 12),
    "Qwen/Qwen3-0.6B": ("GQA", 16, 8, 128, 28, 2 * 8 * 128 * 28),
    "zai-org/GLM-4.5": ("GQA", 96, 8, 128, 92, 2 * 8 * 128 * 92),
    "openai/gpt-oss-120b": ("GQA", 64, 8, 64, 36, 2 * 8 * 64 * 36),
    "MiniMaxAI/MiniMax-M2": ("GQA", 48, 8, 128, 62, 2 * 8 * 128 * 62),
    "tiiuae/falcon-mamba-7b": ("none", None, None, None, 0, 0),
}


def test_hundreds_of_models_every_year_2019_to_2026():
    assert len(ENTRIES) >= 390
    years = Counter(entry.release_date.year for entry in ENTRIES)
    assert set(range(2019, 2027)) <= set(years), years
    assert max(years) <= 2026


def test_every_date_lies_between_2017_and_today():
    assert all(date(2017, 1, 1) <= entry.release_date <= date.today() for entry in ENTRIES)


# Quarters below the floor of 10, and why: no public verbatim copy of the 2023-Q1 releases (Pythia,
# Cerebras-GPT, LLaMA-1 sizes) could be found, and the stored public sources end in August 2026.
THIN_QUARTERS = {"2023-Q1", "2026-Q3", "2026-Q4"}


def test_every_quarter_from_2023_holds_ten_models():
    quarters = Counter(f"{e.release_date.year}-Q{(e.release_date.month - 1) // 3 + 1}" for e in ENTRIES)
    thin = {f"{y}-Q{q}" for y in range(2023, 2027) for q in range(1, 5) if quarters[f"{y}-Q{q}"] < 10}
    assert thin == THIN_QUARTERS, {q: quarters[q] for q in sorted(thin)}


# The organisations the issue names. Snowflake (Arctic), xAI (Grok) and Zyphra (Zamba) are missing:
# no copy of their configs was found, and their geometry could not be checked against a source.
ORGANISATIONS = {
    "Meta", "Mistral AI", "Google", "Alibaba (Qwen)", "DeepSeek", "Moonshot AI", "Zhipu AI (Z.ai)", "MiniMax",
    "StepFun", "Xiaomi", "Tencent", "Baidu", "Microsoft", "NVIDIA", "IBM", "AI2", "TII", "01.AI", "LG AI Research",
    "Cohere", "Databricks", "Apple", "Hugging Face", "Liquid AI", "OpenAI", "BigCode", "EleutherAI", "BigScience",
    "Stability AI", "AI21 Labs", "RWKV (BlinkDL)", "state-spaces (Mamba)",
}
MISSING_ORGANISATIONS = {"Snowflake", "xAI", "Zyphra"}


def test_every_named_organisation_is_present():
    present = {entry.organisation for entry in ENTRIES}
    assert ORGANISATIONS <= present, ORGANISATIONS - present
    assert not MISSING_ORGANISATIONS & present  # a gap that closes must move out of the list above


# A ratchet, not the goal: an earlier issue asked for 95 % verbatim; 372 of 398 (93 %) are. The rest
# are transcribed (12: rebuilt from code or page text, or a vendored copy we corrected by one final
# newline to the Hub's bytes; most proven byte-exact by the Hub's sha256) or reconstructed from
# published geometry (14), each saying where a copy was looked for. Issue 22 moved three copies
# from verbatim to transcribed: their bytes are the Hub's, not the cited vendor's.
def test_nearly_all_configs_are_real_files():
    kinds = Counter(entry.provenance for entry in ENTRIES)
    assert kinds["reconstructed"] <= 14 and kinds["transcribed"] <= 12, kinds
    assert kinds["verbatim"] / len(ENTRIES) >= 0.93, kinds


def test_readme_states_the_snapshot_as_it_is():
    readme = (SNAPSHOT_PATH.parents[3] / "README.md").read_text(encoding="utf-8")
    kinds = Counter(entry.provenance for entry in ENTRIES)
    stated = re.search(r"bundled snapshot of (\d+) notable open models \((\d{4})–(\d{4});\s+(\d+) with their "
                       r"verbatim `config.json`, (\d+) transcribed from code or page text and (\d+) reconstructed", readme)
    assert stated, "README no longer describes the bundled snapshot in the expected words"
    years = sorted(entry.release_date.year for entry in ENTRIES)
    assert tuple(int(g) for g in stated.groups()) == (
        len(ENTRIES), years[0], years[-1], kinds["verbatim"], kinds["transcribed"], kinds["reconstructed"])
    gaps = re.search(r"the\s+(\d+) unsourced dates and (\d+) counts estimated from the config", readme)
    assert gaps, "README no longer says how many dates are unsourced and counts estimated"
    assert (int(gaps[1]), int(gaps[2])) == (sum(e.release_date_source.startswith("unsourced") for e in ENTRIES),
                                            sum(e.num_parameters is None for e in ENTRIES))


def test_sources_are_well_formed():
    for raw in RAW:
        if raw["provenance"] in ("verbatim", "transcribed"):
            assert re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", raw["source_repo"]), raw["id"]
            assert re.fullmatch(r"[0-9a-f]{40}", raw["source_commit"]) and raw["source_commit"] != "0" * 40, raw["id"]
            assert raw["source_path"] and ".." not in raw["source_path"].split("/"), raw["id"]
        else:
            assert raw["source"].startswith("https://") and raw["searched"], raw["id"]
        date_source = raw["release_date_source"]
        assert date_source.startswith(("https://", "unsourced: ")) or re.search(r"@ ?[0-9a-f]{7,40}", date_source) \
            or "/" in date_source, raw["id"]
        if raw.get("num_parameters") is not None:
            assert raw["num_parameters_kind"] in PARAMETER_KINDS and raw["num_parameters_kind"] != "config estimate"
            assert raw["num_parameters_source"], raw["id"]
        else:
            assert raw["num_parameters_kind"] == "config estimate", raw["id"]


def test_no_config_appears_twice_unless_marked_as_the_same_architecture():
    by_text: dict[str, list[str]] = {}
    for entry in ENTRIES:
        by_text.setdefault(entry.raw_text, []).append(entry.id)
    for ids in by_text.values():
        for model_id in ids:
            assert set(BY_ID[model_id].same_architecture_as) == set(ids) - {model_id}, model_id


def test_labels_say_where_each_figure_came_from():
    # A label names a kind of source, and the source text bears it out (issue 22's audit found a
    # safetensors total and a paper figure both labelled "model card").
    for entry in ENTRIES:
        source, kind = (entry.num_parameters_source or "").lower(), entry.num_parameters_kind
        if kind == "paper":
            assert "arxiv" in source or "paper" in source or "report" in source, entry.id
        if kind == "index file":
            assert "index.json" in source and "total_size" in source, entry.id
        if kind == "model card":
            assert "arxiv.org" not in source.split(" ")[0], entry.id
        if kind == "safetensors total":
            assert "safetensors" in source, entry.id
    assert BY_ID["meta-llama/Meta-Llama-3-70B"].num_parameters_kind == "safetensors total"
    assert BY_ID["openai/gpt-oss-20b"].num_parameters_kind == "paper"
    assert BY_ID["arcee-ai/Trinity-Nano-Preview"].active_parameters == 1_000_000_000  # the headline, not non-embedding


def test_every_date_says_what_it_is_the_date_of():
    kinds = Counter(entry.release_date_kind for entry in ENTRIES)
    assert set(kinds) <= set(RELEASE_DATE_KINDS) and kinds["announcement"] > 100, kinds
    for entry in ENTRIES:
        assert (entry.release_date_kind == "unsourced") == entry.release_date_source.startswith("unsourced")
        if entry.release_date_kind == "paper":
            assert "arxiv" in entry.release_date_source.lower(), entry.id


@pytest.mark.parametrize("model_id", REQUIRED_IDS)
def test_required_model_present(model_id):
    assert model_id in BY_ID


def test_ids_valid_and_unique_in_the_file():
    ids = [raw["id"] for raw in RAW]
    assert len(ids) == len(set(ids))
    assert len({i.lower() for i in ids}) == len(ids), "ids differing only in case"
    assert all(is_valid_repo_id(i) and "/" in i for i in ids)


def test_provenance_matches_what_the_entry_holds():
    for raw in RAW:
        if raw["provenance"] in ("verbatim", "transcribed"):
            assert "config_file" in raw and "config" not in raw, raw["id"]
        else:
            assert raw["provenance"] == "reconstructed", raw["id"]
            assert "config" in raw and "config_file" not in raw, raw["id"]
            # Published geometry points at where it was published, not at a vendored copy.
            assert raw["source"].startswith(("https://huggingface.co/", "https://arxiv.org/")), raw["id"]


def test_reconstructed_entries_are_not_copies_of_real_files():
    real_texts = {path.read_bytes().decode("utf-8") for path in CONFIGS_DIR.glob("*.json")}
    for entry in ENTRIES:
        if entry.provenance == "reconstructed":
            assert entry.raw_text not in real_texts, entry.id
            assert entry.raw_text == reconstructed_text(BY_RAW[entry.id]["config"])


def test_copies_name_their_source_and_hold_its_bytes():
    copies = [entry for entry in ENTRIES if entry.provenance in ("verbatim", "transcribed")]
    assert len(copies) >= 350
    for entry in copies:
        assert entry.source == f"https://github.com/{entry.source_repo}/blob/{entry.source_commit}/{entry.source_path}"
        assert entry.raw_text == (CONFIGS_DIR / entry.config_file).read_bytes().decode("utf-8")


def test_verbatim_text_is_byte_exact_including_crlf():
    assert "\r\n" in BY_ID["microsoft/phi-4"].raw_text


def test_abridged_fixture_is_not_in_the_snapshot():
    assert not any(entry.config_file and entry.config_file.startswith("ollama-fixture") for entry in ENTRIES)


def test_every_entry_parses_to_a_geometry():
    assert set(GEOMETRY) == set(BY_ID)
    for model_id, geom in GEOMETRY.items():
        if geom.attention_kind != "none":
            assert geom.kv_elements_per_token > 0, model_id
            assert geom.kv_layers > 0, model_id


def test_every_attention_kind_is_well_represented():
    kinds = Counter(geom.attention_kind for geom in GEOMETRY.values())
    assert kinds["MHA"] >= 20
    assert kinds["GQA"] >= 40
    assert kinds["MQA"] >= 4
    assert kinds["MLA"] >= 8
    assert kinds["none"] >= 1
    assert sum(geom.is_hybrid for geom in GEOMETRY.values()) >= 8


@pytest.mark.parametrize("model_id", sorted(KNOWN))
def test_published_geometry(model_id):
    geom = GEOMETRY[model_id]
    got = (geom.attention_kind, geom.num_query_heads, geom.num_kv_heads, geom.head_dim, geom.kv_layers,
           geom.kv_elements_per_token)
    assert got == KNOWN[model_id]


def test_sliding_and_chunked_schedules_survive_reconstruction():
    assert GEOMETRY["openai/gpt-oss-20b"].sliding_window == 128
    assert GEOMETRY["openai/gpt-oss-20b"].sliding_layers == 12
    assert GEOMETRY["google/gemma-3-1b-it"].sliding_layers == 26 - 26 // 6
    assert GEOMETRY["meta-llama/Llama-4-Maverick-17B-128E-Instruct"].chunked


def test_dates_and_confidence():
    for entry in ENTRIES:
        assert entry.release_date_confidence in ("high", "medium", "low")
        assert entry.created_at.tzinfo is not None and entry.created_at.hour == 0
    assert BY_ID["meta-llama/Llama-2-70b-hf"].release_date.isoformat() == "2023-07-18"
    assert BY_ID["deepseek-ai/DeepSeek-V3"].release_date.isoformat() == "2024-12-26"


def test_no_download_counts_in_the_data():
    assert not any("downloads" in raw or "likes" in raw for raw in RAW)


def test_revision_sha_tracks_the_text(tmp_path):
    entry = next(e for e in ENTRIES if e.provenance == "reconstructed")
    assert entry.sha.startswith(SHA_PREFIX) and len(entry.sha) <= 64  # fits ConfigRevision.sha
    same = load_entries(_manifest(tmp_path, [{**GOOD, "config": BY_RAW[entry.id]["config"]}]))[0]
    assert same.sha == entry.sha
    edited = {**BY_RAW[entry.id]["config"], "n_layer": 13}
    assert load_entries(_manifest(tmp_path, [{**GOOD, "config": edited}]))[0].sha != entry.sha


# --------------------------------------------------------------------------- bad manifests


def _manifest(tmp_path, models, version=2, files=None):
    (tmp_path / "configs").mkdir(exist_ok=True)
    for name, data in (files or {}).items():
        (tmp_path / "configs" / name).write_bytes(data)
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"snapshot_version": version, "models": models}), encoding="utf-8")
    return path


GOOD = {
    "id": "org/model",
    "organisation": "Org",
    "family": "Test",
    "release_date": "2024-01-02",
    "release_date_confidence": "high",
    "release_date_source": "https://example.org/announcement",
    "release_date_kind": "announcement",
    "num_parameters": 1000,
    "num_parameters_kind": "model card",
    "num_parameters_source": "https://huggingface.co/org/model",
    "provenance": "reconstructed",
    "source": "https://huggingface.co/org/model/blob/main/config.json",
    "searched": "every public copy we know of",
    "config": {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2},
}
COPY = {k: v for k, v in GOOD.items() if k not in ("config", "source", "searched")} | {
    "provenance": "verbatim", "config_file": "a.json", "source_repo": "owner/repo", "source_path": "configs/a.json",
    "source_commit": "0123456789abcdef0123456789abcdef01234567", "source_sha256": hashlib.sha256(b"{}").hexdigest()}


def test_good_minimal_manifest_loads(tmp_path):
    (entry,) = load_entries(_manifest(tmp_path, [GOOD]))
    assert entry.id == "org/model" and entry.pipeline_tag == "text-generation"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"id": "org/../etc"}, "not a valid Hub repo id"),
        ({"id": 5}, "repo id must be a string"),
        ({"release_date": "2024-13-01"}, "not a real YYYY-MM-DD date"),
        ({"release_date": "2024-1-1"}, "YYYY-MM-DD"),
        ({"release_date_confidence": "sure"}, "release_date_confidence must be one of"),
        ({"num_parameters": -1}, "num_parameters must be a positive integer"),
        ({"num_parameters": True}, "num_parameters must be a positive integer"),
        ({"provenance": "verbatim"}, "cannot be marked verbatim"),
        ({"release_date": "2016-12-31"}, "before 2017-01-01"),
        ({"organisation": ""}, "organisation must be a non-empty string"),
        ({"num_parameters_kind": "rumour"}, "num_parameters_kind must be one of"),
        ({"num_parameters_source": None}, "num_parameters_source must be a non-empty string"),
        ({"searched": None}, "searched must be a non-empty string"),
        ({"same_architecture_as": "org/x"}, "same_architecture_as must be a list"),
        ({"provenance": "guessed"}, "provenance must be one of"),
        ({"config": {}}, "config must be a non-empty JSON object"),
        ({"config": [1, 2]}, "config must be a non-empty JSON object"),
        ({"config_file": "a.json"}, "exactly one of config_file"),
        ({"downloads": 5}, "unknown key(s) downloads"),
        ({"source": ""}, "source must be a non-empty string"),
        ({"source": "x" * 501}, "source longer than 500"),
        ({"family": None}, "family must be a non-empty string"),
        ({"release_date_kind": "rumour"}, "release_date_kind must be one of"),
        ({"release_date_kind": "unsourced"}, "release_date_kind is unsourced exactly when"),
        ({"num_parameters": None}, "'config estimate' exactly when num_parameters is null"),
    ],
)
def test_bad_entry_is_refused_with_a_clear_message(tmp_path, change, message):
    with pytest.raises(SnapshotError, match="models\\[0\\]") as info:
        load_entries(_manifest(tmp_path, [{**GOOD, **change}]))
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_required_keys(tmp_path):
    bad = {k: v for k, v in GOOD.items() if k not in ("release_date", "release_date_source")}
    with pytest.raises(SnapshotError, match="missing release_date, release_date_source"):
        load_entries(_manifest(tmp_path, [bad]))


@pytest.mark.parametrize("change, message", [
    ({"source_commit": "HEAD"}, "source_commit must be a 40-hex commit"),
    ({"source_repo": "not a repo"}, "source_repo"),
    ({"source_path": "../etc/passwd"}, "source_path must be a path inside"),
    ({"source_repo": None}, "source_repo must be a non-empty string"),
])
def test_bad_copy_sources_are_refused(tmp_path, change, message):
    with pytest.raises(SnapshotError, match=message):
        load_entries(_manifest(tmp_path, [{**COPY, **change}], files={"a.json": b"{}"}))


def test_a_copy_loads_with_its_source_url(tmp_path):
    data = b'{"x": 1}\r\n'
    copy = COPY | {"source_sha256": hashlib.sha256(data).hexdigest()}
    (entry,) = load_entries(_manifest(tmp_path, [copy], files={"a.json": data}))
    assert entry.source == "https://github.com/owner/repo/blob/0123456789abcdef0123456789abcdef01234567/configs/a.json"
    assert entry.raw_text == '{"x": 1}\r\n'  # byte for byte
    assert entry.sha256 == entry.source_sha256 and entry.hub_check is None


def test_a_verbatim_copy_whose_bytes_changed_is_refused(tmp_path):
    # One byte (a final newline) is enough: the copy is no longer the cited file.
    with pytest.raises(SnapshotError, match="a.json has sha256 .* not the source's"):
        load_entries(_manifest(tmp_path, [COPY], files={"a.json": b"{}\n"}))


def test_a_transcribed_copy_may_differ_from_its_source(tmp_path):
    (entry,) = load_entries(_manifest(tmp_path, [COPY | {"provenance": "transcribed"}], files={"a.json": b"{}\n"}))
    assert entry.sha256 != entry.source_sha256


@pytest.mark.parametrize("change, message", [
    ({"source_sha256": None}, "source_sha256 must be the 64-hex sha256"),
    ({"source_sha256": "abc"}, "source_sha256 must be the 64-hex sha256"),
    ({"hub_sha256": "0" * 64}, "hub_sha256 and hub_revision go together"),
    ({"hub_sha256": "x" * 64, "hub_revision": "0" * 40}, "hub_sha256 must be 64-hex"),
    ({"base_models": ["org/base"]}, "base_models must be written as the Hub writes baseModels"),
    ({"quantization_from_copy": "yes"}, "quantization_from_copy must be true or false"),
])
def test_bad_provenance_fields_are_refused(tmp_path, change, message):
    with pytest.raises(SnapshotError, match=message):
        load_entries(_manifest(tmp_path, [COPY | change], files={"a.json": b"{}"}))


def test_the_hub_check_compares_the_bytes_with_the_hub_hash(tmp_path):
    hub = {"hub_revision": "f" * 40}
    (same,) = load_entries(_manifest(tmp_path, [COPY | hub | {"hub_sha256": COPY["source_sha256"]}],
                                     files={"a.json": b"{}"}))
    (other,) = load_entries(_manifest(tmp_path, [COPY | hub | {"hub_sha256": "0" * 64}], files={"a.json": b"{}"}))
    assert (same.hub_check, other.hub_check) == ("match", "differs")


def test_a_reconstructed_entry_has_no_source_hash(tmp_path):
    with pytest.raises(SnapshotError, match="reconstructed entry copies no file"):
        load_entries(_manifest(tmp_path, [GOOD | {"source_sha256": "0" * 64}]))


@pytest.mark.parametrize(
    "name, files, message",
    [
        ("../snapshot.json", {}, "bare \\*\\.json file name"),
        ("sub/x.json", {}, "bare \\*\\.json file name"),
        ("x.txt", {}, "bare \\*\\.json file name"),
        ("missing.json", {}, "config_file missing.json not found"),
        ("latin1.json", {"latin1.json": b'{"n\xe9": 1}'}, "not UTF-8"),
    ],
)
def test_bad_config_file(tmp_path, name, files, message):
    entry = COPY | {"config_file": name}
    with pytest.raises(SnapshotError, match=message):
        load_entries(_manifest(tmp_path, [entry], files=files))


def test_config_file_marked_reconstructed_is_refused(tmp_path):
    entry = COPY | {"provenance": "reconstructed", "source": "https://example.org", "searched": "x"}
    with pytest.raises(SnapshotError, match="real files: mark them verbatim"):
        load_entries(_manifest(tmp_path, [entry], files={"a.json": b"{}"}))


def test_duplicate_ids_refused(tmp_path):
    with pytest.raises(SnapshotError, match="duplicate id"):
        load_entries(_manifest(tmp_path, [GOOD, GOOD]))


def test_every_problem_is_counted(tmp_path):
    bad = [{**GOOD, "id": f"org/m{i}", "release_date": "never"} for i in range(7)]
    with pytest.raises(SnapshotError, match="7 bad entries: .*; and 2 more"):
        load_entries(_manifest(tmp_path, bad))


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object with a 'models' list"),
        ('{"snapshot_version": 2}', "must be a JSON object with a 'models' list"),
        ('{"snapshot_version": 1, "models": []}', "snapshot_version 1"),
    ],
)
def test_bad_manifest_document(tmp_path, text, message):
    path = tmp_path / "snapshot.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SnapshotError, match=message):
        load_entries(path)


def test_missing_manifest(tmp_path):
    with pytest.raises(SnapshotError, match="cannot read snapshot"):
        load_entries(tmp_path / "nope.json")
