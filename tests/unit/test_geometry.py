"""Attention geometry: every bundled real config against EXPECTED, and every dialect and trap."""

from __future__ import annotations

import copy
import json
import pickle
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

import observatory
from observatory.core.geometry import PARSER_VERSION, Geometry, parse_config_text, parse_geometry

CONFIG_DIR = Path(observatory.__file__).parent / "data" / "configs"
EXPECTED = json.loads((Path(__file__).parents[1] / "data" / "expected.json").read_text())


def load(name: str) -> Geometry:
    return parse_geometry(parse_config_text((CONFIG_DIR / name).read_bytes()))


def layers_of(geom: Geometry, kind: str) -> list[int]:
    return [i for i, k in enumerate(geom.layer_kinds) if k == kind]


def test_every_bundled_config_has_an_expectation():
    assert sorted(p.name for p in CONFIG_DIR.glob("*.json")) == sorted(e["file"] for e in EXPECTED)
    assert (CONFIG_DIR / "MANIFEST.tsv").read_text().count("\n") == len(EXPECTED) + 1


@pytest.mark.parametrize("expected", EXPECTED, ids=[e["file"].removesuffix(".json") for e in EXPECTED])
def test_real_config_matches_expected(expected):
    geom = load(expected["file"])
    got = {
        "attention_kind": geom.attention_kind,
        "num_query_heads": geom.num_query_heads,
        "num_kv_heads": geom.num_kv_heads,
        "group_size": geom.group_size,
        "head_dim": geom.head_dim,
        "num_layers": geom.num_layers,
        "kv_layers": geom.kv_layers,
        "kv_cache_elements_per_token": geom.kv_elements_per_token,
        "sliding_window": geom.sliding_window,
    }
    assert got == {key: expected[key] for key in got}
    window_layers = expected.get("sliding_window_layers")
    if window_layers:
        assert geom.sliding_layers == window_layers["count"]
        assert [i for i, k in enumerate(geom.layer_kinds) if k == "full"] == window_layers["full_attention_layers"]
    if "mla" in expected:
        assert geom.mla.to_dict() == expected["mla"]
    assert sum(geom.layer_kv_elements()) == geom.kv_elements_per_token
    json.dumps(geom.to_dict(), allow_nan=False)  # JSON-safe, no NaN/Infinity leaking through


def test_geometry_is_immutable_and_serialisable():
    geom = load("meta-llama__Llama-2-70b-hf.json")
    with pytest.raises(FrozenInstanceError):
        geom.num_kv_heads = 64
    with pytest.raises(TypeError):
        geom.sources["num_kv_heads"] = "made up"
    assert isinstance(geom.layer_kinds, tuple) and isinstance(geom.warnings, tuple)
    assert pickle.loads(pickle.dumps(geom)) == geom
    assert copy.deepcopy(geom) == geom
    assert hash(geom) == hash(load("meta-llama__Llama-2-70b-hf.json"))
    data = geom.to_dict()
    assert data["parser_version"] == PARSER_VERSION and isinstance(PARSER_VERSION, int)
    assert data["sources"] == {
        "num_layers": "num_hidden_layers", "hidden_size": "hidden_size",
        "max_position_embeddings": "max_position_embeddings", "num_query_heads": "num_attention_heads",
        "num_kv_heads": "num_key_value_heads", "head_dim": "derived:hidden_size/num_attention_heads"}


def test_sources_name_nested_key_paths():
    geom = load("Qwen__Qwen3.5-9B.json")
    assert geom.sources["num_kv_heads"] == "text_config.num_key_value_heads"
    assert geom.sources["head_dim"] == "text_config.head_dim"
    assert geom.sources["layer_kinds"] == "text_config.layer_types"
    assert geom.is_hybrid and geom.layer_kinds.count("linear") == 24


def test_traps_in_real_files():
    phi2 = load("microsoft__phi-2.json")  # n_head_kv: null means MHA, not 0 or 1
    assert phi2.sources["num_kv_heads"] == "default:K=H (n_head_kv is null)"
    falcon = load("tiiuae__falcon-180B.json")  # multi_query next to num_kv_heads=8
    assert falcon.num_kv_heads == 8 and any("multi_query" in w for w in falcon.warnings)
    exaone = load("LGAI-EXAONE__EXAONE-4.5-33B.json")  # vision_config.num_key_value_heads must not leak
    assert exaone.sources["num_kv_heads"] == "text_config.num_key_value_heads"
    gemma = load("google__gemma-3-27b-it.json")  # query_pre_attn_scalar 168 is not head_dim
    assert gemma.head_dim == 128 and gemma.sources["head_dim"] == "text_config.head_dim"
    qwen25 = load("Qwen__Qwen2.5-7B-Instruct.json")
    assert qwen25.sliding_window is None and any("inert" in w for w in qwen25.warnings)
    phi3 = load("microsoft__Phi-3-mini-128k-instruct.json")  # window larger than the context
    assert phi3.sliding_window == 262144 and phi3.sliding_layers == 0
    assert any("not smaller than max_position_embeddings" in w for w in phi3.warnings)
    gptj = load("EleutherAI__gpt-j-6b.json")  # window_size and rotary_dim are not attention geometry
    assert (gptj.sliding_window, gptj.head_dim) == (None, 256)
    scout = load("meta-llama__Llama-4-Scout-17B-16E-Instruct.json")
    assert scout.chunked and scout.chunk_size == 8192 and scout.sliding_window is None
    assert layers_of(scout, "full") == list(range(3, 48, 4)) and len(layers_of(scout, "chunked")) == 36
    v4 = load("nvidia__DeepSeek-V4-Flash-NVFP4.json")
    assert any("index_head_dim=128" in w and "+5504" in w for w in v4.warnings)
    assert any("compress_ratios" in w for w in v4.warnings)
    kimi = load("moonshotai__Kimi-K2-Instruct.json")  # MLA decided before K == H -> MHA
    assert kimi.attention_kind == "MLA" and kimi.group_size is None and kimi.v_head_dim == 128
    glm = load("zai-org__GLM-4.7-FP8.json")  # 5120/96 is not an integer; explicit head_dim wins
    assert glm.head_dim == 128 and glm.sources["head_dim"] == "head_dim"
    lfm = load("LiquidAI__LFM2.5-VL-1.6B.json")
    assert lfm.is_hybrid and lfm.layer_kinds.count("conv") == 10
    assert load("ollama-fixture__Meta-Llama-3.1-8B-abridged.json").model_type is None


# --- synthetic configs for dialects no bundled file covers ------------------------------------

LLAMA = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32}


def test_chatglm_group_num_and_its_switch():
    glm = {"model_type": "chatglm", "hidden_size": 4096, "num_attention_heads": 32, "num_layers": 28,
           "kv_channels": 128, "multi_query_attention": True, "multi_query_group_num": 2}
    geom = parse_geometry(glm)
    assert (geom.attention_kind, geom.num_kv_heads, geom.head_dim, geom.num_layers) == ("GQA", 2, 128, 28)
    assert geom.sources["num_kv_heads"] == "multi_query_group_num" and geom.sources["head_dim"] == "kv_channels"
    off = parse_geometry(glm | {"multi_query_attention": False})
    assert off.num_kv_heads == 32 and any("multi_query_group_num ignored" in w for w in off.warnings)


def test_falcon_dialects():
    refined_web = {"model_type": "RefinedWeb", "hidden_size": 8192, "n_head": 128, "n_head_kv": 8, "n_layer": 60}
    geom = parse_geometry(refined_web)  # Falcon-40B: n_head_kv is the only grouping key
    assert (geom.attention_kind, geom.num_query_heads, geom.num_kv_heads, geom.head_dim) == ("GQA", 128, 8, 64)
    falcon7b = {"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71, "num_hidden_layers": 32,
                "multi_query": True, "new_decoder_architecture": False}
    geom = parse_geometry(falcon7b)
    assert (geom.attention_kind, geom.num_kv_heads, geom.group_size) == ("MQA", 1, 71.0)


def test_gpt_bigcode_multi_query():
    geom = parse_geometry({"model_type": "gpt_bigcode", "n_embd": 6144, "n_head": 48, "n_layer": 40,
                           "multi_query": True})
    assert (geom.attention_kind, geom.num_kv_heads, geom.head_dim) == ("MQA", 1, 128)
    assert geom.kv_elements_per_token == 2 * 1 * 128 * 40
    assert geom.sources["num_kv_heads"] == "multi_query"


def test_openelm_per_layer_lists():
    q = [12, 12, 12, 16, 16, 16, 20, 20]
    kv = [3, 3, 3, 4, 4, 4, 5, 5]
    geom = parse_geometry({"model_type": "openelm", "model_dim": 1280, "head_dim": 64,
                           "num_transformer_layers": 8, "num_query_heads": q, "num_kv_heads": kv})
    assert geom.query_heads_per_layer == tuple(q) and geom.kv_heads_per_layer == tuple(kv)
    assert (geom.num_query_heads, geom.num_kv_heads, geom.group_size) == (20, 5, 4.0)
    assert geom.kv_elements_per_token == sum(2 * k * 64 for k in kv)
    assert geom.sources["num_layers"] == "num_transformer_layers" and geom.sources["hidden_size"] == "model_dim"


def test_laguna_per_layer_query_heads():
    kinds = ["full_attention", "sliding_attention", "sliding_attention", "sliding_attention"] * 2
    geom = parse_geometry({"model_type": "laguna", "hidden_size": 2048, "num_hidden_layers": 8,
                           "num_attention_heads": 48, "num_attention_heads_per_layer": [48, 64, 64, 64] * 2,
                           "num_key_value_heads": 8, "head_dim": 128, "layer_types": kinds,
                           "sliding_window": 512, "max_position_embeddings": 131072})
    assert (geom.num_query_heads, geom.num_kv_heads, geom.group_size) == (48, 8, 6.0)  # 2048/48 is not whole
    assert geom.query_heads_per_layer == (48, 64, 64, 64) * 2 and geom.sliding_layers == 6
    assert geom.kv_elements_per_token == 8 * 2 * 8 * 128  # K is 8 on every layer


def test_qwen3_next_full_attention_interval():
    geom = parse_geometry({"model_type": "qwen3_next", "hidden_size": 2048, "num_attention_heads": 16,
                           "num_key_value_heads": 2, "head_dim": 256, "num_hidden_layers": 48,
                           "full_attention_interval": 4, "partial_rotary_factor": 0.25})
    assert geom.kv_layers == 12 and layers_of(geom, "full") == list(range(3, 48, 4))
    assert geom.is_hybrid and geom.head_dim == 256 and geom.kv_elements_per_token == 12 * 2 * 2 * 256


NEMOTRON_H = """{"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "hidden_size": 8192,
 "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "time_step_limit": [0.0, Infinity],
 "rescale_prenorm_residual": NaN, "layers_block_type": %s}"""


def test_nemotron_h_layers_block_type_with_infinity():
    blocks = (["mamba", "moe", "mamba", "moe", "mamba", "moe", "mamba", "attention", "moe"] * 12)
    cfg = parse_config_text(NEMOTRON_H % json.dumps(blocks))
    geom = parse_geometry(cfg)
    assert (geom.num_layers, geom.kv_layers, geom.is_hybrid) == (108, 12, True)
    assert geom.sources["num_layers"] == "derived:len(layers_block_type)"
    assert geom.kv_elements_per_token == 12 * 2 * 8 * 128
    json.dumps(geom.to_dict(), allow_nan=False)


def test_nemotron_h_hybrid_override_pattern():
    geom = parse_geometry({"model_type": "nemotron_h", "hidden_size": 4096, "num_attention_heads": 32,
                           "num_key_value_heads": 8, "hybrid_override_pattern": "M-M-M*-M-M-M*-"})
    assert geom.num_layers == 14 and layers_of(geom, "full") == [5, 12]
    assert geom.layer_kinds[:2] == ("mamba", "mlp")


@pytest.mark.parametrize("cfg", [
    {"model_type": "rwkv", "architectures": ["RwkvForCausalLM"], "hidden_size": 2560, "num_hidden_layers": 32,
     "attention_hidden_size": 2560, "head_size": 64},
    {"model_type": "mamba2", "hidden_size": 2560, "num_hidden_layers": 64, "num_heads": 80, "state_size": 128},
    {"architectures": ["MambaForCausalLM"], "d_model": 768, "n_layer": 24},
], ids=["rwkv", "mamba2", "mamba-by-architecture"])
def test_attention_free_models(cfg):
    geom = parse_geometry(cfg)
    assert (geom.attention_kind, geom.kv_layers, geom.kv_elements_per_token) == ("none", 0, 0)
    assert geom.num_query_heads is None and geom.group_size is None and not geom.is_hybrid
    assert geom.num_layers == len(geom.layer_kinds) > 0


def test_all_layers_without_kv_is_kind_none():
    geom = parse_geometry({"num_attention_heads": 8, "hidden_size": 512, "layers_block_type": ["mamba"] * 4})
    assert geom.attention_kind == "none" and geom.warnings == ("no layer holds a per-token KV cache",)


def test_jamba_attention_period():
    geom = parse_geometry({"model_type": "jamba", "hidden_size": 4096, "num_attention_heads": 32,
                           "num_key_value_heads": 8, "num_hidden_layers": 32, "attn_layer_period": 8,
                           "attn_layer_offset": 4, "expert_layer_period": 2})
    assert layers_of(geom, "full") == [4, 12, 20, 28] and geom.is_hybrid
    assert geom.kv_elements_per_token == 4 * 2 * 8 * 128


def test_minimax_attn_type_list():
    types = ([0] * 7 + [1]) * 10
    geom = parse_geometry({"model_type": "minimax", "hidden_size": 6144, "num_attention_heads": 64,
                           "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 80,
                           "attn_type_list": types, "max_position_embeddings": 10240000})
    assert geom.kv_layers == 10 and geom.layer_kinds.count("linear") == 70 and geom.head_dim == 128
    assert geom.max_position_embeddings == 10240000


def test_mllama_cross_attention_layers_hold_no_text_kv():
    cross = [3, 8, 13, 18, 23, 28, 33, 38, 43, 48, 53, 58, 63, 68, 73, 78, 83, 88, 93, 98]
    cfg = {"model_type": "mllama", "architectures": ["MllamaForConditionalGeneration"],
           "text_config": {"model_type": "mllama_text_model", "hidden_size": 8192, "num_attention_heads": 64,
                           "num_key_value_heads": 8, "num_hidden_layers": 100, "cross_attention_layers": cross},
           "vision_config": {"hidden_size": 1280, "num_attention_heads": 16, "num_hidden_layers": 32}}
    geom = parse_geometry(cfg)
    assert (geom.num_layers, geom.kv_layers, geom.num_query_heads) == (100, 80, 64)
    assert layers_of(geom, "cross") == cross and not geom.is_hybrid
    assert geom.kv_elements_per_token == 80 * 2 * 8 * 128


def test_gemma2_alternates_with_nothing_per_layer():
    geom = parse_geometry({"model_type": "gemma2", "hidden_size": 2304, "num_attention_heads": 8,
                           "num_key_value_heads": 4, "head_dim": 256, "num_hidden_layers": 26,
                           "sliding_window": 4096, "query_pre_attn_scalar": 256, "max_position_embeddings": 8192})
    assert layers_of(geom, "sliding") == list(range(0, 26, 2)) and geom.sliding_layers == 13
    assert geom.head_dim == 256  # not 2304 / 8 = 288


def test_gemma3_sliding_window_pattern():
    text = {"model_type": "gemma3_text", "hidden_size": 1152, "num_attention_heads": 4, "num_key_value_heads": 1,
            "head_dim": 256, "num_hidden_layers": 26, "sliding_window": 512, "sliding_window_pattern": 6,
            "max_position_embeddings": 32768}
    geom = parse_geometry(text)
    assert layers_of(geom, "full") == [5, 11, 17, 23] and geom.sliding_layers == 22
    assert geom.sources["sliding_layers"] == "sliding_window_pattern"
    assert geom.attention_kind == "MQA"


def test_exaone_pattern_string():
    geom = parse_geometry({"model_type": "exaone4", "hidden_size": 5120, "num_attention_heads": 40,
                           "num_key_value_heads": 8, "num_hidden_layers": 64, "sliding_window": 4096,
                           "sliding_window_pattern": "LLLG", "max_position_embeddings": 131072})
    assert layers_of(geom, "full") == list(range(3, 64, 4)) and geom.sliding_layers == 48


def test_llava_text_config_takes_llama_defaults():
    cfg = {"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"],
           "text_config": {"model_type": "llama", "max_position_embeddings": 4096, "vocab_size": 32064},
           "vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024, "num_attention_heads": 16,
                             "num_hidden_layers": 24}}
    geom = parse_geometry(cfg)
    assert (geom.num_query_heads, geom.num_kv_heads, geom.head_dim, geom.num_layers) == (32, 32, 128, 32)
    assert geom.attention_kind == "MHA" and geom.model_type == "llava"
    assert geom.sources["num_query_heads"] == "default:llama.num_attention_heads"
    assert any("applied llama defaults" in w for w in geom.warnings)


def test_nested_null_is_not_replaced_by_a_default():
    cfg = {"model_type": "llava", "text_config": {"model_type": "mistral", "hidden_size": 5120, "head_dim": 128,
                                                  "num_hidden_layers": 40, "sliding_window": None}}
    geom = parse_geometry(cfg)  # Pixtral: heads default to 32, KV to 8, the explicit null window stays null
    assert (geom.num_query_heads, geom.num_kv_heads, geom.sliding_window) == (32, 8, None)


@pytest.mark.parametrize("path", ["llm_config", "language_config", "thinker_config.text_config", "decoder"])
def test_other_nested_sections(path):
    inner = {"hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 2, "num_hidden_layers": 24}
    cfg: dict = {"model_type": "wrapper", "vision_config": {"num_attention_heads": 12, "num_hidden_layers": 12}}
    node = cfg
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = inner
    geom = parse_geometry(cfg)
    assert (geom.num_query_heads, geom.num_kv_heads, geom.num_layers) == (16, 2, 24)
    assert geom.sources["num_kv_heads"] == f"{path}.num_key_value_heads"


def test_deepseek_v2_lite_without_q_lora_rank():
    geom = parse_geometry({"model_type": "deepseek_v2", "hidden_size": 2048, "num_attention_heads": 16,
                           "num_key_value_heads": 16, "num_hidden_layers": 27, "kv_lora_rank": 512,
                           "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
                           "v_head_dim": 128})
    assert geom.attention_kind == "MLA" and geom.mla.q_lora_rank is None
    assert geom.kv_elements_per_token == 27 * 576 and geom.head_dim == 192
    assert geom.sources["mla.q_lora_rank"].startswith("default:none")


def test_minicpm3_without_v_head_dim():
    geom = parse_geometry({"model_type": "minicpm3", "hidden_size": 2560, "num_attention_heads": 40,
                           "num_key_value_heads": 40, "num_hidden_layers": 62, "kv_lora_rank": 256,
                           "q_lora_rank": 768, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32})
    assert geom.mla.v_head_dim == 64 and geom.v_head_dim == 64 and geom.head_dim == 96
    assert geom.kv_elements_per_token == 62 * (256 + 32)
    assert any("without v_head_dim" in w for w in geom.warnings)


def test_glm5_mla_with_misleading_head_dim_and_indexer():
    geom = parse_geometry({"model_type": "glm_moe_dsa", "hidden_size": 6144, "num_attention_heads": 64,
                           "num_key_value_heads": 64, "head_dim": 64, "num_hidden_layers": 78,
                           "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 192,
                           "v_head_dim": 256, "index_head_dim": 128})
    assert geom.attention_kind == "MLA" and geom.head_dim == 256 and geom.kv_elements_per_token == 78 * 576
    assert any("is not the MLA q/k head dim" in w for w in geom.warnings)
    assert any("indexer" in w and f"+{128 * 78}" in w for w in geom.warnings)


def test_deepseek_inference_format():
    geom = parse_geometry({"dim": 7168, "n_heads": 128, "n_layers": 61, "n_dense_layers": 3,
                           "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
                           "v_head_dim": 128, "q_lora_rank": 1536})
    assert geom.attention_kind == "MLA" and geom.kv_elements_per_token == 35136 and geom.hidden_size == 7168


@pytest.mark.parametrize("key", ["n_kv_heads", "n_local_heads", "num_kv_heads"])
def test_meta_torchchat_torchtune_spellings(key):
    geom = parse_geometry({"dim": 4096, "n_heads": 32, "n_layers": 32, key: 8})
    assert (geom.attention_kind, geom.num_kv_heads, geom.head_dim) == ("GQA", 8, 128)
    assert geom.sources["num_kv_heads"] == key


def test_dbrx_and_mpt_attn_config():
    dbrx = parse_geometry({"model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 40,
                           "attn_config": {"kv_n_heads": 8, "clip_qkv": 8}})
    assert (dbrx.num_kv_heads, dbrx.sources["num_kv_heads"]) == (8, "attn_config.kv_n_heads")
    mpt = parse_geometry({"model_type": "mpt", "d_model": 4096, "n_heads": 32, "n_layers": 32,
                          "attn_config": {"attn_type": "multiquery_attention"}})
    assert mpt.attention_kind == "MQA"


def test_sliding_window_on_every_layer_and_qwen_max_window_layers():
    mistral = parse_geometry(LLAMA | {"model_type": "mistral", "num_key_value_heads": 8, "sliding_window": 4096,
                                      "max_position_embeddings": 32768})
    assert mistral.sliding_layers == 32 and mistral.sliding_window == 4096
    qwen = parse_geometry(LLAMA | {"model_type": "qwen2", "use_sliding_window": True, "sliding_window": 4096,
                                   "max_window_layers": 28, "max_position_embeddings": 32768})
    assert layers_of(qwen, "sliding") == [28, 29, 30, 31]


def test_gpt_oss_layer_types_alternate_from_layer_zero():
    geom = parse_geometry({"model_type": "gpt_oss", "hidden_size": 2880, "num_attention_heads": 64,
                           "num_key_value_heads": 8, "head_dim": 64, "num_hidden_layers": 24,
                           "sliding_window": 128, "max_position_embeddings": 131072,
                           "layer_types": ["sliding_attention", "full_attention"] * 12})
    assert layers_of(geom, "sliding") == list(range(0, 24, 2)) and geom.head_dim == 64  # not 2880/64 = 45


def test_lfm2_layer_types_one_longer_than_layers():
    kinds = ["conv", "conv", "full_attention"] * 5 + ["conv", "full_attention"]  # 17 entries
    geom = parse_geometry({"model_type": "lfm2", "hidden_size": 2048, "num_attention_heads": 32, "num_heads": 32,
                           "num_key_value_heads": 8, "num_hidden_layers": 16, "layer_types": kinds})
    assert geom.num_layers == 16 and geom.kv_layers == 5
    assert any("17 entries for 16 layers" in w for w in geom.warnings)


def test_dirty_values_are_read_with_warnings():
    geom = parse_geometry(LLAMA | {"num_attention_heads": "32", "num_key_value_heads": 8.0,
                                   "sliding_window": False, "num_heads": 16})
    assert (geom.num_query_heads, geom.num_kv_heads, geom.sliding_window) == (32, 8, None)
    text = " | ".join(geom.warnings)
    for fragment in ("written as a string", "written as a float", "read as no window", "disagrees"):
        assert fragment in text


def test_head_dim_spellings_and_rotary_keys():
    chan = parse_geometry({"model_type": "qwen", "hidden_size": 4096, "num_attention_heads": 32,
                           "num_hidden_layers": 32, "kv_channels": 128, "rotary_pct": 1.0})
    assert chan.head_dim == 128 and chan.sources["head_dim"] == "kv_channels"
    both = parse_geometry(LLAMA | {"head_dim": 128, "kv_channels": 96})
    assert both.head_dim == 128 and any("kv_channels" in w for w in both.warnings)
    rotary = parse_geometry(LLAMA | {"rotary_dim": 32, "partial_rotary_factor": 0.25, "query_pre_attn_scalar": 144})
    assert rotary.head_dim == 128


def test_unknown_layer_types_never_lower_the_count():
    # Two thirds of the layers are of types nobody knows: each is counted as a full KV layer (an upper
    # bound) and the geometry is marked uncertain, instead of being silently under-counted 3x.
    geom = parse_geometry(LLAMA | {"num_hidden_layers": 3,
                                   "layer_types": ["full_attention", "fancy_attention", "wormhole"]})
    assert geom.layer_kinds == ("full", "full", "full") and geom.kv_layers == 3
    assert geom.kv_elements_per_token == 3 * 2 * 32 * 128 and geom.uncertain
    unknown = [w for w in geom.warnings if "unknown layer type" in w]
    assert unknown == ['layer_types[1]: unknown layer type "fancy_attention" counted as a full KV layer (upper bound)',
                       'layer_types[2]: unknown layer type "wormhole" counted as a full KV layer (upper bound)']
    assert not parse_geometry(LLAMA | {"layer_types": ["full_attention"] * 32}).uncertain


def test_gpt_neo_local_layers_slide_on_window_size():
    cfg = {
        "model_type": "gpt_neo", "architectures": ["GPTNeoForCausalLM"], "hidden_size": 2560,
        "num_heads": 20, "num_layers": 32, "window_size": 256, "max_position_embeddings": 2048,
        "attention_types": [[["global", "local"], 16]],
        "attention_layers": ["global", "local"] * 16,
    }
    geom = parse_geometry(cfg)
    assert (geom.attention_kind, geom.num_kv_heads, geom.head_dim) == ("MHA", 20, 128)
    assert geom.sliding_window == 256 and geom.sliding_layers == 16
    assert geom.kv_layers == 32


def test_gpt_j_window_size_is_not_a_sliding_window():
    cfg = {"model_type": "gptj", "n_embd": 4096, "n_head": 16, "n_layer": 28, "window_size": 256, "rotary_dim": 64}
    geom = parse_geometry(cfg)
    assert geom.sliding_window is None and geom.sliding_layers == 0 and geom.head_dim == 256
