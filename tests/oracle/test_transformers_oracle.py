"""transformers as an independent oracle: for every bundled config that transformers can build,
the layers it caches, their KV heads and head dims, and the elements one token adds must be what
``observatory inspect`` reports.

How the oracle reads a config (``observatory.oracle.probe``, the product's own): the language model is built on torch's meta device
(shapes only, no weights), three tokens go through it with transformers' own ``DynamicCache``
(``EncoderDecoderCache`` for encoder-decoders, given a meta encoder output), and the K/V shape of
every cache-layer update is recorded. Our parser never sees any of that.

The comparison is the product's too (``observatory.oracle.compare.judge``): every bundled config it can
build must get the verdict ``agree``, and the listed differences it relies on are asserted per file, so a
difference that stops being needed (or starts) shows. Where the oracle and our convention differ on
purpose (``compare.DIFFERENCES``):
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

The probe sizes its tensors with torch's compiled meta kernels rather than the Python meta functions
torch registers over them (``observatory.oracle.meta_kernels``); one test reads a config of each kind
both ways and finds the same reading.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

import observatory
from observatory.core.geometry import parse_config_text, parse_geometry

pytest.importorskip("transformers", reason="the oracle needs transformers (pinned in the test extra)")
from observatory.oracle.compare import (
    PARAMETER_TOLERANCE,
    PROBE_LIMITS,
    WHOLE_READING_DIFFERENCES,
    comparable_estimate,
    judge,
)
from observatory.oracle.meta_kernels import prefer_compiled
from observatory.oracle.probe import probe, unbuildable
from observatory.oracle.reading import Reading

CONFIG_DIR = Path(observatory.__file__).parent / "catalog" / "data" / "configs"
CONFIGS = sorted(p.name for p in CONFIG_DIR.glob("*.json"))


# Bundled files whose reading differs from ours in a way one whole-reading difference explains
# (``compare.WHOLE_READING_DIFFERENCES``); encoder-only files need ``encoder-only-no-cache``.
EXPECTED_DIFFERENCES = {
    "tiiuae__falcon-180B.json": "falcon-kv-groups",
    "facebook__opt-1.3b.json": "opt-d_model-width",
}
# Attention-free families: transformers' config class has no attention heads at all, and we report
# kind "none" with no per-token cache. That agreement is the whole check.
ATTENTION_FREE_TYPES = {"rwkv", "mamba", "mamba2", "falcon_mamba"}


# The parameter estimate (observatory.core.params) against the base model transformers builds (no
# LM head; vision towers and MTP layers are not in it either): within TOLERANCE, except these, each
# asserted to stay outside it (with its sign) so a fix or a regression shows.
PARAMETER_DIFFERENCES = {
    "facebook__opt-1.3b.json": (+1, "transformers 5 builds OPTConfig's 768-wide default from this d_model"
                                    " revision (see DIFFERENCES); our count follows the file"),
    "eustlb__csm-1b.json": (-1, ("transformers builds CSM whole: beside the backbone we count, the text embeddings,"
                                 " the depth decoder and its codebook heads, and the Mimi codec")),
    "nvidia__Nemotron-H-4B-Base-8K.json": (-1, "its Mamba mixers (5 % under) are estimated from the standard"
                                               " block shapes, as the estimate says"),
}


@functools.cache
def reading_of(name: str) -> Reading:
    """One build per config, shared by the cache and the parameter checks."""
    return probe(json.loads((CONFIG_DIR / name).read_bytes()))


@pytest.mark.slow
@pytest.mark.parametrize("name", CONFIGS, ids=[n.removesuffix(".json") for n in CONFIGS])
def test_parser_agrees_with_transformers(name):
    text = (CONFIG_DIR / name).read_bytes()
    raw = json.loads(text)
    reason = unbuildable(raw)
    if reason:
        pytest.skip(f"{raw.get('model_type') or name}: {reason}")
    if raw.get("model_type") in PROBE_LIMITS:
        pytest.skip(f"{raw['model_type']}: {PROBE_LIMITS[raw['model_type']]}")
    geom = parse_geometry(parse_config_text(text))
    reading = reading_of(name)
    if raw.get("model_type") in ATTENTION_FREE_TYPES:
        assert reading.attention_free
    if raw.get("model_type") == "openai-gpt":
        assert judge(raw, geom, reading).status == "unsupported"  # OpenAIGPTModel keeps no KV cache
        return
    verdict = judge(raw, geom, reading)
    assert verdict.status == "agree", verdict.reason
    expected = EXPECTED_DIFFERENCES.get(name) or ("encoder-only-no-cache" if geom.encoder_only else None)
    assert {d for d in verdict.differences if d in WHOLE_READING_DIFFERENCES} == ({expected} - {None})
    assert ("mla-latent" in verdict.differences) == (geom.mla is not None)


@pytest.mark.slow
@pytest.mark.parametrize("name", CONFIGS, ids=[n.removesuffix(".json") for n in CONFIGS])
def test_parameter_estimate_agrees_with_transformers(name):
    raw = json.loads((CONFIG_DIR / name).read_bytes())
    reason = unbuildable(raw) or PROBE_LIMITS.get(raw.get("model_type"))
    if reason:
        pytest.skip(f"{raw.get('model_type') or name}: {reason}")
    ours = comparable_estimate(raw)  # the probe builds the text model: no LM head, towers or MTP
    if ours is None:  # no estimate: stored and shown as unknown
        pytest.skip("no estimate")
    theirs = reading_of(name).parameters
    error = ours / theirs - 1
    if name in PARAMETER_DIFFERENCES:
        sign, why = PARAMETER_DIFFERENCES[name]
        assert abs(error) > PARAMETER_TOLERANCE and error * sign > 0, why
        return
    assert abs(error) <= PARAMETER_TOLERANCE, f"ours {ours:,} vs transformers {theirs:,} ({error:+.2%})"


# One config per way of reading a cache: plain GQA, MLA's latent, KV heads varying by layer,
# attention beside Mamba layers, encoder-decoder. (All 318 bundled readings were compared once and
# were identical; the sample keeps the check to a few seconds.)
META_KERNEL_SAMPLE = [
    "meta-llama__Meta-Llama-3-8B.json", "deepseek-ai__DeepSeek-V3.json", "google__gemma-4-E2B-it.json",
    "ai21labs__Jamba-v0.1.json", "google__mt5-base.json",
]
# A fresh interpreter keeps torch's Python meta functions: the probe is told the swap is done.
_PYTHON_META_READINGS = """
import json, sys, torch
import observatory.oracle.probe as probe
probe.prefer_compiled = lambda: True
meta = next(line for line in torch._C._dispatch_dump("aten::mul.Tensor").splitlines() if line.startswith("Meta:"))
assert "_meta_registrations.py" in meta, meta
print(json.dumps({name: probe.probe(json.load(open(path))).to_dict() for name, path in zip(sys.argv[1::2], sys.argv[2::2])}))
"""


@pytest.mark.slow
def test_compiled_meta_kernels_read_what_torchs_python_meta_functions_read():
    assert prefer_compiled()
    active = torch_meta_kernel("aten::mul.Tensor")
    assert "_meta_registrations.py" not in active, active  # the swap happened: the compiled kernel answers
    args = [part for name in META_KERNEL_SAMPLE for part in (name, str(CONFIG_DIR / name))]
    done = subprocess.run([sys.executable, "-c", _PYTHON_META_READINGS, *args], capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    python_meta = json.loads(done.stdout.splitlines()[-1])
    assert python_meta == {name: reading_of(name).to_dict() for name in META_KERNEL_SAMPLE}


def torch_meta_kernel(op: str) -> str:
    """The line of torch's dispatch table naming the Meta kernel that answers ``op``."""
    import torch

    return next(line for line in torch._C._dispatch_dump(op).splitlines() if line.startswith("Meta:"))
