"""Attention geometry: every bundled real config against EXPECTED, and every dialect and trap."""

from __future__ import annotations

import copy
import json
import pickle
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

import observatory
from observatory.core.geometry import (
    PARSER_VERSION,
    Geometry,
    GeometryError,
    parse_config_text,
    parse_geometry,
)
from observatory.core.kvcache import cache_bytes

CONFIG_DIR = Path(observatory.__file__).parent / "catalog" / "data" / "configs"
EXPECTED = json.loads((Path(__file__).parents[1] / "data" / "expected.json").read_text())


def load(name: str) -> Geometry:
    return parse_geometry(parse_config_text((CONFIG_DIR / name).read_bytes()))


def layers_of(geom: Geometry, kind: str) -> list[int]:
    return [i for i, k in enumerate(geom.layer_kinds) if k == kind]


def test_every_bundled_config_is_in_the_manifest_and_the_expectations_name_real_files():
    # Expectations worked out by hand cover a curated set (every rule and family); the transformers
    # oracle (tests/oracle) checks every bundled config that transformers can build.
    names = {p.name for p in CONFIG_DIR.glob("*.json")}
    assert {e["file"] for e in EXPECTED} <= names and len(EXPECTED) >= 60
    with (CONFIG_DIR / "MANIFEST.tsv").open(newline="") as fh:
        listed = [row.split("\t", 1)[0] for row in fh.read().split("\n")[1:] if row]
    assert sorted(listed) == sorted(names) and len(listed) == len(set(listed))


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
    encdec = expected.get("encoder_decoder")
    assert geom.is_encoder_decoder == bool(encdec) and geom.encoder_only == expected.get("encoder_only", False)
    if encdec:
        assert geom.encoder_layers == encdec["encoder_layers"]
        assert geom.cross_kv_elements_per_source_token == encdec["cross_kv_elements_per_source_token"]
    if "head_dims_per_layer_full" in expected:  # Gemma-4: full layers at global_head_dim and global KV heads
        full = [i for i, k in enumerate(geom.layer_kinds) if k == "full"]
        assert {geom.head_dims_per_layer[i] for i in full} == {expected["head_dims_per_layer_full"]}
        assert {geom.kv_heads_per_layer[i] for i in full} == {expected["kv_heads_full"]}
    assert not geom.uncertain
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


@pytest.mark.parametrize("path", ["llm_config", "language_config", "thinker_config.text_config", "decoder",
                                  "llm_cfg", "language_model_config", "lm_config"])  # llm_cfg: VILA / NVILA
def test_other_nested_sections(path):
    inner = {"hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 2, "num_hidden_layers": 24}
    cfg: dict = {"model_type": "wrapper", "vision_config": {"num_attention_heads": 12, "num_hidden_layers": 12},
                 "vision_tower_cfg": {"num_attention_heads": 16, "num_hidden_layers": 27},
                 "mm_projector_cfg": {"num_attention_heads": 1, "num_hidden_layers": 2}}
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


# --- issue 11: KV sharing, per-layer head dims, encoder-only, encoder-decoder, wrappers, defaults --------


def test_gemma4_full_layers_use_global_head_dim_and_global_kv_heads():
    geom = load("google__gemma-4-26B-A4B.json")
    assert geom.sources["head_dim_full_layers"] == "text_config.global_head_dim"
    assert geom.sources["num_kv_heads_full_layers"] == "text_config.num_global_key_value_heads"
    sliding, full = layers_of(geom, "sliding"), layers_of(geom, "full")
    per_layer = geom.layer_kv_elements()
    assert {per_layer[i] for i in sliding} == {2 * 8 * 256} and {per_layer[i] for i in full} == {2 * 2 * 512}
    # Windows still cap the sliding layers at 1024 tokens; the full layers grow with the context.
    assert cache_bytes(geom, 131072) == 2 * (25 * 2 * 8 * 256 * 1024 + 5 * 2 * 2 * 512 * 131072)


def test_global_kv_heads_need_attention_k_eq_v():
    text = json.loads((CONFIG_DIR / "google__gemma-4-26B-A4B.json").read_text())["text_config"]
    geom = parse_geometry({"model_type": "gemma4", "text_config": text | {"attention_k_eq_v": False}})
    assert geom.kv_heads_per_layer is None and geom.num_kv_heads == 8  # as transformers does: ignored
    assert geom.sources["num_global_key_value_heads"].startswith("ignored")


def gemma4_e2b(**changes) -> dict:
    """The Gemma-4 E2B text section as its model card gives it: 35 layers, every 5th full, 20 shared."""
    text = {"model_type": "gemma4_text", "hidden_size": 1536, "num_hidden_layers": 35, "num_attention_heads": 8,
            "num_key_value_heads": 1, "head_dim": 256, "global_head_dim": 512, "sliding_window": 512,
            "num_kv_shared_layers": 20, "attention_k_eq_v": False,
            "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7}
    return {"model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"], "text_config": text | changes}


def test_kv_shared_layers_store_nothing():
    geom = parse_geometry(gemma4_e2b())
    assert geom.layer_kinds[15:] == ("shared",) * 20 and geom.kv_layers == 15
    assert layers_of(geom, "full") == [4, 9, 14] and geom.sliding_layers == 12
    # 12 sliding layers at 2*1*256 and 3 full at 2*1*512; counting all 35 at head_dim 256 was ~2x over.
    assert geom.kv_elements_per_token == 12 * 512 + 3 * 1024 == 9216
    assert parse_geometry(gemma4_e2b(num_kv_shared_layers=0, global_head_dim=256)).kv_elements_per_token == 35 * 512
    assert not geom.is_hybrid and geom.sources["num_kv_shared_layers"] == "text_config.num_kv_shared_layers"


def test_gemma3n_text_section_takes_its_sharing_default():
    cfg = {"model_type": "gemma3n", "text_config": {"model_type": "gemma3n_text", "hidden_size": 2048,
                                                     "num_hidden_layers": 35, "head_dim": 256,
                                                     "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7}}
    geom = parse_geometry(cfg)  # transformers drops num_kv_shared_layers=15 when it saves: its default
    assert geom.kv_layers == 20 and geom.sources["num_kv_shared_layers"] == "default:gemma3n_text.num_kv_shared_layers"
    assert geom.kv_elements_per_token == 20 * 2 * 2 * 256


def test_too_many_shared_layers_is_an_error():
    with pytest.raises(GeometryError, match="num_kv_shared_layers=36 exceeds the 35 layers"):
        parse_geometry(gemma4_e2b(num_kv_shared_layers=36))


@pytest.mark.parametrize("name", ["google-bert__bert-base-uncased.json", "sentence-transformers__all-MiniLM-L6-v2.json"])
def test_encoder_only_models_hold_no_cache(name):
    geom = load(name)
    assert geom.encoder_only and geom.attention_kind == "MHA" and geom.kv_layers == 0
    assert geom.kv_elements_per_token == 0 and set(geom.layer_kinds) == {"encoder"}
    assert cache_bytes(geom, 4096) == 0 and geom.sources["encoder_only"] == "model_type=bert"


def test_encoder_only_by_architecture_and_is_decoder_switch():
    masked = parse_geometry({"architectures": ["NewModelForMaskedLM"], "hidden_size": 768, "num_attention_heads": 12,
                             "num_hidden_layers": 12})
    assert masked.encoder_only and masked.sources["encoder_only"] == "architectures=NewModelForMaskedLM"
    decoder = parse_geometry({"model_type": "bert", "is_decoder": True, "hidden_size": 768,
                              "num_attention_heads": 12, "num_hidden_layers": 12})
    assert not decoder.encoder_only and decoder.kv_layers == 12  # BertLMHeadModel as a decoder caches


def test_whisper_counts_the_decoder_not_num_hidden_layers():
    geom = load("openai__whisper-large-v3-turbo.json")  # num_hidden_layers=32 is the encoder's depth
    assert (geom.num_layers, geom.encoder_layers, geom.kv_layers) == (4, 32, 4)
    assert geom.sources["num_layers"] == "decoder_layers" and geom.sources["num_query_heads"] == "decoder_attention_heads"
    assert geom.sources["encoder_layers"] == "encoder_layers" and geom.max_position_embeddings == 448
    assert geom.kv_elements_per_token == geom.cross_kv_elements_per_source_token == 4 * 2 * 20 * 64


def t5(**changes) -> dict:
    return json.loads((CONFIG_DIR / "google-t5__t5-small.json").read_text()) | changes


def test_t5_with_fewer_decoder_than_encoder_layers():
    geom = parse_geometry(t5(num_layers=24, num_decoder_layers=4))
    assert (geom.num_layers, geom.encoder_layers, geom.kv_layers) == (4, 24, 4)
    assert geom.kv_elements_per_token == 4 * 2 * 8 * 64 and geom.sources["head_dim"] == "d_kv"
    mirrored = parse_geometry(t5(num_layers=24, num_decoder_layers=None))  # T5Config: defaults to num_layers
    assert mirrored.num_layers == 24 and mirrored.sources["num_layers"] == "default:num_decoder_layers=num_layers"


def test_t5_d_kv_need_not_be_d_model_over_heads():
    geom = parse_geometry(t5(d_model=1024, num_heads=128, d_kv=128, num_layers=24, num_decoder_layers=24))
    assert geom.head_dim == 128 and geom.kv_elements_per_token == 24 * 2 * 128 * 128  # T5-11B's shape


def test_nested_decoder_of_an_encoder_decoder_wrapper():
    cfg = {"model_type": "vision-encoder-decoder", "is_encoder_decoder": True,
           "encoder": {"model_type": "vit", "hidden_size": 768, "num_attention_heads": 12, "num_hidden_layers": 12},
           "decoder": {"model_type": "trocr", "d_model": 1024, "decoder_attention_heads": 16, "decoder_layers": 12}}
    geom = parse_geometry(cfg)
    assert geom.is_encoder_decoder and (geom.num_layers, geom.num_query_heads, geom.head_dim) == (12, 16, 64)
    assert geom.encoder_layers == 12 and geom.sources["num_layers"] == "decoder.decoder_layers"


def test_encoder_decoder_without_decoder_heads_is_an_error():
    with pytest.raises(GeometryError, match="no decoder attention head count"):
        parse_geometry({"model_type": "bart", "d_model": 1024, "decoder_layers": 12, "encoder_layers": 12})


SANTACODER = {"_name_or_path": "bigcode/santacoder", "architectures": ["GPT2LMHeadCustomModel"],
              "attention_head_type": "multiquery", "model_type": "gpt2", "n_embd": 2048, "n_head": 16,
              "n_inner": 8192, "n_layer": 24, "n_positions": 2048}


def test_original_santacoder_attention_head_type():
    geom = parse_geometry(SANTACODER)  # the same weights in gpt_bigcode format say multi_query: true
    assert (geom.attention_kind, geom.num_kv_heads, geom.head_dim) == ("MQA", 1, 128)
    assert geom.sources["num_kv_heads"] == "attention_head_type" and geom.kv_elements_per_token == 24 * 2 * 128
    assert parse_geometry(SANTACODER | {"attention_head_type": "multihead"}).attention_kind == "MHA"
    odd = parse_geometry(SANTACODER | {"attention_head_type": "grouped"})
    assert odd.num_kv_heads == 16 and odd.uncertain and any("upper bound" in w for w in odd.warnings)


def test_nested_sections_never_read_encoders_or_projectors():
    cfg = {"model_type": "wrapper", "hidden_size": 1024, "num_hidden_layers": 24,
           "vision_tower_cfg": {"num_attention_heads": 16, "num_hidden_layers": 24},
           "speech_encoder": {"num_attention_heads": 8, "num_hidden_layers": 12}}
    with pytest.raises(GeometryError, match="no attention head count"):
        parse_geometry(cfg)


def test_qwen2_family_sliding_window_is_off_without_the_switch():
    qwen = LLAMA | {"model_type": "qwen2", "num_key_value_heads": 4, "sliding_window": 32768,
                    "max_window_layers": 28, "max_position_embeddings": 131072}
    geom = parse_geometry(qwen)  # Qwen2Config: use_sliding_window defaults to false
    assert geom.sliding_window is None and geom.sliding_layers == 0
    assert any("which qwen2 defaults to false" in w for w in geom.warnings)
    assert cache_bytes(geom, 131072) == 131072 * geom.kv_elements_per_token * 2
    on = parse_geometry(qwen | {"use_sliding_window": True})
    assert on.sliding_window == 32768 and layers_of(on, "sliding") == [28, 29, 30, 31]
    mistral = parse_geometry(qwen | {"model_type": "mistral"})  # Mistral has no switch: the window binds
    assert mistral.sliding_layers == 32


def test_explicit_null_takes_the_family_default_with_a_warning():
    text = {"model_type": "gemma3_text", "hidden_size": 2560, "num_attention_heads": 8, "num_hidden_layers": 34,
            "num_key_value_heads": None, "head_dim": None, "sliding_window": 1024, "sliding_window_pattern": 6}
    geom = parse_geometry({"model_type": "gemma3", "text_config": text})
    assert (geom.attention_kind, geom.num_kv_heads, geom.head_dim) == ("GQA", 4, 256)  # not MHA at 2560/8=320
    assert "text_config.num_key_value_heads is null; using the gemma3_text default num_key_value_heads=4" in geom.warnings
    assert "text_config.head_dim is null; using the gemma3_text default head_dim=256" in geom.warnings
    omitted = parse_geometry({"model_type": "gemma3", "text_config": {k: v for k, v in text.items() if v is not None}})
    assert (omitted.num_kv_heads, omitted.head_dim, omitted.kv_elements_per_token) == (4, 256, geom.kv_elements_per_token)


def test_known_transformers_layer_types_are_not_uncertain():
    kinds = ["indexed_attention", "hybrid_sliding", "dummy", "reference_sliding_attention"]
    geom = parse_geometry(LLAMA | {"num_hidden_layers": 4, "sliding_window": 128, "layer_types": kinds})
    assert geom.layer_kinds == ("full", "sliding", "mlp", "sliding") and not geom.uncertain


def _bundled(name: str):
    from observatory.core.geometry import parse_config_text
    return parse_geometry(parse_config_text((CONFIG_DIR / name).read_bytes()))


def test_xglm_spells_its_heads_attention_heads():
    geom = _bundled("facebook__xglm-564M.json")  # attention_heads 16, d_model 1024, num_layers 24
    assert (geom.attention_kind, geom.num_query_heads, geom.head_dim, geom.kv_layers) == ("MHA", 16, 64, 24)
    assert geom.sources["num_query_heads"] == "attention_heads"


def test_mamba_ssm_package_configs():
    # The mamba_ssm package's own config.json: no model_type, ssm_cfg, attention only where
    # attn_layer_idx says, with its heads in attn_cfg.
    pure = _bundled("state-spaces__mamba2-130m.json")
    assert pure.attention_kind == "none" and pure.kv_layers == 0 and set(pure.layer_kinds) == {"mamba"}
    hybrid = _bundled("state-spaces__mamba2attn-2.7b.json")
    assert hybrid.is_hybrid and hybrid.kv_layers == 6 and hybrid.num_layers == 64
    assert [i for i, k in enumerate(hybrid.layer_kinds) if k == "full"] == [9, 18, 27, 36, 45, 56]
    assert (hybrid.num_query_heads, hybrid.num_kv_heads, hybrid.head_dim) == (30, 30, 128)
    assert hybrid.sources["num_query_heads"] == "attn_cfg.num_heads" and hybrid.sources["head_dim"] == "attn_cfg.head_dim"
    assert hybrid.kv_elements_per_token == 6 * 2 * 30 * 128


def test_lfm2_full_attn_idxs_name_the_attention_layers():
    # LFM2-1.2B as first published: 16 layers, attention on 6 of them, short convolutions elsewhere
    # (transformers' Lfm2Config turns full_attn_idxs into layer_types the same way).
    geom = _bundled("LiquidAI__LFM2-1.2B.json")
    assert geom.is_hybrid and geom.kv_layers == 6 and layers_of(geom, "full") == [2, 5, 8, 10, 12, 14]
    assert geom.kv_elements_per_token == 6 * 2 * 8 * 64
    assert geom.sources["layer_kinds"] == "full_attn_idxs"


def test_bamba_attends_on_attn_layer_indices():
    geom = _bundled("ibm-ai-platform__Bamba-9B.json")  # 32 layers, attention on 9, 18, 27
    assert geom.is_hybrid and layers_of(geom, "full") == [9, 18, 27] and geom.kv_layers == 3
    assert geom.kv_elements_per_token == 3 * 2 * 8 * 128


def test_nemotron_h_head_dim_is_attention_head_dim():
    geom = _bundled("nvidia__Nemotron-H-4B-Base-8K.json")  # hidden 3072 / 32 heads = 96, but heads are 128 wide
    assert geom.head_dim == 128 and geom.sources["head_dim"] == "attention_head_dim"


def test_mimo_v2_sliding_layers_have_their_own_kv_heads():
    geom = _bundled("XiaomiMiMo__MiMo-V2-Flash.json")
    pattern = [0, 1, 1, 1, 1, 0] + ([1] * 5 + [0]) * 7  # hybrid_layer_pattern: 1 = sliding
    assert [k == "sliding" for k in geom.layer_kinds] == [bool(v) for v in pattern]
    full, sliding = layers_of(geom, "full"), layers_of(geom, "sliding")
    assert {geom.kv_heads_per_layer[i] for i in full} == {4} and {geom.kv_heads_per_layer[i] for i in sliding} == {8}
    assert geom.kv_elements_per_token == len(full) * 4 * (192 + 128) + len(sliding) * 8 * (192 + 128)
    assert geom.sliding_window == 128


# --- issue 20: classes of real config the rules used to misread ------------------------------------

def test_deepseek_v4_caches_one_tensor_as_key_and_value():
    # DeepseekV4Attention calls cache.update(kv, kv, ...): the key is the value, cached once.
    for name in ("deepseek-ai__DeepSeek-V4-Flash.json", "deepseek-ai__DeepSeek-V4-Pro.json"):
        geom = load(name)
        assert geom.k_equals_v and geom.sources["k_equals_v"] == "model_type=deepseek_v4"
        assert geom.attention_kind == "MQA" and geom.num_kv_heads == 1 and geom.head_dim == 512
        assert set(geom.layer_kv_elements()) == {512}
        assert geom.kv_elements_per_token == 512 * geom.kv_layers
    flash = load("deepseek-ai__DeepSeek-V4-Flash.json")
    assert flash.kv_elements_per_token == 43 * 512
    # a family that keeps K and V apart is unchanged; a V4 config whose value width differs is refused the rule
    assert not load("deepseek-ai__DeepSeek-V3.json").k_equals_v
    odd = json.loads((CONFIG_DIR / "deepseek-ai__DeepSeek-V4-Flash.json").read_bytes()) | {"v_head_dim": 256}
    geom = parse_geometry(odd)
    assert not geom.k_equals_v and any("shared K = V cache cannot" in w for w in geom.warnings)
    assert geom.kv_elements_per_token == 43 * (512 + 256)


def test_kimi_linear_attn_config_lists_the_full_attention_layers():
    # Kimi-K3's text_config: full_attn_layers (1-based) keep MLA, kda_layers are KDA linear attention.
    k3 = load("moonshotai__Kimi-K3.json")
    full = [i for i, kind in enumerate(k3.layer_kinds) if kind == "full"]
    assert full == [*range(3, 92, 4), 92] and k3.kv_layers == 24
    assert k3.layer_kinds.count("linear") == 69 and k3.is_hybrid and k3.attention_kind == "MLA"
    assert k3.kv_elements_per_token == 24 * (512 + 64)
    assert k3.sources["layer_kinds"] == "text_config.linear_attn_config.full_attn_layers"
    assert not k3.uncertain


@pytest.mark.parametrize(("block", "full", "uncertain"), [
    ({"full_attn_layers": [4, 8]}, [3, 7], False),  # only the full layers listed: the rest are KDA
    ({"kda_layers": [1, 2, 3, 5, 6, 7]}, [3, 7], False),  # only the KDA layers listed: the rest attend
    ({"full_attn_layers": [4], "kda_layers": [1, 2, 3]}, [3, 4, 5, 6, 7], True),  # 4 layers unlisted
    ({"full_attn_layers": [3, 7], "kda_layers": [0, 1, 2, 4, 5, 6], "kda_layer_index_base": 0}, [3, 7], False),
    ({"head_dim": 128}, list(range(8)), True),  # no lists at all: nothing to go on, an upper bound
])
def test_linear_attn_config_edges(block, full, uncertain):
    cfg = {"model_type": "kimi_linear", "hidden_size": 512, "num_attention_heads": 8, "num_hidden_layers": 8,
           "linear_attn_config": block}
    geom = parse_geometry(cfg)
    assert [i for i, kind in enumerate(geom.layer_kinds) if kind == "full"] == full
    assert geom.uncertain == uncertain


def test_linear_attn_config_bad_index_is_one_line_error():
    cfg = {"model_type": "kimi_linear", "hidden_size": 512, "num_attention_heads": 8, "num_hidden_layers": 8,
           "linear_attn_config": {"full_attn_layers": [0, 4]}}  # 0 in a 1-based list
    with pytest.raises(GeometryError, match=r"linear_attn_config.full_attn_layers\[0\] is 0"):
        parse_geometry(cfg)


def test_moonshine_prefixed_encoder_decoder_keys():
    # Moonshine spells the Llama keys with encoder_/decoder_ prefixes; it was refused with "no layer count".
    geom = load("UsefulSensors__moonshine-tiny-ar.json")
    assert geom.is_encoder_decoder and (geom.num_layers, geom.encoder_layers) == (6, 6)
    assert geom.sources["num_layers"] == "decoder_num_hidden_layers"
    assert geom.sources["num_kv_heads"] == "decoder_num_key_value_heads"
    assert (geom.num_query_heads, geom.num_kv_heads, geom.head_dim) == (8, 8, 36)  # 288 / 8; padding is not cached
    assert geom.kv_elements_per_token == geom.cross_kv_elements_per_source_token == 6 * 2 * 8 * 36
    gqa = json.loads((CONFIG_DIR / "UsefulSensors__moonshine-tiny-ar.json").read_bytes()) | {
        "decoder_num_key_value_heads": 2, "encoder_num_key_value_heads": 8}
    assert parse_geometry(gqa).num_kv_heads == 2  # the decoder's count, not the encoder's


def test_csm_backbone_not_its_depth_decoder_or_codec():
    # CSM: the backbone (top level) caches per audio frame; the depth decoder restarts every frame.
    geom = load("eustlb__csm-1b.json")
    assert (geom.num_layers, geom.num_query_heads, geom.num_kv_heads, geom.head_dim) == (16, 32, 8, 64)
    assert geom.kv_elements_per_token == 16 * 2 * 8 * 64 and geom.sources["num_layers"] == "num_hidden_layers"


def test_cross_attention_kv_heads_declared_apart():
    # Dia's decoder_config: 4 self-attention KV heads, 16 cross-attention KV heads of their own head dim.
    cfg = {"model_type": "dia", "is_encoder_decoder": True,
           "encoder_config": {"model_type": "dia_encoder", "num_hidden_layers": 12, "num_attention_heads": 16,
                              "num_key_value_heads": 16, "head_dim": 128, "hidden_size": 1024},
           "decoder_config": {"model_type": "dia_decoder", "num_hidden_layers": 18, "num_attention_heads": 16,
                              "num_key_value_heads": 4, "head_dim": 128, "hidden_size": 2048,
                              "cross_num_attention_heads": 16, "cross_num_key_value_heads": 16,
                              "cross_head_dim": 128, "cross_hidden_size": 1024}}
    geom = parse_geometry(cfg)
    assert geom.is_encoder_decoder and (geom.num_layers, geom.num_kv_heads) == (18, 4)
    assert geom.kv_elements_per_token == 18 * 2 * 4 * 128
    assert geom.cross_kv_elements_per_source_token == 18 * 2 * 16 * 128  # 4x the self-attention figure
    assert geom.sources["cross_num_kv_heads"] == "decoder_config.cross_num_key_value_heads"
