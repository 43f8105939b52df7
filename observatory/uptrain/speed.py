"""Decode speed of each K with the bundled kernel, on the model's own attention shape.

One decode call per layer reads the whole cache once; the kernel runs every K in the same
interleaved rounds (``bench.timing``), so load on a shared machine hits all of them alike. What is
timed is attention alone (the projections and MLP are the same for every K): tokens/s here are an
attention-only ceiling, its ratios the point.
"""

from __future__ import annotations

import torch

from kernels.api import choose_backend, gqa_decode
from observatory.bench.timing import Contender, time_interleaved

ROTATED_COPIES = 2


def decode_speeds(heads: int, kv_options: list[int], head_dim: int, layers: int, context: int, batch: int,
                  *, repeats: int = 20, seed: int = 0) -> dict:
    device = torch.device("cpu")
    generator = torch.Generator().manual_seed(seed)
    seqlens = torch.full((batch,), context, dtype=torch.int32)
    contenders = []
    for k in kv_options:
        copies = []
        for _ in range(ROTATED_COPIES):
            q = torch.randn(batch, heads, head_dim, generator=generator)
            kc = torch.randn(batch, context, k, head_dim, generator=generator)
            vc = torch.randn(batch, context, k, head_dim, generator=generator)
            copies.append((q, kc, vc))
        contenders.append(Contender(f"k{k}", lambda t: gqa_decode(t[0], t[1], t[2], seqlens), copies))
    timings = time_interleaved(contenders, device, warmup=2, repeats=repeats)
    backend = choose_backend(device, "auto", torch.float32, head_dim)
    return {"backend": backend, "dtype": "fp32", "context": context, "batch": batch, "layers": layers,
            "repeats": repeats, "by_kv_heads": {
                str(k): {"median_s_per_call": timings[f"k{k}"].median_s,
                         "attention_s_per_token": timings[f"k{k}"].median_s * layers,
                         "tokens_per_s": batch / (timings[f"k{k}"].median_s * layers)} for k in kv_options}}
