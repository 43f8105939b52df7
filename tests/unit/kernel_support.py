"""Shared by the kernel tests: cases, inputs with poisoned padding, and the comparison with the reference.

A case is GQA (``gqa_decode``, separate K and V caches; ``head_dim_v`` when values are narrower than
keys) or, with ``latent``, absorbed MLA (``mla_decode``: one latent cache of ``head_dim`` =
kv_lora_rank + rope elements per token, values its first ``head_dim_v``).

Run as a script (``python tests/unit/kernel_support.py``) it runs ``TRITON_CASES`` and
``TRITON_MLA_CASES`` with the Triton kernel and prints one JSON object of results: ``test_kernels_triton`` starts it with
``TRITON_INTERPRET=1``, which Triton reads when it is first imported, so the interpreter runs in a
fresh process and never changes how this one uses Triton.

Tolerances, on the relative error max|out − ref| / max|ref| over sequences with tokens (the
reference is float64), chosen from each dtype's rounding: fp32 2e-5, fp16 2e-3 (10-bit mantissa:
inputs are rounded, products accumulate in fp32, ``p`` is rounded to fp16 for p·v), bf16 1.6e-2
(7-bit mantissa). The log-sum-exp is compared absolutely: 1e-5 (fp32), 1e-3 (fp16/bf16).
Outputs must never hold NaN or Inf; a sequence with no tokens must give zeros and lse −inf.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
RTOL = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
LSE_ATOL = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 1e-3}
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class Case:
    id: str
    heads: int
    kv_heads: int
    head_dim: int
    lengths: tuple[int, ...]  # one per sequence: ragged batches, zeros allowed
    dtype: str = "fp32"
    block_size: int | None = None  # paged cache when set
    spare: int = 5  # cache slots past the longest sequence, filled with NaN
    num_splits: int | None = None  # Triton and C kernels
    chunk: int | None = None  # PyTorch path only
    scale: float | None = None
    head_dim_v: int | None = None  # value width when it differs from head_dim (MLA: kv_lora_rank)
    latent: bool = False  # MLA: one latent cache (kv_heads must be 1), values its first head_dim_v elements

    @property
    def value_dim(self) -> int:
        return self.head_dim_v or self.head_dim


def mla_case(id: str, heads: int, rank: int, rope: int, lengths: tuple[int, ...], dtype: str = "fp32", **fields) -> Case:
    """An absorbed-MLA case: H query heads over one latent of ``rank + rope`` elements."""
    return Case(id, heads, 1, rank + rope, lengths, dtype, head_dim_v=rank, latent=True, **fields)


def make_inputs(case: Case, seed: int = 0, device: str = "cpu"):
    """(q, k_cache, v_cache, cache_seqlens, block_table): every slot no sequence owns holds NaN.

    For a latent case, ``k_cache`` is the latent cache ``(batch or blocks, tokens, rank + rope)`` and
    ``v_cache`` is None."""
    gen = torch.Generator().manual_seed(seed)
    dtype = DTYPES[case.dtype]
    batch, d, kv = len(case.lengths), case.head_dim, case.kv_heads
    row_shapes = [(d,)] if case.latent else [(kv, d), (kv, case.value_dim)]

    def randn(*size):
        return torch.randn(*size, generator=gen).to(dtype)

    q = randn(batch, case.heads, d)
    capacity = max(case.lengths) + case.spare
    if case.block_size is None:
        caches = [torch.full((batch, capacity, *row), math.nan, dtype=dtype) for row in row_shapes]
        for seq, length in enumerate(case.lengths):
            for cache, row in zip(caches, row_shapes):
                cache[seq, :length] = randn(length, *row)
        block_table = None
    else:
        size = case.block_size
        per_seq = -(-capacity // size)
        num_blocks = batch * per_seq + 3  # spare blocks no sequence uses
        caches = [torch.full((num_blocks, size, *row), math.nan, dtype=dtype) for row in row_shapes]
        block_table = torch.randperm(num_blocks, generator=gen)[: batch * per_seq].view(batch, per_seq).to(torch.int32)
        for seq, length in enumerate(case.lengths):
            for token in range(length):
                block, slot = int(block_table[seq, token // size]), token % size
                for cache, row in zip(caches, row_shapes):
                    cache[block, slot] = randn(*row)
    k, v = (caches[0], None) if case.latent else caches
    seqlens = torch.tensor(case.lengths, dtype=torch.int32)
    tensors = [t.to(device) if t is not None else None for t in (q, k, v, seqlens, block_table)]
    return tuple(tensors)


def compare(case: Case, out, lse, ref_out, ref_lse) -> dict:
    """Errors against the float64 reference, as plain numbers (JSON-friendly)."""
    out, lse = out.detach().double().cpu(), lse.detach().double().cpu()
    filled = torch.tensor([length > 0 for length in case.lengths])
    empty = ~filled
    result = {"finite": bool(torch.isfinite(out).all()), "rel_err": 0.0, "lse_err": 0.0,
              "empty_ok": bool((out[empty] == 0).all() and (lse[empty] == -math.inf).all())}
    if filled.any():
        scale = ref_out[filled].abs().max().item()
        result["rel_err"] = (out[filled] - ref_out[filled]).abs().max().item() / scale
        result["lse_err"] = (lse[filled] - ref_lse[filled]).abs().max().item()
    return result


def assert_close(case: Case, result: dict) -> None:
    dtype = DTYPES[case.dtype]
    assert result["finite"], f"{case.id}: NaN or Inf in the output"
    assert result["empty_ok"], f"{case.id}: a sequence with no tokens must give zeros and lse -inf"
    assert result["rel_err"] <= RTOL[dtype], f"{case.id}: relative error {result['rel_err']:.3g} > {RTOL[dtype]}"
    assert result["lse_err"] <= LSE_ATOL[dtype], f"{case.id}: lse error {result['lse_err']:.3g}"


# Small enough for the interpreter (each program runs serially in numpy), yet covering MHA, GQA and
# MQA group sizes 1-16 (and 128: two 64-row head slices per KV head), head dims 64/128/256, lengths that
# divide neither BLOCK_N (32/64) nor the split length, ragged batches with empty sequences, paged
# caches with odd block sizes, and more splits than a sequence has tokens.
TRITON_CASES = [
    Case("mha-g1-d64-fp32", 4, 4, 64, (37, 5), "fp32", num_splits=2),
    Case("gqa-g2-d64-fp16", 8, 4, 64, (100,), "fp16", num_splits=3),
    Case("gqa-g4-d128-fp16", 8, 2, 128, (70, 0, 19), "fp16", num_splits=2),
    Case("gqa-g8-d128-fp32", 8, 1, 128, (65,), "fp32", num_splits=2),
    Case("gqa-g16-d64-fp16", 32, 2, 64, (33, 1), "fp16", num_splits=1),
    Case("mqa-g16-d256-fp32", 16, 1, 256, (45,), "fp32", num_splits=2),
    Case("gqa-g4-d256-fp16", 8, 2, 256, (40, 3), "fp16", num_splits=1),
    Case("mqa-g128-d64-fp16", 128, 1, 64, (20, 0), "fp16", num_splits=1),
    Case("splits-past-end-fp32", 4, 2, 64, (9, 70), "fp32", num_splits=8),
    Case("paged-bs16-fp16", 8, 2, 64, (50, 0, 17), "fp16", block_size=16, num_splits=2),
    Case("paged-bs7-d128-fp32", 4, 1, 128, (30, 12), "fp32", block_size=7, num_splits=3),
    Case("paged-bs1-fp16", 4, 2, 64, (11, 6), "fp16", block_size=1, num_splits=2),
    Case("all-empty-fp32", 4, 2, 64, (0, 0), "fp32", num_splits=2),
    Case("custom-scale-fp16", 8, 2, 64, (29,), "fp16", num_splits=2, scale=0.3),
    Case("default-splits-fp16", 8, 2, 64, (300, 150), "fp16", spare=1),
]


# MLA in the interpreter: H = 16/64/128 (one, four and eight 16-row head slices over one latent),
# DeepSeek's 512 + 64 (two products: 512 and the 64-wide rope tail), MiniCPM3's 256 + 32, ragged and
# paged caches, empty sequences; and GQA with 192-wide keys over 128-wide values (DeepSeek's MHA).
TRITON_MLA_CASES = [
    mla_case("mla-h16-512+64-fp32", 16, 512, 64, (37, 0, 9), "fp32", num_splits=2),
    mla_case("mla-h64-512+64-fp16", 64, 512, 64, (45,), "fp16", num_splits=2),
    mla_case("mla-h128-512+64-fp16", 128, 512, 64, (20, 3), "fp16", num_splits=1),
    mla_case("mla-h128-paged-bs16-fp32", 128, 512, 64, (33, 0), "fp32", block_size=16, num_splits=2),
    mla_case("mla-minicpm3-h40-256+32-fp16", 40, 256, 32, (50, 12), "fp16", num_splits=3),
    mla_case("mla-v2lite-h16-paged-bs7-fp16", 16, 512, 64, (30, 12), "fp16", block_size=7, num_splits=2),
    mla_case("mla-scale-fp32", 16, 512, 64, (29,), "fp32", num_splits=2, scale=192 ** -0.5),
    Case("gqa-dk192-dv128-fp16", 8, 8, 192, (40, 7), "fp16", num_splits=2, head_dim_v=128),
    Case("gqa-dk192-dv128-paged-fp32", 8, 2, 192, (25, 9), "fp32", block_size=8, num_splits=2, head_dim_v=128),
]


def run_case(case: Case, backend: str, seed: int = 0, device: str = "cpu") -> dict:
    """One case through ``gqa_decode`` (``mla_decode`` for a latent case) with ``backend``, into a
    NaN-poisoned ``out``, against the float64 reference."""
    from kernels import (
        gqa_decode,
        gqa_decode_reference,
        mla_decode,
        mla_decode_reference,
    )

    q, k, v, seqlens, block_table = make_inputs(case, seed, device=device)
    poisoned = q.new_full((q.shape[0], case.heads, case.value_dim), math.nan)
    if case.latent:
        out, lse = mla_decode(q, k, seqlens, block_table, case.scale, return_lse=True, head_dim_v=case.value_dim,
                              out=poisoned, backend=backend, num_splits=case.num_splits)
        ref_out, ref_lse = mla_decode_reference(q, k, seqlens, block_table, case.scale, head_dim_v=case.value_dim)
    else:
        out, lse = gqa_decode(q, k, v, seqlens, block_table, case.scale, return_lse=True, out=poisoned,
                              backend=backend, num_splits=case.num_splits)
        ref_out, ref_lse = gqa_decode_reference(q, k, v, seqlens, block_table, case.scale)
    return compare(case, out, lse, ref_out, ref_lse) | {"wrote_into_out": out is poisoned}


def run_triton_cases(cases=TRITON_CASES + TRITON_MLA_CASES, device: str = "cpu") -> dict[str, dict]:
    return {case.id: run_case(case, "triton", device=device) for case in cases}


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    cases = TRITON_CASES + TRITON_MLA_CASES
    json.dump({"cases": run_triton_cases(cases), "case_fields": [asdict(c) for c in cases]}, sys.stdout)
