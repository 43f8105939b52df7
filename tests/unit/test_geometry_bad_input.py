"""Bad input: a clear one-line ConfigError/GeometryError, never a traceback; odd input: a warning."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import observatory
from observatory.core.geometry import (
    ConfigError,
    Geometry,
    GeometryError,
    parse_config_text,
    parse_geometry,
)

CONFIG_DIR = Path(observatory.__file__).parent / "catalog" / "data" / "configs"
LLAMA = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
         "num_hidden_layers": 32}


@pytest.mark.parametrize("text, message", [
    ("this is not json", "not valid JSON"),
    ('{"num_attention_heads": 32,', "not valid JSON"),
    ("", "config is empty"),
    ("  \n ", "config is empty"),
    ("[1, 2]", "got an array"),
    ('"llama"', "got a string"),
    ("42", "got a number"),
    ("null", "got null"),
    (b"\xff\xfe{}", "not UTF-8"),
    ("[" * 100_000, "nested too deeply"),
    ('{"pad": "' + "x" * 4_000_001 + '"}', "not a config.json"),
], ids=["prose", "truncated", "empty", "blank", "array", "string", "number", "null", "not-utf8", "deep", "huge"])
def test_unreadable_text(text, message):
    with pytest.raises(ConfigError) as info:
        parse_config_text(text)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_text_quirks_are_accepted():
    assert parse_config_text(b'\xef\xbb\xbf{"a": 1}') == {"a": 1}  # BOM
    assert parse_config_text('{\r\n "a": Infinity, "b": NaN\r\n}')["a"] == float("inf")  # NemotronH, CRLF


@pytest.mark.parametrize("cfg, message", [
    ([], "must be a JSON object"),
    ({}, "no layer count"),
    ({"num_hidden_layers": 32, "hidden_size": 4096}, "no attention head count"),
    ({"model_type": "llama"}, "no layer count"),  # top-level files are saved in full: no family defaults
    ({"model_type": "llava", "vision_config": {"num_attention_heads": 16, "num_hidden_layers": 24}},
     "no layer count"),
    (LLAMA | {"num_attention_heads": 0}, "num_attention_heads is 0; it must be at least 1"),
    (LLAMA | {"num_attention_heads": -32}, "num_attention_heads is -32"),
    (LLAMA | {"num_attention_heads": 32.5}, "fractional"),
    (LLAMA | {"num_attention_heads": True}, "is a boolean"),
    (LLAMA | {"num_key_value_heads": False}, "is a boolean"),
    (LLAMA | {"num_attention_heads": "thirty-two"}, "is the string"),
    (LLAMA | {"num_attention_heads": float("nan")}, "NaN"),
    (LLAMA | {"num_hidden_layers": float("inf")}, "Infinity"),
    (LLAMA | {"num_attention_heads": 10**30}, "not a plausible value"),
    (LLAMA | {"hidden_size": 2**40}, "not a plausible value"),
    (LLAMA | {"num_attention_heads": {"a": 1}}, "expected a whole number"),
    (LLAMA | {"num_hidden_layers": 0}, "num_hidden_layers is 0"),
    (LLAMA | {"num_key_value_heads": 64}, "num_key_value_heads=64 exceeds num_attention_heads=32"),
    (LLAMA | {"num_key_value_heads": 5}, "num_attention_heads=32 is not divisible by num_key_value_heads=5"),
    (LLAMA | {"hidden_size": 4000, "num_attention_heads": 48, "num_key_value_heads": 8},
     "hidden_size=4000 is not divisible by num_attention_heads=48 and no head_dim is given"),
    ({"num_attention_heads": 32, "num_hidden_layers": 32}, "no head_dim and no hidden size"),
    (LLAMA | {"head_dim": 0}, "head_dim is 0"),
    (LLAMA | {"kv_lora_rank": 512}, "qk_rope_head_dim is missing"),
    (LLAMA | {"layer_types": ["full_attention"] * 31}, "layer_types has 31 entries for 32 layers"),
    (LLAMA | {"num_hidden_layers": 2, "num_key_value_heads": [8]}, "num_key_value_heads has 1 entries for 2"),
    (LLAMA | {"num_hidden_layers": 2, "num_key_value_heads": [8, 64]}, "exceeds num_attention_heads=32 at layer 1"),
    (LLAMA | {"num_key_value_heads": []}, "empty list"),
    (LLAMA | {"cross_attention_layers": [-1]}, "cross_attention_layers[0] is -1"),
    (LLAMA | {"num_attention_heads": "32", "num_key_value_heads": "abc"}, "num_key_value_heads is the string"),
    ({"text_config": {"num_attention_heads": 0, "num_hidden_layers": 4, "hidden_size": 64}},
     "text_config.num_attention_heads is 0"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_untrustworthy_geometry_is_an_error(cfg, message):
    with pytest.raises(GeometryError) as info:
        parse_geometry(cfg)
    text = str(info.value)
    assert message in text and "\n" not in text and len(text) < 300
    assert isinstance(info.value, ConfigError)


def test_error_messages_quote_bad_values_briefly():
    with pytest.raises(GeometryError) as info:
        parse_geometry(LLAMA | {"num_attention_heads": "x" * 5000 + "\n" + "y"})
    assert len(str(info.value)) < 200 and "\n" not in str(info.value)


@pytest.mark.parametrize("cfg, warning", [
    (LLAMA | {"head_dim": 128, "kv_channels": 64}, "disagrees with head_dim=128"),
    (LLAMA | {"head_dim": 1024}, "far from hidden size"),
    (LLAMA | {"sliding_window": 8192, "max_position_embeddings": 4096}, "not smaller than max_position_embeddings"),
    (LLAMA | {"sliding_window": 4096, "use_sliding_window": False}, "inert"),
    (LLAMA | {"sliding_window": 0}, "read as no window"),
    (LLAMA | {"sliding_window": True}, "is true, not a size"),
    (LLAMA | {"layer_types": ["sliding_attention"] * 32}, "not set; treated as full attention"),
    (LLAMA | {"layer_types": ["full_attention"] * 32, "sliding_window": 4096}, "marks no sliding layer"),
    (LLAMA | {"multi_query": True}, "the count wins"),
    (LLAMA | {"max_position_embeddings": "lots"}, "context length ignored"),
    (LLAMA | {"cross_attention_layers": [99]}, "beyond the 32 layers"),
    (LLAMA | {"attn_type_list": [1, 2] * 16}, "values other than 0 and 1"),
    (LLAMA | {"sliding_window": 4096, "use_sliding_window": "yes"}, "not a boolean"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_odd_but_usable_configs_warn(cfg, warning):
    geom = parse_geometry(cfg)
    assert any(warning in w for w in geom.warnings), geom.warnings
    assert all("\n" not in w for w in geom.warnings)


JUNK = [None, True, False, "x", "16", -1, 0, 1.5, 2.0, float("nan"), float("inf"), [], [1, 2], {}, {"a": 1},
        10**40, "", [None], ["full_attention"] * 3]
FUZZ_KEYS = ["num_attention_heads", "num_key_value_heads", "num_hidden_layers", "hidden_size", "head_dim",
             "layer_types", "sliding_window", "use_sliding_window", "kv_lora_rank", "qk_rope_head_dim",
             "v_head_dim", "multi_query", "multi_query_group_num", "multi_query_attention", "kv_channels",
             "full_attention_interval", "attn_layer_period", "attention_chunk_size", "text_config",
             "sliding_window_pattern", "max_position_embeddings", "cross_attention_layers", "attn_config",
             "num_attention_heads_per_layer", "layers_block_type", "hybrid_override_pattern", "attn_type_list",
             "architectures", "model_type", "max_window_layers", "no_rope_layers", "index_head_dim"]
FUZZ_FILES = ["deepseek-ai__DeepSeek-V3.json", "google__gemma-3-27b-it.json", "Qwen__Qwen3.5-9B.json",
              "THUDM__codegeex2-6b.json", "meta-llama__Llama-4-Scout-17B-16E-Instruct.json",
              "microsoft__phi-2.json", "LiquidAI__LFM2.5-VL-1.6B.json", "tiiuae__falcon-180B.json"]


def _check_invariants(geom: Geometry) -> None:
    assert len(geom.layer_kinds) == geom.num_layers
    assert geom.kv_layers == sum(k in ("full", "sliding", "chunked") for k in geom.layer_kinds)
    assert geom.kv_elements_per_token == sum(geom.layer_kv_elements())
    assert geom.sliding_layers == geom.layer_kinds.count("sliding")
    json.dumps(geom.to_dict(), allow_nan=False)
    if geom.attention_kind in ("MHA", "MQA", "GQA"):
        assert geom.num_query_heads % geom.num_kv_heads == 0


@pytest.mark.parametrize("name", FUZZ_FILES)
def test_mutated_real_configs_never_crash(name):
    """Every key swapped for junk, at top level and in text_config: a geometry or a GeometryError."""
    rng = random.Random(name)  # deterministic per file
    base = json.loads((CONFIG_DIR / name).read_text())
    cases = 0
    for key in FUZZ_KEYS:
        for junk in rng.sample(JUNK, 8):
            for target in ("top", "text_config"):
                cfg = json.loads(json.dumps(base))
                node = cfg.get("text_config") if target == "text_config" else cfg
                if not isinstance(node, dict):
                    continue
                node[key] = junk
                try:
                    geom = parse_geometry(cfg)
                except GeometryError as exc:
                    assert "\n" not in str(exc) and str(exc)
                else:
                    _check_invariants(geom)
                cases += 1
    assert cases >= len(FUZZ_KEYS) * 8
