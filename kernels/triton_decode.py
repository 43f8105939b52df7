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

Keys wider than values (absorbed MLA: 576 = 512 + 64; DeepSeek's MHA: 192 = 128 + 64) are scored
in two products, ``Q[:, :d_v]·K[:, :d_v]ᵀ + Q[:, d_v:]·K[:, d_v:]ᵀ``, so neither pads to the next
power of two (576 would pad to 1024), as SGLang's grouped kernel splits 512 + 64. With MLA
(``SHARED_KV``) the value tile *is* the first key tile: each latent row is loaded once.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction

LOG2E = 1.4426950408889634
MAX_BLOCK_G = 64  # larger groups (G > 64) are served by several programs per KV head
MAX_ACC_ELEMENTS = 64 * 128  # BLOCK_G × BLOCK_DV float32 accumulators per program (MLA: 16 heads × 512)
MIN_SPLIT_TOKENS = 256  # a split shorter than this costs more in stage 2 than it gains in parallelism
PROGRAMS_PER_SM = 2  # split until batch × KV heads × splits reaches this many programs per SM
# Launch settings used when a call does not pass its own: {"block_n", "num_warps", "num_stages"}.
# Empty means BLOCK_N 64 (32 for head dims over 128), 4 warps, 2 stages; a tuning run
# (benchmarks/decode_attention_gpu.py) may set the best it measured for the rest of its process.
LAUNCH: dict = {}


@triton.jit
def _split_kv_stage1(
    Q, K_cache, V_cache, Seqlens, Block_table, Mid_O, Mid_LSE,
    scale_log2, split_len,
    stride_qb, stride_qh,
    stride_kb, stride_kt, stride_kh,
    stride_vb, stride_vt, stride_vh,
    stride_bt,
    stride_mob, stride_moh, stride_mos,
    stride_mlb, stride_mlh,
    GROUP: tl.constexpr, G_SLICES: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_DIM_V: tl.constexpr,
    D_MAIN: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DT: tl.constexpr, BLOCK_DV: tl.constexpr,
    BLOCK_N: tl.constexpr, PAGED: tl.constexpr, PAGE_SIZE: tl.constexpr, SHARED_KV: tl.constexpr,
    IEEE_FP32: tl.constexpr,
):
    # Keys are scored in a main part of D_MAIN elements and, when they are wider than the values, a
    # tail of the remaining HEAD_DIM - D_MAIN (BLOCK_DT > 0 only then).
    seq = tl.program_id(0).to(tl.int64)
    kv_head = tl.program_id(1) // G_SLICES
    g_start = (tl.program_id(1) % G_SLICES) * BLOCK_G
    split = tl.program_id(2)

    offs_g = g_start + tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, BLOCK_D)
    offs_v = tl.arange(0, BLOCK_DV)
    offs_n = tl.arange(0, BLOCK_N)
    g_mask = offs_g < GROUP
    d_mask = offs_d < D_MAIN
    v_mask = offs_v < HEAD_DIM_V
    heads = kv_head * GROUP + offs_g

    length = tl.load(Seqlens + seq)
    start = split * split_len
    end = tl.minimum(start + split_len, length)

    q_rows = Q + seq * stride_qb + heads[:, None] * stride_qh
    q = tl.load(q_rows + offs_d[None, :], mask=g_mask[:, None] & d_mask[None, :], other=0.0)
    if BLOCK_DT > 0:
        offs_t = tl.arange(0, BLOCK_DT)
        t_mask = offs_t < HEAD_DIM - D_MAIN
        q_tail = tl.load(q_rows + D_MAIN + offs_t[None, :], mask=g_mask[:, None] & t_mask[None, :], other=0.0)
    m_i = tl.full([BLOCK_G], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_G], dtype=tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_DV], dtype=tl.float32)

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
        k_base = K_cache + k_rows[:, None] + kv_head * stride_kh
        k = tl.load(k_base + offs_d[None, :], mask=n_mask[:, None] & d_mask[None, :], other=0.0)
        if IEEE_FP32:
            s = tl.dot(q, tl.trans(k), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        if BLOCK_DT > 0:
            k_tail = tl.load(k_base + D_MAIN + offs_t[None, :], mask=n_mask[:, None] & t_mask[None, :], other=0.0)
            if IEEE_FP32:
                s += tl.dot(q_tail, tl.trans(k_tail), input_precision="ieee")
            else:
                s += tl.dot(q_tail, tl.trans(k_tail))
        s = tl.where(n_mask[None, :], s * scale_log2, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        if SHARED_KV:
            v = k  # MLA: the values are the first HEAD_DIM_V (= D_MAIN) elements of the rows just loaded
        else:
            v = tl.load(V_cache + v_rows[:, None] + kv_head * stride_vh + offs_v[None, :],
                        mask=n_mask[:, None] & v_mask[None, :], other=0.0)
        if IEEE_FP32:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        else:
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new

    nonempty = l_i > 0
    out = acc / tl.where(nonempty, l_i, 1.0)[:, None]
    lse = tl.where(nonempty, m_i + tl.log2(tl.where(nonempty, l_i, 1.0)), float("-inf"))
    tl.store(Mid_O + seq * stride_mob + heads[:, None] * stride_moh + split * stride_mos + offs_v[None, :],
             out, mask=g_mask[:, None] & v_mask[None, :])
    tl.store(Mid_LSE + seq * stride_mlb + heads * stride_mlh + split, lse, mask=g_mask)


@triton.jit
def _merge_stage2(
    Mid_O, Mid_LSE, Out, Lse,
    num_splits,
    stride_mob, stride_moh, stride_mos,
    stride_mlb, stride_mlh,
    stride_ob, stride_oh,
    stride_lb, stride_lh,
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
    tl.store(Lse + seq * stride_lb + head * stride_lh, lse_out)


def interpreting() -> bool:
    """Whether the kernels were built for Triton's numpy interpreter.

    Triton reads ``TRITON_INTERPRET`` when a function is decorated, its own ``tl.sum``/``tl.max``
    helpers included, so the mode is fixed for the process when ``triton`` is first imported.
    """
    return isinstance(_split_kv_stage1, InterpretedFunction)


def choose_splits(batch: int, programs_per_sequence: int, capacity: int, sm_count: int,
                  per_sm: int | None = None) -> int:
    """Splits per sequence so ``batch × programs × splits`` ≳ PROGRAMS_PER_SM × SM count, none
    shorter than MIN_SPLIT_TOKENS.

    Sized from the cache capacity rather than the actual lengths, so no device sync is needed
    (FlashAttention's heuristic does the same); splits past a sequence's end exit at once.
    """
    wanted = math.ceil((per_sm or PROGRAMS_PER_SM) * sm_count / (batch * programs_per_sequence))
    return max(1, min(wanted, math.ceil(capacity / MIN_SPLIT_TOKENS)))


def gqa_decode_triton(q, k_cache, v_cache, cache_seqlens, block_table, scale, shape, out, *, num_splits=None,
                      block_n=None, num_warps=None, num_stages=None, shared_kv=False):
    """Write the attention output into ``out`` and return the log-sum-exp ``(batch, H)`` float32.

    Inputs are already checked by ``kernels.api.check_inputs``. ``shared_kv``: the value cache is a
    view of the key rows' first ``head_dim_v`` elements (MLA), so values are not loaded again.

    ``block_n``/``num_warps``/``num_stages`` override the launch configuration (for tuning runs).
    """
    interpret = interpreting()
    if q.device.type != "cuda" and not interpret:
        raise ValueError("the Triton kernel runs on CPU tensors only in Triton's interpreter: "
                         "set TRITON_INTERPRET=1 before triton is first imported")
    b, H, d = q.shape
    d_v, K, G = shape.head_dim_v, shape.num_kv_heads, shape.group_size
    tail = d - d_v if d > d_v else 0  # key elements past the values' width, scored separately
    block_d = max(16, triton.next_power_of_2(d - tail))
    block_dt = max(16, triton.next_power_of_2(tail)) if tail else 0
    block_dv = max(16, triton.next_power_of_2(d_v))
    block_g = min(MAX_BLOCK_G, max(16, triton.next_power_of_2(G)), max(16, MAX_ACC_ELEMENTS // block_dv))
    g_slices = triton.cdiv(G, block_g)
    block_n = block_n or LAUNCH.get("block_n") or (64 if max(block_d, block_dv) <= 128 else 32)
    num_warps = num_warps or LAUNCH.get("num_warps") or 4
    num_stages = num_stages or LAUNCH.get("num_stages") or 2
    if num_splits is None:
        sm_count = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 2
        num_splits = choose_splits(b, K * g_slices, shape.capacity, sm_count)
    split_len = triton.cdiv(triton.cdiv(shape.capacity, num_splits), block_n) * block_n
    num_splits = max(1, triton.cdiv(shape.capacity, split_len))

    mid_o = torch.empty(b, H, num_splits, d_v, dtype=torch.float32, device=q.device)
    mid_lse = torch.empty(b, H, num_splits, dtype=torch.float32, device=q.device)
    lse = torch.empty(b, H, dtype=torch.float32, device=q.device)
    if block_table is None:
        block_table_arg, stride_bt, page_size = cache_seqlens, 0, 1  # unused: PAGED is False
    else:
        block_table_arg, stride_bt, page_size = block_table, block_table.stride(0), k_cache.shape[1]
    launch = {} if interpret else {"num_warps": num_warps, "num_stages": num_stages}

    _split_kv_stage1[(b, K * g_slices, num_splits)](
        q, k_cache, v_cache, cache_seqlens, block_table_arg, mid_o, mid_lse,
        scale * LOG2E, split_len,
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        v_cache.stride(0), v_cache.stride(1), v_cache.stride(2),
        stride_bt,
        mid_o.stride(0), mid_o.stride(1), mid_o.stride(2),
        mid_lse.stride(0), mid_lse.stride(1),
        GROUP=G, G_SLICES=g_slices, HEAD_DIM=d, HEAD_DIM_V=d_v, D_MAIN=d - tail, BLOCK_G=block_g, BLOCK_D=block_d,
        BLOCK_DT=block_dt, BLOCK_DV=block_dv, BLOCK_N=block_n, PAGED=block_table is not None,
        PAGE_SIZE=page_size, SHARED_KV=shared_kv, IEEE_FP32=q.dtype == torch.float32, **launch)
    _merge_stage2[(b, H)](
        mid_o, mid_lse, out, lse, num_splits,
        mid_o.stride(0), mid_o.stride(1), mid_o.stride(2),
        mid_lse.stride(0), mid_lse.stride(1),
        out.stride(0), out.stride(1),
        lse.stride(0), lse.stride(1),
        HEAD_DIM=d_v, BLOCK_D=block_dv,
        **({} if interpret else {"num_warps": 4}))
    return lse
