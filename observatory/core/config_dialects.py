"""How real ``config.json`` files spell attention geometry: key names, family defaults, layer schedules.

``geometry.py`` decides what a config means; this module only knows where each value may be
written and how to read it safely. Everything here is pure.
"""

from __future__ import annotations

import json
import math
from typing import Any


class ConfigError(ValueError):
    """A config.json that cannot be read at all (not JSON, not an object)."""


class GeometryError(ConfigError):
    """A config from which no trustworthy attention geometry can be derived."""


# Spellings, most common first. The first key holding a non-null value wins.
# "attention_heads": XGLM; "attn_cfg.*": the mamba_ssm package's config.json (Mamba-2 with attention layers).
HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "num_heads", "num_query_heads", "attention_heads",
             "attn_cfg.num_heads")
KV_HEAD_KEYS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "n_kv_heads", "n_local_heads",
                "attn_cfg.num_heads_kv")
LAYER_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "num_transformer_layers")
WIDTH_KEYS = ("hidden_size", "n_embd", "n_embed", "d_model", "model_dim", "dim")
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "seq_length", "max_sequence_length")
# T5 spells the per-head width d_kv, NemotronH attention_head_dim
HEAD_DIM_KEYS = ("head_dim", "d_kv", "attention_head_dim", "attn_cfg.head_dim")

# Flat encoder-decoder configs (T5, BART, Whisper, Marian, NLLB) describe both stacks at the top
# level; the decoder is the one that caches per generated token. num_hidden_layers there is the
# encoder's depth (BART's attribute map), so it is never read for the decoder.
# Moonshine prefixes the Llama spellings instead: decoder_num_hidden_layers, decoder_num_attention_heads,
# decoder_num_key_value_heads (and encoder_num_* for the encoder).
DECODER_LAYER_KEYS = ("decoder_layers", "num_decoder_layers", "decoder_num_hidden_layers")
DECODER_HEAD_KEYS = ("decoder_attention_heads", "decoder_num_attention_heads", "num_heads")
DECODER_KV_HEAD_KEYS = ("decoder_num_key_value_heads",)
DECODER_CONTEXT_KEYS = ("max_target_positions", "n_positions", "max_position_embeddings")
ENCODER_LAYER_KEYS = ("encoder_layers", "encoder_num_hidden_layers", "num_layers", "num_hidden_layers")
# Cross-attention declared apart from self-attention (Dia's decoder_config): its KV heads and head dim.
CROSS_KV_HEAD_KEYS = ("cross_num_key_value_heads",)
CROSS_HEAD_DIM_KEYS = ("cross_head_dim",)
# Per-layer schedules whose length is the layer count when no layer key is given (NemotronH).
LAYER_LIST_KEYS = ("layer_types", "layers_block_type", "block_types", "hybrid_override_pattern", "attn_type_list")

# Where wrappers keep the language model: any object-valued key (or one level below one, as in
# thinker_config.text_config) is a candidate unless a word of its name says it is an encoder or
# a projector. Names with a language-model word are preferred, then "decoder", then any other.
# "depth" and "codec" are not encoders but are never the language model either: an audio model's depth
# decoder (CSM's depth_decoder_config) restarts its small cache every frame, while the backbone's cache
# grows with the sequence; a codec (Mimi) turns audio into tokens.
ENCODER_SECTION_WORDS = frozenset({
    "vision", "visual", "image", "audio", "speech", "encoder", "vit", "qformer", "eva", "projector",
    "perceiver", "connector", "mm", "siglip", "clip", "sam", "resampler", "tower", "quantization", "rope",
    "depth", "codec"})
LM_SECTION_WORDS = frozenset({"text", "llm", "language", "lm", "thinker"})
MAX_SECTION_DEPTH = 2

MAX_COUNT = 1 << 20  # heads, layers and widths of real models are far below this
MAX_TOKENS = 1 << 40  # windows and context lengths
MAX_SHOWN = 40  # characters of a bad value quoted in a message

# transformers drops sub-config values equal to the class defaults when it saves a wrapper
# (LLaVA's text_config is just {"model_type": "llama", ...}); these are the defaults it then loads.
FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32},
    "mistral": {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32,
                "num_key_value_heads": 8, "sliding_window": 4096},
    "mixtral": {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8},
    "qwen2": {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32},
    "gemma": {"hidden_size": 3072, "num_attention_heads": 16, "num_hidden_layers": 28,
              "num_key_value_heads": 16, "head_dim": 256},
    "gemma2": {"hidden_size": 2304, "num_attention_heads": 8, "num_hidden_layers": 26,
               "num_key_value_heads": 4, "head_dim": 256, "sliding_window": 4096},
    "gemma3_text": {"hidden_size": 2304, "num_attention_heads": 8, "num_hidden_layers": 26,
                    "num_key_value_heads": 4, "head_dim": 256, "sliding_window": 4096},
    "phi3": {"hidden_size": 3072, "num_attention_heads": 32, "num_hidden_layers": 32},
    "gemma3n_text": {"hidden_size": 2048, "num_attention_heads": 8, "num_hidden_layers": 35,
                     "num_key_value_heads": 2, "head_dim": 256, "sliding_window": 512, "num_kv_shared_layers": 15},
    "gemma4_text": {"hidden_size": 2304, "num_attention_heads": 8, "num_hidden_layers": 30, "num_key_value_heads": 4,
                    "head_dim": 256, "sliding_window": 512, "num_kv_shared_layers": 0, "global_head_dim": 512},
}

# Families whose transformers configuration class switches a declared sliding_window off unless
# use_sliding_window is true (Qwen2Config: use_sliding_window=False by default).
SLIDING_WINDOW_OFF_BY_DEFAULT = frozenset({
    "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text",
    "qwen2_5_omni_text", "qwen2_5_omni_thinker", "qwen2_5_omni_talker", "smollm3", "deepseek_ocr2_text",
    "iquestcoder"})

# Encoder-only families: they never decode, so they hold no KV cache (unless a config sets is_decoder).
ENCODER_ONLY_MODEL_TYPES = frozenset({
    "bert", "roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "distilbert", "albert", "electra",
    "deberta", "deberta-v2", "mpnet", "modernbert", "nomic_bert", "megatron-bert", "mobilebert", "squeezebert",
    "convbert", "xlm", "flaubert", "ernie", "ernie_m", "rembert", "roformer", "funnel", "longformer", "big_bird",
    "luke", "layoutlm", "layoutlmv2", "layoutlmv3", "markuplm", "lilt", "xmod", "data2vec-text", "ibert",
    "canine", "esm", "nystromformer", "yoso", "mra", "splinter", "bros", "neobert", "eurobert", "jina_bert"})
ENCODER_ONLY_ARCH_SUFFIXES = ("ForMaskedLM",)  # with no causal-LM or generation head next to it
DECODER_ARCH_SUFFIXES = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration")

# Flat encoder-decoder families (is_encoder_decoder is also honoured when a config sets it).
ENCODER_DECODER_MODEL_TYPES = frozenset({
    "t5", "mt5", "umt5", "longt5", "switch_transformers", "bart", "mbart", "marian", "m2m_100", "nllb-moe",
    "pegasus", "pegasus_x", "blenderbot", "blenderbot-small", "plbart", "fsmt", "led", "bigbird_pegasus",
    "whisper", "speech_to_text", "mvp", "prophetnet", "xlm-prophetnet", "moonshine", "dia"})

# Families whose attention caches one tensor per layer as both key and value (DeepSeek-V4's shared-KV MQA:
# ``cache.update(kv, kv, ...)``); the cache holds it once.
K_EQUALS_V_MODEL_TYPES = frozenset({"deepseek_v4"})
K_EQUALS_V_ARCH_PREFIXES = ("DeepseekV4",)

ATTENTION_FREE_MODEL_TYPES = frozenset(
    {"rwkv", "rwkv5", "rwkv6", "rwkv7", "mamba", "mamba2", "falcon_mamba", "xlstm"})
ATTENTION_FREE_ARCH_PREFIXES = ("Rwkv", "RWKV", "Mamba", "Mamba2", "FalconMamba", "xLSTM")

# Layer kinds. Only the first three hold a per-token KV cache. "shared" layers attend over the KV
# of an earlier layer (Gemma-3n/4 num_kv_shared_layers) and store none; "encoder" layers never decode.
KV_KINDS = ("full", "sliding", "chunked")
STATE_KINDS = frozenset({"linear", "conv", "mamba", "recurrent", "other"})  # mixers with fixed-size state
LAYER_KIND_NAMES = {
    "full_attention": "full", "attention": "full", "full": "full", "global": "full",
    "global_attention": "full", "*": "full", "G": "full",
    "hybrid": "full",  # Zamba2: a Mamba layer plus the shared attention block, which caches K/V
    "indexed_attention": "full",  # DSA: full K/V plus an indexer cache (noted separately)
    "sliding_attention": "sliding", "sliding": "sliding", "local": "sliding", "local_attention": "sliding",
    "swa": "sliding", "L": "sliding", "hybrid_sliding": "sliding", "reference_sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear", "lightning_attention": "linear", "linear": "linear",
    "conv": "conv", "short_conv": "conv",
    "mamba": "mamba", "mamba2": "mamba", "ssm": "mamba", "M": "mamba",
    "recurrent": "recurrent", "rwkv": "recurrent",
    "mlp": "mlp", "moe": "mlp", "ffn": "mlp", "-": "mlp", "E": "mlp", "dummy": "mlp",
    "cross_attention": "cross",
}


def show(value: Any) -> str:
    """A short, one-line rendering of an untrusted value for messages."""
    try:
        text = json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def get_path(cfg: dict, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def to_int(value: Any, path: str, warnings: list[str], *, lo: int = 1, hi: int = MAX_COUNT) -> int:
    """Read a whole number, tolerating "32" and 32.0 (with a warning) and refusing anything else."""
    if isinstance(value, bool):
        raise GeometryError(f"{path} is a boolean ({show(value)}), expected a whole number")
    if isinstance(value, str):
        text = value.strip()
        try:
            number: Any = int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                raise GeometryError(f"{path} is the string {show(value)}, expected a whole number") from None
        warnings.append(f"{path} is written as a string ({show(value)}); read as {show(number)}")
        value = number
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        warnings.append(f"{path} is written as a float ({show(value)}); read as {int(value)}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise GeometryError(f"{path} is {show(value)}, expected a whole number")
        if not value.is_integer():
            raise GeometryError(f"{path} is fractional ({show(value)}), expected a whole number")
        value = int(value)
    if not isinstance(value, int):
        raise GeometryError(f"{path} is {type(value).__name__} {show(value)}, expected a whole number")
    if value < lo:
        raise GeometryError(f"{path} is {value}; it must be at least {lo}")
    if value > hi:
        raise GeometryError(f"{path} is {value}; more than {hi} is not a plausible value")
    return value


class Section:
    """The part of a config that describes the language model, with its key prefix and defaults."""

    def __init__(self, data: dict, prefix: str, warnings: list[str], sources: dict[str, str]):
        self.data = data
        self.prefix = prefix  # "" or "text_config." etc.
        self.warnings = warnings
        self.sources = sources
        self.family = data.get("model_type") if isinstance(data.get("model_type"), str) else None
        # Defaults apply only to nested sections: top-level config.json files are saved in full.
        self.defaults = FAMILY_DEFAULTS.get(self.family or "", {}) if prefix else {}
        self.defaulted: list[str] = []
        self.uncertain: list[str] = []  # why a figure may overstate (an unknown layer type, a guess)

    def path(self, key: str) -> str:
        return self.prefix + key

    def _get(self, key: str) -> Any:
        """A value by key; a dotted key reads a small sub-object (``attn_cfg.num_heads``)."""
        return get_path(self.data, key) if "." in key else self.data.get(key)

    def _holds(self, key: str) -> bool:
        if "." not in key:
            return key in self.data
        parent, _, leaf = key.rpartition(".")
        node = get_path(self.data, parent)
        return isinstance(node, dict) and leaf in node

    def has(self, keys: tuple[str, ...]) -> bool:
        return any(self._get(k) is not None for k in keys)

    def raw(self, key: str) -> Any:
        return self.data.get(key)

    def lookup(self, keys: tuple[str, ...], *, null_is_default: bool = True) -> tuple[str, Any] | None:
        """(path, value) of the first non-null spelling; a family default if none; else None.

        An explicit null means what an omitted key means (the family default), with a warning,
        unless ``null_is_default`` is false (windows: null there switches the window off).
        """
        found = [(k, self._get(k)) for k in keys if self._get(k) is not None]
        if found:
            key, value = found[0]
            for other, other_value in found[1:]:
                if other_value != value:
                    self.warnings.append(
                        f"{self.path(other)}={show(other_value)} disagrees with {self.path(key)}={show(value)};"
                        f" using {self.path(key)}")
            return self.path(key), value
        nulls = [k for k in keys if self._holds(k)]
        if nulls and not null_is_default:
            return None
        for key in keys:
            if key in self.defaults:
                if nulls:
                    self.warnings.append(f"{self.path(nulls[0])} is null; using the {self.family} default"
                                         f" {key}={self.defaults[key]}")
                else:
                    self.defaulted.append(f"{key}={self.defaults[key]}")
                return f"default:{self.family}.{key}", self.defaults[key]
        return None

    def count(self, field: str, keys: tuple[str, ...], *, lo: int = 1, hi: int = MAX_COUNT) -> int | None:
        """A scalar whole number from the first spelling present, recorded in sources."""
        item = self.lookup(keys)
        if item is None:
            return None
        path, value = item
        self.sources[field] = path
        return to_int(value, path, self.warnings, lo=lo, hi=hi)

    def counts(self, field: str, keys: tuple[str, ...]) -> int | list[int] | None:
        """Like ``count`` but a per-layer list of whole numbers is also accepted."""
        item = self.lookup(keys)
        if item is None:
            return None
        path, value = item
        self.sources[field] = path
        if isinstance(value, list):
            if not value:
                raise GeometryError(f"{path} is an empty list")
            return [to_int(v, f"{path}[{i}]", self.warnings) for i, v in enumerate(value)]
        return to_int(value, path, self.warnings)

    def window(self, field: str, key: str) -> int | None:
        """A window or chunk size; null, false, 0 and negatives mean "none"."""
        item = self.lookup((key,), null_is_default=False)
        if item is None:
            return None
        path, value = item
        if value is False or (isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0):
            self.warnings.append(f"{path}={show(value)} read as no window")
            return None
        if value is True:
            self.warnings.append(f"{path} is true, not a size; ignored")
            return None
        self.sources[field] = path
        return to_int(value, path, self.warnings, hi=MAX_TOKENS)

    def flag(self, key: str) -> bool | None:
        value = self.data.get(key)
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            self.warnings.append(f"{self.path(key)} is the string {show(value)}; read as a boolean")
            return value.strip().lower() == "true"
        if isinstance(value, (int, float)) and value in (0, 1):
            return bool(value)
        self.warnings.append(f"{self.path(key)}={show(value)} is not a boolean; ignored")
        return None

    def note_defaults(self) -> None:
        if self.defaulted:
            self.warnings.append(
                f"{self.prefix.rstrip('.')} omits {', '.join(d.split('=')[0] for d in self.defaulted)};"
                f" applied {self.family} defaults ({', '.join(self.defaulted)})")


def select_section(cfg: dict, warnings: list[str], sources: dict[str, str]) -> Section:
    """Find the language model's settings: a nested language-model section if it has heads, else the
    top level, else any other nested section with heads, else one that names a known family or a depth."""
    nested = _nested_sections(cfg)
    top = Section(cfg, "", warnings, sources)
    heads = HEAD_KEYS + DECODER_HEAD_KEYS
    with_heads = [(rank, path, sub) for rank, path, sub in nested if Section(sub, path, [], {}).has(heads)]
    for rank, path, sub in with_heads:
        if rank < 2:
            return Section(sub, path + ".", warnings, sources)
    if top.has(heads):
        return top
    for _, path, sub in with_heads:
        return Section(sub, path + ".", warnings, sources)
    for _, path, sub in nested:
        if sub.get("model_type") in FAMILY_DEFAULTS or Section(sub, path, [], {}).has(LAYER_KEYS):
            return Section(sub, path + ".", warnings, sources)
    return top


def _nested_sections(cfg: dict) -> list[tuple[int, str, dict]]:
    """(rank, dotted path, section) of every object that may hold a language model, best first."""
    found: list[tuple[int, int, int, str, dict]] = []

    def visit(node: dict, prefix: str, depth: int) -> None:
        for key, value in node.items():
            if not isinstance(value, dict) or not isinstance(key, str):
                continue
            words = set(key.lower().replace("-", "_").split("_"))
            if words & ENCODER_SECTION_WORDS:
                continue
            rank = 0 if words & LM_SECTION_WORDS else 1 if "decoder" in words else 2
            found.append((rank, depth, len(found), prefix + key, value))
            if depth < MAX_SECTION_DEPTH:
                visit(value, prefix + key + ".", depth + 1)

    visit(cfg, "", 1)
    return [(rank, path, sub) for rank, _, _, path, sub in sorted(found, key=lambda f: f[:3])]


def layer_kind(name: Any, path: str, sec: Section) -> str:
    """A per-layer schedule entry as a layer kind. An unknown entry never lowers the estimate: it is
    counted as a full KV layer (an upper bound) and the geometry is marked uncertain."""
    if isinstance(name, str) and name in LAYER_KIND_NAMES:
        return LAYER_KIND_NAMES[name]
    if isinstance(name, str) and name.strip().lower() in LAYER_KIND_NAMES:
        return LAYER_KIND_NAMES[name.strip().lower()]
    sec.warnings.append(f"{path}: unknown layer type {show(name)} counted as a full KV layer (upper bound)")
    sec.uncertain.append(f"{path}={show(name)}")
    return "full"


def fit_to_layers(kinds: list[Any], n_layers: int, path: str, warnings: list[str]) -> list[Any]:
    """Per-layer lists must cover every layer; extra trailing entries (LFM2, MTP layers) are dropped."""
    if len(kinds) < n_layers:
        raise GeometryError(f"{path} has {len(kinds)} entries for {n_layers} layers")
    if len(kinds) > n_layers:
        warnings.append(f"{path} has {len(kinds)} entries for {n_layers} layers; using the first {n_layers}")
    return kinds[:n_layers]


def explicit_schedule(sec: Section, n_layers: int) -> tuple[list[str], str] | None:
    """Per-layer kinds from a schedule the config spells out, or None if it spells none out."""
    w = sec.warnings
    # Lists of the layers that attend, the others being Mamba (Bamba attn_layer_indices, the mamba_ssm
    # package's attn_layer_idx) or short convolutions (LFM2's first configs, full_attn_idxs).
    for key, other in (("attn_layer_indices", "mamba"), ("attn_layer_idx", "mamba"), ("full_attn_idxs", "conv")):
        listed = sec.raw(key)
        if isinstance(listed, list) and "layer_types" not in sec.data:
            return _attending(sec, key, listed, other, n_layers), sec.path(key)
    nested = _linear_attn_config(sec, n_layers)
    if nested is not None:
        return nested
    pattern = sec.raw("hybrid_layer_pattern")  # MiMo-V2: 1 = sliding-window layer, 0 = full attention
    if isinstance(pattern, list) and pattern and all(v in (0, 1) and not isinstance(v, bool) for v in pattern):
        kinds = ["sliding" if v == 1 else "full" for v in pattern]
        return fit_to_layers(kinds, n_layers, sec.path("hybrid_layer_pattern"), w), sec.path("hybrid_layer_pattern")
    # GPT-Neo spells its global/local alternation as attention_layers.
    for key in ("layer_types", "layers_block_type", "block_types", "attention_layers"):
        value = sec.raw(key)
        if isinstance(value, list) and value:
            kinds = [layer_kind(v, f"{sec.path(key)}[{i}]", sec) for i, v in enumerate(value)]
            return fit_to_layers(kinds, n_layers, sec.path(key), w), sec.path(key)
    pattern = sec.raw("hybrid_override_pattern")  # NemotronH: M = Mamba, * = attention, - = MLP, E = MoE
    if isinstance(pattern, str) and pattern:
        kinds = [layer_kind(c, f"{sec.path('hybrid_override_pattern')}[{i}]", sec) for i, c in enumerate(pattern)]
        return fit_to_layers(kinds, n_layers, sec.path("hybrid_override_pattern"), w), sec.path(
            "hybrid_override_pattern")
    types = sec.raw("attn_type_list")  # MiniMax: 1 = softmax attention, 0 = lightning (linear) attention
    if isinstance(types, list) and types:
        kinds = ["full" if v == 1 and not isinstance(v, bool) else "linear" for v in types]
        if any(v not in (0, 1) or isinstance(v, bool) for v in types):
            w.append(f"{sec.path('attn_type_list')} holds values other than 0 and 1; only 1 counted as attention")
        return fit_to_layers(kinds, n_layers, sec.path("attn_type_list"), w), sec.path("attn_type_list")
    if sec.raw("attn_layer_period") is not None:  # Jamba: attention on layers i % period == offset
        period = to_int(sec.raw("attn_layer_period"), sec.path("attn_layer_period"), w)
        offset = to_int(sec.raw("attn_layer_offset") or 0, sec.path("attn_layer_offset"), w, lo=0)
        kinds = ["full" if i % period == offset else "mamba" for i in range(n_layers)]
        return kinds, f"{sec.path('attn_layer_period')}/{sec.path('attn_layer_offset')}"
    if sec.raw("full_attention_interval") is not None:  # Qwen3-Next: every interval-th layer attends
        interval = to_int(sec.raw("full_attention_interval"), sec.path("full_attention_interval"), w)
        kinds = ["full" if (i + 1) % interval == 0 else "linear" for i in range(n_layers)]
        return kinds, sec.path("full_attention_interval")
    return None


def _linear_attn_config(sec: Section, n_layers: int) -> tuple[list[str], str] | None:
    """Kimi-Linear / Kimi-K3: ``linear_attn_config`` lists the layers that keep full attention
    (``full_attn_layers``) and the KDA linear-attention layers (``kda_layers``), 1-based as
    transformers' KimiLinearConfig reads them (``kda_layer_index_base: 0`` says 0-based). A layer in
    neither list is counted as full attention (an upper bound) and the geometry is uncertain."""
    block = sec.raw("linear_attn_config")
    if not isinstance(block, dict) or "layer_types" in sec.data:
        return None
    path = sec.path("linear_attn_config")
    full, kda = block.get("full_attn_layers"), block.get("kda_layers")
    if not isinstance(full, list) and not isinstance(kda, list):
        sec.warnings.append(f"{path} lists neither full_attn_layers nor kda_layers; every layer read as attention")
        sec.uncertain.append(path)
        return None
    base = block.get("kda_layer_index_base", 1)
    base = 0 if base == 0 and not isinstance(base, bool) else 1
    kinds: list[str | None] = [None] * n_layers
    for key, kind in (("full_attn_layers", "full"), ("kda_layers", "linear")):
        for i, value in enumerate(block.get(key) or []):
            index = to_int(value, f"{path}.{key}[{i}]", sec.warnings, lo=base) - base
            if index >= n_layers:
                sec.warnings.append(f"{path}.{key}[{i}]={value} is beyond the {n_layers} layers; ignored")
            elif kinds[index] is not None and kinds[index] != kind:
                sec.warnings.append(f"{path}: layer {value} is in both full_attn_layers and kda_layers;"
                                    " counted as full attention (upper bound)")
                sec.uncertain.append(f"{path}.{key}[{i}]")
                kinds[index] = "full"
            else:
                kinds[index] = kind
    missing = [i for i, k in enumerate(kinds) if k is None]
    if missing:
        listed_both = isinstance(full, list) and isinstance(kda, list)
        fill = "full" if listed_both or not isinstance(full, list) else "linear"
        if listed_both:
            sec.warnings.append(f"{path} leaves {len(missing)} of {n_layers} layers unlisted; counted as full"
                                " attention (upper bound)")
            sec.uncertain.append(path)
        kinds = [fill if k is None else k for k in kinds]
    return [k or "full" for k in kinds], f"{path}.full_attn_layers"


def _attending(sec: Section, key: str, listed: list, other: str, n_layers: int) -> list[str]:
    kinds = [other] * n_layers
    for i, value in enumerate(listed):
        index = to_int(value, f"{sec.path(key)}[{i}]", sec.warnings, lo=0)
        if index >= n_layers:
            sec.warnings.append(f"{sec.path(key)}[{i}]={index} is beyond the {n_layers} layers; ignored")
        else:
            kinds[index] = "full"
    return kinds


def sliding_schedule(sec: Section, n_layers: int, model_type: str | None) -> tuple[list[bool], str]:
    """Which layers slide when a window is declared but no per-layer list says so."""
    w = sec.warnings
    for key in ("sliding_window_pattern", "_sliding_window_pattern"):
        pattern = sec.raw(key)
        if isinstance(pattern, str) and pattern and set(pattern) <= {"L", "G"}:
            # EXAONE-4: "LLLG" repeats; transformers also keeps the last layer global.
            return [pattern[i % len(pattern)] == "L" and i != n_layers - 1 for i in range(n_layers)], sec.path(key)
        if pattern is not None:
            every = to_int(pattern, sec.path(key), w)  # Gemma-3, Cohere2: every n-th layer is global
            return [(i + 1) % every != 0 for i in range(n_layers)], sec.path(key)
    family = sec.family or model_type or ""
    if family == "gemma2":  # alternates local/global from layer 0 with nothing per-layer in the file
        return [i % 2 == 0 for i in range(n_layers)], "derived:gemma2 alternates sliding/full"
    if family.startswith("gemma3"):
        return [(i + 1) % 6 != 0 for i in range(n_layers)], "derived:gemma3 default pattern 6"
    if sec.flag("use_sliding_window") is True and sec.raw("max_window_layers") is not None:
        # Qwen2 family: the first max_window_layers layers keep full attention.
        first = to_int(sec.raw("max_window_layers"), sec.path("max_window_layers"), w, lo=0)
        return [i >= first for i in range(n_layers)], sec.path("max_window_layers")
    return [True] * n_layers, "derived:sliding_window on every layer"


def chunk_schedule(sec: Section, n_layers: int) -> tuple[list[bool], str]:
    """Llama 4: chunked attention on RoPE layers; every no_rope_layer_interval-th layer is global NoPE."""
    flags = sec.raw("no_rope_layers")
    if isinstance(flags, list) and flags:
        flags = fit_to_layers(flags, n_layers, sec.path("no_rope_layers"), sec.warnings)
        return [bool(f) for f in flags], sec.path("no_rope_layers")
    interval = sec.raw("no_rope_layer_interval")
    every = 4 if interval is None else to_int(interval, sec.path("no_rope_layer_interval"), sec.warnings)
    return [(i + 1) % every != 0 for i in range(n_layers)], f"derived:every {every}th layer global (NoPE)"


def kv_heads(sec: Section, h: int, keys: tuple[str, ...] = KV_HEAD_KEYS) -> int | list[int]:
    """K from the first grouping signal present; a missing or null count means K = H (MHA)."""
    warn, src = sec.warnings.append, sec.sources
    explicit = sec.counts("num_kv_heads", keys)
    multi_query = sec.flag("multi_query")
    if explicit is not None:
        if multi_query and explicit != 1:
            warn(f"multi_query is true but {src['num_kv_heads']}={show(explicit)}; the count wins")
        return explicit
    group_num = sec.raw("multi_query_group_num")
    if group_num is not None:  # ChatGLM2/3, GLM-4 in chatglm format
        if sec.flag("multi_query_attention"):
            return sec.count("num_kv_heads", ("multi_query_group_num",))
        warn(f"{sec.path('multi_query_group_num')} ignored: multi_query_attention is not true")
    attn = sec.raw("attn_config")
    if isinstance(attn, dict):  # DBRX, MPT
        if attn.get("kv_n_heads") is not None:
            path = sec.path("attn_config.kv_n_heads")
            src["num_kv_heads"] = path
            return to_int(attn["kv_n_heads"], path, sec.warnings)
        if attn.get("attn_type") == "multiquery_attention":
            src["num_kv_heads"] = sec.path("attn_config.attn_type")
            return 1
    if multi_query:
        src["num_kv_heads"] = sec.path("multi_query")
        return 1
    head_type = sec.raw("attention_head_type")  # the original santacoder (model_type gpt2, remote code)
    if head_type is not None:
        src["num_kv_heads"] = sec.path("attention_head_type")
        if head_type == "multiquery":
            return 1
        if head_type != "multihead":
            warn(f"{sec.path('attention_head_type')}={show(head_type)} is not multiquery or multihead;"
                 " K = H assumed (an upper bound)")
            sec.uncertain.append(sec.path("attention_head_type"))
        return h
    present = [key for key in KV_HEAD_KEYS if key in sec.data]
    src["num_kv_heads"] = "default:K=H" + (f" ({sec.path(present[0])} is null)" if present else "")
    return h


def extra_cache_notes(sec: Section, kv_layers: int) -> None:
    """Caches the standard formula leaves out: sparse-attention indexers, compression, MTP layers."""
    warn = sec.warnings.append
    index_dim = sec.raw("index_head_dim")
    if isinstance(index_dim, int) and not isinstance(index_dim, bool) and index_dim > 0:
        warn(f"{sec.path('index_head_dim')}={index_dim}: a sparse-attention indexer also caches"
             f" {index_dim} elements per layer (+{index_dim * kv_layers} per token), not counted")
    if sec.raw("compress_ratios") is not None:
        warn(f"{sec.path('compress_ratios')} present: compressed attention is not modelled; figures use the"
             " plain formula, and with a sliding window they undercount long contexts")
    for key in ("num_nextn_predict_layers", "mtp_num_hidden_layers", "_num_mtp_layers"):
        extra = sec.raw(key)
        if isinstance(extra, int) and not isinstance(extra, bool) and extra > 0:
            warn(f"{sec.path(key)}={extra}: multi-token-prediction layers sit outside the layer count;"
                 " not counted")
            break
