"""Roofline arithmetic against hand-computed numbers and the anchors' published figures."""

from __future__ import annotations

import math

import pytest

from observatory.catalog.hardware import get_device, load_catalog
from observatory.core import roofline
from observatory.core.geometry import parse_geometry
from observatory.core.kvcache import cache_bytes

LLAMA3_8B = parse_geometry({"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8,
                            "hidden_size": 4096, "num_hidden_layers": 32})
MQA = parse_geometry({"model_type": "gpt_bigcode", "n_head": 48, "n_embd": 6144, "n_layer": 40, "multi_query": True})
DEEPSEEK_V3 = parse_geometry({"model_type": "deepseek_v3", "num_attention_heads": 128, "num_key_value_heads": 128,
                              "hidden_size": 7168, "num_hidden_layers": 61, "kv_lora_rank": 512,
                              "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
                              "q_lora_rank": 1536})
GEMMA_LIKE = parse_geometry({"model_type": "gemma3_text", "num_attention_heads": 32, "num_key_value_heads": 16,
                             "head_dim": 128, "hidden_size": 5376, "num_hidden_layers": 6, "sliding_window": 1024,
                             "layer_types": ["sliding_attention"] * 5 + ["full_attention"]})
H200 = get_device("h200-sxm")


def test_llama3_8b_decode_attention_by_hand():
    est = roofline.decode_estimate(LLAMA3_8B, H200, 32768, 1, "bf16", per_call_s=0)
    kv = 32 * 32768 * 2 * 8 * 128 * 2  # layers x tokens x (K and V) x K x d x bf16 bytes = 4 GiB
    assert est.kv_bytes == kv == cache_bytes(LLAMA3_8B, 32768, 1, "bf16")
    assert est.attention_flops == 32 * 32768 * 2 * 32 * (128 + 128)  # 2·H·(d + d_v) per cached token per layer
    assert est.intensity == pytest.approx(4.0)  # G FLOP/byte for bf16 GQA
    assert est.bound == "memory"
    assert est.time_s == pytest.approx(kv / 4.8e12)
    assert est.tokens_per_s == pytest.approx(1 / est.time_s)
    assert est.calls == 32 and est.cache_fits and est.fits is None  # no weights counted: cannot say


def test_fixed_cost_per_call_keeps_small_shapes_realistic():
    # A 4k-token MQA call moves ~1 MB per layer: ~0.2 µs at 4.8 TB/s, but kernels take ~10 µs.
    est = roofline.decode_estimate(MQA, H200, 4096, 1)
    assert est.memory_s / est.calls < 0.5e-6
    assert est.time_s == pytest.approx(est.calls * roofline.DEFAULT_PER_CALL_S + est.memory_s)
    assert roofline.decode_estimate(MQA, H200, 4096, 1, per_call_s=0).time_s == pytest.approx(est.memory_s)


def test_efficiency_scales_memory_time():
    full = roofline.decode_estimate(LLAMA3_8B, H200, 32768, 8, per_call_s=0)
    aic = roofline.decode_estimate(LLAMA3_8B, H200, 32768, 8, per_call_s=0,
                                   efficiency=roofline.AIC_BANDWIDTH_EFFICIENCY)
    assert aic.time_s == pytest.approx(full.time_s / 0.8)


def test_mla_is_about_2h_flop_per_byte_and_compute_bound_on_h200():
    est = roofline.decode_estimate(DEEPSEEK_V3, H200, 32768, 1)
    # 2·H·(2·512 + 64) FLOPs per 576-element bf16 latent: 2·128·1088 / 1152 ≈ 242 ≈ 2H.
    assert est.intensity == pytest.approx(2 * 128 * 1088 / (576 * 2))
    assert est.bound == "compute"  # above H200's ridge of ~206 FLOP/byte ...
    assert roofline.decode_estimate(DEEPSEEK_V3, get_device("b200"), 32768, 1).bound == "memory"  # ... below B200's 281


def test_sliding_window_layers_stop_growing():
    short = roofline.decode_estimate(GEMMA_LIKE, H200, 1024, 1, per_call_s=0)
    long = roofline.decode_estimate(GEMMA_LIKE, H200, 1024 * 9, 1, per_call_s=0)
    # Five windowed layers stay at 1024 tokens; the one full layer grows 9x: (5 + 9) / (5 + 1).
    assert long.attention_flops / short.attention_flops == pytest.approx(14 / 6)
    assert long.kv_bytes / short.kv_bytes == pytest.approx(14 / 6)


def test_whole_step_adds_weights():
    attention = roofline.decode_estimate(LLAMA3_8B, H200, 4096, 1, per_call_s=0)
    step = roofline.decode_estimate(LLAMA3_8B, H200, 4096, 1, params=8.03e9, per_call_s=0)
    assert step.weight_bytes == int(8.03e9 * 2)
    assert step.flops == pytest.approx(attention.flops + 2 * 8.03e9)
    assert step.time_s == pytest.approx((attention.kv_bytes + step.weight_bytes) / 4.8e12)
    moe = roofline.decode_estimate(LLAMA3_8B, H200, 4096, 4, params=30e9, active_params=3e9, per_call_s=0)
    assert moe.weight_flops == 2 * 3e9 * 4 and moe.weight_bytes == 60e9


def test_compute_bound_at_large_batch_with_weights():
    # Weights are read once per step, so at large batch and short context the GEMMs dominate.
    est = roofline.decode_estimate(LLAMA3_8B, H200, 1, 4096, params=8e9)
    assert est.bound == "compute"


def test_machines_without_published_flops_are_memory_bound():
    est = roofline.decode_estimate(DEEPSEEK_V3, get_device("m3-ultra"), 32768, 1)
    assert est.compute_s == 0 and est.bound == "memory"
    cpu = roofline.MeasuredMachine("cpu", bandwidth_bytes_per_s=20e9)
    assert roofline.decode_estimate(LLAMA3_8B, cpu, 4096, 1, "fp32", per_call_s=0).time_s == pytest.approx(
        cache_bytes(LLAMA3_8B, 4096, 1, "fp32") / 20e9)
    assert roofline.decode_estimate(LLAMA3_8B, cpu, 4096, 1).fits is None
    assert roofline.decode_estimate(LLAMA3_8B, cpu, 4096, 1).cache_fits is None


def test_max_batch():
    per_sequence = cache_bytes(LLAMA3_8B, 32768, 1, "bf16")  # 4 GiB
    assert roofline.max_batch(LLAMA3_8B, H200, 32768) == 141_000_000_000 // per_sequence == 32
    assert roofline.max_batch(LLAMA3_8B, H200, 32768, params=8.03e9) == (141e9 - 16.06e9) // per_sequence
    assert roofline.max_batch(LLAMA3_8B, get_device("l4"), 4096, params=70e9) == 0  # weights alone overflow
    assert roofline.max_batch(LLAMA3_8B, roofline.MeasuredMachine("cpu", 1e10), 4096) is None


def test_sweep_has_every_context_and_batch_with_the_mha_counterfactual():
    rows = roofline.sweep(LLAMA3_8B, H200)
    assert [(r["context"], r["batch"]) for r in rows] == [(c, b) for c in (4096, 32768, 131072)
                                                          for b in (1, 2, 4, 8, 16, 32, 64, 128, 256)]
    big = rows[-1]
    assert big["mha"]["kv_bytes"] == 4 * big["gqa"]["kv_bytes"]  # G = 4
    assert big["speedup"] == pytest.approx(4, rel=0.01)  # memory-bound: time scales with bytes
    assert rows[0]["speedup"] < big["speedup"]  # the fixed per-call cost narrows the gap at small shapes
    assert big["gqa"]["cache_fits"] is False and big["gqa"]["fits"] is None


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"efficiency": 0}, "efficiency"),
    ({"efficiency": 1.5}, "efficiency"),
    ({"per_call_s": -1}, "per_call_s"),
    ({"params": -5}, "params"),
])
def test_bad_options_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        roofline.decode_estimate(LLAMA3_8B, H200, 4096, 1, **kwargs)


def test_bad_context_and_batch_are_refused():
    with pytest.raises(ValueError):
        roofline.decode_estimate(LLAMA3_8B, H200, -1, 1)
    with pytest.raises(ValueError):
        roofline.decode_estimate(LLAMA3_8B, H200, 4096, 0)


@pytest.mark.parametrize(("device_id", "ridge"), [
    ("a100-80gb-sxm", 153), ("h100-sxm", 295), ("h200-sxm", 206), ("b200", 281)])  # anchors doc, derived
def test_ridge_points_match_the_anchors(device_id, ridge):
    assert roofline.ridge_point(get_device(device_id)) == pytest.approx(ridge, abs=1)


def test_ridge_points_for_the_hardware_page():
    rows = roofline.ridge_points(load_catalog())
    assert [r["released"] for r in rows] == sorted(r["released"] for r in rows)
    by_id = {r["id"]: r for r in rows}
    assert by_id["m2-ultra"]["ridge_bf16"] is None
    assert by_id["h100-sxm"]["ridge_fp8"] == pytest.approx(1979e12 / 3.35e12)
    assert by_id["tpu-v5e"]["ridge_fp8"] is None


def test_one_layer_is_one_full_attention_call():
    layer = roofline.one_layer(GEMMA_LIKE)
    assert (layer.kv_layers, layer.layer_kinds) == (1, ("full",))
    assert layer.kv_elements_per_token == 2 * 16 * 128
    est = roofline.decode_estimate(layer, H200, 32768, 8, per_call_s=0)
    assert est.kv_bytes == 8 * 32768 * 2 * 16 * 128 * 2 and est.calls == 1
    with pytest.raises(ValueError, match="no layer"):
        roofline.one_layer(parse_geometry({"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24}))


def test_estimate_is_plain_data():
    data = roofline.decode_estimate(LLAMA3_8B, H200, 4096, 1).to_dict()
    assert set(data) >= {"flops", "bytes", "intensity", "bound", "time_s", "tokens_per_s", "fits"}
    assert all(not isinstance(v, float) or math.isfinite(v) for v in data.values())


LLAMA31_70B = parse_geometry({"model_type": "llama", "num_attention_heads": 64, "num_key_value_heads": 8,
                              "hidden_size": 8192, "num_hidden_layers": 80})


def test_fits_means_weights_and_cache_and_never_contradicts_max_batch():
    # Llama-3.1-70B on one H100 (80 GB) at 32k: the cache alone (10.7 GB) fits, the 141 GB of
    # bf16 weights do not, so "fits" is false, max batch is 0 and two devices hold the weights.
    h100 = get_device("h100-sxm")
    params = 70_553_706_496
    attention = roofline.decode_estimate(LLAMA31_70B, h100, 32768, 1)
    whole = roofline.decode_estimate(LLAMA31_70B, h100, 32768, 1, params=params)
    assert attention.cache_fits is True and attention.fits is None
    assert whole.cache_fits is True and whole.fits is False
    assert roofline.max_batch(LLAMA31_70B, h100, 32768, params=params) == 0
    assert roofline.devices_for_weights(h100, params) == 2  # ceil(141.1 GB / 80 GB)
    two = roofline.decode_estimate(LLAMA31_70B, h100, 32768, 1, params=params, devices=2)
    assert two.fits is True and two.devices == 2
    # ideal tensor parallelism: twice the bandwidth, half the memory time
    assert two.memory_s == pytest.approx(whole.memory_s / 2)
    assert roofline.devices_for_weights(h100, None) is None


def test_devices_must_be_a_whole_number():
    with pytest.raises(ValueError, match="devices"):
        roofline.decode_estimate(LLAMA31_70B, get_device("h100-sxm"), 4096, 1, devices=0)


# ---- two memory tiers (SRAM-first chips) -----------------------------------------------------------

CORSAIR = get_device("dmatrix-corsair")  # 2 GB SRAM at 150 TB/s, 256 GB LPDDR5 at 400 GB/s


def test_two_tiers_fill_sram_first_and_the_slow_tier_sets_the_time():
    params = 8.03e9  # Llama-3-8B: 16.06 GB of bf16 weights, far beyond 2 GB of SRAM
    est = roofline.decode_estimate(LLAMA3_8B, CORSAIR, 4096, 1, params=params, per_call_s=0)
    total = int(params * 2) + 32 * 4096 * 2 * 8 * 128 * 2  # weights + a 4k cache (512 MiB)
    assert est.bytes == total
    assert est.bytes_by_tier == {"SRAM": 2_000_000_000, "LPDDR5": total - 2_000_000_000}
    # Tiers are read at once: the LPDDR5 share (14.6 GB at 400 GB/s = 36.6 ms) dwarfs the SRAM's 13 µs.
    assert est.memory_s == pytest.approx((total - 2e9) / 400e9)
    assert est.fits  # 16.6 GB within 258 GB
    # One bandwidth for all 258 GB would have said 0.11 ms, 330 times too fast.
    assert est.memory_s / (total / CORSAIR.bandwidth_bytes_per_s) > 300


def test_spread_over_cards_the_weights_move_into_sram():
    params = 8.03e9
    total = int(params * 2) + 32 * 4096 * 2 * 8 * 128 * 2
    est = roofline.decode_estimate(LLAMA3_8B, CORSAIR, 4096, 1, params=params, per_call_s=0, devices=9)
    assert est.bytes_by_tier == {"SRAM": total, "LPDDR5": 0}  # 9 x 2 GB hold all 16.6 GB
    assert est.memory_s == pytest.approx(total / (9 * 150e12))


def test_sram_only_chip_reports_what_does_not_fit():
    groq = get_device("groq-lpu")
    est = roofline.decode_estimate(LLAMA3_8B, groq, 4096, 1, params=8.03e9)
    assert est.fits is False and est.cache_fits is False  # a 4k cache (512 MiB) alone exceeds 230 MB
    assert roofline.devices_for_weights(groq, 8.03e9) == 70  # ceil(16.06 GB / 230 MB)


def test_one_tier_devices_are_unchanged():
    est = roofline.decode_estimate(LLAMA3_8B, H200, 32768, 1, per_call_s=0)
    assert est.bytes_by_tier == {"memory": est.bytes} and est.memory_s == pytest.approx(est.bytes / 4.8e12)


def test_a_machine_known_by_measurement_has_one_unbounded_tier():
    from observatory.core.tiers import MemoryTier, place, tiers_of
    (tier,) = tiers_of(roofline.MeasuredMachine("cpu", bandwidth_bytes_per_s=50e9))
    assert tier.bandwidth_bytes_per_s == 50e9 and place(10**15, [tier]) == [10**15]
    with pytest.raises(ValueError, match="positive size and bandwidth"):
        MemoryTier("SRAM", 0, 1e12)
