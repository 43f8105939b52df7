"""Attention geometry from a ``config.json``: pure, no I/O.

``parse_config_text`` turns raw text into a dict; ``parse_geometry`` turns that dict into an
immutable ``Geometry``: attention kind, query heads H, KV heads K, group size G = H/K, head dim,
layers, the layers that hold a per-token KV cache, windows, MLA latent sizes, the KV-cache
elements per token, where every value came from (``sources``) and what looked odd (``warnings``).
Key spellings, family defaults and layer schedules live in ``config_dialects``.

Rules, in the order they apply:

- The language model's settings are a nested ``text_config`` / ``llm_config`` / ``language_config``
  / ``thinker_config.text_config`` / ``decoder`` if it has head counts, else the top level.
  Encoder sections (``vision_config``, ``audio_config``, ...) are never read. A nested section
  that omits keys gets its family's transformers defaults, with a warning.
- Attention-free families (RWKV, Mamba) and stacks in which no layer attends are kind ``none``.
- A per-layer schedule (``layer_types``, ``layers_block_type``, ``hybrid_override_pattern``,
  ``attn_type_list``, Jamba's period/offset, ``full_attention_interval``) says which layers
  attend; cross-attention layers (``cross_attention_layers``) cache image tokens, not text, so
  they are not KV layers. A declared ``sliding_window`` applies per the schedule, else per
  ``sliding_window_pattern``, the Gemma-2/3 conventions, Qwen's ``max_window_layers``, else every
  layer. Llama 4's ``attention_chunk_size`` chunks all but every fourth layer.
- MLA (``kv_lora_rank`` present) is decided before the K == H -> MHA rule: its cache is one
  latent of ``kv_lora_rank + qk_rope_head_dim`` elements per layer, and the declared KV-head
  count is logical only. Otherwise each KV layer caches ``K * (head_dim + v_head_dim)``.
- ``head_dim`` wins over ``kv_channels``, which wins over ``hidden / H``; ``rotary_dim``,
  ``partial_rotary_factor`` and ``query_pre_attn_scalar`` never change it.
- K: an explicit KV-head key; else ChatGLM's ``multi_query_group_num`` when
  ``multi_query_attention`` is true; else DBRX/MPT ``attn_config``; else ``multi_query: true``
  means 1; else K = H.
- DeepSeek-V4 caches one tensor per layer that is both key and value: ``K * head_dim`` per layer.

Bad or odd input, decided per case (errors raise ``GeometryError``, one line; warnings are
kept on the record and the geometry is still trusted):

    case                                                  outcome
    not JSON / not UTF-8 / empty / not an object          error (ConfigError)
    no head count, no layer count                         error
    count that is 0, negative, fractional, a boolean,
      NaN/Infinity, a non-numeric string or > 2**20       error
    count written as "32" or 32.0                         warning, read as 32
    K > H, or H not divisible by K                        error
    no head_dim and hidden not divisible by H             error (head_dim inconsistent with widths)
    MLA without qk_rope_head_dim                          error (cache size unknown)
    MLA without v_head_dim / q_lora_rank                  warning / source note, geometry kept
    head_dim and kv_channels disagree                     warning, head_dim used
    explicit head_dim * H far (>4x) from hidden size      warning
    MLA with a head_dim that is not nope + rope           warning, ignored
    duplicated spellings that disagree                    warning, first spelling used
    per-layer list longer than the layer count            warning, first n entries used
    per-layer list shorter than the layer count           error
    sliding_window with use_sliding_window false          warning, sliding_window None
    window >= max_position_embeddings                     warning, layers treated as full
                                                          (the declared window is still reported)
    sliding layers declared but no window                 warning, treated as full
    window null/false/0/negative                          no window (warning if false/0/negative)
    unknown layer type                                    warning (full if named *attention*)
    multi_query true next to a KV-head count              warning, the count wins
    DSA indexer keys, compress_ratios, MTP layers         warning (not in the element count)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Mapping

from observatory.core.config_dialects import (
    ATTENTION_FREE_ARCH_PREFIXES,
    ATTENTION_FREE_MODEL_TYPES,
    CONTEXT_KEYS,
    CROSS_HEAD_DIM_KEYS,
    CROSS_KV_HEAD_KEYS,
    DECODER_ARCH_SUFFIXES,
    DECODER_CONTEXT_KEYS,
    DECODER_HEAD_KEYS,
    DECODER_KV_HEAD_KEYS,
    DECODER_LAYER_KEYS,
    ENCODER_DECODER_MODEL_TYPES,
    ENCODER_LAYER_KEYS,
    ENCODER_ONLY_ARCH_SUFFIXES,
    ENCODER_ONLY_MODEL_TYPES,
    HEAD_DIM_KEYS,
    HEAD_KEYS,
    K_EQUALS_V_ARCH_PREFIXES,
    K_EQUALS_V_MODEL_TYPES,
    KV_HEAD_KEYS,
    KV_KINDS,
    LAYER_KEYS,
    LAYER_LIST_KEYS,
    MAX_TOKENS,
    SLIDING_WINDOW_OFF_BY_DEFAULT,
    STATE_KINDS,
    WIDTH_KEYS,
    ConfigError,
    GeometryError,
    Section,
    chunk_schedule,
    explicit_schedule,
    extra_cache_notes,
    fit_to_layers,
    get_path,
    kv_heads,
    select_section,
    show,
    sliding_schedule,
    to_int,
)

__all__ = ["PARSER_VERSION", "ConfigError", "GeometryError", "Geometry", "MLAGeometry",
           "parse_config_text", "parse_geometry"]

# Bump when a rule changes what a config derives to; stored geometries with a lower version are re-derived.
PARSER_VERSION = 9  # 3: parameter estimates checked against transformers (stored with the geometry); 4: Jamba experts; 5: GPT-Neo, CodeGen, CTRL, MiniMax-M3, early Falcon, GPT-1, dense Granite-4.0-H estimates; 6: kv_tp_max (how far the KV heads shard); 7: Qwen2-Audio's audio encoder; 8: DeepSeek-V4's shared K = V cache and attention parameters, Kimi's linear_attn_config, Moonshine's prefixed keys, CSM's backbone, cross-attention KV heads (issue 20); 9: Gemma-4 attention and MoE block, encoders (ModernBERT, EuroBERT) with attention and no head, family defaults from transformers, the expert guard (issue 20 item 4)

MAX_CONFIG_CHARS = 4_000_000  # real config.json files are a few KB


@dataclass(frozen=True)
class MLAGeometry:
    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int | None
    v_head_dim: int | None
    q_lora_rank: int | None  # None: queries are not compressed (DeepSeek-V2-Lite)

    @property
    def latent_elements_per_layer(self) -> int:
        return self.kv_lora_rank + self.qk_rope_head_dim

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["latent_elements_per_layer"] = self.latent_elements_per_layer
        return out


@dataclass(frozen=True)
class Geometry:
    """What one config.json says about attention. Counts are None only for kind "none"."""

    model_type: str | None
    architectures: tuple[str, ...]
    attention_kind: str  # "MHA" | "MQA" | "GQA" | "MLA" | "none"
    is_hybrid: bool  # attention layers mixed with linear-attention / SSM / conv layers
    num_query_heads: int | None  # H; with per-layer lists, the top-level value or the largest
    num_kv_heads: int | None  # K; for MLA the declared (logical) count
    group_size: float | None  # H / K; None for MLA and "none"
    head_dim: int | None  # q/k head dim (MLA: qk_nope + qk_rope)
    v_head_dim: int | None
    num_layers: int  # decoder layers, MTP layers excluded
    kv_layers: int  # layers holding a per-token KV cache (full, sliding or chunked self-attention)
    sliding_window: int | None  # declared window, unless a flag switches it off
    sliding_layers: int  # layers on which that window binds
    chunked: bool
    chunk_size: int | None
    hidden_size: int | None
    mla: MLAGeometry | None
    kv_elements_per_token: int  # full context, all KV layers (elements, not bytes)
    layer_kinds: tuple[str, ...]  # per layer: full, sliding, chunked, cross, linear, conv, mamba, ...
    kv_heads_per_layer: tuple[int, ...] | None = None  # when K differs per layer (a list, Gemma-4 globals)
    query_heads_per_layer: tuple[int, ...] | None = None
    max_position_embeddings: int | None = None
    sources: Mapping[str, str] = field(default_factory=dict, hash=False)
    warnings: tuple[str, ...] = ()
    # q/k (= v) head dim of each layer, when a family declares per-layer dims (Gemma-4 global_head_dim)
    head_dims_per_layer: tuple[int, ...] | None = None
    encoder_only: bool = False  # BERT-style: never decodes, so kv_layers and the cache are 0
    # T5/BART/Whisper/...: the KV figures are the decoder's self-attention per generated token;
    # cross-attention caches K/V of every source (encoder) token in every decoder layer, counted here.
    is_encoder_decoder: bool = False
    cross_kv_elements_per_source_token: int = 0
    encoder_layers: int | None = None
    # True when a figure may overstate: an unknown layer type counted as a full KV layer, or a guess.
    uncertain: bool = False
    # DeepSeek-V4: one tensor per layer serves as both key and value, so a layer caches K * head_dim.
    k_equals_v: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "sources", MappingProxyType(dict(self.sources)))

    # mappingproxy does not pickle or deepcopy; hand over a plain dict instead.
    def __getstate__(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)} | {"sources": dict(self.sources)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)
        self.__post_init__()

    def layer_kv_elements(self) -> tuple[int, ...]:
        """Elements cached per token by each layer (0 for layers without a per-token cache)."""
        # Memoised on the (frozen) instance: a roofline sweep asks for it hundreds of times.
        cached = self.__dict__.get("_layer_kv_elements")
        if cached is not None:
            return cached
        out = []
        for i, kind in enumerate(self.layer_kinds):
            if kind not in KV_KINDS:
                out.append(0)
            elif self.mla is not None:
                out.append(self.mla.latent_elements_per_layer)
            else:
                k = self.kv_heads_per_layer[i] if self.kv_heads_per_layer else self.num_kv_heads
                if self.k_equals_v:
                    out.append(k * (self.head_dims_per_layer[i] if self.head_dims_per_layer else self.head_dim))
                elif self.head_dims_per_layer:
                    out.append(k * 2 * self.head_dims_per_layer[i])
                else:
                    out.append(k * (self.head_dim + (self.v_head_dim or self.head_dim)))
        object.__setattr__(self, "_layer_kv_elements", tuple(out))
        return self._layer_kv_elements

    def memoised(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per (frozen) instance, kept under ``name``: the KV and roofline
        arithmetic reads the same per-layer sums for every device and context of a page."""
        cached = self.__dict__.get(name)
        if cached is None:
            cached = compute()
            object.__setattr__(self, name, cached)
        return cached

    def cache_terms(self) -> tuple[tuple[int | None, int], ...]:
        """``(cap, elements per token)`` summed over the layers sharing a cap (None: unbounded),
        so the cache at any context is ``Σ elements × min(context, cap)``."""
        def compute():
            terms: dict[int | None, int] = {}
            for elements, cap in zip(self.layer_kv_elements(), self.layer_windows()):
                if elements:
                    terms[cap] = terms.get(cap, 0) + elements
            return tuple(sorted(terms.items(), key=lambda t: t[0] or 0))
        return self.memoised("_cache_terms", compute)

    def layer_windows(self) -> tuple[int | None, ...]:
        """Most tokens each layer keeps: its window or chunk size, or None when unbounded."""
        cached = self.__dict__.get("_layer_windows")
        if cached is None:
            caps = {"sliding": self.sliding_window, "chunked": self.chunk_size}
            cached = tuple(caps.get(kind) for kind in self.layer_kinds)
            object.__setattr__(self, "_layer_windows", cached)
        return cached

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, MLAGeometry):
                value = value.to_dict()
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            out[f.name] = value
        out["parser_version"] = PARSER_VERSION
        return out


def parse_config_text(text: str | bytes) -> dict:
    """Parse config.json text; NaN/Infinity literals are accepted (NemotronH writes them)."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"config is not UTF-8 text (bad byte at offset {exc.start})") from None
    if not isinstance(text, str):
        raise ConfigError(f"config text must be str or bytes, got {type(text).__name__}")
    text = text.lstrip("\ufeff")
    if len(text) > MAX_CONFIG_CHARS:
        raise ConfigError(f"config is {len(text)} characters; more than {MAX_CONFIG_CHARS} is not a config.json")
    if not text.strip():
        raise ConfigError("config is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise ConfigError("not a config: JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config must be a JSON object, got {_json_type(data)}")
    return data


def parse_geometry(cfg: dict) -> Geometry:
    """Derive the attention geometry of one parsed config.json (see the module docstring)."""
    if not isinstance(cfg, dict):
        raise GeometryError(f"config must be a JSON object, got {_json_type(cfg)}")
    warnings: list[str] = []
    sources: dict[str, str] = {}
    sec = select_section(cfg, warnings, sources)
    model_type = _model_type(cfg, sec)
    architectures = _architectures(cfg, sec)
    stack = _stack(cfg, sec, model_type, architectures)
    # BART-style keys (decoder_layers, decoder_attention_heads) wherever the decoder is spelled that way;
    # a nested decoder section written in the plain spelling (T5Gemma, Llama-style) keeps the plain keys.
    flat_encdec = stack == "encoder-decoder" and sec.has(DECODER_LAYER_KEYS + DECODER_HEAD_KEYS)
    n_layers = _decoder_layer_count(sec) if flat_encdec else _layer_count(sec)
    hidden = sec.count("hidden_size", WIDTH_KEYS)
    max_pos = _context_length(sec, DECODER_CONTEXT_KEYS if flat_encdec else CONTEXT_KEYS)
    base = dict(model_type=model_type, architectures=architectures, num_layers=n_layers,
                hidden_size=hidden, max_position_embeddings=max_pos, sources=sources,
                encoder_only=stack == "encoder-only", is_encoder_decoder=stack == "encoder-decoder",
                encoder_layers=_encoder_layer_count(cfg, sec, flat_encdec) if stack == "encoder-decoder" else None)

    free = _attention_free_kind(model_type, sec.family, architectures, mamba_ssm_only=_mamba_ssm_only(sec))
    if free is not None:
        sec.note_defaults()
        return _no_attention(base, (free,) * n_layers, warnings, sec)

    if stack == "encoder-only":
        kinds, explicit = ["encoder"] * n_layers, None
    else:
        schedule = explicit_schedule(sec, n_layers)
        kinds, explicit = (schedule[0], schedule[1]) if schedule else (["full"] * n_layers, None)
    if explicit:
        sources["layer_kinds"] = explicit
    _mark_cross_attention(sec, kinds)
    window, chunk = _windows(sec, kinds, explicit, model_type, max_pos)
    _mark_kv_shared(sec, kinds)
    kv_layers = sum(kind in KV_KINDS for kind in kinds)
    if kv_layers == 0 and stack != "encoder-only":
        warnings.append("no layer holds a per-token KV cache")
        sec.note_defaults()
        return _no_attention(base, tuple(kinds), warnings, sec)

    heads = sec.counts("num_query_heads", DECODER_HEAD_KEYS if flat_encdec else HEAD_KEYS)
    if heads is None:
        looked = DECODER_HEAD_KEYS if flat_encdec else HEAD_KEYS
        raise GeometryError(f"no {'decoder ' if flat_encdec else ''}attention head count"
                            f" (looked for {', '.join(looked)})")
    q_per_layer = _per_layer(sec, heads, "num_query_heads", "num_attention_heads_per_layer", n_layers)
    h = heads if isinstance(heads, int) else max(q_per_layer)
    kv = kv_heads(sec, h, DECODER_KV_HEAD_KEYS + KV_HEAD_KEYS if flat_encdec else KV_HEAD_KEYS)
    k_per_layer = _per_layer(sec, kv, "num_kv_heads", "num_key_value_heads_per_layer", n_layers)
    k = kv if isinstance(kv, int) else max(k_per_layer)
    k_per_layer = _global_kv_heads(sec, kinds, k, k_per_layer)
    k_per_layer = _sliding_kv_heads(sec, kinds, k, k_per_layer)
    _check_groups(sec, kinds, h, k, q_per_layer, k_per_layer, mla=sec.raw("kv_lora_rank") is not None)

    mla = _mla(sec, h, hidden)
    dims_per_layer = None
    k_equals_v = False
    if mla is not None:
        head_dim, v_head_dim, kind, group = _mla_head_dims(sec, mla, h, hidden), mla.v_head_dim, "MLA", None
    else:
        head_dim = _head_dim(sec, h, hidden, varying_heads=q_per_layer is not None and isinstance(heads, list))
        v_head_dim = sec.count("v_head_dim", ("v_head_dim",)) or head_dim
        k_equals_v = _k_equals_v(sec, model_type, architectures, head_dim, v_head_dim)
        dims_per_layer = _global_head_dims(sec, kinds, head_dim)
        kind = "MHA" if k == h else "MQA" if k == 1 else "GQA"
        group = h / k
    if stack != "encoder-only":
        extra_cache_notes(sec, kv_layers)
    sec.note_defaults()

    geom = Geometry(
        **base, attention_kind=kind, is_hybrid=any(x in STATE_KINDS for x in kinds),
        num_query_heads=h, num_kv_heads=k, group_size=group, head_dim=head_dim, v_head_dim=v_head_dim,
        kv_layers=kv_layers, sliding_window=window, sliding_layers=kinds.count("sliding"),
        chunked="chunked" in kinds, chunk_size=chunk, mla=mla, kv_elements_per_token=0,
        layer_kinds=tuple(kinds), kv_heads_per_layer=_tuple(k_per_layer),
        query_heads_per_layer=_tuple(q_per_layer), head_dims_per_layer=_tuple(dims_per_layer),
        warnings=tuple(warnings), uncertain=bool(sec.uncertain), k_equals_v=k_equals_v)
    per_token = sum(geom.layer_kv_elements())
    cross = _cross_elements(sec, geom, per_token) if stack == "encoder-decoder" else 0
    return replace(geom, kv_elements_per_token=per_token, cross_kv_elements_per_source_token=cross,
                   sources=sources)  # with the cross-attention keys it read


def _cross_elements(sec: Section, geom: Geometry, per_token: int) -> int:
    """Cross-attention keeps K and V of every source token in every decoder layer. At the decoder's KV
    heads and head dim, unless the config declares them apart (Dia: cross_num_key_value_heads,
    cross_head_dim): then per source token, not the elements a generated token adds."""
    k = sec.count("cross_num_kv_heads", CROSS_KV_HEAD_KEYS)
    d = sec.count("cross_head_dim", CROSS_HEAD_DIM_KEYS)
    if k is None and d is None:
        return per_token
    k = geom.num_kv_heads if k is None else k
    d = geom.head_dim if d is None else d
    return geom.kv_layers * k * 2 * d


def _json_type(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "a boolean", type(None): "null", int: "a number",
             float: "a number"}
    return names.get(type(value), type(value).__name__)


def _tuple(values: list[int] | None) -> tuple[int, ...] | None:
    return tuple(values) if values is not None else None


def _model_type(cfg: dict, sec: Section) -> str | None:
    for value in (cfg.get("model_type"), sec.family):
        if isinstance(value, str) and value.strip():
            return value.strip()[:100]
    return None


def _architectures(cfg: dict, sec: Section) -> tuple[str, ...]:
    for value in (cfg.get("architectures"), sec.raw("architectures")):
        if isinstance(value, list) and value:
            return tuple(str(a)[:200] for a in value if isinstance(a, str))
    return ()


def _layer_count(sec: Section) -> int:
    n = sec.count("num_layers", LAYER_KEYS)
    if n is not None:
        return n
    for key in LAYER_LIST_KEYS:  # NemotronH has no layer count, only its per-layer schedule
        value = sec.raw(key)
        if isinstance(value, (list, str)) and value:
            sec.sources["num_layers"] = f"derived:len({sec.path(key)})"
            return to_int(len(value), sec.path(key), sec.warnings)
    raise GeometryError(f"no layer count (looked for {', '.join(LAYER_KEYS)} and per-layer lists)")


def _decoder_layer_count(sec: Section) -> int:
    """Decoder depth of a flat encoder-decoder config; T5 without num_decoder_layers mirrors num_layers."""
    n = sec.count("num_layers", DECODER_LAYER_KEYS)
    if n is not None:
        return n
    if sec.raw("num_layers") is not None:
        n = sec.count("num_layers", ("num_layers",))
        sec.sources["num_layers"] = f"default:num_decoder_layers={sec.path('num_layers')}"
        return n
    raise GeometryError(f"no decoder layer count (looked for {', '.join(DECODER_LAYER_KEYS)} and num_layers)")


def _encoder_layer_count(cfg: dict, sec: Section, flat: bool) -> int | None:
    """Encoder depth, for the record: from a sibling "encoder" section of a nested decoder, else from
    the decoder's own section when it spells both stacks (T5, BART, Whisper)."""
    sibling = get_path(cfg, "encoder") if sec.prefix else None
    if isinstance(sibling, dict):
        node, prefix, keys = sibling, "encoder.", LAYER_KEYS
    elif flat:
        node, prefix, keys = sec.data, sec.prefix, ENCODER_LAYER_KEYS
    else:
        return None
    enc = Section(node, prefix, sec.warnings, {})
    n = enc.count("encoder_layers", keys)
    if n is not None:
        sec.sources["encoder_layers"] = enc.sources["encoder_layers"]
    return n


def _stack(cfg: dict, sec: Section, model_type: str | None, architectures: tuple[str, ...]) -> str:
    """"decoder", "encoder-decoder" (decoder self-attention caches per token) or "encoder-only"."""
    types = {t.lower() for t in (model_type, sec.family) if t}
    flagged = [p for p, node in (("is_encoder_decoder", cfg), (sec.path("is_encoder_decoder"), sec.data))
               if node.get("is_encoder_decoder") is True]
    if flagged or types & ENCODER_DECODER_MODEL_TYPES:
        if sec.prefix or sec.has(DECODER_LAYER_KEYS + DECODER_HEAD_KEYS):
            sec.sources["is_encoder_decoder"] = flagged[0] if flagged else f"model_type={model_type}"
            return "encoder-decoder"
    if sec.flag("is_decoder") is True:
        return "decoder"
    if types & ENCODER_ONLY_MODEL_TYPES:
        sec.sources["encoder_only"] = f"model_type={next(iter(sorted(types & ENCODER_ONLY_MODEL_TYPES)))}"
        return "encoder-only"
    masked = [a for a in architectures if a.endswith(ENCODER_ONLY_ARCH_SUFFIXES)]
    if masked and not any(a.endswith(DECODER_ARCH_SUFFIXES) for a in architectures):
        sec.sources["encoder_only"] = f"architectures={masked[0]}"
        return "encoder-only"
    return "decoder"


def _mark_kv_shared(sec: Section, kinds: list[str]) -> None:
    """Gemma-3n/4: the last num_kv_shared_layers layers reuse earlier layers' K/V and store none."""
    if sec.raw("num_kv_shared_layers") is None and "num_kv_shared_layers" not in sec.defaults:
        return
    shared = sec.count("num_kv_shared_layers", ("num_kv_shared_layers",), lo=0)
    if not shared:
        return
    if shared > len(kinds):
        raise GeometryError(f"{sec.sources['num_kv_shared_layers']}={shared} exceeds the {len(kinds)} layers")
    for i in range(len(kinds) - shared, len(kinds)):
        if kinds[i] in KV_KINDS:
            kinds[i] = "shared"


def _k_equals_v(sec: Section, model_type: str | None, architectures: tuple[str, ...], head_dim: int,
                v_head_dim: int) -> bool:
    """DeepSeek-V4's shared-KV MQA: one projection per layer gives a tensor that is both key and value
    (transformers' cache layer keeps ``values = keys``), so it is cached once, not twice."""
    families = {t for t in (model_type, sec.family) if t}
    if not (families & K_EQUALS_V_MODEL_TYPES or any(a.startswith(K_EQUALS_V_ARCH_PREFIXES) for a in architectures)):
        return False
    if v_head_dim != head_dim:
        sec.warnings.append(f"{sec.path('v_head_dim')}={v_head_dim} differs from head_dim={head_dim}, which a shared"
                            " K = V cache cannot; keys and values counted apart")
        return False
    sec.sources["k_equals_v"] = f"model_type={model_type}" if families & K_EQUALS_V_MODEL_TYPES else (
        f"architectures={architectures[0]}")
    return True


def _global_kv_heads(sec: Section, kinds: list[str], k: int, k_per_layer: list[int] | None) -> list[int] | None:
    """Gemma-4: with attention_k_eq_v, full layers use num_global_key_value_heads (as transformers does)."""
    if sec.raw("num_global_key_value_heads") is None:
        return k_per_layer
    if sec.flag("attention_k_eq_v") is not True:
        sec.sources["num_global_key_value_heads"] = "ignored: attention_k_eq_v is not true"
        return k_per_layer
    k_full = sec.count("num_kv_heads_full_layers", ("num_global_key_value_heads",))
    base = k_per_layer or [k] * len(kinds)
    return [k_full if kind == "full" else base[i] for i, kind in enumerate(kinds)]


def _sliding_kv_heads(sec: Section, kinds: list[str], k: int, k_per_layer: list[int] | None) -> list[int] | None:
    """MiMo-V2: sliding-window layers have their own KV-head count (swa_num_key_value_heads)."""
    if sec.raw("swa_num_key_value_heads") is None or "sliding" not in kinds:
        return k_per_layer
    k_swa = sec.count("num_kv_heads_sliding_layers", ("swa_num_key_value_heads",))
    for key, full in (("swa_head_dim", "head_dim"), ("swa_v_head_dim", "v_head_dim"),
                      ("swa_num_attention_heads", "num_attention_heads")):
        if sec.raw(key) is not None and sec.raw(key) != sec.raw(full):
            sec.warnings.append(f"{sec.path(key)}={show(sec.raw(key))} differs from {full}; not modelled")
    base = k_per_layer or [k] * len(kinds)
    return [k_swa if kind == "sliding" else base[i] for i, kind in enumerate(kinds)]


def _global_head_dims(sec: Section, kinds: list[str], head_dim: int) -> list[int] | None:
    """Gemma-4: full-attention layers use global_head_dim, the others head_dim."""
    if sec.raw("global_head_dim") is None and "global_head_dim" not in sec.defaults:
        return None
    global_dim = sec.count("head_dim_full_layers", ("global_head_dim",))
    if global_dim is None or global_dim == head_dim:
        return None
    return [global_dim if kind == "full" else head_dim for kind in kinds]


def _context_length(sec: Section, keys: tuple[str, ...]) -> int | None:
    try:
        return sec.count("max_position_embeddings", keys, hi=MAX_TOKENS)
    except GeometryError as exc:  # the context length only qualifies windows; not worth failing over
        sec.warnings.append(f"{exc}; context length ignored")
        sec.sources.pop("max_position_embeddings", None)
        return None


def _mamba_ssm_only(sec: Section) -> bool:
    """The mamba_ssm package's own config.json (no model_type): Mamba layers, and attention only
    where ``attn_layer_idx`` lists layers."""
    return isinstance(sec.raw("ssm_cfg"), dict) and not sec.raw("attn_layer_idx")


def _attention_free_kind(model_type: str | None, family: str | None, architectures: tuple[str, ...], *,
                         mamba_ssm_only: bool = False) -> str | None:
    if mamba_ssm_only:
        return "mamba"
    types = {t.lower() for t in (model_type, family) if t}
    if types & ATTENTION_FREE_MODEL_TYPES or any(a.startswith(ATTENTION_FREE_ARCH_PREFIXES) for a in architectures):
        return "mamba" if any("mamba" in t for t in types) or any("Mamba" in a for a in architectures) else "recurrent"
    return None


def _no_attention(base: dict, kinds: tuple[str, ...], warnings: list[str], sec: Section) -> Geometry:
    return Geometry(**base, attention_kind="none", is_hybrid=False, num_query_heads=None, num_kv_heads=None,
                    group_size=None, head_dim=None, v_head_dim=None, kv_layers=0, sliding_window=None,
                    sliding_layers=0, chunked=False, chunk_size=None, mla=None, kv_elements_per_token=0,
                    layer_kinds=kinds, warnings=tuple(warnings), uncertain=bool(sec.uncertain))


def _mark_cross_attention(sec: Section, kinds: list[str]) -> None:
    """Mllama counts its cross-attention layers in num_hidden_layers; they cache image tokens."""
    layers = sec.raw("cross_attention_layers")
    if not isinstance(layers, list) or not layers:
        return
    path = sec.path("cross_attention_layers")
    sec.sources["cross_attention_layers"] = path
    for i, value in enumerate(layers):
        index = to_int(value, f"{path}[{i}]", sec.warnings, lo=0)
        if index >= len(kinds):
            sec.warnings.append(f"{path}[{i}]={index} is beyond the {len(kinds)} layers; ignored")
        else:
            kinds[index] = "cross"


def _windows(sec: Section, kinds: list[str], explicit: str | None, model_type: str | None,
             max_pos: int | None) -> tuple[int | None, int | None]:
    """Mark sliding and chunked layers in ``kinds``; return (sliding_window, chunk_size)."""
    n, warn = len(kinds), sec.warnings.append
    window = sec.window("sliding_window", "sliding_window")
    if window is None and (model_type or sec.family) == "gpt_neo":
        # GPT-Neo's local layers use window_size; GPT-J's early files carry a window_size
        # too but attend globally, so the key counts only for gpt_neo.
        window = sec.window("sliding_window", "window_size")
    switch = sec.flag("use_sliding_window")
    family = sec.family or model_type or ""
    if window is not None and (switch is False or (switch is None and family in SLIDING_WINDOW_OFF_BY_DEFAULT)):
        why = "use_sliding_window is false" if switch is False else (
            f"no use_sliding_window, which {family} defaults to false")
        warn(f"{sec.path('sliding_window')}={window} is inert ({why})")
        sec.sources.pop("sliding_window", None)
        window = None
    if window is not None and explicit is None:
        slides, source = sliding_schedule(sec, n, model_type)
        for i in range(n):
            if slides[i] and kinds[i] == "full":
                kinds[i] = "sliding"
        sec.sources["sliding_layers"] = source
    elif window is not None and "sliding" not in kinds:
        warn(f"{sec.path('sliding_window')}={window} is declared but {explicit} marks no sliding layer")
        sec.sources.pop("sliding_window", None)
        window = None
    chunk = sec.window("chunk_size", "attention_chunk_size")
    if chunk is not None and explicit is None:
        chunked, source = chunk_schedule(sec, n)
        for i in range(n):
            if chunked[i] and kinds[i] == "full":
                kinds[i] = "chunked"
        sec.sources["chunked_layers"] = source
    for kind, size, key in (("sliding", window, "sliding_window"), ("chunked", chunk, "attention_chunk_size")):
        if kind not in kinds:
            continue
        if size is None:
            warn(f"layers are marked {kind} but {sec.path(key)} is not set; treated as full attention")
        elif max_pos is not None and size >= max_pos:
            warn(f"{sec.path(key)}={size} is not smaller than max_position_embeddings={max_pos};"
                 " treated as full attention")
        else:
            continue
        kinds[:] = ["full" if x == kind else x for x in kinds]
    return window, chunk


def _per_layer(sec: Section, value: int | list[int], field_name: str, list_key: str,
               n_layers: int) -> list[int] | None:
    """Per-layer counts: the value itself if it is a list (OpenELM), else a *_per_layer list (Laguna)."""
    if isinstance(value, list):
        return fit_to_layers(value, n_layers, sec.sources.get(field_name, field_name), sec.warnings)
    extra = sec.raw(list_key)
    if not isinstance(extra, list) or not extra:
        return None
    path = sec.path(list_key)
    values = [to_int(v, f"{path}[{i}]", sec.warnings) for i, v in enumerate(extra)]
    values = fit_to_layers(values, n_layers, path, sec.warnings)
    if len(set(values)) > 1:
        sec.warnings.append(f"{path} varies ({min(values)}-{max(values)}); the top-level count is reported")
    return values


def _check_groups(sec: Section, kinds: list[str], h: int, k: int, q_per_layer: list[int] | None,
                  k_per_layer: list[int] | None, *, mla: bool) -> None:
    hpath, kpath = sec.sources.get("num_query_heads", "heads"), sec.sources.get("num_kv_heads", "kv heads")
    for i, kind in enumerate(kinds):
        if kind not in KV_KINDS:
            continue
        hi = q_per_layer[i] if q_per_layer else h
        ki = k_per_layer[i] if k_per_layer else k
        at = f" at layer {i}" if q_per_layer or k_per_layer else ""
        if ki > hi:
            raise GeometryError(f"{kpath}={ki} exceeds {hpath}={hi}{at}")
        if hi % ki and not mla:
            raise GeometryError(f"{hpath}={hi} is not divisible by {kpath}={ki}{at}")


def _mla(sec: Section, h: int, hidden: int | None) -> MLAGeometry | None:
    if sec.raw("kv_lora_rank") is None:
        return None
    rank = sec.count("mla.kv_lora_rank", ("kv_lora_rank",))
    rope = sec.count("mla.qk_rope_head_dim", ("qk_rope_head_dim",))
    if rope is None:
        raise GeometryError(f"{sec.path('kv_lora_rank')} is set but qk_rope_head_dim is missing;"
                            " the MLA cache size is unknown")
    nope = sec.count("mla.qk_nope_head_dim", ("qk_nope_head_dim",))
    v = sec.count("mla.v_head_dim", ("v_head_dim",))
    if v is None and hidden is not None and hidden % h == 0:  # MiniCPM3's code uses hidden / heads
        v = hidden // h
        sec.sources["mla.v_head_dim"] = f"derived:{sec.sources['hidden_size']}/{sec.sources['num_query_heads']}"
        sec.warnings.append(f"MLA without v_head_dim; using hidden_size / heads = {v}")
    elif v is None:
        sec.warnings.append("MLA without v_head_dim and no hidden size to derive it from")
    q_rank = sec.count("mla.q_lora_rank", ("q_lora_rank",))
    if q_rank is None:
        sec.sources["mla.q_lora_rank"] = "default:none (queries not compressed)"
    return MLAGeometry(kv_lora_rank=rank, qk_rope_head_dim=rope, qk_nope_head_dim=nope, v_head_dim=v,
                       q_lora_rank=q_rank)


def _mla_head_dims(sec: Section, mla: MLAGeometry, h: int, hidden: int | None) -> int | None:
    """MLA's q/k head dim is nope + rope; a declared head_dim (GLM-5 writes 64) is not used."""
    declared = sec.raw("head_dim")
    if mla.qk_nope_head_dim is not None:
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        sec.sources["head_dim"] = f"derived:{sec.path('qk_nope_head_dim')}+{sec.path('qk_rope_head_dim')}"
        if declared is not None and declared != qk:
            sec.warnings.append(f"{sec.path('head_dim')}={show(declared)} is not the MLA q/k head dim"
                                f" (qk_nope + qk_rope = {qk}); ignored")
        return qk
    sec.warnings.append("MLA without qk_nope_head_dim; q/k head dim taken from head_dim or hidden / heads")
    return _head_dim(sec, h, hidden, varying_heads=False)


def _head_dim(sec: Section, h: int, hidden: int | None, *, varying_heads: bool) -> int:
    head_dim = sec.count("head_dim", HEAD_DIM_KEYS)
    channels = sec.raw("kv_channels")
    if head_dim is not None:
        if channels is not None and channels != head_dim:
            sec.warnings.append(f"{sec.path('kv_channels')}={show(channels)} disagrees with head_dim={head_dim};"
                                " using head_dim")
    elif channels is not None:
        head_dim = sec.count("head_dim", ("kv_channels",))
    if head_dim is not None:
        if hidden is not None and not hidden / 4 <= head_dim * h <= hidden * 4:
            sec.warnings.append(f"head_dim {head_dim} x {h} heads is far from hidden size {hidden}")
        return head_dim
    if varying_heads:
        raise GeometryError("per-layer head counts need an explicit head_dim")
    if hidden is None:
        raise GeometryError(f"no head_dim and no hidden size to derive it from (looked for {', '.join(WIDTH_KEYS)})")
    if hidden % h:
        raise GeometryError(f"{sec.sources['hidden_size']}={hidden} is not divisible by"
                            f" {sec.sources['num_query_heads']}={h} and no head_dim is given")
    sec.sources["head_dim"] = f"derived:{sec.sources['hidden_size']}/{sec.sources['num_query_heads']}"
    return hidden // h
