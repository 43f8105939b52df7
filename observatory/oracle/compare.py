"""Our geometry beside transformers' reading of the same config: a verdict, with both values named.

The oracle's terms are per cached layer: (KV heads, K head dim, V head dim, elements per token).
Ours are put in those terms (``ours``) and compared layer by layer, then the totals, the query
heads, the kind, and the cross-attention cache per source token.

Where we differ from transformers on purpose, ``DIFFERENCES`` names the difference and its reason,
and each entry checks that the difference has exactly its stated shape: a config whose reading
differs in any other way is a disagreement, not a listed difference. A verdict of ``agree`` lists
the differences that were needed to reach it.

Pure: plain values in, plain values out (no transformers, no store), so the parent process, the
tests and ``observatory inspect --oracle`` share it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from observatory.core.config_dialects import ConfigError, GeometryError
from observatory.core.geometry import Geometry
from observatory.core.params import estimate_parameters
from observatory.oracle.reading import Reading

STATUSES = ("agree", "disagree", "unsupported", "failed")

# Parameter counts: our estimate of what the oracle builds (no LM head, no vision or audio towers,
# no MTP layers) within this fraction counts as agreement. Shown beside the verdict; the verdict
# itself is about the geometry, which is what ``uncertain`` keeps out of headlines.
PARAMETER_TOLERANCE = 0.03


@dataclass(frozen=True)
class Verdict:
    status: str  # agree | disagree | unsupported | failed
    reason: str | None = None  # for disagree: both values named; unsupported/failed: why
    differences: tuple[str, ...] = ()  # DIFFERENCES ids that explain an agreement
    mismatches: tuple[str, ...] = field(default=())  # one line per value that differs, ours then theirs


@dataclass(frozen=True)
class Difference:
    """A deliberate difference from transformers: ``holds`` is true when the reading differs from
    ours in exactly this way (and only then may the comparison use it)."""

    id: str
    reason: str
    holds: Callable[[dict, Geometry, Reading], bool]


def kind_of(k: int, h: int) -> str:
    return "MHA" if k == h else "MQA" if k == 1 else "GQA"


def ours(geom: Geometry) -> dict[int, tuple[int, int, int, int]]:
    """Per cached layer: (KV heads, K head dim, V head dim, elements), in the oracle's terms."""
    out = {}
    for i, elements in enumerate(geom.layer_kv_elements()):
        if not elements:
            continue
        if geom.mla is not None:  # one latent: kv_lora_rank in the key tensor, the rope part in the value
            out[i] = (1, geom.mla.kv_lora_rank, geom.mla.qk_rope_head_dim, elements)
            continue
        k = geom.kv_heads_per_layer[i] if geom.kv_heads_per_layer else geom.num_kv_heads
        d = geom.head_dims_per_layer[i] if geom.head_dims_per_layer else geom.head_dim
        v = geom.head_dims_per_layer[i] if geom.head_dims_per_layer else geom.v_head_dim
        out[i] = (k, d, v, elements)
    return out


def theirs(reading: Reading) -> dict[int, tuple[int, int, int, int]]:
    return {i: (c.k_heads, c.k_dim, c.v_dim, c.elements) for i, c in sorted(reading.self_attention.items())}


def _falcon_groups(raw: dict, geom: Geometry, reading: Reading) -> bool:
    layers = list(reading.self_attention.values())
    h, k = geom.num_query_heads, geom.num_kv_heads
    return (raw.get("model_type") == "falcon" and bool(raw.get("new_decoder_architecture")) and bool(layers)
            and k is not None and k < (h or 0) and len(layers) == geom.kv_layers
            and {(c.k_heads, c.k_dim, c.v_heads, c.v_dim) for c in layers} == {(h, geom.head_dim, h, geom.v_head_dim)}
            and reading.query_heads == h
            and reading.elements_per_token == geom.kv_elements_per_token * h // k)


def _opt_d_model(raw: dict, geom: Geometry, reading: Reading) -> bool:
    layers = list(reading.self_attention.values())
    h = geom.num_query_heads or 0
    return (raw.get("model_type") == "opt" and "d_model" in raw and "hidden_size" not in raw and bool(layers)
            and h > 0 and len(layers) == geom.kv_layers and reading.query_heads == h
            and {(c.k_heads, c.k_dim, c.v_heads, c.v_dim) for c in layers} == {(h, 768 // h, h, 768 // h)}
            and 768 // h != geom.head_dim)


def _encoder_only(raw: dict, geom: Geometry, reading: Reading) -> bool:
    shapes = {(c.k_heads, c.k_dim, c.v_heads, c.v_dim) for c in reading.self_attention.values()}
    return (geom.encoder_only and (geom.kv_layers, geom.kv_elements_per_token) == (0, 0)
            and shapes == {(geom.num_kv_heads, geom.head_dim, geom.num_kv_heads, geom.v_head_dim)}
            and len(reading.self_attention) == geom.num_layers
            and reading.query_heads == geom.num_query_heads
            and geom.attention_kind == kind_of(geom.num_kv_heads, geom.num_query_heads))


def _mla_latent(raw: dict, geom: Geometry, reading: Reading) -> bool:
    mla = geom.mla
    return (mla is not None and bool(reading.self_attention)
            and {(c.k_heads, c.k_dim, c.v_heads, c.v_dim) for c in reading.self_attention.values()}
            == {(1, mla.kv_lora_rank, 1, mla.qk_rope_head_dim)})


def _kind_of_declared_k(raw: dict, geom: Geometry, reading: Reading) -> bool:
    ks = Counter(c.k_heads for c in reading.self_attention.values())
    return (bool(geom.kv_heads_per_layer) and len(ks) > 1 and geom.num_kv_heads in ks
            and ks.most_common(1)[0][0] != geom.num_kv_heads)


# Every entry is tested (tests/unit/test_oracle_compare.py) on a config that needs it.
DIFFERENCES: dict[str, Difference] = {d.id: d for d in (
    Difference("mla-latent",
               "MLA under vLLM's convention: transformers (5.x) caches the same latent vLLM does, one 'head' holding"
               " kv_lora_rank (the key tensor) and qk_rope_head_dim (the value tensor); we report the declared"
               " logical KV heads and the q/k head dim, so the cache is compared as that latent",
               _mla_latent),
    Difference("falcon-kv-groups",
               "transformers' Falcon (new_decoder_architecture) repeats the KV groups for every query head before"
               " caching them; vLLM caches the groups, as we count",
               _falcon_groups),
    Difference("encoder-only-no-cache",
               "an encoder reads its whole input at once and never decodes token by token: handed a cache,"
               " transformers' encoder fills it, but nothing is kept between steps, so we count no KV cache"
               " (the per-layer heads and head dims still agree)",
               _encoder_only),
    Difference("opt-d_model-width",
               "this OPT revision spells the width d_model; transformers 5's OPTConfig reads only hidden_size and"
               " builds its 768-wide default, not the model; our reading follows the file",
               _opt_d_model),
    Difference("kind-of-declared-k",
               "KV heads vary by layer (MiMo-V2-Flash: 8 on its sliding layers, 4 declared): the kind we headline is that of the config's"
               " num_key_value_heads layers, not the most common layer's (every layer is still compared)",
               _kind_of_declared_k),
)}

# Families transformers builds, but not with a recording cache on the meta device: the probe fails
# for a known reason, recorded with the verdict ``failed`` and this explanation.
PROBE_LIMITS = {
    "minimax": "MiniMax keeps a cache of its own (linear-attention state) and refuses a DynamicCache",
    "paddleocr_vl": "AutoModel cannot build PaddleOCR-VL's text config on its own",
    "switch_transformers": "Switch's expert routing calls torch.nonzero, which has no meta implementation",
    "dbrx": "DBRX's expert routing calls torch.nonzero, which has no meta implementation",
    "mllama": "AutoModel cannot build Mllama's text config on its own (its cross-attention layers need the vision"
              " model's output)",
}
# Differences whose check covers the whole reading (every layer, the totals): they may stand in for
# every mismatch. The others are conventions of the comparison itself, applied inside ``mismatches``.
WHOLE_READING_DIFFERENCES = ("falcon-kv-groups", "encoder-only-no-cache", "opt-d_model-width")
# Families whose base model keeps no KV cache of transformers' kind: only the parameter count is read.
NO_CACHE_TYPES = {"openai-gpt"}  # OpenAIGPTModel takes no past_key_values
NO_CACHE_REASON = "transformers' {model_type} model keeps no KV cache: there is no cache to compare the geometry with"


def _layer_text(shape: tuple[int, int, int, int] | None) -> str:
    if shape is None:
        return "no cache"
    k, kd, vd, elements = shape
    return f"{k} KV heads, d {kd}/{vd} ({elements:,} elements)"


def mismatches(geom: Geometry, reading: Reading) -> tuple[list[str], tuple[str, ...]]:
    """Every value that differs, named with ours first, then transformers' (empty when all agree),
    and the conventions (``DIFFERENCES`` ids) the comparison relied on."""
    if reading.attention_free:
        if (geom.attention_kind, geom.kv_layers, geom.kv_elements_per_token) == ("none", 0, 0):
            return [], ()
        return [(f"attention: ours {geom.attention_kind} with {geom.kv_layers} KV layers, transformers' config"
                 " class has no attention heads")], ()
    out: list[str] = []
    used: list[str] = []
    a, b = ours(geom), theirs(reading)
    runs: list[list] = []  # [first, last, ours, theirs]: consecutive layers that differ alike
    for i in sorted(set(a) | set(b)):
        if a.get(i) != b.get(i):
            if runs and runs[-1][1] == i - 1 and runs[-1][2:] == [a.get(i), b.get(i)]:
                runs[-1][1] = i
            else:
                runs.append([i, i, a.get(i), b.get(i)])
    for first, last, mine, other in runs[:3]:
        where = f"layer {first}" if first == last else f"layers {first}–{last}"
        out.append(f"{where}: ours {_layer_text(mine)}, transformers {_layer_text(other)}")
    if len(runs) > 3:
        out.append(f"... and {len(runs) - 3} more runs of layers")
    if geom.kv_layers != len(reading.self_attention):
        out.append(f"KV layers: ours {geom.kv_layers}, transformers {len(reading.self_attention)}")
    if geom.kv_elements_per_token != reading.elements_per_token:
        out.append(f"KV elements per token: ours {geom.kv_elements_per_token:,},"
                   f" transformers {reading.elements_per_token:,}")
    if reading.query_heads is not None and geom.num_query_heads != reading.query_heads:
        out.append(f"query heads: ours {geom.num_query_heads}, transformers {reading.query_heads}")
    unequal = sorted(i for i, c in reading.self_attention.items() if c.k_heads != c.v_heads)
    if unequal:
        out.append(f"transformers caches K and V with different head counts on {len(unequal)} layers"
                   f" (first: layer {unequal[0]})")
    h = reading.query_heads or geom.num_query_heads or 0
    if geom.mla is not None:
        if geom.attention_kind != "MLA":
            out.append(f"kind: ours {geom.attention_kind}, transformers caches an MLA latent")
        elif not out and _mla_latent({}, geom, reading):
            used.append("mla-latent")
    elif reading.self_attention:
        ks = Counter(c.k_heads for c in reading.self_attention.values())
        common = ks.most_common(1)[0][0]
        if _kind_of_declared_k({}, geom, reading):
            expected = kind_of(geom.num_kv_heads, h)
            used.append("kind-of-declared-k")
        else:
            expected = kind_of(common, h)
        if geom.attention_kind != expected:
            out.append(f"kind: ours {geom.attention_kind}, transformers {kind_of(common, h)} (K = {common} on"
                       " most layers)")
    elif geom.kv_layers:
        out.append("transformers cached nothing for a model we say decodes")
    cross = reading.cross_elements_per_source_token
    if geom.is_encoder_decoder != bool(reading.cross_attention) or geom.cross_kv_elements_per_source_token != cross:
        out.append(f"cross-attention elements per source token: ours {geom.cross_kv_elements_per_source_token:,},"
                   f" transformers {cross:,}")
    return out, tuple(used)


def judge(raw: dict, geom: Geometry, reading: Reading) -> Verdict:
    """The verdict on our geometry of ``raw`` against transformers' ``reading`` of it."""
    model_type = raw.get("model_type")
    if model_type in NO_CACHE_TYPES and not reading.self_attention and not reading.attention_free:
        return Verdict("unsupported", NO_CACHE_REASON.format(model_type=model_type))
    found, used = mismatches(geom, reading)
    if not found:
        return Verdict("agree", differences=used)
    for difference in WHOLE_READING_DIFFERENCES:
        if DIFFERENCES[difference].holds(raw, geom, reading):
            return Verdict("agree", differences=(difference,))
    return Verdict("disagree", reason="; ".join(found), mismatches=tuple(found))


def comparable_estimate(raw: dict) -> int | None:
    """Our parameter estimate of what the oracle builds: the base model, without the LM head, vision
    and audio towers or MTP layers; None when we have no estimate."""
    try:
        estimate = estimate_parameters(raw)
    except (ConfigError, GeometryError):
        return None
    parts = estimate.breakdown
    return estimate.total - sum(parts.get(k, 0) for k in ("lm_head", "vision", "audio", "mtp"))


def parameter_error(estimate_comparable: int | None, oracle_parameters: int | None) -> float | None:
    """ours / theirs - 1, or None when either is unknown."""
    if not estimate_comparable or not oracle_parameters:
        return None
    return estimate_comparable / oracle_parameters - 1


def side_by_side(geom: Geometry, reading: Reading | None, our_parameters: int | None = None
                 ) -> list[tuple[str, str, str]]:
    """(what, ours, transformers') rows for a printed comparison; per-layer rows group runs of
    consecutive layers whose pair of readings is the same."""
    def num(value) -> str:
        return "—" if value is None else f"{value:,}"

    if reading is None:
        return []
    rows = [("query heads", num(geom.num_query_heads), num(reading.query_heads)),
            ("layers holding a KV cache", num(geom.kv_layers), num(len(reading.self_attention))),
            ("KV elements per token", num(geom.kv_elements_per_token),
             "—" if reading.attention_free else num(reading.elements_per_token))]
    if geom.is_encoder_decoder or reading.cross_attention:
        rows.append(("cross elements per source token", num(geom.cross_kv_elements_per_source_token),
                     num(reading.cross_elements_per_source_token)))
    rows.append(("parameters (base model)", num(our_parameters), num(reading.parameters or None)))
    a, b = ours(geom), theirs(reading)

    def shape(value: tuple[int, int, int, int] | None, heads_v: int | None = None) -> str:
        if value is None:
            return "no cache"
        k, kd, vd, _ = value
        return f"{k}×{kd} K, {heads_v if heads_v is not None else k}×{vd} V"

    layers = sorted(set(a) | set(b))
    runs: list[tuple[int, int, str, str]] = []
    for i in layers:
        pair = (shape(a.get(i)), shape(b.get(i), reading.self_attention[i].v_heads if i in b else None))
        if runs and runs[-1][1] == i - 1 and runs[-1][2:] == pair:
            runs[-1] = (runs[-1][0], i, *pair)
        else:
            runs.append((i, i, *pair))
    for first, last, mine, theirs_ in runs:
        rows.append((f"layer {first}" if first == last else f"layers {first}–{last}", mine, theirs_))
    return rows
