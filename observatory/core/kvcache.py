"""KV-cache arithmetic on a ``Geometry``: pure, no I/O.

Sizing follows vLLM's per-token convention: a GQA/MHA layer caches ``K * (head_dim + v_head_dim)``
elements per token (``2*K*d`` when K and V share a head dim); an MLA layer caches one latent of
``kv_lora_rank + qk_rope_head_dim`` elements (no factor 2). Layers without a per-token cache
(linear attention, SSM, conv, cross-attention) add nothing. Sliding-window layers keep at most
``sliding_window`` tokens and chunked layers at most ``chunk_size`` tokens.

Units are explicit: elements vs bytes, ``GB`` = 10**9 bytes, ``GiB`` = 2**30 bytes.
"""

from __future__ import annotations

from dataclasses import replace

from observatory.core.geometry import Geometry

DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "fp32": 4}
GB = 10**9
GiB = 2**30


def dtype_bytes(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype]
    except (KeyError, TypeError):
        raise ValueError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPE_BYTES)}") from None


def bytes_per_token(geom: Geometry, dtype: str = "bf16") -> int:
    """Bytes one token adds to the cache at full context, over all KV layers."""
    return geom.kv_elements_per_token * dtype_bytes(dtype)


def cache_bytes(geom: Geometry, context: int, batch: int = 1, dtype: str = "bf16") -> int:
    """Bytes of KV cache for ``batch`` sequences of ``context`` tokens each."""
    _check_whole(context, "context", lo=0)
    _check_whole(batch, "batch", lo=1)
    elements = sum(per_token * (context if cap is None else min(context, cap)) for cap, per_token in geom.cache_terms())
    return elements * batch * dtype_bytes(dtype)


def mha_counterfactual(geom: Geometry) -> Geometry:
    """The same model with one KV head per query head (K = H), everything else unchanged.

    For MLA the counterfactual is the MHA that MLA replaces: H heads caching keys of the
    q/k head dim (``qk_nope + qk_rope``, e.g. 192) and values of ``v_head_dim`` (e.g. 128), so
    DeepSeek-V3 goes from 576 to 128 * (192 + 128) = 40,960 elements per layer.
    Attention-free geometries are returned as they are.
    """
    if geom.attention_kind == "none":
        return geom
    h = geom.num_query_heads
    v_head_dim = geom.mla.v_head_dim if geom.mla is not None else geom.v_head_dim
    counter = replace(
        geom, attention_kind="MHA", num_kv_heads=h, group_size=1.0, mla=None,
        v_head_dim=v_head_dim or geom.head_dim, kv_heads_per_layer=geom.query_heads_per_layer,
        warnings=(), sources={"num_kv_heads": "counterfactual:K=H"})
    return replace(counter, kv_elements_per_token=sum(counter.layer_kv_elements()))


def saving_ratio(geom: Geometry, context: int | None = None) -> float | None:
    """How many times larger the MHA counterfactual's cache is (G for plain GQA).

    At full context by default; at ``context`` tokens when given (windows then matter).
    None when the model has no per-token cache.
    """
    counter = mha_counterfactual(geom)
    if context is None:
        actual, mha = geom.kv_elements_per_token, counter.kv_elements_per_token
    else:
        actual, mha = cache_bytes(geom, context), cache_bytes(counter, context)
    return mha / actual if actual else None


def max_tokens(geom: Geometry, memory_bytes: float, dtype: str = "bf16", batch: int = 1) -> int | None:
    """Longest context whose cache for ``batch`` sequences fits in ``memory_bytes``.

    None means unbounded: no per-token cache, or only windowed layers whose capped cache fits.
    """
    memory_bytes = _bytes(memory_bytes)
    caps = [cap for cap, per in zip(geom.layer_windows(), geom.layer_kv_elements()) if per]
    if not caps:
        return None
    if all(cap is not None for cap in caps):
        if cache_bytes(geom, max(caps), batch, dtype) <= memory_bytes:
            return None
        high = max(caps)
    else:
        growth = sum(per for cap, per in zip(geom.layer_windows(), geom.layer_kv_elements()) if cap is None)
        high = memory_bytes // (growth * batch * dtype_bytes(dtype)) + 1
    low = 0  # cache_bytes is non-decreasing in context: bisect for the last context that fits
    while low < high:
        mid = (low + high + 1) // 2
        if cache_bytes(geom, mid, batch, dtype) <= memory_bytes:
            low = mid
        else:
            high = mid - 1
    return low


def max_sequences(geom: Geometry, memory_bytes: float, context: int, dtype: str = "bf16") -> int | None:
    """How many concurrent sequences of ``context`` tokens fit; None when they cost no cache."""
    memory_bytes = _bytes(memory_bytes)
    per_sequence = cache_bytes(geom, context, 1, dtype)
    return memory_bytes // per_sequence if per_sequence else None


def _bytes(memory: float) -> int:
    """A memory budget in bytes; floats such as 141e9 are accepted and floored."""
    if isinstance(memory, bool) or not isinstance(memory, (int, float)) or not 0 <= memory < float("inf"):
        raise ValueError(f"memory_bytes must be a finite number >= 0, got {memory!r}")
    return int(memory)


def _check_whole(value: int, name: str, *, lo: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValueError(f"{name} must be a whole number >= {lo}, got {value!r}")
