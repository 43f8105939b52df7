"""From a model's geometry to the tensors of one decode-attention call, and to its MHA counterfactual."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from observatory.core.geometry import Geometry
from observatory.core.kvcache import dtype_bytes, mha_counterfactual

TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


class SkipShape(ValueError):
    """The geometry has no shape the bundled kernels can run; the message says why."""


@dataclass(frozen=True)
class AttentionShape:
    """One decode-attention call: ``batch`` sequences of ``context`` cached tokens.

    GQA: H query heads over K heads of keys (``head_dim``) and values (``head_dim_v``, usually the
    same). ``latent`` (absorbed MLA): one latent cache of ``head_dim`` = kv_lora_rank + rope elements
    per token, K = 1, values its first ``head_dim_v`` = kv_lora_rank elements.
    """

    batch: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    context: int
    head_dim_v: int | None = None  # None: the same as head_dim
    latent: bool = False

    @property
    def group_size(self) -> int:
        return self.num_heads // self.num_kv_heads

    @property
    def value_dim(self) -> int:
        return self.head_dim_v or self.head_dim

    @property
    def kernel(self) -> str:
        return "mla" if self.latent else "gqa"

    @property
    def flops(self) -> float:
        """Multiply-adds × 2 of one call: q·k over head_dim and p·v over head_dim_v, per head and token
        (MLA: 2·H·(2·kv_lora_rank + rope), the roofline's count)."""
        return 2.0 * self.batch * self.context * self.num_heads * (self.head_dim + self.value_dim)

    def kv_bytes(self, dtype: str) -> int:
        """Cache bytes one call reads: keys and values, or the latent once (its value part is the same rows)."""
        per_token = self.head_dim if self.latent else self.num_kv_heads * (self.head_dim + self.value_dim)
        return self.batch * self.context * per_token * dtype_bytes(dtype)

    def label(self) -> str:
        if self.latent:
            rope = self.head_dim - self.value_dim
            return f"b={self.batch} H={self.num_heads} latent={self.value_dim}+{rope} L={self.context}"
        dims = f"d={self.head_dim}" + (f"/{self.head_dim_v}" if self.value_dim != self.head_dim else "")
        return f"b={self.batch} H={self.num_heads} K={self.num_kv_heads} {dims} L={self.context}"

    def to_dict(self) -> dict:
        return asdict(self)


def attention_shape(geom: Geometry, batch: int, context: int) -> AttentionShape:
    """The shape of one of the model's full-attention layers at ``batch`` × ``context``.

    MLA runs in its absorbed form: H query heads over one shared latent (K = 1), keys the whole
    ``kv_lora_rank + rope`` row and values its first ``kv_lora_rank`` elements (``mla_decode``).
    """
    if batch < 1 or context < 1:
        raise ValueError(f"batch and context must be >= 1, got {batch}, {context}")
    if geom.attention_kind == "none" or not geom.kv_layers:
        raise SkipShape("no attention layer with a KV cache" + (" (encoder-only)" if geom.encoder_only else ""))
    if geom.head_dims_per_layer and len(set(geom.head_dims_per_layer)) > 1:
        raise SkipShape("head dim varies by layer")
    heads = geom.num_query_heads
    if geom.query_heads_per_layer and len(set(geom.query_heads_per_layer)) > 1:
        raise SkipShape("query-head count varies by layer")
    if geom.mla is not None:
        rank, rope = geom.mla.kv_lora_rank, geom.mla.qk_rope_head_dim
        return AttentionShape(batch, heads, 1, rank + rope, context, head_dim_v=rank, latent=True)
    kv_heads = geom.num_kv_heads
    if geom.kv_heads_per_layer and len(set(geom.kv_heads_per_layer) - {0}) > 1:
        raise SkipShape("KV-head count varies by layer")
    if not heads or not kv_heads or not geom.head_dim or heads % kv_heads:
        raise SkipShape(f"unusable head counts H={heads} K={kv_heads} d={geom.head_dim}")
    head_dim_v = geom.v_head_dim if geom.v_head_dim not in (None, geom.head_dim) else None
    return AttentionShape(batch, heads, kv_heads, geom.head_dim, context, head_dim_v=head_dim_v)


def counterfactual_shape(geom: Geometry, batch: int, context: int) -> AttentionShape | None:
    """The MHA counterfactual's shape (``kvcache.mha_counterfactual``: same H, head dims and layers,
    K = H; for MLA the MHA it replaces, e.g. 192-wide keys and 128-wide values), or None when the
    model already caches one KV head per query head."""
    shape = attention_shape(geom, batch, context)
    if not shape.latent and shape.num_kv_heads == shape.num_heads:
        return None
    return attention_shape(mha_counterfactual(geom), batch, context)


def make_inputs(shape: AttentionShape, dtype: str, device: torch.device, copies: int = 1, seed: int = 0):
    """``copies`` independent argument tuples in FlashAttention's layout: ``(q, k_cache, v_cache,
    cache_seqlens)`` for GQA, ``(q, latent_cache, cache_seqlens)`` for MLA."""
    generator = torch.Generator(device=device).manual_seed(seed)
    torch_dtype = TORCH_DTYPES[dtype]
    b, H, K, d, L = shape.batch, shape.num_heads, shape.num_kv_heads, shape.head_dim, shape.context

    def rand(*size):
        return torch.randn(*size, generator=generator, device=device, dtype=torch_dtype)

    out = []
    for _ in range(copies):
        seqlens = torch.full((b,), L, dtype=torch.int32, device=device)
        if shape.latent:
            out.append((rand(b, H, d), rand(b, L, d), seqlens))
        else:
            out.append((rand(b, H, d), rand(b, L, K, d), rand(b, L, K, shape.value_dim), seqlens))
    return out


def input_bytes(shape: AttentionShape, dtype: str) -> int:
    """Bytes of one argument tuple from ``make_inputs`` (the query is 1/L of the cache; counted anyway)."""
    q = shape.batch * shape.num_heads * shape.head_dim * dtype_bytes(dtype)
    return q + shape.kv_bytes(dtype) + 4 * shape.batch


def rotation_copies(bytes_per_copy: int, rotate_bytes: int, max_copies: int = 4) -> int:
    """Input copies so a rotation spans at least ``rotate_bytes`` (beyond the last-level cache)."""
    return max(1, min(max_copies, math.ceil(rotate_bytes / max(bytes_per_copy, 1))))
