"""Grouped split-KV decode attention in Triton (Flash-Decoding with the query-head group as the tile).

Decode has one query token per sequence, so a kernel that runs one program per *query* head reads
every K/V row G times and gives ``tl.dot`` a single row. Instead (FlashAttention's
``seqlenq_ngroups_swapped``, FlashInfer's head-group fusion, LightLLM/SGLang's grouped kernel):

- **one program per (sequence, KV head, split)** loads the G query heads that share that KV head
  as the rows of a ``[BLOCK_G, d]`` tile (padded to ≥ 16 rows, the smallest ``tl.dot`` tile), so
  every K/V element is read from memory once and both products run on tensor cores;
- **split-KV**: a sequence is cut into ``num_splits`` contiguous pieces handled by separate
  programs, so ``batch × K × splits`` programs fill the GPU even at batch 1 and long context;
- **stage 2** merges the pieces by their log-sum-exp.

The math, next to the PyTorch it replaces (``s`` over one split, base-2 exponentials as in the
FlashAttention Triton kernels: ``exp(x) = exp2(x·log2 e)``)::

    # reference (kernels/reference.py), per query head h, KV head h // G
    s = (q[h] @ k[:L, h // G].T) * scale          # (L,)
    o[h] = softmax(s) @ v[:L, h // G]             # (d,)

    # stage 1, per split [start, end), tiles of BLOCK_N tokens, online softmax (all G rows at once)
    m = -inf; l = 0; acc = 0
    for tile in split:
        s    = (Q_group @ K_tile.T) * scale·log2e   # (BLOCK_G, BLOCK_N), masked past `end` to -inf
        m'   = max(m, rowmax(s))
        p    = exp2(s - m')
        l    = l·exp2(m - m') + rowsum(p)
        acc  = acc·exp2(m - m') + p @ V_tile
        m    = m'
    O_split = acc / l ;  LSE_split = m + log2(l)      (an empty split stores O = 0, LSE = -inf)

    # stage 2, per (sequence, query head): merge splits
    M = max_s LSE_s ;  w_s = exp2(LSE_s - M)
    o = Σ w_s·O_s / Σ w_s ;  lse = (M + log2 Σ w_s) · ln 2        (no tokens at all: o = 0, lse = -inf)

Accumulation is float32 whatever the input dtype (fp16/bf16/fp32); ``p`` is cast to the input
dtype for the second product, as FlashAttention does. Lanes past a sequence's length are masked
out of the loads, so whatever the cache holds there (even NaN) never reaches the result.
"""

from __future__ import annotations

import functools
import math
import os

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
MAX_BLOCK_G = 64  # larger groups (G > 64) are served by several programs per KV head
MIN_SPLIT_TOKENS = 256  # a split shorter than this costs more in stage 2 than it gains in parallelism


def _split_kv_stage1(
    Q, K_cache, V_cache, Seqlens, Block_table, Mid_O, Mid_LSE,
    scale_log2, split_len,
    stride_qb, stride_qh,
    stride_kb, stride_kt, stride_kh,
    stride_vb, stride_vt, stride_vh,
    stride_bt,
    stride_mob, stride_moh, stride_mos,
    stride_mlb, stride_mlh,
    GROUP: tl.constexpr, G_SLICES: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
    PAGED: tl.constexpr, PAGE_SIZE: tl.constexpr, IEEE_FP32: tl.constexpr,
):
    seq = tl.program_id(0).to(tl.int64)
    kv_head = tl.program_id(1) // G_SLICES
    g_start = (tl.program_id(1) % G_SLICES) * BLOCK_G
    split = tl.program_id(2)

    offs_g = g_start + tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, BLOCK_D)
    offs_n = tl.arange(0, BLOCK_N)
    g_mask = offs_g < GROUP
    d_mask = offs_d < HEAD_DIM
    heads = kv_head * GROUP + offs_g

    length = tl.load(Seqlens + seq)
    start = split * split_len
    end = tl.minimum(start + split_len, length)

    q = tl.load(Q + seq * stride_qb + heads[:, None] * stride_qh + offs_d[None, :],
                mask=g_mask[:, None] & d_mask[None, :], other=0.0)
    m_i = tl.full([BLOCK_G], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], dtype=tl.float32)

    for tile in range(start, end, BLOCK_N):
        tokens = tile + offs_n
        n_mask = tokens < end
        if PAGED:
            block = tl.load(Block_table + seq * stride_bt + tokens // PAGE_SIZE, mask=n_mask, other=0).to(tl.int64)
            k_rows = block * stride_kb + (tokens % PAGE_SIZE) * stride_kt
            v_rows = block * stride_vb + (tokens % PAGE_SIZE) * stride_vt
        else:
            k_rows = seq * stride_kb + tokens.to(tl.int64) * stride_kt
            v_rows = seq * stride_vb + tokens.to(tl.int64) * stride_vt
        kv_mask = n_mask[:, None] & d_mask[None, :]
        k = tl.load(K_cache + k_rows[:, None] + kv_head * stride_kh + offs_d[None, :], mask=kv_mask, other=0.0)
        if IEEE_FP32:
            s = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        s = tl.where(n_mask[None, :], s * scale_log2, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V_cache + v_rows[:, None] + kv_head * stride_vh + offs_d[None, :], mask=kv_mask, other=0.0)
        if IEEE_FP32:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    nonempty = l_i > 0
    out = acc / tl.where(nonempty, l_i, 1.0)[:, None]
    lse = tl.where(nonempty, m_i + tl.log2(tl.where(nonempty, l_i, 1.0)), float("-inf"))
    tl.store(Mid_O + seq * stride_mob + heads[:, None] * stride_moh + split * stride_mos + offs_d[None, :],
             out, mask=g_mask[:, None] & d_mask[None, :])
    tl.store(Mid_LSE + seq * stride_mlb + heads * stride_mlh + split, lse, mask=g_mask)


def _merge_stage2(
    Mid_O, Mid_LSE, Out, Lse,
    num_splits,
    stride_mob, stride_moh, stride_mos,
    stride_mlb, stride_mlh,
    stride_ob, stride_oh,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
):
    seq = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < HEAD_DIM
    # Start from a finite floor rather than -inf so an empty split (lse -inf) gives weight 0, not NaN.
    m = -1e30
    total = 0.0
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for split in range(0, num_splits):
        lse = tl.load(Mid_LSE + seq * stride_mlb + head * stride_mlh + split)
        o = tl.load(Mid_O + seq * stride_mob + head * stride_moh + split * stride_mos + offs_d, mask=d_mask, other=0.0)
        m_new = tl.maximum(m, lse)
        alpha = tl.exp2(m - m_new)
        w = tl.exp2(lse - m_new)
        acc = acc * alpha + w * o
        total = total * alpha + w
        m = m_new
    nonempty = total > 0
    out = acc / tl.where(nonempty, total, 1.0)
    tl.store(Out + seq * stride_ob + head * stride_oh + offs_d, out.to(Out.dtype.element_ty), mask=d_mask)
    lse_out = tl.where(nonempty, (m + tl.log2(tl.where(nonempty, total, 1.0))) * 0.6931471805599453, float("-inf"))
    tl.store(Lse + seq * stride_mlb // stride_mlb * 0 + seq * 0 + _lse_offset(seq, head, Lse_stride_b=stride_ob), lse_out) if False else None


@functools.cache
def _kernels(interpret: bool):
    """JIT the kernels for the GPU or for Triton's numpy interpreter.

    ``TRITON_INTERPRET`` is read when a function is decorated, so each flavour is decorated with the
    variable set accordingly; CPU tensors then run in the interpreter without the caller exporting it.
    """
    saved = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if interpret else "0"
    try:
        return triton.jit(_split_kv_stage1), triton.jit(_merge_stage2)
    finally:
        if saved is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = saved
