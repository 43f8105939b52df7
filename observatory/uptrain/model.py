"""A small Llama-architecture decoder in plain torch, stored as transformers stores a Llama.

Parameter names, shapes, RoPE (rotate-half, ``rope_theta``), RMSNorm and SwiGLU follow
transformers' ``LlamaForCausalLM``, and ``save`` writes ``model.safetensors`` and a Llama
``config.json``: so ``observatory convert`` converts it as it converts any Llama checkpoint, and
transformers loads what we train (a test holds the logits equal). Written here rather than
imported from transformers because the product does not depend on transformers, and this one
trains faster on two CPU cores (no cache or mask machinery).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from observatory.uptrain.shape import VOCAB, ModelShape


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class Attention(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        d = shape.head_dim
        self.heads, self.kv_heads, self.head_dim = shape.heads, shape.kv_heads, d
        self.q_proj = nn.Linear(shape.hidden, shape.heads * d, bias=False)
        self.k_proj = nn.Linear(shape.hidden, shape.kv_heads * d, bias=False)
        self.v_proj = nn.Linear(shape.hidden, shape.kv_heads * d, bias=False)
        self.o_proj = nn.Linear(shape.heads * d, shape.hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        # Query head h reads KV head h // G, as transformers' repeat_kv and the kernels do.
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class MLP(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.gate_proj = nn.Linear(shape.hidden, shape.intermediate, bias=False)
        self.up_proj = nn.Linear(shape.hidden, shape.intermediate, bias=False)
        self.down_proj = nn.Linear(shape.intermediate, shape.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.input_layernorm = RMSNorm(shape.hidden, shape.norm_eps)
        self.self_attn = Attention(shape)
        self.post_attention_layernorm = RMSNorm(shape.hidden, shape.norm_eps)
        self.mlp = MLP(shape)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, shape: ModelShape):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, shape.hidden)
        self.layers = nn.ModuleList(Layer(shape) for _ in range(shape.layers))
        self.norm = RMSNorm(shape.hidden, shape.norm_eps)


class ByteLlama(nn.Module):
    """``model.*`` and ``lm_head`` as in transformers' Llama; forward returns logits."""

    def __init__(self, shape: ModelShape):
        super().__init__()
        self.shape = shape
        self.model = Body(shape)
        self.lm_head = nn.Linear(shape.hidden, VOCAB, bias=False)
        d = shape.head_dim
        inv_freq = 1.0 / (shape.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
        angles = torch.outer(torch.arange(shape.context).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.shape[1]
        cos, sin = self.cos[:t], self.sin[:t]
        x = self.model.embed_tokens(tokens)
        for layer in self.model.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.model.norm(x))


def init_weights(model: ByteLlama, seed: int) -> None:
    """Normal(0, 0.02) weights as transformers initialises a Llama, from one seed."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if name.endswith("layernorm.weight") or name == "model.norm.weight":
                param.fill_(1.0)
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02)


def save(model: ByteLlama, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, folder / "model.safetensors",
              metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(model.shape.config(), indent=2) + "\n")


def load(folder: Path) -> ByteLlama:
    """A checkpoint ``save`` wrote, or one ``observatory convert`` made of it."""
    config = json.loads((folder / "config.json").read_text())
    model = ByteLlama(ModelShape.from_config(config))
    model.load_state_dict(load_file(folder / "model.safetensors"))
    return model


def shape_dict(shape: ModelShape) -> dict:
    return {**asdict(shape), "head_dim": shape.head_dim}
