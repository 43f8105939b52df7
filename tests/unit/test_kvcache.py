"""KV-cache arithmetic: the Llama 2 70B seed example, windows, hybrids, MLA, budgets, units."""

from __future__ import annotations

from pathlib import Path

import pytest

import observatory
from observatory.core.geometry import Geometry, parse_config_text, parse_geometry
from observatory.core.kvcache import (
    DTYPE_BYTES,
    GB,
    GiB,
    bytes_per_token,
    cache_bytes,
    max_sequences,
    max_tokens,
    mha_counterfactual,
    saving_ratio,
)

CONFIG_DIR = Path(observatory.__file__).parent / "catalog" / "data" / "configs"


def load(name: str) -> Geometry:
    return parse_geometry(parse_config_text((CONFIG_DIR / name).read_text()))


LLAMA2_70B = {"hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8, "num_hidden_layers": 80}


@pytest.mark.parametrize("geom", [parse_geometry(LLAMA2_70B), load("meta-llama__Llama-2-70b-hf.json")],
                         ids=["synthetic", "real-config"])
def test_llama2_70b_seed_example(geom):
    # H=64, K=8, d=128, 80 layers, 2,048 tokens, batch 1, fp16.
    gqa = cache_bytes(geom, 2048, 1, "fp16")
    mha = cache_bytes(mha_counterfactual(geom), 2048, 1, "fp16")
    assert gqa == 671_088_640 and round(gqa / GB, 3) == 0.671
    assert mha == 5_368_709_120 and round(mha / GB, 2) == 5.37
    # The often-quoted 0.33 / 2.68 "GB" are element counts in billions, not bytes at fp16.
    assert geom.kv_elements_per_token * 2048 == 335_544_320  # "0.33"
    assert mha_counterfactual(geom).kv_elements_per_token * 2048 == 2_684_354_560  # "2.68"
    assert saving_ratio(geom) == 8.0 == geom.group_size


def test_units_and_dtypes():
    assert (GB, GiB) == (10**9, 2**30)
    assert DTYPE_BYTES == {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "fp32": 4}
    geom = parse_geometry(LLAMA2_70B)
    assert [bytes_per_token(geom, d) for d in ("fp32", "bf16", "fp16", "fp8", "int8")] == [
        655360, 327680, 327680, 163840, 163840]
    assert bytes_per_token(geom) == 327680  # bf16 by default
    with pytest.raises(ValueError, match="unknown dtype 'fp4'; valid: bf16, fp16, fp8, int8, fp32"):
        bytes_per_token(geom, "fp4")
    with pytest.raises(ValueError, match="unknown dtype"):
        cache_bytes(geom, 10, 1, "float16")


def test_cache_scales_with_context_and_batch():
    geom = load("Qwen__Qwen3-32B.json")
    per_token = bytes_per_token(geom)
    assert cache_bytes(geom, 0) == 0
    assert cache_bytes(geom, 4096) == 4096 * per_token
    assert cache_bytes(geom, 4096, batch=8) == 8 * 4096 * per_token


def test_sliding_layers_are_capped_at_their_window():
    geom = load("google__gemma-3-27b-it.json")  # 10 full + 52 sliding (1024) layers, 2*16*128 per layer
    per_layer = 2 * 16 * 128 * 2  # bytes per token per layer, bf16
    assert cache_bytes(geom, 512) == 62 * per_layer * 512  # below the window every layer grows
    assert cache_bytes(geom, 32768) == per_layer * (10 * 32768 + 52 * 1024)
    assert bytes_per_token(geom) == 62 * per_layer  # full-context figure counts every KV layer


def test_chunked_layers_are_capped_at_the_chunk():
    geom = load("meta-llama__Llama-4-Scout-17B-16E-Instruct.json")  # 12 global + 36 chunked (8192)
    per_layer = 2 * 8 * 128 * 2
    assert cache_bytes(geom, 131072) == per_layer * (12 * 131072 + 36 * 8192)
    assert cache_bytes(geom, 4096) == 48 * per_layer * 4096


def test_window_that_never_binds_costs_full_attention():
    geom = load("microsoft__Phi-3-mini-128k-instruct.json")
    assert cache_bytes(geom, 131072) == 131072 * bytes_per_token(geom)


def test_hybrids_count_only_attention_layers():
    geom = load("Qwen__Qwen3.5-9B.json")  # 8 of 32 layers attend
    assert cache_bytes(geom, 1000) == 1000 * 8 * 2 * 4 * 256 * 2
    lfm = load("LiquidAI__LFM2.5-VL-1.6B.json")
    assert cache_bytes(lfm, 1000, dtype="fp8") == 1000 * 6144


def test_mla_cache_and_counterfactual():
    geom = load("deepseek-ai__DeepSeek-V3.json")
    assert bytes_per_token(geom) == 61 * 576 * 2  # one latent per layer, no factor 2
    counter = mha_counterfactual(geom)
    assert counter.attention_kind == "MHA" and counter.mla is None and counter.num_kv_heads == 128
    assert (counter.head_dim, counter.v_head_dim) == (192, 128)
    assert counter.kv_elements_per_token == 61 * 128 * (192 + 128)
    assert saving_ratio(geom) == pytest.approx(40960 / 576)
    assert geom.kv_elements_per_token == 35136  # the original is untouched


def test_counterfactual_keeps_windows_and_layers():
    geom = load("google__gemma-3-27b-it.json")
    counter = mha_counterfactual(geom)
    assert counter.layer_kinds == geom.layer_kinds and counter.sliding_window == 1024
    assert counter.num_kv_heads == 32 and counter.group_size == 1.0
    assert cache_bytes(counter, 32768) == 2 * cache_bytes(geom, 32768)
    assert saving_ratio(geom, 32768) == 2.0
    assert counter.sources == {"num_kv_heads": "counterfactual:K=H"} and counter.warnings == ()


def test_counterfactual_of_per_layer_heads():
    kv = [3, 3, 4, 4]
    geom = parse_geometry({"model_dim": 1024, "head_dim": 64, "num_transformer_layers": 4,
                           "num_query_heads": [12, 12, 16, 16], "num_kv_heads": kv})
    assert geom.kv_elements_per_token == sum(2 * k * 64 for k in kv)
    assert mha_counterfactual(geom).kv_elements_per_token == 2 * 64 * (12 + 12 + 16 + 16)


def test_mha_and_attention_free_counterfactuals():
    mha = load("meta-llama__Llama-2-7b-hf.json")
    assert mha_counterfactual(mha).kv_elements_per_token == mha.kv_elements_per_token
    assert saving_ratio(mha) == 1.0
    rwkv = parse_geometry({"model_type": "rwkv", "hidden_size": 2048, "num_hidden_layers": 24})
    assert mha_counterfactual(rwkv) is rwkv and saving_ratio(rwkv) is None
    assert cache_bytes(rwkv, 10**6) == 0
    assert max_tokens(rwkv, GB) is None and max_sequences(rwkv, GB, 4096) is None


def test_max_tokens_fits_exactly():
    geom = parse_geometry(LLAMA2_70B)
    budget = 80 * GB
    tokens = max_tokens(geom, budget, "bf16")
    assert tokens == 80 * GB // 327680 == 244140
    assert cache_bytes(geom, tokens) <= budget < cache_bytes(geom, tokens + 1)
    assert max_tokens(geom, budget, "bf16", batch=4) == 244140 // 4
    assert max_tokens(geom, 0) == 0
    assert max_tokens(geom, 141e9) == int(141e9) // 327680  # float budgets from spec sheets


def test_max_tokens_with_windows():
    gemma = load("google__gemma-3-27b-it.json")
    tokens = max_tokens(gemma, 24 * GiB)
    assert cache_bytes(gemma, tokens) <= 24 * GiB < cache_bytes(gemma, tokens + 1)
    mistral = parse_geometry({"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                              "num_hidden_layers": 32, "sliding_window": 4096})
    assert max_tokens(mistral, GB) is None  # every layer slides: 512 MiB at most, then it stops growing
    small = max_tokens(mistral, 100 * 10**6)
    assert small == 100 * 10**6 // (32 * 2 * 8 * 128 * 2)


def test_max_sequences():
    geom = parse_geometry(LLAMA2_70B)
    per_sequence = cache_bytes(geom, 4096)
    assert max_sequences(geom, 80 * GB, 4096) == 80 * GB // per_sequence == 59
    assert max_sequences(geom, per_sequence - 1, 4096) == 0


@pytest.mark.parametrize("call", [
    lambda g: cache_bytes(g, -1),
    lambda g: cache_bytes(g, 10, batch=0),
    lambda g: cache_bytes(g, 1.5),
    lambda g: cache_bytes(g, True),
    lambda g: max_tokens(g, -5),
    lambda g: max_tokens(g, float("inf")),
    lambda g: max_sequences(g, "80GB", 4096),
], ids=["negative-context", "zero-batch", "fractional-context", "bool-context", "negative-memory",
        "infinite-memory", "string-memory"])
def test_bad_arguments(call):
    with pytest.raises(ValueError):
        call(parse_geometry(LLAMA2_70B))


def test_kv_shared_layers_add_nothing_at_any_context():
    text = {"model_type": "gemma4_text", "hidden_size": 1536, "num_hidden_layers": 10, "num_attention_heads": 8,
            "num_key_value_heads": 1, "head_dim": 256, "global_head_dim": 512, "sliding_window": 512,
            "num_kv_shared_layers": 5, "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 2}
    geom = parse_geometry({"model_type": "gemma4", "text_config": text})
    # Layers 0-3 slide (512 elements a token, capped at 512 tokens), layer 4 is full at d=512; 5-9 reuse.
    assert geom.layer_kv_elements() == (512,) * 4 + (1024,) + (0,) * 5
    assert cache_bytes(geom, 100_000) == 2 * (4 * 512 * 512 + 1024 * 100_000)
    counter = mha_counterfactual(geom)  # K = H = 8, same per-layer head dims, sharing kept
    assert counter.layer_kv_elements() == (8 * 512,) * 4 + (8 * 1024,) + (0,) * 5


def test_encoder_only_geometry_has_no_cache_anywhere():
    geom = parse_geometry({"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12,
                           "num_hidden_layers": 12})
    assert cache_bytes(geom, 512) == 0 and saving_ratio(geom) is None
    assert max_tokens(geom, 80e9) is None and max_sequences(geom, 80e9, 512) is None
