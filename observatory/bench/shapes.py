"""From a model's geometry to the tensors of one decode-attention call."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from observatory.core.geometry import Geometry

TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


class SkipShape(ValueError):
    """The geometry has no shape the bundled GQA kernel can run; the message says why."""


@dataclass(frozen=True)
class AttentionShape:
    batch: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    context: int

    @property
    def group_size(self) -> int:
        return self.num_heads // self.num_kv_heads

    def label(self) -> str:
        return f"b={self.batch} H={self.num_heads} K={self.num_kv_heads} d={self.head_dim} L={self.context}"

    def to_dict(self) -> dict:
        return asdict(self)


def attention_shape(geom: Geometry, batch: int, context: int) -> AttentionShape:
    """The shape of one of the model's full-attention layers at ``batch`` × ``context``.

    MLA is skipped rather than approximated: absorbed MLA decode is MQA over one shared latent
    (K = 1, keys of ``kv_lora_rank + rope`` elements whose first ``kv_lora_rank`` are also the
    values). Running it as GQA with separate K and V would read twice the bytes MLA reads, so the
    number would describe a different kernel (FlashMLA's job, not this one).
    """
    if batch < 1 or context < 1:
        raise ValueError(f"batch and context must be >= 1, got {batch}, {context}")
    if geom.attention_kind == "none":
        raise SkipShape("no attention layer with a KV cache")
    if geom.attention_kind == "MLA":
        raise SkipShape("MLA: decode reads one shared latent cache (FlashMLA-style kernel), not GQA K/V heads")
    if geom.v_head_dim not in (None, geom.head_dim):
        raise SkipShape(f"value head dim {geom.v_head_dim} differs from key head dim {geom.head_dim}")
    heads, kv_heads = geom.num_query_heads, geom.num_kv_heads
    if geom.kv_heads_per_layer and len(set(geom.kv_heads_per_layer) - {0}) > 1:
        raise SkipShape("KV-head count varies by layer")
    if not heads or not kv_heads or not geom.head_dim or heads % kv_heads:
        raise SkipShape(f"unusable head counts H={heads} K={kv_heads} d={geom.head_dim}")
    return AttentionShape(batch, heads, kv_heads, geom.head_dim, context)


def make_inputs(shape: AttentionShape, dtype: str, device: torch.device, copies: int = 1, seed: int = 0):
    """``copies`` independent (q, k_cache, v_cache, cache_seqlens) tuples in FlashAttention's layout."""
    generator = torch.Generator(device=device).manual_seed(seed)
    torch_dtype = TORCH_DTYPES[dtype]
    b, H, K, d, L = shape.batch, shape.num_heads, shape.num_kv_heads, shape.head_dim, shape.context

    def rand(*size):
        return torch.randn(*size, generator=generator, device=device, dtype=torch_dtype)

    out = []
    for _ in range(copies):
        seqlens = torch.full((b,), L, dtype=torch.int32, device=device)
        out.append((rand(b, H, d), rand(b, L, K, d), rand(b, L, K, d), seqlens))
    return out


def rotation_copies(bytes_per_copy: int, rotate_bytes: int, max_copies: int = 4) -> int:
    """Input copies so a rotation spans at least ``rotate_bytes`` (beyond the last-level cache)."""
    return max(1, min(max_copies, math.ceil(rotate_bytes / max(bytes_per_copy, 1))))
