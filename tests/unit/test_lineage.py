"""Lineage classification, safetensors parsing and geometry fingerprints, including every bad-input path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import observatory
from observatory.core.geometry import parse_geometry
from observatory.core.lineage import (
    RELATIONS,
    TOY_PARAMETERS,
    Lineage,
    classify,
    fingerprint_fields,
    geometry_fingerprint,
    parse_safetensors,
    quantization,
)

CONFIG_DIR = Path(observatory.__file__).parent / "catalog" / "data" / "configs"
LLAMA_8B = 8_030_261_248


def load(name: str) -> dict:
    return json.loads((CONFIG_DIR / name).read_text())


def listing(relation, *ids) -> dict:
    """The listing's baseModels value as the Hub sends it."""
    return {"relation": relation, "models": [{"_id": f"id{i}", "id": m} for i, m in enumerate(ids)]}


# -- relation -------------------------------------------------------------------------------------

def test_no_base_is_original():
    got = classify("meta-llama/Llama-3.1-8B", None, load("meta-llama__Llama-3.1-8B.json"), LLAMA_8B)
    assert got == Lineage(relation="original")
    assert got.is_original and RELATIONS[0] == "original"


@pytest.mark.parametrize("relation", ["finetune", "quantized", "adapter", "merge"])
def test_relation_and_bases_come_from_base_models(relation):
    got = classify("org/derived", listing(relation, "meta-llama/Llama-3.1-8B"), {}, LLAMA_8B)
    assert (got.relation, got.base_models, got.warnings) == (relation, ("meta-llama/Llama-3.1-8B",), ())


def test_merge_keeps_every_base_once_in_order():
    got = classify("org/merged", listing("merge", "a/one", "b/two", "a/one"), {}, None)
    assert got.base_models == ("a/one", "b/two")


def test_quantization_config_without_a_base_is_still_quantized():
    cfg = {**load("meta-llama__Llama-3.1-8B.json"),
           "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}
    got = classify("someone/Llama-3.1-8B-AWQ", None, cfg, None)
    assert (got.relation, got.quant_method, got.quant_bits) == ("quantized", "awq", 4)


def test_a_declared_relation_wins_over_the_quantization_config():
    cfg = {"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}}
    got = classify("org/qlora-merged", listing("finetune", "meta-llama/Llama-3.1-8B"), cfg, None)
    assert (got.relation, got.quant_method, got.quant_bits) == ("finetune", "bitsandbytes", 4)


@pytest.mark.parametrize("name, method, bits", [
    ("deepseek-ai__DeepSeek-V3.json", "fp8", 8),  # released in block FP8 by its lab
    ("openai__gpt-oss-20b.json", "mxfp4", 4),  # released in MXFP4 by its lab
])
def test_native_low_precision_releases_stay_original(name, method, bits):
    got = classify(name.replace("__", "/").removesuffix(".json"), None, load(name), None)
    assert (got.relation, got.quant_method, got.quant_bits) == ("original", method, bits)
    assert any("native low-precision release" in w for w in got.warnings)


@pytest.mark.parametrize("cfg, method, bits", [
    ({"quantization_config": {"quant_method": "gptq", "bits": 8}}, "gptq", 8),
    ({"quantization_config": {"quant_method": "bitsandbytes", "load_in_8bit": True}}, "bitsandbytes", 8),
    ({"quantization_config": {"quant_method": "compressed-tensors",
                              "config_groups": {"group_0": {"weights": {"num_bits": 4}}}}}, "compressed-tensors", 4),
    ({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}, "modelopt", 4),
    ({"quantization_config": {"quant_method": "hqq", "nbits": 3}}, "hqq", 3),
    ({"quantization_config": {"quant_method": "torchao"}}, "torchao", None),  # bits not stated: unknown
    ({"quantization": {"group_size": 64, "bits": 4}}, "mlx", 4),  # mlx-lm
    ({"text_config": {"quantization_config": {"quant_method": "awq", "bits": 4}}}, "awq", 4),
    ({"quantization": "int8"}, None, None),  # not MLX's shape: nothing declared
])
def test_quantization_methods_and_bits(cfg, method, bits):
    warnings: list[str] = []
    assert quantization(cfg, warnings) == (method, bits)
    assert warnings == []


@pytest.mark.parametrize("cfg, method, bits, warned", [
    ({"quantization_config": "gptq"}, "unknown", None, "expected an object"),
    ({"quantization_config": {"bits": 4}}, "unknown", 4, "quant_method"),
    ({"quantization_config": {"quant_method": "gptq", "bits": "four"}}, "gptq", None, "bits unknown"),
    ({"quantization_config": {"quant_method": "gptq", "bits": 0}}, "gptq", None, "bits unknown"),
    ({"quantization_config": {"quant_method": "gptq", "bits": True}}, "gptq", None, "bits unknown"),
])
def test_malformed_quantization_is_recorded_with_a_warning(cfg, method, bits, warned):
    # A config that declares a quantization is quantized even when it spells it badly; what it
    # does not spell out stays unknown ("unknown" method, None bits).
    got = classify("org/q", None, cfg, None)
    assert (got.relation, got.quant_method, got.quant_bits) == ("quantized", method, bits)
    assert any(warned in w for w in got.warnings)


# -- malformed baseModels ------------------------------------------------------------------------

@pytest.mark.parametrize("value, warned", [
    ("finetune", "expected an object"),
    ([{"relation": "finetune"}], "expected an object"),
    ({"models": [{"id": "a/b"}]}, "baseModels.relation"),
    ({"relation": 3, "models": [{"id": "a/b"}]}, "baseModels.relation"),
    ({"relation": "distilled", "models": [{"id": "a/b"}]}, "is not one of"),
    ({"relation": "original", "models": []}, "is not one of"),
    ({"relation": "finetune"}, "baseModels.models"),
    ({"relation": "finetune", "models": {"id": "a/b"}}, "expected a list"),
])
def test_malformed_base_models_make_the_relation_unknown(value, warned):
    got = classify("org/model", value, {}, LLAMA_8B)
    assert got.relation is None and got.base_models == ()
    assert any(warned in w for w in got.warnings) and all("\n" not in w for w in got.warnings)


def test_bad_base_entries_are_dropped_with_a_warning_each():
    value = {"relation": "finetune", "models": [
        {"id": "meta-llama/Llama-3.1-8B"}, {"id": "not a repo id"}, {"id": "../../etc/passwd"}, {"id": 42},
        {"name": "no-id"}, "meta-llama/Llama-3.1-70B", {"id": "org/model"}]}
    got = classify("org/model", value, {}, None)
    assert got.relation == "finetune" and got.base_models == ("meta-llama/Llama-3.1-8B",)
    assert len(got.warnings) == 6
    assert any("names the model itself" in w for w in got.warnings)


def test_a_relation_without_any_valid_base_is_kept_and_flagged():
    got = classify("org/model", {"relation": "adapter", "models": [{"id": "bad id"}]}, {}, None)
    assert got.relation == "adapter" and got.base_models == ()
    assert any("no valid base model" in w for w in got.warnings)


def test_an_invalid_model_id_is_noted_but_still_classified():
    got = classify("bad id", None, {}, None)
    assert got.relation == "original" and any("not a valid repo id" in w for w in got.warnings)


# -- test and toy repos --------------------------------------------------------------------------

@pytest.mark.parametrize("model_id", [
    "hf-internal-testing/tiny-random-LlamaForCausalLM", "trl-internal-testing/tiny-Qwen2ForCausalLM-2.5",
    "optimum-internal-testing/tiny-random-gpt2", "someone/tiny-random-mistral", "someone/llama-tiny_random",
    "peft-internal-testing/opt-125m",
])
def test_test_repos_flagged_by_id(model_id):
    assert classify(model_id, None, {}, None).is_test_repo


@pytest.mark.parametrize("model_id, params", [
    ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", 1_100_048_384),  # "Tiny" in a real model's name is not a test repo
    ("meta-llama/Llama-3.1-8B", LLAMA_8B),
    ("someone/random-name", None),
])
def test_real_models_are_not_test_repos(model_id, params):
    assert not classify(model_id, None, {}, params).is_test_repo


def test_a_handful_of_parameters_makes_a_toy():
    assert classify("someone/my-model", None, {}, TOY_PARAMETERS - 1).is_test_repo
    assert not classify("someone/my-model", None, {}, TOY_PARAMETERS).is_test_repo


@pytest.mark.parametrize("value", [True, -1, 0, 1.5, "8B", 10**15])
def test_a_bad_parameter_count_is_ignored_with_a_warning(value):
    got = classify("someone/my-model", None, {}, value)
    assert not got.is_test_repo and any("num_parameters" in w for w in got.warnings)


def test_lineage_is_json_ready():
    got = classify("org/x", listing("quantized", "a/b"), {"quantization_config": {"quant_method": "gptq", "bits": 4}},
                   None)
    assert json.loads(json.dumps(got.to_dict())) == {
        "relation": "quantized", "base_models": ["a/b"], "quant_method": "gptq", "quant_bits": 4,
        "is_test_repo": False, "warnings": []}


# -- safetensors ---------------------------------------------------------------------------------

def test_safetensors_as_the_hub_sends_it():
    warnings: list[str] = []
    value = {"parameters": {"F32": 266240, "BF16": 8030000000 - 266240 + 261248}, "total": 8030261248}
    assert parse_safetensors(value, warnings) == (8030261248, {"BF16": 8029995008, "F32": 266240})
    assert warnings == []
    assert parse_safetensors(None, warnings) is None and warnings == []  # absent: nothing to say


@pytest.mark.parametrize("value, warned", [
    ("8B", "expected an object"),
    ({"total": 10}, "lacks parameters"),
    ({"parameters": {"BF16": 10}}, "lacks total"),
    ({}, "lacks parameters and total"),
    ({"parameters": {"BF16": 10}, "total": "10"}, "safetensors.total"),
    ({"parameters": {"BF16": 10}, "total": True}, "safetensors.total"),
    ({"parameters": {"BF16": 10}, "total": 0}, "safetensors.total"),  # unknown, never 0
    ({"parameters": {"BF16": 10}, "total": -10}, "safetensors.total"),
    ({"parameters": [10], "total": 10}, "safetensors.parameters"),
    ({"parameters": {"BF16": -1}, "total": 10}, "bad entry"),
    ({"parameters": {"BF16": 2.5}, "total": 10}, "bad entry"),
])
def test_malformed_safetensors_is_ignored_with_a_warning(value, warned):
    warnings: list[str] = []
    assert parse_safetensors(value, warnings) is None
    assert len(warnings) == 1 and warned in warnings[0]


def test_a_total_that_disagrees_with_its_dtypes_is_kept_with_a_warning():
    warnings: list[str] = []
    assert parse_safetensors({"parameters": {"BF16": 10, "F32": 1}, "total": 12}, warnings) == (12, {"BF16": 10,
                                                                                                "F32": 1})
    assert "differs" in warnings[0]


# -- fingerprints --------------------------------------------------------------------------------

def fingerprint(cfg: dict) -> str:
    return geometry_fingerprint(parse_geometry(cfg), cfg)


def test_a_finetune_shares_its_base_fingerprint():
    base, instruct = load("meta-llama__Llama-3.1-8B.json"), load("meta-llama__Llama-3.1-8B-Instruct.json")
    assert fingerprint(base) == fingerprint(instruct)
    assert fingerprint(load("meta-llama__Llama-3.3-70B-Instruct.json")) == fingerprint(
        load("meta-llama__Llama-3.1-70B-Instruct.json"))


@pytest.mark.parametrize("change", [
    {"num_key_value_heads": 4}, {"num_hidden_layers": 31}, {"vocab_size": 128000}, {"hidden_size": 4608},
    {"head_dim": 96}, {"intermediate_size": 14000}, {"model_type": "mistral"}, {"sliding_window": 4096},
])
def test_any_architectural_change_changes_the_fingerprint(change):
    base = load("meta-llama__Llama-3.1-8B.json")
    assert fingerprint({**base, **change}) != fingerprint(base)


def test_mla_dims_and_layer_schedules_are_part_of_the_fingerprint():
    v3 = load("deepseek-ai__DeepSeek-V3.json")
    assert fingerprint({**v3, "kv_lora_rank": 256}) != fingerprint(v3)
    assert fingerprint_fields(parse_geometry(v3), v3)["mla"] == [512, 64, 128, 128, 1536]
    gemma = load("google__gemma-3-27b-it.json")
    fields = fingerprint_fields(parse_geometry(gemma), gemma)
    assert fields["schedule"].startswith("sliding*5,full*1,") and fields["vocab"] == 262208


def test_fingerprints_are_stable_strings():
    cfg = load("Qwen__Qwen3-30B-A3B.json")
    first = fingerprint(cfg)
    assert first == fingerprint(json.loads(json.dumps(cfg))) and first.startswith("g1-") and len(first) == 23
    assert len({fingerprint(json.loads(p.read_text())) for p in CONFIG_DIR.glob("*.json")}) >= 45


@pytest.mark.parametrize("model_id, tag", [
    ("RedHatAI/Llama-3.1-8B-Instruct-FP8", "FP8"),
    ("nvidia/DeepSeek-V4-Flash-NVFP4", "NVFP4"),
    ("TheBloke/Llama-2-7B-GPTQ", "GPTQ"),
    ("someone/Qwen2.5-7B-Instruct-AWQ", "AWQ"),
    ("someone/Mistral-7B-v0.1-GGUF", "GGUF"),
    ("mlx-community/Llama-3.2-1B-4bit", "4bit"),
    ("RedHatAI/Qwen2.5-7B-quantized.w4a16", "quantized"),
])
def test_a_conversion_tag_makes_a_derivative_even_without_a_base(model_id, tag):
    # FP8 with no base is a native release (DeepSeek-V3) unless the name says it is someone's
    # converted copy; the same holds for a config that declares no quantization at all.
    cfg = {**load("meta-llama__Llama-3.1-8B.json"), "quantization_config": {"quant_method": "fp8"}}
    for config in (cfg, load("meta-llama__Llama-3.1-8B.json")):
        got = classify(model_id, None, config, LLAMA_8B)
        assert got.relation == "quantized" and any(repr(tag) in w for w in got.warnings), model_id
    # A method labs never release in is a quantization already: the name adds nothing to say.
    gptq = {**cfg, "quantization_config": {"quant_method": "gptq", "bits": 4}}
    assert classify(model_id, None, gptq, LLAMA_8B) == Lineage(relation="quantized", quant_method="gptq", quant_bits=4)


@pytest.mark.parametrize("model_id", ["deepseek-ai/DeepSeek-V3", "openai/gpt-oss-20b", "microsoft/Phi-3-mini-4k-instruct",
                                      "google/gemma-4-E2B-it", "moonshotai/Kimi-K2.5", "microsoft/bitnet-b1.58-2B-4T",
                                      "meta-llama/Llama-3.1-8B", 42, None])
def test_names_without_a_conversion_tag(model_id):
    from observatory.core.lineage import conversion_tag
    assert conversion_tag(model_id) is None


def test_a_labs_compressed_tensors_release_stays_original():
    cfg = {**load("meta-llama__Llama-3.1-8B.json"), "quantization_config": {
        "quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {"num_bits": 4}}}}}
    got = classify("moonshotai/Kimi-K2.5", None, cfg, None)
    assert (got.relation, got.quant_method, got.quant_bits) == ("original", "compressed-tensors", 4)
