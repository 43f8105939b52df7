"""What an MHA -> GQA conversion may do to a checkpoint, decided from plain values: pure, no I/O.

The recipe (GQA, Ainslie et al. 2023, arXiv 2305.13245 §2.1): the K and V projection heads of each
group are pooled into one, and the model is then uptrained. Three poolings, the paper's own:
``mean`` (its recipe), ``first`` (keep the group's first head) and ``random`` (fresh heads, the
from-scratch control). This module reads a config and the checkpoint's tensor names and dtypes and
either returns a plan (which tensors are K/V projections, how heads group) or raises
``ConversionRefused`` naming what cannot be converted honestly. ``observatory.convert`` does the I/O.

Groups are contiguous, as the kernels and transformers' ``repeat_kv`` read them: query head ``h``
uses KV head ``h // (H / K)``, so new KV head ``j`` pools old KV heads ``j*g .. j*g + g - 1`` where
``g = K_old / K`` (for an MHA source, ``K_old = H``). Converting a GQA checkpoint further (K_old >
K, K dividing K_old) keeps that correspondence; K above K_old would need heads that do not exist.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

METHODS = ("mean", "first", "random")
DEFAULT_MAX_SHARD_BYTES = 2 * 10**9  # bytes per output shard; here so the CLI need not import torch
# Decoder families with separate q/k/v projections named as transformers' Llama names them. A family
# joins the list when a test converts a tiny model of it and transformers loads and generates it.
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")
FLOAT_DTYPES = ("F32", "F16", "BF16", "F64")  # safetensors' names
# Fused projections: one tensor holds Q, K and V (Phi-3, Baichuan, Falcon, GPT-NeoX, ...).
FUSED_QKV = re.compile(r"(qkv_proj|W_pack|query_key_value|c_attn|Wqkv|qkv)\.")
KV_PROJECTION = re.compile(r"^(?P<prefix>.*\.self_attn\.)(?P<which>k_proj|v_proj)\.(?P<part>weight|bias)$")
MLA_KEYS = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim")


class ConversionRefused(ValueError):
    """The checkpoint cannot be converted honestly; the message says why."""


@dataclass(frozen=True)
class Plan:
    num_heads: int
    old_kv_heads: int
    new_kv_heads: int
    head_dim: int
    method: str
    kv_tensors: tuple[str, ...]  # k_proj/v_proj weights and biases, pooled
    kept_tensors: tuple[str, ...]  # everything else, copied as stored

    @property
    def pool(self) -> int:
        """Old KV heads per new one."""
        return self.old_kv_heads // self.new_kv_heads

    @property
    def identity(self) -> bool:
        return self.old_kv_heads == self.new_kv_heads


def _int(cfg: Mapping, key: str) -> int | None:
    value = cfg.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def plan_conversion(config: Mapping, tensors: Mapping[str, str], kv_heads: int, method: str = "mean") -> Plan:
    """The conversion of a checkpoint with this ``config`` and these tensors (name -> safetensors
    dtype) to ``kv_heads`` KV heads, or ``ConversionRefused``."""
    if method not in METHODS:
        raise ConversionRefused(f"method {method!r} is not one of {', '.join(METHODS)}")
    if not isinstance(config, Mapping):
        raise ConversionRefused("config.json is not a JSON object")
    if config.get("auto_map"):
        raise ConversionRefused("config.json has auto_map: a remote-code architecture, whose attention we cannot read")
    if config.get("quantization_config") or config.get("quantization"):
        raise ConversionRefused("the checkpoint is quantized (quantization_config): pooling packed or scaled integer "
                                "weights would not be a mean of heads; convert the full-precision checkpoint")
    if any(config.get(key) for key in MLA_KEYS):
        raise ConversionRefused("the config describes multi-head latent attention (MLA): its keys and values come "
                                "from a shared latent, there are no K/V heads to pool")
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ConversionRefused(f"model_type {model_type!r} is not one we convert ({', '.join(SUPPORTED_MODEL_TYPES)}: "
                                "decoders with separate k_proj and v_proj)")
    fused = sorted(name for name in tensors if FUSED_QKV.search(name))
    if fused:
        raise ConversionRefused(f"fused QKV projection ({fused[0]}): split it into q_proj/k_proj/v_proj first")
    heads = _int(config, "num_attention_heads")
    if heads is None:
        raise ConversionRefused("num_attention_heads is missing or not a positive integer")
    old = config.get("num_key_value_heads", heads)
    if not (isinstance(old, int) and not isinstance(old, bool) and old > 0 and heads % old == 0):
        raise ConversionRefused(f"num_key_value_heads {old!r} does not divide num_attention_heads {heads}")
    if isinstance(kv_heads, bool) or not isinstance(kv_heads, int) or kv_heads < 1:
        raise ConversionRefused(f"--kv-heads must be a positive integer, got {kv_heads!r}")
    if heads % kv_heads:
        raise ConversionRefused(f"K = {kv_heads} does not divide H = {heads}: query heads would not group evenly")
    if kv_heads > old or old % kv_heads:
        raise ConversionRefused(f"K = {kv_heads} cannot be made from the checkpoint's {old} KV heads: "
                                "each new head must pool a whole number of existing ones")
    head_dim = _int(config, "head_dim")
    if head_dim is None:
        hidden = _int(config, "hidden_size")
        if hidden is None or hidden % heads:
            raise ConversionRefused("head_dim is missing and hidden_size does not divide by num_attention_heads")
        head_dim = hidden // heads
    quantized = sorted(name for name, dtype in tensors.items() if dtype not in FLOAT_DTYPES)
    if quantized:
        raise ConversionRefused(f"tensor {quantized[0]} is stored as {tensors[quantized[0]]}, not a float: "
                                "quantized weights cannot be pooled honestly")
    kv = sorted(name for name in tensors if KV_PROJECTION.match(name))
    layers = _int(config, "num_hidden_layers")
    weights = [name for name in kv if name.endswith(".weight")]
    if not weights or (layers is not None and len(weights) != 2 * layers):
        raise ConversionRefused(f"expected a k_proj and a v_proj weight in each of {layers} layers, found "
                                f"{len(weights)} projection weights")
    return Plan(num_heads=heads, old_kv_heads=old, new_kv_heads=kv_heads, head_dim=head_dim, method=method,
                kv_tensors=tuple(kv), kept_tensors=tuple(sorted(set(tensors) - set(kv))))


def converted_config(config: Mapping, plan: Plan) -> dict:
    """The config with ``num_key_value_heads`` = K and the conversion recorded beside it."""
    out = dict(config)
    out["num_key_value_heads"] = plan.new_kv_heads
    out["observatory_conversion"] = {"method": plan.method, "from_kv_heads": plan.old_kv_heads,
                                     "to_kv_heads": plan.new_kv_heads,
                                     "recipe": "GQA (Ainslie et al. 2023, arXiv 2305.13245) section 2.1"}
    return out


def groups(old_kv_heads: int, new_kv_heads: int) -> list[list[int]]:
    """The old KV heads each new head pools, in order."""
    pool = old_kv_heads // new_kv_heads
    return [list(range(j * pool, (j + 1) * pool)) for j in range(new_kv_heads)]


def shard_plan(sizes: Sequence[tuple[str, int]], max_shard_bytes: int) -> list[list[str]]:
    """Tensors (name, bytes) in order, cut into shards of at most ``max_shard_bytes`` (a tensor larger
    than that gets a shard of its own)."""
    shards: list[list[str]] = [[]]
    used = 0
    for name, size in sizes:
        if shards[-1] and used + size > max_shard_bytes:
            shards.append([])
            used = 0
        shards[-1].append(name)
        used += size
    return [s for s in shards if s]
