"""Parameter counts estimated from a ``config.json``: pure, no I/O.

For repositories without safetensors metadata (``.bin`` weights, GGUF-only, config-only, the
bundled snapshot) the Hub gives no parameter count; this module derives one from the shapes the
config declares. ``estimate_parameters(cfg)`` returns a ``ParameterEstimate``:

- ``total``: every weight the checkpoint of this architecture holds: embeddings (and the output
  head unless tied), attention (MHA/GQA/MQA; MLA with its q/kv LoRA ranks), linear-attention,
  short-convolution and Mamba mixers of hybrids, dense MLPs, routed and shared experts with their
  router, norms and biases where the family has them, learned position tables,
  multi-token-prediction (MTP) layers shipped beside the decoder, the vision tower of a
  multimodal wrapper when it has a ``vision_config``, and Qwen2-Audio's Whisper-style audio
  encoder (``audio_config``).
- ``active``: what one text token passes through: ``total`` less the routed experts it is not
  sent to, less MTP layers and the vision and audio towers. For a dense text-only model
  ``active == total``.
  Both embedding matrices are counted, as Mistral, Qwen, DeepSeek and Meta count their published
  active figures (OpenAI's gpt-oss figures leave the input embedding out; subtract
  ``breakdown["embeddings"]`` to compare).
- ``breakdown``: the same total by part (the keys below; absent parts are omitted).
- ``warnings``: where the count is approximate (a mixer or a tower modelled generically, a
  family convention assumed) or the config is odd.

The attention shapes (H, K, head dim, MLA ranks, which layers attend) come from
``geometry.parse_geometry``, so a config the geometry refuses is refused here too
(``GeometryError``/``ConfigError``, one line). Families differ in small conventions (bias,
LayerNorm vs RMSNorm, norms per layer, q/k norms, tying); ``FAMILIES`` records them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from observatory.core.config_dialects import (
    WIDTH_KEYS,
    ConfigError,
    GeometryError,
    Section,
    get_path,
    select_section,
    to_int,
)
from observatory.core.family_defaults import FAMILY_DEFAULTS, VISION_DEFAULTS
from observatory.core.geometry import Geometry, parse_geometry

__all__ = ["BREAKDOWN_KEYS", "LANGUAGE_MODEL_ONLY", "WHOLE_CHECKPOINT", "ParameterEstimate", "estimate_parameters"]

WHOLE_CHECKPOINT = "whole checkpoint"
LANGUAGE_MODEL_ONLY = "language model only"
# Words of a section name that hold a tower of weights beside the language model (quantization_config,
# rope_scaling and the like hold settings, not weights).
VISION_WORDS = frozenset({"vision", "visual", "image", "vit", "siglip", "clip", "sam", "qformer", "perceiver",
                          "resampler", "projector", "connector", "mm", "tower", "video"})
AUDIO_WORDS = frozenset({"audio", "speech", "whisper"})
TOWER_WORDS = VISION_WORDS | AUDIO_WORDS | frozenset({"codec", "depth", "talker", "token2wav", "code2wav",
                                                      "vocoder", "vq"})
SHAPE_KEY_WORDS = frozenset({"hidden", "layers", "dim", "depth", "width", "heads", "embd"})

BREAKDOWN_KEYS = (
    "embeddings",  # input token embedding (also the output head when tied)
    "lm_head",  # untied output projection
    "position_embeddings",  # learned absolute positions (GPT-2, OPT)
    "attention",  # q/k/v/o projections, their biases, q/k norms, MLA down/up projections
    "linear_mixers",  # linear attention, short convolutions, Mamba blocks of hybrids
    "mlp",  # dense feed-forward layers
    "experts",  # routed experts, all of them
    "shared_experts",  # experts every token passes through
    "router",  # expert gates and their biases
    "norms",  # per-layer and final norms
    "pooler",  # encoder-only models: the pooler BertModel carries
    "mtp",  # multi-token-prediction layers shipped beside the decoder
    "vision",  # vision tower and projector of a multimodal wrapper (generic ViT estimate)
    "audio",  # audio encoder and projector (Qwen2-Audio's Whisper-style encoder)
)

VOCAB_KEYS = ("vocab_size", "padded_vocab_size", "n_vocab")
FFN_KEYS = ("intermediate_size", "ffn_hidden_size", "ffn_dim", "n_inner", "inner_hidden_size", "d_ff",
            "block_ff_dim", "dff")
EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
TOP_K_KEYS = ("num_experts_per_tok", "experts_per_token", "moe_top_k", "top_k", "top_k_experts")  # Gemma-4: top_k_experts
# Keys of architectures whose extra weights this module does not model (DeepSeek-V4 and kin).
# (DeepSeek-V4's attention, its compressors and indexer are modelled when its K = V rule applies.)
UNMODELLED = {"hc_mult": "hyper-connections", "o_lora_rank": "low-rank output projection",
              "index_n_heads": "sparse-attention indexer", "compress_ratios": "compressed attention",
              "num_hash_layers": "hash-routed layers"}
MODELLED_WITH_K_EQUALS_V = ("o_lora_rank", "index_n_heads", "compress_ratios", "num_hash_layers")
MTP_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "_num_mtp_layers")
# Guards against keys read as experts that size something else (product-key memories, PEER's single-neuron
# experts, a count of expert slots): a figure from them is wrong by orders of magnitude ("412B for a 55M
# model": 16,384 "experts" sized at the dense width 2,048 over 8 layers of width 512), so none is given.
# The largest mixtures the estimator sizes stay well inside both: Kimi-K3's 896 experts, its routed
# widths 384 times the model width.
MAX_EXPERTS = 4096  # Switch-C, the most experts of a published model, has 2,048
MAX_EXPERT_WIDTH_PER_HIDDEN = 2048  # experts x expert width, per unit of model width, in one layer


@dataclass(frozen=True)
class Family:
    """Conventions of one model family that the config does not spell out."""

    layer_norm: bool = False  # LayerNorm (weight + bias) rather than RMSNorm (weight)
    norms_per_layer: int = 2
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    gated: bool = True  # gate/up/down (SwiGLU, GeGLU) rather than fc1/fc2
    qk_norm: str | None = None  # "head": one head_dim vector each; "full": H*d and K*d vectors
    tied: bool = False  # tie_word_embeddings when the config does not say (FAMILY_DEFAULTS wins, see family())
    lm_head_bias: bool = False
    ffn_default_x4: bool = False  # no FFN width in the config means 4 * hidden
    # attention_bias: true adds a bias to q, k, v only (o stays bias-free) in these families
    bias_key_is_qkv_only: bool = False


LLAMA = Family()
FAMILIES: dict[str, Family] = {
    "gpt2": Family(layer_norm=True, qkv_bias=True, o_bias=True, mlp_bias=True, gated=False, tied=True,
                   ffn_default_x4=True),
    "gptj": Family(layer_norm=True, norms_per_layer=1, mlp_bias=True, gated=False, lm_head_bias=True,
                   ffn_default_x4=True),
    "codegen": Family(layer_norm=True, norms_per_layer=1, mlp_bias=True, gated=False, lm_head_bias=True,
                      ffn_default_x4=True),  # GPT-J's block: attention and MLP side by side after one LayerNorm
    "openai-gpt": Family(layer_norm=True, qkv_bias=True, o_bias=True, mlp_bias=True, gated=False, tied=True,
                         ffn_default_x4=True),
    "gpt_neo": Family(layer_norm=True, o_bias=True, mlp_bias=True, gated=False, tied=True, ffn_default_x4=True),
    "ctrl": Family(layer_norm=True, qkv_bias=True, o_bias=True, mlp_bias=True, gated=False, tied=True),
    "gpt_neox": Family(layer_norm=True, qkv_bias=True, o_bias=True, mlp_bias=True, gated=False),
    "opt": Family(layer_norm=True, qkv_bias=True, o_bias=True, mlp_bias=True, gated=False, tied=True),
    "phi": Family(layer_norm=True, norms_per_layer=1, qkv_bias=True, o_bias=True, mlp_bias=True, gated=False,
                  lm_head_bias=True, ffn_default_x4=True),
    "mixformer-sequential": Family(layer_norm=True, norms_per_layer=1, qkv_bias=True, o_bias=True, mlp_bias=True,
                                   gated=False, lm_head_bias=True, ffn_default_x4=True),
    # Falcon checkpoints store lm_head beside the embedding (transformers ties them at load);
    # the count follows the checkpoint, as the safetensors total does.
    "falcon": Family(layer_norm=True, gated=False, ffn_default_x4=True),
    "bloom": Family(layer_norm=True, qkv_bias=True, o_bias=True, mlp_bias=True, gated=False, tied=True,
                    ffn_default_x4=True),
    "gpt_bigcode": Family(layer_norm=True, qkv_bias=True, o_bias=True, mlp_bias=True, gated=False, tied=True,
                          ffn_default_x4=True),
    "starcoder2": Family(layer_norm=True, qkv_bias=True, o_bias=True, mlp_bias=True, gated=False, tied=True),
    "stablelm": Family(layer_norm=True),
    "stablelm_epoch": Family(layer_norm=True),
    "qwen2": Family(qkv_bias=True), "qwen2_moe": Family(qkv_bias=True),
    "qwen2_vl": Family(qkv_bias=True), "qwen2_5_vl": Family(qkv_bias=True),
    "mimo": Family(bias_key_is_qkv_only=True),
    "glm4_moe": Family(bias_key_is_qkv_only=True), "glm4": Family(bias_key_is_qkv_only=True),
    "qwen3": Family(qk_norm="head"), "qwen3_moe": Family(qk_norm="head"),
    "qwen3_vl_moe_text": Family(qk_norm="head"), "qwen3_vl_text": Family(qk_norm="head"),
    "qwen3_next": Family(qk_norm="head"), "qwen3_5_text": Family(qk_norm="head"),
    "qwen3_5_moe_text": Family(qk_norm="head"),
    "gemma": Family(tied=True), "gemma2": Family(norms_per_layer=4, tied=True),
    "gemma3_text": Family(norms_per_layer=4, qk_norm="head", tied=True),
    "olmo2": Family(qk_norm="full"), "olmo3": Family(qk_norm="full"),
    "exaone4": Family(qk_norm="head"), "exaone4_5_text": Family(qk_norm="head"),
    "lfm2": Family(qk_norm="head", tied=True),
    "granite": Family(), "granitemoe": Family(), "granitemoeshared": Family(),  # tying: transformers' default
    "gpt_oss": Family(qkv_bias=True, o_bias=True),
    "chatglm": Family(),
    "cohere": Family(tied=True), "cohere2": Family(tied=True), "smollm3": Family(tied=True),
    "lfm2_moe": Family(qk_norm="head", tied=True),
    "gemma4_text": Family(norms_per_layer=4, qk_norm="head", tied=True),
    "gemma3n_text": Family(norms_per_layer=4, qk_norm="head", tied=True),
    "mamba": Family(tied=True), "mamba2": Family(), "falcon_mamba": Family(tied=True),
    # Up/down MLPs (no gate): squared ReLU (Nemotron, Persimmon/Fuyu, Arcee), xIELU (Apertus), GELU (XGLM)
    "nemotron": Family(layer_norm=True, gated=False), "nemotron_h": Family(gated=False),
    "arcee": Family(gated=False), "apertus": Family(gated=False, qk_norm="head"),
    "persimmon": Family(layer_norm=True, qkv_bias=True, o_bias=True, mlp_bias=True, gated=False),
    "fuyu": Family(layer_norm=True, qkv_bias=True, o_bias=True, mlp_bias=True, gated=False),
    "xglm": Family(layer_norm=True, qkv_bias=True, o_bias=True, mlp_bias=True, gated=False, tied=True),
    # Encoders built like decoders: ModernBERT's LayerNorms lose their bias with norm_bias false; its
    # fused Wi is GeGLU (gated). EuroBERT is Llama-shaped.
    "modernbert": Family(layer_norm=True, tied=True), "eurobert": Family(),
}
# Where the count follows the checkpoints rather than transformers' class default, with the reason.
# Everywhere else a family's tying and gating are transformers' own (FAMILY_DEFAULTS, generated by
# observatory/oracle/family_defaults.py); tests/oracle/test_family_defaults.py holds this list to that table.
DIFFERS_FROM_TRANSFORMERS: dict[tuple[str, str], str] = {
    ("falcon", "tied"): "Falcon checkpoints store lm_head beside the embedding (transformers ties them at load);"
                        " the count follows the checkpoint, as the safetensors total does",
}


def family(name: str) -> Family:
    """The conventions of a family: FAMILIES' own, with tying and gating as transformers' classes default
    them unless DIFFERS_FROM_TRANSFORMERS names a reason not to."""
    row = FAMILY_DEFAULTS.get(name, {})
    known = {k: v for k, v in row.items() if v is not None and (name, k) not in DIFFERS_FROM_TRANSFORMERS}
    return replace(FAMILIES.get(name, LLAMA), **known)


# Pure state-space models: every block is a Mamba mixer, with no MLP beside it.
NO_MLP = frozenset({"mamba", "mamba2", "falcon_mamba"})
# Llama-shaped families (RMSNorm, SwiGLU, no biases unless the config says, untied unless it says).
for _name in ("llama", "llama4_text", "mistral", "mixtral", "ministral", "ministral3", "qwen", "internlm",
              "internlm2", "internlm3", "deepseek", "deepseek_v2", "deepseek_v3", "deepseek_v4", "kimi_k2", "yi",
              "phi3", "minicpm", "minicpmv", "olmo", "olmoe", "granitemoehybrid", "jamba",
              "minimax", "minimax_m2", "hunyuan", "baichuan", "exaone", "dbrx", "seed_oss",
              "ernie4_5", "ernie4_5_moe", "bailing_moe", "step3p5", "longcat_flash"):
    FAMILIES.setdefault(_name, LLAMA)
ENCODER_ONLY = frozenset({"bert", "roberta", "xlm-roberta", "camembert", "ernie"})
T5_FAMILIES = frozenset({"t5", "mt5", "umt5"})


@dataclass(frozen=True)
class ParameterEstimate:
    total: int
    active: int  # == total for a dense text-only model
    breakdown: Mapping[str, int] = field(default_factory=dict, hash=False)
    warnings: tuple[str, ...] = ()
    is_moe: bool = False
    counts_vision: bool = False  # the total includes a vision tower estimate
    # Sections of the checkpoint the total leaves out (a codec, a depth decoder, a vision or speech tower
    # this module has no shape for): with any, the figure covers the language model only.
    uncounted: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "breakdown", MappingProxyType(dict(self.breakdown)))

    @property
    def scope(self) -> str:
        return LANGUAGE_MODEL_ONLY if self.uncounted else WHOLE_CHECKPOINT

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "active": self.active, "breakdown": dict(self.breakdown),
                "warnings": list(self.warnings), "is_moe": self.is_moe, "counts_vision": self.counts_vision,
                "scope": self.scope, "uncounted": list(self.uncounted)}


class _Counter:
    """Reads the language-model section and adds up parameters per breakdown key."""

    def __init__(self, cfg: dict, geom: Geometry):
        self.cfg = cfg
        self.geom = geom
        self.warnings: list[str] = []
        self.sec: Section = select_section(cfg, [], {})
        self.family_name = self.sec.family or geom.model_type or ""
        # Falcon's first releases (remote code): RefinedWebModel is the 7B layout, RefinedWeb the 40B one,
        # which transformers' Falcon reads as new_decoder_architecture.
        if self.family_name in ("RefinedWeb", "RefinedWebModel"):
            self.family_name = "falcon"
        self.fam = family(self.family_name)
        self.parts: dict[str, int] = {}
        self.inactive = 0  # routed-expert weights a token does not use
        self.experts = 0

    # -- reading ------------------------------------------------------------------------------
    def int_of(self, keys: tuple[str, ...], *, lo: int = 1) -> int | None:
        for key in keys:
            value = get_path(self.sec.data, key)
            if value is not None:
                return to_int(value, self.sec.path(key), self.warnings, lo=lo)
        return None

    def flag(self, key: str, default: bool) -> bool:
        value = self.sec.flag(key)
        return default if value is None else value

    def add(self, part: str, n: int) -> None:
        if n:
            self.parts[part] = self.parts.get(part, 0) + n

    def norm(self, width: int) -> int:
        return width * (2 if self.layer_norm and self.flag("norm_bias", True) else 1)

    # -- the model ----------------------------------------------------------------------------
    def count(self) -> None:
        g, sec = self.geom, self.sec
        self.hidden = g.hidden_size
        if self.hidden is None:
            raise GeometryError(f"no hidden size (looked for {', '.join(WIDTH_KEYS)}); cannot count parameters")
        self.chatglm_v1 = self.family_name == "chatglm" and sec.raw("inner_hidden_size") is not None
        self.layer_norm = self.fam.layer_norm or self.chatglm_v1 or (
            self.family_name == "chatglm" and sec.flag("rmsnorm") is False)
        self.vocab = self.int_of(VOCAB_KEYS)
        if self.vocab is None:
            raise GeometryError(f"no vocabulary size (looked for {', '.join(VOCAB_KEYS)}); cannot count parameters")
        if self.family_name in ENCODER_ONLY:
            self._encoder_only()
            return
        if self.family_name in T5_FAMILIES:
            self._t5()
            return
        if self.geom.encoder_only:
            self._modern_encoder()
            return
        if self.cfg.get("is_encoder_decoder") is True:
            raise GeometryError(f"encoder-decoder family {self.family_name or 'unknown'} is not estimated")
        self._embeddings()
        unmodelled = [name for key, name in UNMODELLED.items() if self.sec.raw(key) is not None
                      and not (g.k_equals_v and key in MODELLED_WITH_K_EQUALS_V)]
        if unmodelled:
            self.warnings.append(f"not modelled: {', '.join(unmodelled)}; the count is approximate")
        kinds = list(g.layer_kinds)
        moe_layers = self._moe_layers(len(kinds))
        for i, kind in enumerate(kinds):
            self._layer(i, kind, i in moe_layers)
        self.add("norms", self.norm(self.hidden))  # the final norm
        self._per_layer_inputs()
        self._mtp(moe_layers)
        self._vision()
        self._audio()

    def _embeddings(self) -> None:
        h, sec = self.hidden, self.sec
        proj = self.int_of(("word_embed_proj_dim",)) if self.family_name == "opt" else None
        width = proj or h
        self.add("embeddings", self.vocab * width)
        if proj and proj != h:  # OPT-350m: project_in / project_out between embedding and model width
            self.add("embeddings", 2 * proj * h)
        tied = sec.flag("tie_word_embeddings")
        if tied is None:
            tied = self.cfg.get("tie_word_embeddings") if isinstance(self.cfg.get("tie_word_embeddings"), bool) \
                else None
        if tied is None:
            tied = self.fam.tied
            if self.family_name not in FAMILIES and self.family_name not in FAMILY_DEFAULTS:
                self.warnings.append(f"tie_word_embeddings not stated; assumed {'tied' if tied else 'untied'}")
        if not tied:
            self.add("lm_head", self.vocab * width + (self.vocab if self.fam.lm_head_bias else 0))
        positions = None
        if self.family_name in ("gpt2", "gpt_neo", "openai-gpt"):  # learned absolute positions
            positions = self.int_of(("n_positions", "max_position_embeddings"))
        elif self.family_name == "opt":
            # OPT's learned positions carry an offset of 2 rows
            positions = (self.int_of(("max_position_embeddings",)) or 2048) + 2
        if positions:
            self.add("position_embeddings", positions * h)
        if self.family_name == "bloom":  # word_embeddings_layernorm
            self.add("norms", self.norm(h))

    # -- one decoder layer --------------------------------------------------------------------
    def _layer(self, i: int, kind: str, moe: bool) -> None:
        h = self.hidden
        block_only = self.family_name == "nemotron_h"  # one job per block: mixer, attention, MLP or MoE
        if kind in ("full", "sliding", "chunked", "cross", "encoder") or (kind == "shared" and self.family_name == "gemma4_text"):
            self.add("attention", self._attention(i))
            if kind == "cross":
                self._note("cross-attention layers counted as self-attention layers")
        elif kind == "linear":
            self.add("linear_mixers", self._linear_attention())
        elif kind == "conv":
            self.add("linear_mixers", self._short_conv())
        elif kind == "mamba":
            self.add("linear_mixers", self._mamba())
        elif kind in ("recurrent", "other"):
            self._note(f"{kind} layers are not modelled; counted as their MLP only")
        if self.family_name in NO_MLP:
            self.add("norms", self.norm(h))
            return
        if block_only:
            self.add("norms", self.norm(h))
            if kind == "mlp":
                self._ffn(moe)
            return
        norms = self.fam.norms_per_layer
        if self.family_name == "falcon":
            norms = self._falcon_norms()
        self.add("norms", norms * self.norm(h))
        self._ffn(moe, wide=self._double_wide(i))

    def _falcon_norms(self) -> int:
        if self.sec.flag("new_decoder_architecture") or self.geom.model_type == "RefinedWeb":
            return self.int_of(("num_ln_in_parallel_attn",)) or 2
        return 1 if self.flag("parallel_attn", True) else 2

    def _note(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def _attention(self, i: int) -> int:
        g, h = self.geom, self.hidden
        if g.mla is not None:
            return self._mla()
        if g.k_equals_v:
            return self._shared_kv_attention(i)
        if self.family_name == "gemma4_text":
            return self._gemma4_attention(i)
        heads = g.query_heads_per_layer[i] if g.query_heads_per_layer else g.num_query_heads
        kv = g.kv_heads_per_layer[i] if g.kv_heads_per_layer else g.num_kv_heads
        d, vd = g.head_dim, g.v_head_dim or g.head_dim
        q, k, v, o = heads * d, kv * d, kv * vd, heads * vd
        if self.family_name == "qwen":  # Qwen-1: kv_channels * heads == hidden, fused c_attn
            q = k = v = o = h
        gate = q if self.flag("attn_output_gate", False) else 0  # Qwen3-Next/3.5 gate the output per head
        n = h * (q + gate + k + v) + o * h
        qkv_bias, o_bias = self._attention_bias()
        n += (q + gate + k + v) * qkv_bias + h * o_bias
        if self.fam.qk_norm == "head" or (self.family_name == "glm4_moe" and self.flag("use_qk_norm", False)):
            n += 2 * d
        elif self.fam.qk_norm == "full":
            n += q + k
        if self.family_name == "gpt_oss":
            n += heads  # attention sinks: one learned logit per head
        return n

    def _gemma4_attention(self, i: int) -> int:
        """Gemma-4 (``Gemma4TextAttention``): full layers size q/k/o at ``global_head_dim`` and, with
        ``attention_k_eq_v``, keep no v projection (K serves as V); the last ``num_kv_shared_layers``
        layers reuse an earlier layer's cache and hold only q, its norm and o. q and k carry a norm of
        one head dim each (the v norm has no weight)."""
        g, h = self.geom, self.hidden
        heads = g.num_query_heads
        types = self.sec.raw("layer_types")
        # The geometry marks KV-shared layers "shared"; their weights follow the declared layer type.
        full = (types[i] == "full_attention" if isinstance(types, list) and i < len(types)
                else g.layer_kinds[i] == "full")
        d = (self.int_of(("global_head_dim",)) or g.head_dim) if full else g.head_dim
        kv = g.kv_heads_per_layer[i] if g.kv_heads_per_layer else g.num_kv_heads
        bias = self.flag("attention_bias", False)
        n = (h + bias) * heads * d + d + heads * d * h + bias * h  # q, q_norm, o
        if g.layer_kinds[i] != "shared":
            k_eq_v = self.flag("attention_k_eq_v", False) and full
            n += (1 if k_eq_v else 2) * (h + bias) * kv * d + d  # k (and v), k_norm
        return n

    def _shared_kv_attention(self, i: int) -> int:
        """DeepSeek-V4 (``DeepseekV4Attention``): low-rank queries, one K = V projection, a grouped low-rank
        output projection, one sink per head; compressed layers add a compressor (``compress_ratios``
        4: CSA, with its Lightning indexer; 128: HCA)."""
        g, h = self.geom, self.hidden
        heads, d = g.num_query_heads, g.head_dim
        q_rank = self.int_of(("q_lora_rank",)) or 0
        o_rank, groups = self.int_of(("o_lora_rank",)), self.int_of(("o_groups",))
        q = h * q_rank + q_rank + q_rank * heads * d if q_rank else h * heads * d
        o = o_rank * heads * d + groups * o_rank * h if o_rank and groups else heads * d * h
        n = q + h * d + d + o + heads
        ratios = self.sec.raw("compress_ratios")
        ratio = ratios[i] if isinstance(ratios, list) and i < len(ratios) else 0
        if ratio == 4:  # CSA: overlapping windows (2d wide) and the indexer that picks them
            n += 2 * (h * 2 * d) + ratio * 2 * d + d
            idx_heads, idx_d = self.int_of(("index_n_heads",)) or 0, self.int_of(("index_head_dim",)) or 0
            n += 2 * (h * 2 * idx_d) + ratio * 2 * idx_d + idx_d + q_rank * idx_heads * idx_d + h * idx_heads
        elif isinstance(ratio, int) and not isinstance(ratio, bool) and ratio > 0:  # HCA: disjoint windows
            n += 2 * (h * d) + ratio * d + d
        return n

    def _attention_bias(self) -> tuple[bool, bool]:
        sec, fam = self.sec, self.fam
        if self.family_name == "chatglm":
            if self.chatglm_v1:
                return True, True
            linear = self.flag("add_bias_linear", False)
            return self.flag("add_qkv_bias", False) or linear, linear
        if self.family_name == "qwen":
            return True, not self.flag("no_bias", True)
        if self.family_name in ("falcon", "internlm"):
            bias = self.flag("bias", self.family_name == "internlm")
            return bias, bias
        if self.family_name in ("stablelm", "stablelm_epoch"):
            return self.flag("use_qkv_bias", False), False
        if sec.raw("attention_bias") is not None:
            bias = self.flag("attention_bias", False)
            return bias, bias and not fam.bias_key_is_qkv_only
        return fam.qkv_bias, fam.o_bias

    def _mla(self) -> int:
        """DeepSeek-V2/V3 multi-head latent attention: low-rank q and kv with their norms."""
        g, h, m = self.geom, self.hidden, self.geom.mla
        heads = g.num_query_heads
        rope = m.qk_rope_head_dim
        nope = m.qk_nope_head_dim if m.qk_nope_head_dim is not None else g.head_dim - rope
        v = m.v_head_dim or nope
        qk = heads * (nope + rope)
        q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * qk if m.q_lora_rank else h * qk
        kv = h * (m.kv_lora_rank + rope) + m.kv_lora_rank + m.kv_lora_rank * heads * (nope + v)
        n = q + kv + heads * v * h
        if self.flag("attention_bias", False):
            n += (m.q_lora_rank or qk) + m.kv_lora_rank + rope + h
        return n

    def _linear_attention(self) -> int:
        """Gated DeltaNet (Qwen3-Next, Qwen3.5); other linear attention as a generic q/k/v/gate/o block."""
        h = self.hidden
        kh, kd = self.int_of(("linear_num_key_heads",)), self.int_of(("linear_key_head_dim",))
        vh, vd = self.int_of(("linear_num_value_heads",)), self.int_of(("linear_value_head_dim",))
        if None not in (kh, kd, vh, vd):
            key, value = kh * kd, vh * vd
            kernel = self.int_of(("linear_conv_kernel_dim",)) or 4
            return (h * (2 * key + 2 * value)  # q, k, v and the output gate z
                    + h * 2 * vh  # beta and alpha
                    + (2 * key + value) * kernel  # depthwise causal conv over q, k, v
                    + 2 * vh  # dt_bias, A_log
                    + vd  # gated RMSNorm
                    + value * h)
        # MiniMax lightning attention: fused qkv, an output gate, a norm, the output projection
        self._note("linear-attention layers estimated as q/k/v + output gate + norm + output projection")
        inner = self.geom.num_query_heads * self.geom.head_dim
        return h * 3 * inner + h * inner + inner + inner * h

    def _short_conv(self) -> int:
        """LFM2 short convolution: in_proj to 3 * hidden, a depthwise conv, out_proj."""
        h = self.hidden
        kernel = self.int_of(("conv_L_cache",)) or 3
        bias = self.flag("conv_bias", False)
        return h * 3 * h + 3 * h * bias + h * kernel + h * h + h * bias

    def _mamba(self) -> int:
        """Mamba-2 when a head count is given, else Mamba-1; approximate either way."""
        h = self.hidden
        expand = self.int_of(("mamba_expand", "expand")) or 2
        # transformers' Mamba configs keep a stated intermediate_size over expand * hidden (Falcon-Mamba
        # states expand 16 beside intermediate_size 8,192); in hybrids that key is the MLP's width.
        stated = self.int_of(("intermediate_size",)) if self.family_name in NO_MLP else None
        inner = self.int_of(("mamba_d_inner",)) or stated or expand * h
        state = self.int_of(("mamba_d_state", "ssm_state_size", "state_size", "d_state")) or 16
        conv = self.int_of(("mamba_d_conv", "conv_kernel", "d_conv")) or 4
        heads = self.int_of(("mamba_n_heads", "mamba_num_heads"))
        self._note("Mamba layers estimated from the standard block shapes; approximate")
        if heads:
            groups = self.int_of(("mamba_n_groups", "n_groups")) or 1
            conv_dim = inner + 2 * groups * state
            return h * (2 * inner + 2 * groups * state + heads) + conv_dim * (conv + 1) + 3 * heads + inner + inner * h
        rank = self.int_of(("mamba_dt_rank", "time_step_rank", "dt_rank")) or -(-h // 16)
        return (h * 2 * inner + inner * (conv + 1) + inner * (rank + 2 * state) + rank * inner + inner
                + inner * state + inner + inner * h)

    # -- feed-forward -------------------------------------------------------------------------
    def _ffn_width(self) -> int:
        name = self.family_name
        if name == "llama4_text":
            width = self.int_of(("intermediate_size_mlp", "intermediate_size"))
        elif name == "lfm2":
            return self._lfm2_ffn()
        else:
            width = self.int_of(FFN_KEYS)
        if width is None:
            if not self.fam.ffn_default_x4:
                raise GeometryError(f"no feed-forward width (looked for {', '.join(FFN_KEYS)});"
                                    " cannot count parameters")
            width = 4 * self.hidden
        if name == "qwen":  # Qwen-1 writes twice the width of each of its two up projections
            width //= 2
        return width

    def _lfm2_ffn(self) -> int:
        width = self.int_of(("block_ff_dim", "intermediate_size"))
        if self.flag("block_auto_adjust_ff_dim", False):  # LFM2 shrinks the declared width like LLaMA-1 did
            width = int(2 * width / 3)
            multiplier = self.sec.raw("block_ffn_dim_multiplier")
            if isinstance(multiplier, (int, float)) and not isinstance(multiplier, bool):
                width = int(multiplier * width)
            multiple = self.int_of(("block_multiple_of",)) or 256
            width = multiple * -(-width // multiple)
        return width

    def _dense_mlp(self, width: int) -> int:
        h, fam = self.hidden, self.fam
        if self.chatglm_v1:
            return 2 * h * width + width + h
        gated = fam.gated
        if self.family_name == "falcon" or (self.family_name == "chatglm"):
            gated = self.family_name == "chatglm"
        bias = fam.mlp_bias or self.flag("mlp_bias", False) or (
            self.family_name == "chatglm" and self.flag("add_bias_linear", False)) or (
            self.family_name == "falcon" and self.flag("bias", False))
        if gated:
            return 3 * h * width + bias * (2 * width + h)
        return 2 * h * width + bias * (width + h)

    def _double_wide(self, i: int) -> bool:
        """Gemma-3n/4 E-series: the KV-shared last layers carry an MLP of twice the width."""
        shared = self.int_of(("num_kv_shared_layers",), lo=0) or 0
        return bool(shared) and self.flag("use_double_wide_mlp", False) and i >= len(self.geom.layer_kinds) - shared

    def _per_layer_inputs(self) -> None:
        """Gemma-3n/4 E-series per-layer inputs: a second embedding table giving every layer its own
        slice of ``hidden_size_per_layer_input``, projected from the hidden state too, and gated
        into each layer (most of an E-model's parameters: 2.35 B of Gemma-4 E2B's 4.6 B)."""
        width = self.int_of(("hidden_size_per_layer_input",), lo=0)  # 0 in the dense Gemma-4 models
        if not width:
            return
        h, layers = self.hidden, len(self.geom.layer_kinds)
        vocab = self.int_of(("vocab_size_per_layer_input",)) or self.vocab
        self.add("embeddings", vocab * layers * width)
        self.add("linear_mixers", h * layers * width + layers * 2 * h * width)  # model projection; gate + projection
        self.add("norms", width + layers * h)

    def _ffn(self, moe: bool, wide: bool = False) -> None:
        if not moe:
            self.add("mlp", self._dense_mlp(self._ffn_width() * (2 if wide else 1)))
            return
        h = self.hidden
        if self.family_name == "gemma4_text":
            # Gemma-4's MoE block runs beside the dense MLP, not instead of it (Gemma4TextDecoderLayer:
            # mlp, router, experts, three more norms); its router holds a scale per width and per expert.
            self.add("mlp", self._dense_mlp(self._ffn_width()))
            self.add("norms", 3 * h)
            self.add("router", h + self.experts)
        experts, top_k, width = self.experts, self.top_k, self.expert_width
        gpt_oss = self.family_name == "gpt_oss"
        projections = 3 if self.fam.gated else 2
        latent = self.int_of(("moe_latent_size",))  # Nemotron 3: experts work in a narrower latent
        one = projections * (latent or h) * width + (2 * width + h if gpt_oss else 0)
        self.add("experts", experts * one + (2 * h * latent if latent else 0))
        self.inactive += (experts - top_k) * one
        router = h * experts
        if gpt_oss:
            router += experts
        if self.sec.raw("topk_method") == "noaux_tc" or self.family_name in ("glm4_moe", "deepseek_v4"):
            router += experts  # e_score_correction_bias
        self.add("router", router)
        shared = self.shared_width
        if shared:
            self.add("shared_experts", projections * h * shared + (h if self.shared_gate else 0))

    def _guard_experts(self, experts: int, width: int) -> None:
        """Refuse (no figure rather than a wrong one) when the expert count or the experts' combined width
        is beyond what any mixture of this model's width holds."""
        if experts > MAX_EXPERTS:
            raise GeometryError(f"{experts:,} experts is more than any published mixture holds (at most"
                                f" {MAX_EXPERTS:,} sized); the key does not count experts of an MLP's shape")
        if experts * width > MAX_EXPERT_WIDTH_PER_HIDDEN * self.hidden:
            raise GeometryError(f"{experts:,} experts of width {width:,} would hold"
                                f" {experts * width // self.hidden:,}x the model width {self.hidden:,} per layer"
                                f" (at most {MAX_EXPERT_WIDTH_PER_HIDDEN:,}x sized); the expert keys do not"
                                " describe experts of an MLP's shape")

    def _moe_layers(self, n_layers: int) -> set[int]:
        """Which layers route to experts, and the expert shapes; empty for a dense model."""
        sec = self.sec
        # Granite 4.0-H's dense models state num_local_experts: 0
        experts = self.int_of(EXPERT_COUNT_KEYS, lo=0) or self.int_of(("ffn_config.moe_num_experts",))
        if not experts or experts < 2:
            self.experts = 0
            return set()
        self.experts = experts
        self.top_k = self.int_of(TOP_K_KEYS) or self.int_of(("ffn_config.moe_top_k",))
        if self.top_k is None:
            raise GeometryError(f"{experts} experts but no experts-per-token count (looked for"
                                f" {', '.join(TOP_K_KEYS)}); cannot count active parameters")
        if self.top_k > experts:
            raise GeometryError(f"{self.top_k} experts per token exceeds the {experts} experts")
        width = self.int_of(("moe_intermediate_size", "expert_intermediate_size", "ffn_config.ffn_hidden_size"))
        if width is None:
            width = self.int_of(("intermediate_size",))
        if width is None:
            raise GeometryError("mixture-of-experts config without an expert width (moe_intermediate_size or"
                                " intermediate_size)")
        self.expert_width = width
        self._guard_experts(experts, width)
        shared_count = self.int_of(("n_shared_experts", "num_shared_experts"), lo=0) or 0
        self.shared_gate = False
        if sec.raw("shared_expert_intermediate_size") is not None:
            self.shared_width = self.int_of(("shared_expert_intermediate_size",), lo=0) or 0
            self.shared_gate = True  # Qwen2-MoE / Qwen3.5: a sigmoid gate scales the shared expert
        elif sec.raw("shared_intermediate_size") is not None:  # GraniteMoeShared
            self.shared_width = self.int_of(("shared_intermediate_size",), lo=0) or 0
        elif sec.raw("moe_shared_expert_intermediate_size") is not None:  # NemotronH
            self.shared_width = self.int_of(("moe_shared_expert_intermediate_size",), lo=0) or 0
        elif self.family_name == "llama4_text":
            self.shared_width = width  # one shared expert of the routed width
        else:
            self.shared_width = shared_count * width
        pattern = sec.raw("hybrid_override_pattern")
        if isinstance(pattern, str):  # NemotronH: "E" blocks are the MoE ones
            return {i for i, c in enumerate(pattern[:n_layers]) if c == "E"}
        blocks = sec.raw("layers_block_type")
        if self.family_name == "nemotron_h" and isinstance(blocks, list):  # the same, spelt out
            return {i for i, b in enumerate(blocks[:n_layers]) if b == "moe"}
        moe_list = sec.raw("moe_layers")
        if isinstance(moe_list, list) and moe_list:
            return {to_int(v, f"{sec.path('moe_layers')}[{j}]", self.warnings, lo=0) for j, v in enumerate(moe_list)}
        period = self.int_of(("expert_layer_period",), lo=1)
        if period:  # Jamba: every expert_layer_period-th layer from expert_layer_offset routes to experts
            offset = self.int_of(("expert_layer_offset",), lo=0) or 0
            return {i for i in range(n_layers) if i % period == offset}
        flags = sec.raw("moe_layer_freq")
        if isinstance(flags, list):  # MiniMax-M3: one 0/1 flag per layer
            return {i for i, flag in enumerate(flags[:n_layers]) if flag}
        # DeepSeek: dense before first_k_dense_replace, then every moe_layer_freq-th layer;
        # Qwen-MoE: every decoder_sparse_step-th layer but mlp_only_layers; Llama 4 likewise.
        first = self.int_of(("first_k_dense_replace", "num_dense_layers"), lo=0) or 0  # LFM2-MoE: num_dense_layers
        freq = self.int_of(("moe_layer_freq",)) or 1
        step = self.int_of(("decoder_sparse_step", "interleave_moe_layer_step")) or 1
        layers = {i for i in range(n_layers) if i >= first and i % freq == 0 and (i + 1) % step == 0}
        dense = sec.raw("mlp_only_layers")
        if isinstance(dense, list):
            layers -= {v for v in dense if isinstance(v, int) and not isinstance(v, bool)}
        return layers

    # -- encoders -----------------------------------------------------------------------------
    def _encoder_only(self) -> None:
        """BERT and its kin as BertModel holds them: embeddings (word, position, token type, a
        LayerNorm), post-norm layers with biases everywhere, and the pooler. Task heads (MLM,
        classifier) vary by checkpoint and are not counted."""
        h, g = self.hidden, self.geom
        width = self._ffn_width()
        positions = self.int_of(("max_position_embeddings",)) or 512
        types = self.int_of(("type_vocab_size",), lo=0)
        self.add("embeddings", self.vocab * h)
        self.add("position_embeddings", positions * h + (2 if types is None else types) * h)
        self.add("norms", 2 * h)
        self.add("attention", g.num_layers * (4 * h * h + 4 * h))
        self.add("mlp", g.num_layers * (2 * h * width + width + h))
        self.add("norms", g.num_layers * 4 * h)
        self.add("pooler", h * h + h)
        self.warnings.append("encoder-only model: the pooler is counted, task heads (MLM, classifier) are not")

    def _modern_encoder(self) -> None:
        """Encoder-only models built like decoders (ModernBERT, EuroBERT and kin): a token embedding,
        attention and MLP layers counted as a decoder's are, and no position table (RoPE). As for BERT,
        the task heads (MLM decoder, classifier) vary by checkpoint and are not counted, so neither is an
        output head: EuroBERT's untied MLM head once added a third to its count."""
        h = self.hidden
        self.add("embeddings", self.vocab * h)
        if self.family_name == "modernbert":
            self.add("norms", self.norm(h))  # the embedding LayerNorm
        for i, kind in enumerate(self.geom.layer_kinds):
            self._layer(i, kind, False)
        if self.family_name == "modernbert":
            self.add("norms", -self.norm(h))  # layer 0 has no attention norm (nn.Identity)
        self.add("norms", self.norm(h))  # the final norm
        self.warnings.append("encoder-only model: task heads (MLM, classifier) are not counted")

    def _t5(self) -> None:
        """T5: a shared embedding, an encoder and a decoder of RMS-normed layers without biases,
        relative-position buckets per head (in the first layer, or every layer for umT5)."""
        h, g = self.hidden, self.geom
        heads = g.num_query_heads
        inner = heads * (self.int_of(("d_kv",)) or g.head_dim)
        width = self._ffn_width()
        proj = str(self.sec.raw("feed_forward_proj") or "relu")
        ffn = (3 if proj.startswith("gated") else 2) * h * width
        buckets = (self.int_of(("relative_attention_num_buckets",)) or 32) * heads
        encoder = self.int_of(("num_layers",)) or g.num_layers  # the geometry's depth is the decoder's
        decoder = self.int_of(("num_decoder_layers",)) or encoder
        bias_tables = encoder + decoder if self.family_name == "umt5" else 2
        self.add("embeddings", self.vocab * h)
        if not self.flag("tie_word_embeddings", True):
            self.add("lm_head", self.vocab * h)
        attention = 4 * h * inner  # q, k, v, o; decoder layers add cross-attention of the same shape
        self.add("attention", encoder * attention + decoder * 2 * attention + bias_tables * buckets)
        self.add("mlp", (encoder + decoder) * ffn)
        self.add("norms", (encoder * 2 + decoder * 3 + 2) * h)

    # -- outside the decoder ------------------------------------------------------------------
    def _mtp(self, moe_layers: set[int]) -> None:
        """Multi-token-prediction layers: one more decoder layer each plus the projection joining
        the embedding and the hidden state; DeepSeek-V3 also ships copies of embedding and head."""
        n = self.int_of(MTP_KEYS, lo=0)
        if not n:
            return
        # Count n more attention layers (MoE if the model has any) the usual way, then move them
        # from their parts into "mtp": they do not run for the main token.
        before, inactive = dict(self.parts), self.inactive
        for _ in range(n):
            self._layer(len(self.geom.layer_kinds) - 1, "full", bool(moe_layers))
        layers = sum(self.parts.values()) - sum(before.values())
        self.parts, self.inactive = before, inactive
        h = self.hidden
        extra = layers + n * (2 * h * h + 3 * self.norm(h))  # eh_proj and the embedding/hidden/final norms
        if self.family_name in ("deepseek_v3", "kimi_k2"):
            extra += n * 2 * self.vocab * h
        self.add("mtp", extra)

    def _vision(self) -> None:
        vision = self.cfg.get("vision_config")
        if not isinstance(vision, dict) or not vision:
            if any(self.cfg.get(k) for k in ("vision_encoder", "vision_tower", "mm_vision_tower", "visual")):
                self.warnings.append("vision encoder named but not described; the total counts the language"
                                     " model only")
            return
        try:
            try:
                n = _vision_tower(vision, self.hidden, self.cfg)
            except GeometryError:
                # The checkpoint leaves the tower's sizes to its config class (SmolVLM, Qwen2.5-VL, Pixtral):
                # fill what it leaves out with that class's defaults, as transformers does when it builds it.
                defaults = VISION_DEFAULTS.get(str(vision.get("model_type") or "")) or VISION_DEFAULTS.get(
                    str(self.cfg.get("model_type") or ""))
                if not defaults:
                    raise
                n = _vision_tower({**defaults, **vision}, self.hidden, self.cfg)
                self.warnings.append("vision tower sized partly from its config class's defaults"
                                     f" ({defaults['model_type']})")
        except GeometryError as exc:
            self.warnings.append(f"vision tower not counted: {exc}")
            return
        self.add("vision", n)
        self.warnings.append("vision tower and projector estimated from vision_config as a generic ViT;"
                             " approximate")

    def _audio(self) -> None:
        audio = self.cfg.get("audio_config")
        if isinstance(audio, dict) and audio.get("model_type") == "qwen2_audio_encoder":
            self.add("audio", _whisper_encoder(audio, self.hidden))


def _whisper_encoder(audio: dict, text: int) -> int:
    """Qwen2-Audio's encoder, Whisper's: two convolutions over the mel bins, a position table, pre-norm
    blocks (q, v and out projections biased, k not), a final norm, and a linear projector into the
    language model's width. Exact: transformers builds the same tensors."""
    w: list[str] = []
    d = to_int(audio.get("d_model", 1280), "audio_config.d_model", w)
    layers = to_int(audio.get("encoder_layers", 32), "audio_config.encoder_layers", w)
    ffn = to_int(audio.get("encoder_ffn_dim", 5120), "audio_config.encoder_ffn_dim", w)
    mels = to_int(audio.get("num_mel_bins", 128), "audio_config.num_mel_bins", w)
    positions = to_int(audio.get("max_source_positions", 1500), "audio_config.max_source_positions", w)
    convs = (mels * d * 3 + d) + (d * d * 3 + d)
    block = (4 * d * d + 3 * d) + (d * ffn + ffn) + (ffn * d + d) + 2 * (2 * d)
    return convs + positions * d + layers * block + 2 * d + (d * text + text)


def _vision_tower(vision: dict, text: int, cfg: dict) -> int:
    """A ViT from its vision_config (blocks, patch embedding, position table, final norm) plus the
    projector of the wrapper family into the language model's width. Good to a few percent of the
    tower, which is itself a few percent of the model."""
    w: list[str] = []

    def first(source: dict, keys: tuple[str, ...]) -> int | None:
        for key in keys:
            if source.get(key) is not None and not isinstance(source.get(key), (dict, list)):
                return to_int(source[key], f"vision_config.{key}", w)
        return None

    width = first(vision, ("hidden_size", "embed_dim", "width", "d_model"))
    depth = first(vision, ("num_hidden_layers", "depth", "layers", "num_layers"))
    if width is None or depth is None:
        raise GeometryError("vision_config has no width or depth")
    ffn = first(vision, ("intermediate_size", "mlp_dim", "ffn_dim")) or 4 * width
    heads = first(vision, ("num_attention_heads", "num_heads")) or 1
    kv_width = width * (first(vision, ("num_key_value_heads",)) or heads) // heads
    kind, wrapper = str(vision.get("model_type") or ""), str(cfg.get("model_type") or "")
    bias = kind != "pixtral"  # Pixtral's blocks have no biases
    gated = kind == "pixtral" or vision.get("hidden_act") == "silu"  # Qwen2.5-VL, EXAONE-4.5
    attention = width * (2 * width + 2 * kv_width) + bias * (2 * width + 2 * kv_width)
    mlp = (3 if gated else 2) * width * ffn + bias * ((2 if gated else 1) * ffn + width)
    n = depth * (attention + mlp + 4 * width)  # two norms per block
    patch = first(vision, ("patch_size", "spatial_patch_size")) or 14
    frames = first(vision, ("temporal_patch_size",)) or 1
    channels = first(vision, ("num_channels", "in_channels", "in_chans")) or 3
    n += channels * frames * patch * patch * width + bias * width + 2 * width
    positions = first(vision, ("num_position_embeddings", "num_patches"))
    image = first(vision, ("image_size",))
    if positions is None and image and kind.startswith(("siglip", "clip", "llama4")):
        positions = (image // patch) ** 2 + kind.startswith(("llama4", "clip"))
    n += (positions or 0) * width
    merge = first(vision, ("spatial_merge_size",)) or first(cfg, ("spatial_merge_size", "downsample_factor"))
    ratio = vision.get("pixel_shuffle_ratio")
    if merge is None and isinstance(ratio, float) and 0 < ratio < 1:
        merge = round(1 / ratio)
    merged = width * (merge or 1) ** 2
    return n + _projector(vision, cfg, wrapper, width, merged, text, first)


def _projector(vision: dict, cfg: dict, wrapper: str, width: int, merged: int, text: int, first) -> int:
    out = first(vision, ("out_hidden_size",))
    if out is not None:  # Qwen-VL mergers (plus one per deepstack layer in Qwen3-VL)
        stacks = vision.get("deepstack_visual_indexes")
        mergers = 1 + (len(stacks) if isinstance(stacks, list) else 0)
        return mergers * (merged * merged + merged + merged * out + out + 2 * width) + (out != text) * out * text
    if wrapper.startswith("gemma3"):  # one projection matrix and a soft-embedding norm
        return width * text + width
    if wrapper == "mistral3":  # patch merger, then a two-layer MLP
        return width + merged * width + width * text + text * text
    if wrapper == "lfm2_vl":
        hidden = first(cfg, ("projector_hidden_size",)) or text
        return merged * hidden + hidden + hidden * text + text
    hidden = first(vision, ("projector_input_dim", "vision_output_dim")) or text
    return merged * hidden + hidden * hidden + hidden * text


def estimate_parameters(cfg: Any) -> ParameterEstimate:
    """Estimate total and active parameters of the model a parsed config.json describes."""
    if not isinstance(cfg, dict):
        raise ConfigError(f"config must be a JSON object, got {type(cfg).__name__}")
    geom = parse_geometry(cfg)
    if geom.attention_kind == "none" and not geom.is_hybrid and not any(
            k == "mamba" for k in geom.layer_kinds):
        raise GeometryError(f"no parameter estimate for {geom.model_type or 'this'} recurrent architecture")
    counter = _Counter(cfg, geom)
    counter.count()
    parts = {k: counter.parts[k] for k in BREAKDOWN_KEYS if counter.parts.get(k)}
    total = sum(parts.values())
    active = total - counter.inactive - parts.get("mtp", 0) - parts.get("vision", 0) - parts.get("audio", 0)
    return ParameterEstimate(total=total, active=active, breakdown=parts, warnings=tuple(counter.warnings),
                             is_moe=bool(counter.experts), counts_vision="vision" in parts,
                             uncounted=uncounted_towers(cfg, parts))


def uncounted_towers(cfg: dict, parts: Mapping[str, int]) -> tuple[str, ...]:
    """Top-level sections that hold weights of their own (a tower, a codec, a depth decoder) and that
    the breakdown has no part for. Vision sections are counted when "vision" is; audio and speech
    ones when "audio" is."""
    out = []
    for key, value in cfg.items():
        if not isinstance(key, str) or not isinstance(value, dict):
            continue
        words = set(key.lower().replace("-", "_").split("_"))
        shaped = any(isinstance(v, dict) or (isinstance(k, str) and SHAPE_KEY_WORDS & set(k.lower().split("_")))
                     for k, v in value.items())  # widths or depths, or sub-sections (token2wav's DiT and vocoder)
        if not words & TOWER_WORDS or not shaped:
            continue  # a settings table (Aria's projector_patch_to_query_dict maps sizes to counts), no tower
        counted = ("vision" in parts and words & VISION_WORDS) or ("audio" in parts and words & AUDIO_WORDS)
        if not counted:
            out.append(key)
    return tuple(sorted(out))

