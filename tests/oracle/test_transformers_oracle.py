"""transformers as an independent oracle: for every bundled config that transformers can build,
the layers it caches, their KV heads and head dims, and the elements one token adds must be what
``observatory inspect`` reports.

How the oracle reads a config (``cache_probe``): the language model is built on torch's meta device
(shapes only, no weights), three tokens go through it with transformers' own ``DynamicCache``
(``EncoderDecoderCache`` for encoder-decoders, given a meta encoder output), and the K/V shape of
every cache-layer update is recorded. Our parser never sees any of that.

Where the oracle and our convention differ on purpose, the comparison says so:
- MLA: transformers (since 5.x) caches the same latent vLLM does, one "head" holding
  ``kv_lora_rank`` (the key tensor) and ``qk_rope_head_dim`` (the value tensor); we report the
  declared logical KV-head count and the q/k head dim (nope + rope), so heads and head dims are
  compared as that latent, and elements per token must match exactly.
- Kind when KV heads vary per layer (Gemma-4 global layers): we report the kind of the
  ``num_key_value_heads`` layers; the oracle's kind is that of the most common layer.
- Falcon's new decoder architecture: transformers expands the KV groups to all query heads before
  it caches them; vLLM caches the groups, and so do we (``DIFFERENCES``).
- Encoder-only models (BERT and its kin): handed a cache, transformers' encoder fills it like any
  other, but an encoder reads its whole input at once and never decodes token by token, so nothing
  is kept between steps and we count 0 KV layers and 0 bytes. The oracle's per-layer shapes are
  still checked against our heads and head dims.

Configs transformers cannot build itself (remote code) are skipped, with the family and reason.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from pathlib import Path

import pytest

import observatory
from observatory.core.geometry import Geometry, parse_config_text, parse_geometry

pytest.importorskip("transformers", reason="the oracle needs transformers (pinned in the test extra)")
from observatory.core.config_dialects import ConfigError, GeometryError  # noqa: E402
from observatory.core.params import estimate_parameters  # noqa: E402
from oracle.cache_probe import Reading, base_model_parameters, read, unbuildable  # noqa: E402  (tests/ is on sys.path)

CONFIG_DIR = Path(observatory.__file__).parent / "catalog" / "data" / "configs"
CONFIGS = sorted(p.name for p in CONFIG_DIR.glob("*.json"))


# Bundled files whose oracle reading differs from ours on purpose, and why. Each difference is
# asserted to hold exactly, so an entry that stops being true fails instead of hiding a change.
DIFFERENCES = {
    "tiiuae__falcon-180B.json": "transformers' Falcon (new_decoder_architecture) repeats the 8 KV groups for all"
                                " 232 query heads before caching them; vLLM caches the 8 groups, as we count",
    "facebook__opt-1.3b.json": "this first Hub revision spells the width d_model; transformers 5's OPTConfig reads"
                               " only hidden_size and builds its 768-wide default (head dim 24), not the model",
}


# Families the probe cannot run, and why (transformers builds them, but not with a recording cache on
# the meta device). Each is still parsed; the reason is the skip message.
UNPROBEABLE = {
    "minimax": "MiniMax keeps a cache of its own (linear-attention state) and refuses a DynamicCache",
    "paddleocr_vl": "AutoModel cannot build PaddleOCR-VL's text config on its own",
    "switch_transformers": "Switch's expert routing calls torch.nonzero, which has no meta implementation",
    "dbrx": "DBRX's expert routing calls torch.nonzero, which has no meta implementation",
    "openai-gpt": "OpenAIGPTModel keeps no KV cache (it has no past_key_values)",
    "mllama": "AutoModel cannot build Mllama's text config on its own (its cross-attention layers need the vision"
              " model's output)",
}
# Attention-free families: transformers' config class has no attention heads at all, and we report
# kind "none" with no per-token cache. That agreement is the whole check.
ATTENTION_FREE_TYPES = {"rwkv", "mamba", "mamba2", "falcon_mamba"}


# The parameter estimate (observatory.core.params) against the base model transformers builds (no
# LM head; vision towers and MTP layers are not in it either): within TOLERANCE, except these, each
# asserted to stay outside it (with its sign) so a fix or a regression shows.
PARAMETER_TOLERANCE = 0.03
PARAMETER_DIFFERENCES = {
    "facebook__opt-1.3b.json": (+1, "transformers 5 builds OPTConfig's 768-wide default from this d_model"
                                    " revision (see DIFFERENCES); our count follows the file"),
    "google__gemma-4-E2B-it.json": (-1, "transformers builds k/v projections for the KV-shared layers, which"
                                        " read an earlier layer's cache; we count what the layer uses"),
    "google__gemma-4-E4B.json": (-1, "as gemma-4-E2B"),
    "eustlb__csm-1b.json": (-1, ("transformers builds CSM whole: beside the backbone we count, the text embeddings,"
                                 " the depth decoder and its codebook heads, and the Mimi codec")),
    "nvidia__Nemotron-H-4B-Base-8K.json": (-1, "its Mamba mixers (5 % under) are estimated from the standard"
                                               " block shapes, as the estimate says"),
}


@functools.lru_cache(maxsize=None)
def reading_of(name: str) -> Reading:
    """One build per config, shared by the cache and the parameter checks."""
    return read(json.loads((CONFIG_DIR / name).read_bytes()))


def kind_of(k: int, h: int) -> str:
    return "MHA" if k == h else "MQA" if k == 1 else "GQA"


def ours(geom: Geometry) -> dict:
    """Per cached layer: (KV heads, K head dim, V head dim, elements), in the oracle's terms."""
    out = {}
    for i, elements in enumerate(geom.layer_kv_elements()):
        if not elements:
            continue
        if geom.mla is not None:  # one latent: kv_lora_rank in the key tensor, the rope part in the value
            out[i] = (1, geom.mla.kv_lora_rank, geom.mla.qk_rope_head_dim, elements)
            continue
        k = geom.kv_heads_per_layer[i] if geom.kv_heads_per_layer else geom.num_kv_heads
        d = geom.head_dims_per_layer[i] if geom.head_dims_per_layer else geom.head_dim
        v = geom.head_dims_per_layer[i] if geom.head_dims_per_layer else geom.v_head_dim
        out[i] = (k, d, v, elements)
    return out


def theirs(layers: dict) -> dict:
    return {i: (c.k_heads, c.k_dim, c.v_dim, c.elements) for i, c in sorted(layers.items())
            if c.k_heads == c.v_heads}


@pytest.mark.slow
@pytest.mark.parametrize("name", CONFIGS, ids=[n.removesuffix(".json") for n in CONFIGS])
def test_parser_agrees_with_transformers(name):
    text = (CONFIG_DIR / name).read_bytes()
    raw = json.loads(text)
    reason = unbuildable(raw)
    if reason:
        pytest.skip(f"{raw.get('model_type') or name}: {reason}")
    geom = parse_geometry(parse_config_text(text))
    if raw.get("model_type") in ATTENTION_FREE_TYPES:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        config = CONFIG_MAPPING[raw["model_type"]].from_dict(raw)
        assert not hasattr(config, "num_attention_heads") and not hasattr(config, "num_key_value_heads")
        assert (geom.attention_kind, geom.kv_layers, geom.kv_elements_per_token) == ("none", 0, 0)
        return
    if raw.get("model_type") in UNPROBEABLE:
        pytest.skip(f"{raw['model_type']}: {UNPROBEABLE[raw['model_type']]}")
    reading = reading_of(name)
    if name in DIFFERENCES:
        assert_known_difference(name, geom, reading)
        return

    # K and V of one layer always have the same head count in these families (MLA's latent: 1 and 1).
    assert all(c.k_heads == c.v_heads for c in reading.self_attention.values())
    if geom.encoder_only:  # on purpose: no decoding, no cache (see the module docstring)
        assert (geom.kv_layers, geom.kv_elements_per_token) == (0, 0)
        assert {(c.k_heads, c.k_dim, c.v_dim) for c in reading.self_attention.values()} == {
            (geom.num_kv_heads, geom.head_dim, geom.v_head_dim)}
        assert len(reading.self_attention) == geom.num_layers
        assert geom.attention_kind == kind_of(geom.num_kv_heads, reading.query_heads)
        return
    assert ours(geom) == theirs(reading.self_attention), "per-layer (KV heads, K dim, V dim, elements)"
    assert geom.kv_layers == len(reading.self_attention)
    assert geom.kv_elements_per_token == sum(c.elements for c in reading.self_attention.values())
    assert geom.num_query_heads == reading.query_heads

    if geom.mla is not None:  # the declared K is logical; the cache holds one latent per layer
        assert geom.attention_kind == "MLA"
        assert {c.k_heads for c in reading.self_attention.values()} == {1}
    elif reading.self_attention:
        ks = Counter(c.k_heads for c in reading.self_attention.values())
        if len(ks) == 1 or not geom.kv_heads_per_layer:
            common_k = ks.most_common(1)[0][0]
            assert geom.attention_kind == kind_of(common_k, reading.query_heads)
            assert geom.num_kv_heads == common_k
        else:  # K varies by layer (checked layer by layer above); the headline is the config's declared K
            assert geom.num_kv_heads in ks and geom.attention_kind == kind_of(geom.num_kv_heads, reading.query_heads)
    else:
        pytest.fail("transformers cached nothing for a model we say decodes")

    assert geom.is_encoder_decoder == bool(reading.cross_attention)
    assert geom.cross_kv_elements_per_source_token == sum(c.elements for c in reading.cross_attention.values())


@pytest.mark.slow
@pytest.mark.parametrize("name", CONFIGS, ids=[n.removesuffix(".json") for n in CONFIGS])
def test_parameter_estimate_agrees_with_transformers(name):
    raw = json.loads((CONFIG_DIR / name).read_bytes())
    reason = unbuildable(raw) or (UNPROBEABLE.get(raw.get("model_type")) if raw.get("model_type") != "openai-gpt"
                                  else None)
    if reason:
        pytest.skip(f"{raw.get('model_type') or name}: {reason}")
    try:
        estimate = estimate_parameters(raw)
    except (ConfigError, GeometryError) as exc:  # no estimate: stored and shown as unknown
        pytest.skip(f"no estimate ({exc})")
    if raw.get("model_type") in ATTENTION_FREE_TYPES or raw.get("model_type") == "openai-gpt":
        theirs = base_model_parameters(raw)
    else:
        theirs = reading_of(name).parameters
    parts = estimate.breakdown
    ours = estimate.total - sum(parts.get(k, 0) for k in ("lm_head", "vision", "audio", "mtp"))  # the probe builds the text model
    error = ours / theirs - 1
    if name in PARAMETER_DIFFERENCES:
        sign, why = PARAMETER_DIFFERENCES[name]
        assert abs(error) > PARAMETER_TOLERANCE and error * sign > 0, why
        return
    assert abs(error) <= PARAMETER_TOLERANCE, f"ours {ours:,} vs transformers {theirs:,} ({error:+.2%})"


def assert_known_difference(name: str, geom: Geometry, reading: Reading) -> None:
    layers = list(reading.self_attention.values())
    assert len(layers) == geom.kv_layers, DIFFERENCES[name]
    if name.startswith("tiiuae__falcon"):
        h, k = geom.num_query_heads, geom.num_kv_heads
        assert {(c.k_heads, c.k_dim) for c in layers} == {(h, geom.head_dim)}, DIFFERENCES[name]
        assert sum(c.elements for c in layers) == geom.kv_elements_per_token * h // k, DIFFERENCES[name]
    else:  # OPT first revision: transformers' default width 768 over the file's 32 heads
        assert {c.k_dim for c in layers} == {768 // geom.num_query_heads} != {geom.head_dim}, DIFFERENCES[name]
