"""The shape of the experiment's small decoder, as plain values: the plan and the site read it
without importing torch (``model`` builds the network from it)."""

from __future__ import annotations

from dataclasses import dataclass

VOCAB = 256  # bytes


@dataclass(frozen=True)
class ModelShape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    context: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def config(self) -> dict:
        """The transformers Llama config.json of this shape."""
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB,
                "hidden_size": self.hidden, "intermediate_size": self.intermediate,
                "num_hidden_layers": self.layers, "num_attention_heads": self.heads,
                "num_key_value_heads": self.kv_heads, "head_dim": self.head_dim,
                "max_position_embeddings": self.context, "rms_norm_eps": self.norm_eps,
                "rope_theta": self.rope_theta, "hidden_act": "silu", "tie_word_embeddings": False,
                "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32",
                "bos_token_id": None, "eos_token_id": None, "pad_token_id": None}

    @classmethod
    def from_config(cls, config: dict) -> ModelShape:
        return cls(hidden=config["hidden_size"], layers=config["num_hidden_layers"],
                   heads=config["num_attention_heads"], kv_heads=config["num_key_value_heads"],
                   intermediate=config["intermediate_size"], context=config["max_position_embeddings"],
                   rope_theta=config.get("rope_theta", 10000.0), norm_eps=config.get("rms_norm_eps", 1e-5))
