"""What the oracle read from one config, as plain data: the parent process holds these without
importing torch or transformers, and the store keeps them as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LayerCache:
    """What one cache layer stores per token: heads and head dim of its K and of its V tensor."""

    k_heads: int
    k_dim: int
    v_heads: int
    v_dim: int
    k_is_v: bool = False  # the model handed one tensor as both key and value (DeepSeek-V4's shared KV)

    @property
    def elements(self) -> int:
        if self.k_is_v:  # one tensor, stored once (its cache layer keeps values = keys)
            return self.k_heads * self.k_dim
        return self.k_heads * self.k_dim + self.v_heads * self.v_dim


@dataclass
class Reading:
    query_heads: int | None
    self_attention: dict[int, LayerCache] = field(default_factory=dict)  # per generated token
    cross_attention: dict[int, LayerCache] = field(default_factory=dict)  # per source token
    parameters: int = 0  # the built base model's (no LM head), each shared tensor once
    attention_free: bool = False  # the config class has no attention heads at all (RWKV, Mamba)

    @property
    def elements_per_token(self) -> int:
        return sum(c.elements for c in self.self_attention.values())

    @property
    def cross_elements_per_source_token(self) -> int:
        return sum(c.elements for c in self.cross_attention.values())

    def to_dict(self) -> dict:
        return {"query_heads": self.query_heads, "parameters": self.parameters,
                "attention_free": self.attention_free,
                "self_attention": _layers_out(self.self_attention),
                "cross_attention": _layers_out(self.cross_attention)}

    @classmethod
    def from_dict(cls, data: dict) -> Reading:
        return cls(query_heads=data.get("query_heads"), parameters=int(data.get("parameters") or 0),
                   attention_free=bool(data.get("attention_free")),
                   self_attention=_layers_in(data.get("self_attention") or []),
                   cross_attention=_layers_in(data.get("cross_attention") or []))


def _layers_out(layers: dict[int, LayerCache]) -> list[list[int]]:
    """[layer, k_heads, k_dim, v_heads, v_dim] per cached layer, in layer order, with a sixth
    element 1 where one tensor is both K and V."""
    return [[i, c.k_heads, c.k_dim, c.v_heads, c.v_dim, *([1] if c.k_is_v else [])]
            for i, c in sorted(layers.items())]


def _layers_in(rows: list) -> dict[int, LayerCache]:
    return {int(row[0]): LayerCache(*(int(x) for x in row[1:5]), k_is_v=len(row) > 5 and bool(row[5]))
            for row in rows}
