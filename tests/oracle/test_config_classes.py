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
