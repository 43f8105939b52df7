"""Well-known claims about attention state, recomputed from geometry: pure, no I/O.

Each claim is a statement quoted from a source, the models (and devices) it is about, and a
check that recomputes the claimed numbers with ``kvcache`` and ``roofline`` from the stored
geometry. A check returns plain values: the figures side by side (claimed, ours, unit, how),
the arithmetic as lines of text, a verdict and the reason for it.

Verdicts:

- ``holds``: our arithmetic reproduces the claim as stated;
- ``holds with caveats``: it reproduces only under a reading the statement leaves implicit
  (a unit, a dtype, a baseline, a batch), which the summary names;
- ``does not hold``: no reading of the stated setting reproduces it;
- ``unsourced``: no primary source for the claim has been found, whatever our arithmetic shows
  (it stays beside the verdict as ``arithmetic_verdict``): a number nobody can trace is not
  confirmed by reproducing it;
- ``None``: the claim could not be checked (a model it needs is not in the store).

A figure "matches" when it is within ``MATCH_TOLERANCE`` (relative) of the claimed value: the
sources quote two to four significant digits. Units are explicit: GB = 10^9 bytes,
GiB = 2^30 bytes; "elements" are cached numbers, before multiplying by bytes per element.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from observatory.core.deployment import DP_ATTENTION, group_capacity, layout
from observatory.core.geometry import Geometry
from observatory.core.kvcache import (
    GB,
    GiB,
    bytes_per_token,
    cache_bytes,
    mha_counterfactual,
)
from observatory.core.roofline import (
    Machine,
    MeasuredMachine,
    decode_estimate,
    max_batch,
)
from observatory.core.trends import THIN_N
from observatory.core.uptraining import judge as judge_uptraining

HOLDS, CAVEATS, FAILS, UNSOURCED = "holds", "holds with caveats", "does not hold", "unsourced"
VERDICTS = (HOLDS, CAVEATS, FAILS, UNSOURCED)
MATCH_TOLERANCE = 0.02

LLAMA2_70B = "meta-llama/Llama-2-70b-hf"
DEEPSEEK_V2 = "deepseek-ai/DeepSeek-V2"
DEEPSEEK_67B = "deepseek-ai/deepseek-llm-67b-base"
DEEPSEEK_V3 = "deepseek-ai/DeepSeek-V3"
LLAMA31_8B = "meta-llama/Llama-3.1-8B"
LLAMA31_70B = "meta-llama/Llama-3.1-70B-Instruct"  # same geometry as the base model
LLAMA31_405B = "meta-llama/Llama-3.1-405B"
QWEN25_72B = "Qwen/Qwen2.5-72B"
MISTRAL_7B = "mistralai/Mistral-7B-v0.1"
LLAMA3_70B = "meta-llama/Meta-Llama-3-70B"
STARCODER = "bigcode/starcoder"  # MQA: one KV head
H100 = "h100-sxm"


@dataclass(frozen=True)
class Source:
    title: str
    url: str | None  # None: the primary source has not been found, so the claim is unsourced
    where: str  # section, table, figure or page
    note: str = ""

    @property
    def found(self) -> bool:
        return self.url is not None


@dataclass(frozen=True)
class Inputs:
    """What the checks read: geometry and parameter count per model id, devices by catalog id."""

    geometries: Mapping[str, Geometry]
    parameters: Mapping[str, int | None] = field(default_factory=dict)
    devices: Mapping[str, Machine] = field(default_factory=dict)
    # The originals' quarterly TP = 8 series: {"label", "n", "share", "share_mla"} per quarter, oldest first.
    tp8_quarters: tuple[dict, ...] = ()
    # The newest complete ``observatory uptrain`` run (its results dict), or None: none has run.
    uptrain: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Claim:
    id: str
    title: str
    statement: str
    source: Source
    models: tuple[str, ...]
    check: Callable[[Inputs], dict]
    devices: tuple[str, ...] = ()
    measurable: bool = False  # a spot-benchmark of the model's shape could measure it


def matches(ours: float | None, claimed: float | tuple[float, float] | None,
            tolerance: float = MATCH_TOLERANCE) -> bool:
    """Whether ``ours`` equals ``claimed`` within the relative tolerance (quotes are rounded), or
    lies in it when the claim is a range ``(low, high)``."""
    if ours is None or claimed is None:
        return False
    if isinstance(claimed, tuple):
        low, high = claimed
        return low * (1 - tolerance) <= ours <= high * (1 + tolerance)
    if claimed == 0:
        return ours == 0
    return abs(ours - claimed) <= tolerance * abs(claimed)


def _figure(label: str, claimed: float | tuple[float, float] | None, ours: float | None, unit: str,
            how: str) -> dict:
    """One row of a claim's table. A claimed range is given as ``claimed`` (its low end) and
    ``claimed_high``; ``matches`` is None where the source claims nothing for the row."""
    low, high = claimed if isinstance(claimed, tuple) else (claimed, None)
    return {"label": label, "claimed": low, "claimed_high": high, "ours": ours, "unit": unit, "how": how,
            "matches": matches(ours, claimed) if claimed is not None else None}


def _result(verdict: str, summary: str, figures: list[dict], steps: list[str], **extra: Any) -> dict:
    return {"verdict": verdict, "summary": summary, "figures": figures, "steps": steps, **extra}


# ---- Llama 2 70B at 2,048 tokens: the textbook example ------------------------------------------

TEXTBOOK_MHA_GB, TEXTBOOK_GQA_GB = 2.68, 0.33


def _llama2_70b_2048(inputs: Inputs) -> dict:
    geom = inputs.geometries[LLAMA2_70B]
    mha_geom = mha_counterfactual(geom)
    context = 2048
    gqa, mha = cache_bytes(geom, context, 1, "fp16"), cache_bytes(mha_geom, context, 1, "fp16")
    layers = geom.kv_layers
    gqa_elements, mha_elements = geom.kv_elements_per_token * context, mha_geom.kv_elements_per_token * context
    # Each reading of "the cache" a textbook might have meant, in GB, as (label, MHA, GQA).
    readings = [
        ("K and V, all layers, fp16 (2 bytes per element): the cache a server allocates", mha / GB, gqa / GB),
        ("the same bytes in GiB (2^30 bytes): a unit slip changes them by 7%, not 2x", mha / GiB, gqa / GiB),
        ("K and V, all layers, 1 byte per element (an fp8/int8 cache), i.e. the element count in billions",
         mha_elements / GB, gqa_elements / GB),
        ("K alone (or V alone), all layers, fp16", mha / 2 / GB, gqa / 2 / GB),
        ("K and V, one layer, fp16", mha / layers / GB, gqa / layers / GB),
    ]
    rows = [{"reading": label, "mha_gb": m, "gqa_gb": g,
             "matches": matches(m, TEXTBOOK_MHA_GB) and matches(g, TEXTBOOK_GQA_GB)} for label, m, g in readings]
    ratio = mha / gqa
    figures = [
        _figure("MHA cache, fp16", TEXTBOOK_MHA_GB, mha / GB, "GB",
                f"2 x {mha_geom.num_kv_heads} heads x {geom.head_dim} x {layers} layers x {context:,} tokens x 2 B"),
        _figure("GQA cache, fp16", TEXTBOOK_GQA_GB, gqa / GB, "GB",
                f"2 x {geom.num_kv_heads} heads x {geom.head_dim} x {layers} layers x {context:,} tokens x 2 B"),
        _figure("MHA / GQA", TEXTBOOK_MHA_GB / TEXTBOOK_GQA_GB, ratio, "x", "G = H / K"),
        _figure("MHA cache, K and V elements", None, mha_elements / GB, "billion elements", "bytes at 1 B/element"),
    ]
    steps = [
        f"GQA: 2 (K, V) x {geom.num_kv_heads} KV heads x {geom.head_dim} head dim x {layers} layers x "
        f"{context:,} tokens = {gqa_elements:,} elements; x 2 bytes (fp16) = {gqa:,} B = {gqa / GB:.2f} GB "
        f"= {gqa / GiB:.3f} GiB",
        f"MHA counterfactual (K = H = {mha_geom.num_kv_heads}): {mha_elements:,} elements = {mha:,} B = "
        f"{mha / GB:.2f} GB = {mha / GiB:.2f} GiB",
        f"ratio {ratio:g} = G: the 8x saving holds at any dtype",
        "the quoted 2.68 GB / 0.33 GB equal the element counts (2.68e9 and 0.34e9): bytes at 1 byte per "
        "element, or K without V at fp16; not GB vs GiB (7%), not one layer (67 MB), not batch (batch 1)",
    ]
    fp16_holds, other_holds = rows[0]["matches"], any(r["matches"] for r in rows[1:])
    verdict = HOLDS if fp16_holds else CAVEATS if other_holds and matches(ratio, figures[2]["claimed"]) else FAILS
    return _result(
        verdict,
        f"The 8x ratio holds exactly (G = {geom.group_size:g}). The absolute figures are half the fp16 cache: "
        f"they equal the number of cached elements, so they hold for a 1-byte (fp8/int8) cache, or for keys "
        f"alone. At fp16/bf16 the cache is {mha / GB:.2f} GB ({mha / GiB:.2f} GiB) as MHA and "
        f"{gqa / GB:.2f} GB ({gqa / GiB:.3f} GiB) as GQA.",
        figures, steps, readings=rows)


# ---- DeepSeek-V2: "reduces the KV cache by 93.3%" ------------------------------------------------

DEPLOYED_KV_BITS_V2 = 6  # DeepSeek-V2 §3.2.3: KV cache quantised to "6 bits on average" per element
CLAIMED_REDUCTION_V2 = 0.933


def _deepseek_v2(inputs: Inputs) -> dict:
    v2, d67 = inputs.geometries[DEEPSEEK_V2], inputs.geometries[DEEPSEEK_67B]
    v2_bf16, d67_bf16 = bytes_per_token(v2, "bf16"), bytes_per_token(d67, "bf16")
    v2_deployed = v2.kv_elements_per_token * DEPLOYED_KV_BITS_V2 / 8
    mha_bf16 = bytes_per_token(mha_counterfactual(v2), "bf16")
    as_deployed = 1 - v2_deployed / d67_bf16
    equal_precision = 1 - v2_bf16 / d67_bf16
    vs_mha = 1 - v2_bf16 / mha_bf16
    rank, rope = v2.mla.kv_lora_rank, v2.mla.qk_rope_head_dim
    figures = [
        _figure("vs DeepSeek 67B, V2 cache at 6 bits, 67B at bf16", CLAIMED_REDUCTION_V2, as_deployed, "share",
                f"1 - {v2_deployed:,.0f} B / {d67_bf16:,} B per token"),
        _figure("vs DeepSeek 67B, both bf16", CLAIMED_REDUCTION_V2, equal_precision, "share",
                f"1 - {v2_bf16:,} B / {d67_bf16:,} B per token"),
        _figure("vs DeepSeek-V2's MHA twin, both bf16", CLAIMED_REDUCTION_V2, vs_mha, "share",
                f"1 - {v2_bf16:,} B / {mha_bf16:,} B per token"),
    ]
    steps = [
        f"DeepSeek-V2 (MLA): {v2.kv_layers} layers x ({rank} latent + {rope} rope) = "
        f"{v2.kv_elements_per_token:,} elements per token; bf16 {v2_bf16:,} B; at {DEPLOYED_KV_BITS_V2} bits "
        f"{v2_deployed:,.0f} B",
        f"DeepSeek 67B (GQA, {d67.num_kv_heads} KV heads of {d67.num_query_heads}): {d67.kv_layers} layers x 2 x "
        f"{d67.num_kv_heads} x {d67.head_dim} = {d67.kv_elements_per_token:,} elements; bf16 {d67_bf16:,} B",
        f"MHA twin of V2 ({v2.num_query_heads} heads caching {v2.head_dim}-dim keys and "
        f"{v2.mla.v_head_dim}-dim values): {mha_bf16:,} B per token in bf16",
        f"reductions: {as_deployed:.1%} as deployed, {equal_precision:.1%} at equal precision, "
        f"{vs_mha:.1%} against MHA",
    ]
    verdict = HOLDS if matches(equal_precision, CLAIMED_REDUCTION_V2) else (
        CAVEATS if matches(as_deployed, CLAIMED_REDUCTION_V2) else FAILS)
    return _result(
        verdict,
        f"The paper's 93.3% is against DeepSeek 67B, a GQA model (8 KV heads, 95 layers), not MHA, and it is "
        f"reproduced ({as_deployed:.1%}) only with V2's cache quantised to {DEPLOYED_KV_BITS_V2} bits per element "
        f"against 67B at bf16. At equal precision MLA saves {equal_precision:.1%} against 67B; against V2's own "
        f"MHA twin it saves {vs_mha:.1%}, so \"93.3% smaller than MHA\" names the wrong baseline and understates "
        f"the MLA-versus-MHA saving.",
        figures, steps)


# ---- TensorRT-LLM: +30-50% throughput for a 70B GQA model against its MHA twin ------------------

CLAIMED_GAIN = (1.3, 1.5)
NODE_GPUS = 8  # the 70B bf16 weights (138 GB) need several H100s; a full node with tensor parallelism
TRTLLM_CONTEXT = 8192
BATCH_LADDER = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def node(device: Machine, gpus: int) -> MeasuredMachine:
    """``gpus`` devices as one machine under ideal tensor parallelism (memory, bandwidth and
    compute add up; communication is not modelled)."""
    flops = device.peak_flops("bf16")
    return MeasuredMachine(name=f"{gpus} x {getattr(device, 'name', 'device')}",
                           bandwidth_bytes_per_s=device.bandwidth_bytes_per_s * gpus,
                           memory_bytes=device.memory_bytes * gpus if device.memory_bytes else None,
                           flops=flops * gpus if flops else None)


def _trtllm_gqa(inputs: Inputs) -> dict:
    geom = inputs.geometries[LLAMA2_70B]
    params = inputs.parameters.get(LLAMA2_70B)
    if not params:
        return _result(None, "The parameter count of Llama 2 70B is not known, so the whole decode step (weights "
                       "+ cache) cannot be estimated.", [], [])
    machine = node(inputs.devices[H100], NODE_GPUS)
    twin = mha_counterfactual(geom)
    context = TRTLLM_CONTEXT
    fit_gqa = max_batch(geom, machine, context, params=params)
    fit_mha = max_batch(twin, machine, context, params=params)
    ladder = []
    for batch in BATCH_LADDER:
        if batch > fit_gqa:
            break
        gqa = decode_estimate(geom, machine, context, batch, params=params)
        mha = decode_estimate(twin, machine, context, batch, params=params) if batch <= fit_mha else None
        ladder.append({"batch": batch, "gqa_tokens_per_s": gqa.tokens_per_s, "gqa_bound": gqa.bound,
                       "mha_tokens_per_s": mha.tokens_per_s if mha else None,
                       "speedup": mha.time_s / gqa.time_s if mha else None})
    best_gqa = decode_estimate(geom, machine, context, fit_gqa, params=params)
    best_mha = decode_estimate(twin, machine, context, fit_mha, params=params)
    same_batch = best_mha.time_s / decode_estimate(geom, machine, context, fit_mha, params=params).time_s
    each_full = best_gqa.tokens_per_s / best_mha.tokens_per_s
    within = [r["batch"] for r in ladder if r["speedup"] and CLAIMED_GAIN[0] <= r["speedup"] <= CLAIMED_GAIN[1]]
    figures = [
        _figure(f"throughput gain at batch {fit_mha} (the most the MHA twin fits)", CLAIMED_GAIN,
                same_batch, "x", "MHA step time / GQA step time, roofline of the whole decode step"),
        _figure("throughput gain, each at the most sequences it fits", CLAIMED_GAIN, each_full, "x",
                f"GQA at batch {fit_gqa} against MHA at batch {fit_mha}"),
        _figure("sequences of 8k tokens that fit beside the weights, GQA", None, fit_gqa, "sequences",
                f"({machine.memory_bytes / GB:,.0f} GB - {params * 2 / GB:,.0f} GB bf16 weights) / "
                f"{cache_bytes(geom, context) / GB:.2f} GB per sequence"),
        _figure("the same for the MHA twin", None, fit_mha, "sequences",
                f"/ {cache_bytes(twin, context) / GB:.2f} GB per sequence"),
    ]
    steps = [
        f"machine: {machine.name}, {machine.memory_bytes / GB:,.0f} GB, "
        f"{machine.bandwidth_bytes_per_s / 1e12:.1f} TB/s, {machine.flops / 1e15:.2f} PFLOP/s dense bf16 "
        "(ideal tensor parallelism)",
        f"one decode step reads the {params / 1e9:.1f}B bf16 weights once and every cached token: time = "
        f"80 calls x 10 us + max(bytes / bandwidth, FLOPs / peak)",
        "speed-up at equal batch = MHA step time / GQA step time: "
        + ", ".join(f"batch {r['batch']}: {r['speedup']:.2f}x" for r in ladder if r["speedup"]),
        f"+30-50% (1.3-1.5x) is the roofline's gain at batch {', '.join(map(str, within)) or 'none'}; at large "
        f"batch the weights' share of the bytes shrinks and the gain grows towards G = {geom.group_size:g}",
    ]
    # A measured gain may fall below the roofline's ceiling, never above it.
    verdict = CAVEATS if same_batch >= CLAIMED_GAIN[0] else FAILS
    opening = ("Consistent but conservative." if verdict == CAVEATS else
               "The claimed gain exceeds what the roofline allows.")
    return _result(
        verdict,
        f"{opening} The roofline of the whole decode step on {machine.name} at 8k context "
        f"puts the gain at {same_batch:.1f}x at batch {fit_mha} (the largest batch whose MHA cache fits) and "
        f"{each_full:.1f}x when each model runs the most sequences it fits ({fit_gqa} against {fit_mha}). "
        f"+30-50% is what the roofline predicts at batch {', '.join(map(str, within)) or '—'}, not at large batch: "
        f"a measured gain below the ceiling is possible (prefill, scheduling and kernels below peak take their "
        f"share), a gain above it would not be.",
        figures, steps, ladder=ladder, context=context)


# ---- Hugging Face's Llama 3.1 blog: KV cache at 128k tokens --------------------------------------

LLAMA31_BLOG_GB = {LLAMA31_8B: 15.62, LLAMA31_70B: 39.06, LLAMA31_405B: 123.05}
LLAMA31_CONTEXT = 128_000  # "128k" read as 128,000 tokens, the reading under which 8B and 70B match


def _llama31_blog(inputs: Inputs) -> dict:
    figures, steps, failed = [], [], []
    for model_id, claimed in LLAMA31_BLOG_GB.items():
        geom = inputs.geometries[model_id]
        size = cache_bytes(geom, LLAMA31_CONTEXT, 1, "fp16")
        figures.append(_figure(f"{model_id.split('/')[1]} at 128k tokens, fp16", claimed, size / GiB, "GiB",
                               f"{bytes_per_token(geom, 'fp16'):,} B per token x {LLAMA31_CONTEXT:,} tokens"))
        steps.append(f"{model_id}: {geom.kv_layers} layers x 2 x {geom.num_kv_heads} KV heads x {geom.head_dim} x "
                     f"2 B = {bytes_per_token(geom, 'fp16'):,} B per token; x {LLAMA31_CONTEXT:,} = {size:,} B = "
                     f"{size / GiB:.2f} GiB = {size / GB:.2f} GB")
        if not matches(size / GiB, claimed):
            failed.append((model_id, claimed / (size / GiB)))
    steps.append("the blog's \"GB\" are GiB (2^30 bytes) and its \"128k\" is 128,000 tokens: only that reading "
                 "reproduces the 8B and 70B rows")
    if not failed:
        return _result(CAVEATS, "All three rows hold if \"GB\" means GiB and \"128k\" means 128,000 tokens.",
                       figures, steps)
    worst = ", ".join(f"{m.split('/')[1]} is {r:.2f}x our figure" for m, r in failed)
    return _result(
        FAILS,
        f"The 8B and 70B rows hold (in GiB, at 128,000 tokens); the 405B row does not: {worst}. Twice our figure "
        f"is what 16 KV heads would cache; the released 405B config has {inputs.geometries[LLAMA31_405B].num_kv_heads}.",
        figures, steps)


# ---- Mistral 7B: the rolling buffer saves 8x at 32k ----------------------------------------------

def _mistral_rolling_buffer(inputs: Inputs) -> dict:
    geom = inputs.geometries[MISTRAL_7B]
    context = 32_768
    windowed = cache_bytes(geom, context)
    unbounded = bytes_per_token(geom) * context
    saving = unbounded / windowed
    figures = [_figure("cache saving at 32k tokens", 8.0, saving, "x",
                       f"{unbounded:,} B without the window / {windowed:,} B with it (bf16)")]
    window = f"{geom.sliding_window:,}-token window on {geom.sliding_layers} of {geom.kv_layers} layers" \
        if geom.sliding_window else "no sliding window"
    steps = [f"{window}; {bytes_per_token(geom):,} B per token (bf16)",
             f"without the window: {unbounded:,} B; with it: {windowed:,} B; ratio {saving:g}"]
    if not matches(saving, 8.0):
        return _result(FAILS, f"The stored geometry has {window}: the cache at 32,768 tokens is {saving:g}x "
                       "smaller, not 8x.", figures, steps)
    return _result(HOLDS, f"At 32,768 tokens the cache is capped at the {window}: {saving:g}x smaller. It holds "
                   "for memory; each layer still sees only its window, so the claim about quality is the paper's, "
                   "not arithmetic.", figures, steps)


# ---- DeepSeek's ISCA'25 paper: KV cache per token ----------------------------------------------

ISCA_KB = {DEEPSEEK_V3: 70.272, QWEN25_72B: 327.680, LLAMA31_405B: 516.096}


def _isca_per_token(inputs: Inputs) -> dict:
    figures, steps, ok = [], [], True
    for model_id, claimed in ISCA_KB.items():
        geom = inputs.geometries[model_id]
        ours = bytes_per_token(geom, "bf16") / 1000
        ok &= matches(ours, claimed, 1e-6)
        figures.append(_figure(model_id.split("/")[1], claimed, ours, "kB per token (bf16)",
                               f"{geom.kv_elements_per_token:,} elements x 2 B"))
        steps.append(f"{model_id} ({geom.attention_kind}): {geom.kv_layers} layers, "
                     f"{geom.kv_elements_per_token // geom.kv_layers:,} elements per layer, "
                     f"{bytes_per_token(geom, 'bf16'):,} B per token")
    return _result(HOLDS if ok else FAILS,
                   "All three figures are exact in decimal kB (1 kB = 1,000 B) at bf16." if ok else
                   "At least one figure differs from the stored geometry (see the table).", figures, steps)


# ---- "TP cannot be split across the KV-head dimension" ----------------------------------------

TP_CONTEXT = 32_768


def _tp_kv_heads(inputs: Inputs) -> dict:
    llama, mqa, mla = (inputs.geometries[m] for m in (LLAMA3_70B, STARCODER, DEEPSEEK_V3))
    at8, at16 = layout(llama, 8), layout(llama, 16)
    mqa8 = layout(mqa, 8)
    mla_tp, mla_dp = layout(mla, 8), layout(mla, 8, DP_ATTENTION)
    figures = [
        _figure("Llama-3-70B (K = 8): copies of its KV cache at TP = 8", None, at8.copies, "x",
                "max(1, 8 // 8) = 1 head per rank, each head on one rank"),
        _figure("the same at TP = 16", None, at16.copies, "x", "max(1, 8 // 16) = 1 head per rank, 16 // 8 = 2 ranks per head"),
        _figure("StarCoder (MQA, K = 1) at TP = 8", None, mqa8.copies, "x", "its one head on all 8 ranks"),
        _figure("DeepSeek-V3 (MLA) at TP = 8, plain TP", None, mla_tp.copies, "x", "the whole latent on every rank"),
        _figure("DeepSeek-V3 at TP = 8, data-parallel attention", None, mla_dp.copies, "x",
                "each rank the latent of its own sequences"),
    ]
    steps = [
        f"vLLM: KV heads per rank = max(1, K // TP); when TP >= K each head is held by TP // K ranks. Llama-3-70B: "
        f"{at8.rank_bytes_per_token:,} B per token on each rank at TP = 8 and still {at16.rank_bytes_per_token:,} B at "
        f"TP = 16, so the 16 ranks hold {at16.copies:g} copies",
        f"StarCoder's single KV head is replicated on all 8 ranks: {mqa8.rank_bytes_per_token:,} B per token each, "
        f"{mqa8.copies:g} copies",
        f"DeepSeek-V3 caches one {mla.mla.latent_elements_per_layer}-element latent per layer and no KV heads: plain TP "
        f"stores it {mla_tp.copies:g} times at TP = 8; data-parallel attention once",
        "Megatron-LM divides the query groups by TP (divide(num_query_groups, world_size)): TP = 16 is refused for "
        f"K = 8 ({'divisible' if at16.megatron_divisible else 'not divisible'})",
    ]
    params = inputs.parameters.get(LLAMA3_70B)
    device = inputs.devices.get(H100)
    if params and device is not None and device.memory_bytes:
        fit8, fit16 = (group_capacity(llama, device.memory_bytes, tp, TP_CONTEXT, params=params).max_sequences
                       for tp in (8, 16))
        figures.append(_figure("Llama-3-70B 32k sequences on 8 x H100", None, fit8, "sequences",
                               "(80 GB - weights / 8) / (one head x 80 layers x 32,768 tokens x 4 B)"))
        figures.append(_figure("the same on 16 x H100", None, fit16, "sequences",
                               "twice the GPUs, the same per-rank cache per sequence"))
        steps.append(f"on H100s at 32k: {fit8} sequences at TP = 8, {fit16} at TP = 16: doubling the GPUs adds "
                     f"{fit16 - fit8}, because each still holds one whole KV head of every sequence")
    judged = [q for q in inputs.tp8_quarters if q["n"] >= THIN_N and q["share"] is not None]
    if judged:
        last = judged[-1]
        figures.append(_figure(f"new originals filling a TP = 8 node without replication, {last['label']}", None,
                               last["share"], "share", f"K divisible by 8, or MLA; n = {last['n']}"))
        steps.append(f"of the new originals of {last['label']} (n = {last['n']}), {last['share']:.0%} fill a TP = 8 "
                     f"node without replication ({(last['share_mla'] or 0):.0%} of them through MLA with data-parallel "
                     f"attention); the rest store some KV head on several GPUs")
    else:
        steps.append(f"no quarter holds {THIN_N} new originals with known KV heads: the population share is not shown")
    ok = (at8.copies == 1 and at16.copies == 2 and mqa8.copies == 8 and mla_tp.copies == 8 and mla_dp.copies == 1
          and at16.megatron_divisible is False)
    verdict = CAVEATS if ok else FAILS
    return _result(
        verdict,
        "Tensor parallelism does split across the KV heads, up to TP = K: Llama-3-70B's 8 heads shard over 8 GPUs, one "
        "each. What it cannot split is one head, so beyond K every extra rank stores copies (vLLM) or the degree is "
        "refused (Megatron-LM): Llama-3-70B keeps its cache twice at TP = 16, an MQA model eight times at TP = 8, and "
        "MLA, which has no KV heads at all, once per rank under plain TP unless attention runs data-parallel. Read as "
        "\"TP cannot go past the KV-head count without replication\", it holds; read literally, it does not.",
        figures, steps)


# ---- GQA uptraining: judged on our own small-scale run (core.uptraining) -------------------------

def _uptraining(inputs: Inputs) -> dict:
    run = inputs.uptrain
    if run is None:
        return _result(None, "Not checked: no complete `observatory uptrain` run is stored.", [], [])
    result = judge_uptraining(run["cells"], run["sizes"]["shape"]["heads"])
    return {**result, "steps": [*result["steps"], f"run {run['run_key'][:8]}: scale {run['scale']:g}, seed "
                                f"{run['seed']}, corpus sha256 {run['corpus']['sha256'][:12]}"]}


CLAIMS: tuple[Claim, ...] = (
    Claim("llama2-70b-kv-2048", "Llama 2 70B's KV cache at 2,048 tokens",
          "Llama 2 70B's KV cache at 2,048 tokens is 2.68 GB with multi-head attention and 0.33 GB with "
          "grouped-query attention.",
          Source("A widely repeated textbook example", None, "as it circulates, without a primary source",
                 "The original publication was not located in our sources; the figures are checked as quoted."),
          (LLAMA2_70B,), _llama2_70b_2048),
    Claim("deepseek-v2-kv-93", "DeepSeek-V2's \"93.3% smaller KV cache\"",
          "Compared with DeepSeek 67B, DeepSeek-V2 ... reduces the KV cache by 93.3% (often repeated as "
          "\"93.3% smaller than MHA\").",
          Source("DeepSeek-AI, DeepSeek-V2: A Strong, Economical, and Efficient Mixture-of-Experts Language Model "
                 "(arXiv 2405.04434)", "https://arxiv.org/abs/2405.04434", "abstract, p. 1; §3.2.3 Inference Efficiency",
                 "§3.2.3: the deployed KV cache is quantised to \"6 bits on average\" per element."),
          (DEEPSEEK_V2, DEEPSEEK_67B), _deepseek_v2),
    Claim("trtllm-gqa-70b-throughput", "TensorRT-LLM: +30-50% throughput from GQA at 8k",
          "A 70B GQA model delivers 30-50% more throughput than its MHA twin at 8k context and large batch on H100.",
          Source("TensorRT-LLM launch material, as commonly quoted", None, "",
                 "The primary page was not located in our sources; the claim is checked as quoted."),
          (LLAMA2_70B,), _trtllm_gqa, devices=(H100,), measurable=True),
    Claim("hf-llama31-kv-128k", "Hugging Face's Llama 3.1 KV-cache table",
          "KV cache in fp16 at 128k tokens: 8B 15.62 GB, 70B 39.06 GB, 405B 123.05 GB.",
          Source("Hugging Face blog, Llama 3.1 - 405B, 70B & 8B with multilinguality and long context (2024-07-23)",
                 "https://huggingface.co/blog/llama31#inference-memory-requirements",
                 "section \"Inference Memory Requirements\", KV cache table",
                 "A reader reported the 405B row as twice the formula's value: github.com/huggingface/blog issue 2345."),
          (LLAMA31_8B, LLAMA31_70B, LLAMA31_405B), _llama31_blog),
    Claim("mistral-7b-rolling-buffer", "Mistral 7B's rolling buffer: 8x at 32k",
          "On a sequence length of 32k tokens, this reduces the cache memory usage by 8x, without impacting the "
          "model quality.",
          Source("Jiang et al., Mistral 7B (arXiv 2310.06825)", "https://arxiv.org/abs/2310.06825",
                 "§2 Architectural details, Rolling Buffer Cache, p. 2"),
          (MISTRAL_7B,), _mistral_rolling_buffer),
    Claim("deepseek-v3-kv-per-token", "KV cache per token: DeepSeek-V3, Qwen-2.5 72B, Llama-3.1 405B",
          "KV cache per token (BF16): DeepSeek-V3 (MLA) 70.272 KB, Qwen-2.5 72B (GQA) 327.680 KB, "
          "LLaMA-3.1 405B (GQA) 516.096 KB.",
          Source("DeepSeek-AI, Insights into DeepSeek-V3: Scaling Challenges and Reflections on Hardware for AI "
                 "Architectures (ISCA 2025, arXiv 2505.09343)", "https://arxiv.org/abs/2505.09343", "Table 1"),
          (DEEPSEEK_V3, QWEN25_72B, LLAMA31_405B), _isca_per_token),
    Claim("tp-kv-heads", "\"TP cannot split across KV heads\"",
          "Tensor parallelism cannot be split across the KV-head dimension, and strategy tools must take it into "
          "account.",
          Source("A common statement about tensor-parallel deployment, quoted without a primary source", None, "",
                 "Checked against vLLM's and Megatron-LM's sharding rules (core.deployment); tests/unit/"
                 "test_deployment.py quotes each rule's source line."),
          (LLAMA3_70B, STARCODER, DEEPSEEK_V3), _tp_kv_heads),
    Claim("gqa-uptraining", "Uptraining at 5-10% recovers MHA quality; MQA recovers less",
          "An MHA checkpoint mean-pooled to GQA and uptrained for 5-10% of its original steps recovers quality "
          "close to MHA; MQA recovers less.",
          Source("Ainslie et al., GQA: Training Generalized Multi-Query Transformer Models from Multi-Head "
                 "Checkpoints (arXiv 2305.13245)", "https://arxiv.org/abs/2305.13245",
                 "abstract; section 2.1 (uptraining) and the uptraining-proportion experiments",
                 "The paper measures T5 encoder-decoders; we judge it on our own small run (observatory uptrain)."),
          (), _uptraining),
)


def check(claim: Claim, inputs: Inputs) -> dict:
    """The claim with our numbers and verdict; unverifiable (verdict None) when a model is missing."""
    missing = [m for m in claim.models if m not in inputs.geometries]
    missing += [d for d in claim.devices if d not in inputs.devices]
    head = {"id": claim.id, "title": claim.title, "statement": claim.statement,
            "source": {"title": claim.source.title, "url": claim.source.url, "where": claim.source.where,
                       "note": claim.source.note},
            "models": list(claim.models), "devices": list(claim.devices), "measurable": claim.measurable,
            "missing": missing}
    head.update(readings=None, ladder=None, context=None)  # the tables only some claims have
    if missing:
        result = _result(None, f"Not checked: {', '.join(missing)} not in the store.", [], [])
    else:
        result = claim.check(inputs)
    result["arithmetic_verdict"] = result["verdict"]
    if not claim.source.found:
        shown = result["verdict"] or "not checked"
        result.update(verdict=UNSOURCED, summary=f"Unsourced: no primary source for this claim has been found, so "
                      f"reproducing it confirms nothing (our arithmetic alone: {shown}). {result['summary']}")
    return {**head, **result}


def check_all(inputs: Inputs, claims: tuple[Claim, ...] = CLAIMS) -> list[dict]:
    return [check(claim, inputs) for claim in claims]

