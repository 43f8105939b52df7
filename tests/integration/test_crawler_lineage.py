"""Lineage and parameter counts from the listing (issue 10), through the real huggingface_hub client
against the stand-in Hub: what one crawl stores, how a store crawled before lineage existed gets
it with no config fetched, what a malformed value does, and the populations the API then counts."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from crawler_support import LLAMA, LONG_AGO, model
from fastapi.testclient import TestClient
from sqlalchemy import update
from sqlmodel import Session

from observatory.crawler.run import crawl
from observatory.crawler.store import UNLISTED
from observatory.store.tables import HubModel
from observatory.web.app import create_app

DATA = Path(__file__).resolve().parents[2] / "observatory" / "catalog" / "data"
KNOWN = {m["file"]: m for m in json.loads((DATA / "param_counts.json").read_text())["models"]}


def bundled(name: str) -> dict:
    return json.loads((DATA / "configs" / name).read_text())


def safetensors(total: int, dtype: str = "BF16") -> dict:
    return {"parameters": {dtype: total}, "total": total}


def based(relation: str, *ids: str) -> dict:
    """baseModels exactly as the Hub lists it (each base also carries its _id)."""
    return {"relation": relation, "models": [{"_id": f"{i:024x}", "id": base} for i, base in enumerate(ids)]}


LLAMA_8B = "meta-llama/Llama-3.1-8B"
QWEN_7B = "Qwen/Qwen2.5-7B-Instruct"
MIXTRAL = "mistralai/Mixtral-8x7B-v0.1"
SMALL = "small-lab/tiny-but-real-0.5B"
TINY = "hf-internal-testing/tiny-random-LlamaForCausalLM"
AWQ_CONFIG = {**bundled("meta-llama__Llama-3.1-8B.json"),
              "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}
GPTQ_CONFIG = {**bundled("Qwen__Qwen2.5-7B-Instruct.json"),
               "quantization_config": {"quant_method": "gptq", "bits": 4}}
TINY_CONFIG = {**LLAMA, "hidden_size": 16, "num_attention_heads": 4, "num_key_value_heads": 2,
               "num_hidden_layers": 2, "intermediate_size": 64, "vocab_size": 1000}

# id -> (config, baseModels, safetensors, expected relation, expected bases)
REPOS = {
    LLAMA_8B: (bundled("meta-llama__Llama-3.1-8B.json"), None, safetensors(8_030_261_248), "original", None),
    QWEN_7B: (bundled("Qwen__Qwen2.5-7B-Instruct.json"), None, None, "original", None),  # .bin era: estimated
    MIXTRAL: (bundled("mistralai__Mixtral-8x7B-v0.1.json"), None, None, "original", None),
    SMALL: (LLAMA | {"hidden_size": 1024, "num_hidden_layers": 24, "intermediate_size": 2816,
                     "num_attention_heads": 16, "num_key_value_heads": 2, "vocab_size": 151936},
            None, safetensors(494_032_768), "original", None),
    "chat-lab/Llama-3.1-8B-chat": (bundled("meta-llama__Llama-3.1-8B.json"), based("finetune", LLAMA_8B),
                                   safetensors(8_030_261_248), "finetune", [LLAMA_8B]),
    "quant-lab/Llama-3.1-8B-AWQ": (AWQ_CONFIG, based("quantized", LLAMA_8B),
                                   {"parameters": {"F16": 1_051_000_000, "I32": 879_000_000},
                                    "total": 1_930_000_000}, "quantized", [LLAMA_8B]),
    "quant-lab/Qwen2.5-7B-GPTQ-no-card": (GPTQ_CONFIG, None, None, "quantized", None),
    "merge-lab/llama-qwen-slerp": (bundled("meta-llama__Llama-3.1-8B.json"),
                                   based("merge", LLAMA_8B, "chat-lab/Llama-3.1-8B-chat"),
                                   safetensors(8_030_261_248), "merge", [LLAMA_8B, "chat-lab/Llama-3.1-8B-chat"]),
    "lora-lab/llama-adapter-merged": (bundled("meta-llama__Llama-3.1-8B.json"), based("adapter", LLAMA_8B),
                                      None, "adapter", [LLAMA_8B]),
    TINY: (TINY_CONFIG, None, safetensors(1_034_560, "F32"), "original", None),
}
QUANTIZED = {"quant-lab/Llama-3.1-8B-AWQ", "quant-lab/Qwen2.5-7B-GPTQ-no-card"}
# Originals of at least 1B parameters that are not test repos: what population=originals counts.
ORIGINALS_1B = {LLAMA_8B, QWEN_7B, MIXTRAL}


@pytest.fixture
def lineage_hub(hub):
    # Days old: a later crawl's created pass stops above them (at its mark, less the overlap).
    start = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=10)
    for i, (repo_id, (config, base_models, counted, _, _)) in enumerate(REPOS.items()):
        created = start + timedelta(hours=i)  # further apart than the crawl overlap
        hub.add_repo(repo_id, config, created_at=created, last_modified=created, downloads=1000 * (i + 1),
                     base_models=base_models, safetensors=counted)
    return hub


def test_one_crawl_stores_each_repos_relation_bases_and_parameter_count(engine, lineage_hub, hub_settings):
    run = crawl(engine, hub_settings, since=LONG_AGO)

    assert run.status == "ok" and run.new == len(REPOS)
    assert run.requests == lineage_hub.counts["resolve_get"] + lineage_hub.counts["listing"]  # no extra kind
    for repo_id, (_, _, counted, relation, bases) in REPOS.items():
        stored = model(engine, repo_id)
        assert (stored.relation, stored.base_models) == (relation, bases), repo_id
        assert stored.lineage_warnings is None, (repo_id, stored.lineage_warnings)
        if counted is not None:  # exact, with its dtypes
            assert stored.num_parameters == counted["total"] and stored.parameters_source == "safetensors"
            assert stored.weight_dtypes == counted["parameters"]
        else:
            assert stored.num_parameters is None and stored.parameters_source is None
    awq = model(engine, "quant-lab/Llama-3.1-8B-AWQ")
    assert (awq.quant_method, awq.quant_bits) == ("awq", 4)
    assert model(engine, TINY).is_test_repo and not model(engine, LLAMA_8B).is_test_repo


def test_the_api_lists_relations_estimates_and_populations(engine, lineage_hub, hub_settings):
    crawl(engine, hub_settings, since=LONG_AGO)
    with TestClient(create_app(hub_settings)) as client:
        check_api(client)


def check_api(client) -> None:

    quantized = client.get("/api/v1/models", params={"relation": "quantized", "size": 100}).json()["rows"]
    assert {r["id"] for r in quantized} == QUANTIZED
    rows = {r["id"]: r for r in client.get("/api/v1/models", params={"size": 100}).json()["rows"]}
    assert rows[LLAMA_8B]["num_parameters"] == 8_030_261_248 and rows[LLAMA_8B]["parameters_source"] == "safetensors"
    # Without safetensors: the config's estimate, within 5% of the published count, said to be one.
    for repo_id, file in ((QWEN_7B, "Qwen__Qwen2.5-7B-Instruct.json"), (MIXTRAL, "mistralai__Mixtral-8x7B-v0.1.json")):
        row = rows[repo_id]
        assert row["parameters_source"] == "config"
        assert abs(row["num_parameters"] / KNOWN[file]["total"] - 1) < 0.05, (repo_id, row["num_parameters"])
    assert 12e9 < rows[MIXTRAL]["active_parameters"] < 13.5e9  # Mistral: 12.9B active
    for repo_id, (_, _, _, relation, bases) in REPOS.items():
        assert (rows[repo_id]["relation"], rows[repo_id]["base_models"]) == (relation, bases)
    record = client.get(f"/api/v1/models/{LLAMA_8B}").json()
    assert record["model"]["relation"] == "original" and record["model"]["num_parameters"] == 8_030_261_248

    counts = {}
    for population in ("originals", "all", "derivatives"):
        body = client.get("/api/v1/trends", params={"period": "quarter", "population": population}).json()
        counts[population] = sum(p["count"] for p in body["points"])
    assert counts == {"originals": len(ORIGINALS_1B), "all": len(REPOS),
                      "derivatives": sum(1 for spec in REPOS.values() if spec[3] != "original")}
    lower = client.get("/api/v1/trends", params={"period": "quarter", "population": "originals",
                                                 "min_params": 100_000_000}).json()
    assert sum(p["count"] for p in lower["points"]) == len(ORIGINALS_1B) + 1  # the 0.5B model; never TINY


def test_a_store_crawled_before_lineage_gets_it_from_the_listing_with_no_config_fetched(
        engine, lineage_hub, hub_settings):
    crawl(engine, hub_settings, since=LONG_AGO)
    forget_lineage(engine)  # as a crawl before issue 10 left them
    lineage_hub.reset_counts()

    run = crawl(engine, hub_settings)

    assert lineage_hub.counts.get("resolve_get", 0) == 0 and lineage_hub.counts.get("resolve_head", 0) == 0
    # Listing pages only: the stand-in's pages hold 10 models, the lineage pass reads down to the oldest.
    assert lineage_hub.counts["listing"] <= 2 + (len(REPOS) // 10 + 1)
    assert run.stats["passes"]["lineage"]["complete"] is True and run.stats["passes"]["lineage"]["unlisted"] == 0
    for repo_id, (_, _, counted, relation, bases) in REPOS.items():
        stored = model(engine, repo_id)
        assert (stored.relation, stored.base_models) == (relation, bases), repo_id
        assert stored.num_parameters == (counted["total"] if counted else None)
    awq = model(engine, "quant-lab/Llama-3.1-8B-AWQ")
    assert awq.relation == "quantized" and awq.quant_method == "awq"

    # Done once: the next crawl has no lineage pass and lists one page per pass, as before.
    lineage_hub.reset_counts()
    again = crawl(engine, hub_settings)
    assert "lineage" not in again.stats["passes"] and lineage_hub.counts["listing"] <= 2


def test_a_model_the_listing_no_longer_shows_is_marked_once_and_not_paged_for_again(
        engine, lineage_hub, hub_settings):
    crawl(engine, hub_settings, since=LONG_AGO)
    forget_lineage(engine)
    lineage_hub.remove_repo(LLAMA_8B)  # the oldest: deleted since it was stored

    run = crawl(engine, hub_settings)

    assert run.stats["passes"]["lineage"]["unlisted"] == 1
    gone = model(engine, LLAMA_8B)
    assert gone.relation is None and gone.lineage_warnings == [UNLISTED]
    assert model(engine, QWEN_7B).relation == "original"
    lineage_hub.reset_counts()
    assert "lineage" not in crawl(engine, hub_settings).stats["passes"]


MALFORMED = {
    "bad-lab/base-is-a-string": ("llama", None, "baseModels is str"),
    "bad-lab/base-without-models": ({"relation": "finetune"}, None, "baseModels.models is"),
    "bad-lab/base-unknown-relation": ({"relation": "distilled", "models": [{"id": LLAMA_8B}]}, None,
                                      "not one of"),
    "bad-lab/base-id-hostile": (based("finetune", "../../etc/passwd"), None, "is not a valid repo id"),
    "bad-lab/safetensors-without-total": (None, {"parameters": {"BF16": 8_000_000_000}}, "lacks total"),
    "bad-lab/safetensors-wrong-types": (None, {"parameters": "lots", "total": "8B"}, "safetensors.total is"),
    "bad-lab/safetensors-a-list": (None, [8_000_000_000], "safetensors is list"),
}


def test_malformed_listing_values_are_stored_unknown_with_a_warning_and_the_crawl_goes_on(
        engine, hub, hub_settings):
    config = bundled("meta-llama__Llama-3.1-8B.json")
    for repo_id, (base_models, counted, _) in MALFORMED.items():
        hub.add_repo(repo_id, config, base_models=base_models, safetensors=counted)
    hub.add_repo("good-lab/after-them", config, safetensors=safetensors(8_030_261_248))

    run = crawl(engine, hub_settings, since=LONG_AGO)

    assert run.status == "ok" and run.new == len(MALFORMED) + 1 and run.failed == 0
    for repo_id, (base_models, counted, warning) in MALFORMED.items():
        stored = model(engine, repo_id)
        assert stored.current_revision_id is not None  # the config is stored all the same
        assert any(warning in w for w in stored.lineage_warnings), (repo_id, stored.lineage_warnings)
        if base_models is not None and "hostile" not in repo_id:
            assert stored.relation is None  # unknown, not guessed
        if counted is not None:
            assert stored.num_parameters is None and stored.relation == "original"
    hostile = model(engine, "bad-lab/base-id-hostile")
    assert hostile.relation == "finetune" and hostile.base_models is None  # the relation is stated; the id dropped
    assert model(engine, "good-lab/after-them").num_parameters == 8_030_261_248


def forget_lineage(engine) -> None:
    with Session(engine) as session:
        session.execute(update(HubModel).values(relation=None, base_models=None, num_parameters=None,
                                                parameters_source=None, weight_dtypes=None, is_test_repo=False,
                                                lineage_warnings=None))
        session.commit()
