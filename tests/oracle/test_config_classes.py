"""Rules checked against transformers' own configuration classes where the whole model cannot be
built: the wrapper is remote code (Kimi-K3's ``kimi_k3``), but the section our rule reads is a family
transformers ships, and its config class decides the same thing our rule does (which layers attend)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import observatory
from observatory.core.geometry import parse_geometry

transformers = pytest.importorskip("transformers", reason="the oracle needs transformers (pinned in the test extra)")

CONFIG_DIR = Path(observatory.__file__).parent / "catalog" / "data" / "configs"


def test_kimi_k3_full_attention_layers_match_kimi_linear_config():
    raw = json.loads((CONFIG_DIR / "moonshotai__Kimi-K3.json").read_bytes())
    theirs = transformers.KimiLinearConfig.from_dict(raw["text_config"]).layer_types
    ours = parse_geometry(raw).layer_kinds
    assert len(theirs) == len(ours) == 93
    assert [t == "full_attention" for t in theirs] == [k == "full" for k in ours]
    assert {t for t in theirs} == {"full_attention", "linear_attention"}
    assert [k for k in ours if k != "full"] == ["linear"] * 69


def test_dia_cross_attention_kv_heads_match_the_cache_transformers_fills():
    # No Dia config.json in transformers' format is bundled; DiaConfig's defaults are Dia-1.6B-0626's
    # (its docstring), serialised as transformers saves them, and built on the meta device.
    from observatory.oracle.probe import read

    raw = json.loads(transformers.DiaConfig().to_json_string())
    geom = parse_geometry(raw)
    reading = read(raw)
    assert geom.is_encoder_decoder and geom.kv_layers == len(reading.self_attention)
    assert geom.kv_elements_per_token == sum(c.elements for c in reading.self_attention.values())
    assert geom.cross_kv_elements_per_source_token == sum(c.elements for c in reading.cross_attention.values())
    assert geom.cross_kv_elements_per_source_token == 4 * geom.kv_elements_per_token  # 16 cross KV heads, 4 self
