"""The named list of deliberate differences (``observatory.oracle.compare.DIFFERENCES``): each entry is
needed by a bundled config, and explains only the difference it names. A reading changed anywhere
else (one layer's heads) is a disagreement that names both values, never an agreement.

Readings come from transformers itself (``probe`` on the meta device), a few configs only: the
sweep over every bundled file is ``test_transformers_oracle``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import pytest

import observatory
from observatory.core.geometry import parse_config_text, parse_geometry

pytest.importorskip("transformers", reason="the oracle needs transformers (a pinned dependency)")
from observatory.oracle.compare import DIFFERENCES, judge
from observatory.oracle.probe import probe
from observatory.oracle.reading import LayerCache

CONFIG_DIR = Path(observatory.__file__).parent / "catalog" / "data" / "configs"

# One bundled config that needs each listed difference.
NEEDED_BY = {
    "mla-latent": "deepseek-ai__DeepSeek-V3.json",
    "falcon-kv-groups": "tiiuae__falcon-180B.json",
    "encoder-only-no-cache": "google-bert__bert-base-uncased.json",
    "opt-d_model-width": "facebook__opt-1.3b.json",
    "kind-of-declared-k": "XiaomiMiMo__MiMo-V2-Flash.json",
}


def test_every_listed_difference_has_a_config_that_needs_it_and_a_reason():
    assert set(NEEDED_BY) == set(DIFFERENCES)
    assert all(len(d.reason.split()) >= 12 for d in DIFFERENCES.values())


@functools.cache
def case(name: str):
    text = (CONFIG_DIR / name).read_bytes()
    return json.loads(text), parse_geometry(parse_config_text(text)), probe(json.loads(text))


@pytest.mark.slow
@pytest.mark.parametrize("difference", sorted(NEEDED_BY))
def test_the_difference_is_what_makes_the_config_agree(difference):
    raw, geom, reading = case(NEEDED_BY[difference])
    verdict = judge(raw, geom, reading)
    assert verdict.status == "agree" and difference in verdict.differences
    assert DIFFERENCES[difference].holds(raw, geom, reading)


@pytest.mark.slow
@pytest.mark.parametrize("difference", sorted(NEEDED_BY))
def test_a_reading_changed_elsewhere_is_a_disagreement_naming_both_values(difference):
    raw, geom, reading = case(NEEDED_BY[difference])
    layer = max(reading.self_attention)
    c = reading.self_attention[layer]
    changed = dataclasses.replace(reading, self_attention={
        **reading.self_attention, layer: LayerCache(c.k_heads + 1, c.k_dim, c.v_heads + 1, c.v_dim)})
    verdict = judge(raw, geom, changed)
    assert verdict.status == "disagree" and verdict.differences == ()
    assert f"layer {layer}: ours" in verdict.reason and f"transformers {c.k_heads + 1} KV heads" in verdict.reason
