"""Pooling one K or V projection tensor's heads into fewer (torch), following a core ``Plan``.

A projection weight is ``(K_old * d, hidden)`` and its bias ``(K_old * d,)``: rows ``i*d .. i*d + d - 1``
are head ``i``. Pooling reshapes to ``(K_new, g, d, ...)`` and reduces the ``g`` axis. The mean is taken
in float64 and cast back, so a bf16 checkpoint loses no more than one rounding.
"""

from __future__ import annotations

import torch

from observatory.core.kv_conversion import Plan

RANDOM_SEED = 0


def pool_heads(tensor: torch.Tensor, plan: Plan, *, generator: torch.Generator | None = None) -> torch.Tensor:
    """The tensor with its head rows pooled from ``plan.old_kv_heads`` to ``plan.new_kv_heads``."""
    rows = plan.old_kv_heads * plan.head_dim
    if tensor.shape[0] != rows:
        raise ValueError(f"projection has {tensor.shape[0]} rows, expected {plan.old_kv_heads} heads x "
                         f"{plan.head_dim} = {rows}")
    if plan.identity:
        return tensor.clone()
    grouped = tensor.reshape(plan.new_kv_heads, plan.pool, plan.head_dim, *tensor.shape[1:])
    if plan.method == "mean":
        pooled = grouped.to(torch.float64).mean(dim=1)
    elif plan.method == "first":
        pooled = grouped[:, 0]
    else:
        # Fresh heads: the from-scratch control. A weight is drawn at the source's own scale so the
        # layer's output starts at the size the rest of the model expects; a bias starts at zero.
        shape = (plan.new_kv_heads * plan.head_dim, *tensor.shape[1:])
        if tensor.dim() == 1:
            return torch.zeros(shape, dtype=tensor.dtype)
        std = float(tensor.to(torch.float64).std())
        return (torch.randn(shape, generator=generator, dtype=torch.float64) * std).to(tensor.dtype)
    return pooled.reshape(plan.new_kv_heads * plan.head_dim, *tensor.shape[1:]).to(tensor.dtype).contiguous()
