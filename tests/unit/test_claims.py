"""The claims arithmetic (``core.claims``), the capacity series (``core.capacity``) and the bundled
research table and price history, checked against numbers worked out by hand and against the
kvcache/roofline functions they are built on. Each verdict is also shown to flip when the input
that decides it changes, so no verdict is a constant."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from datetime import date

import pytest

from observatory.catalog.hardware import get_device, load_catalog
from observatory.catalog.prices import (
    PRICES_PATH,
    PriceDataError,
    load_prices,
    parse_prices,
)
from observatory.catalog.research import (
    RESEARCH_PATH,
    ResearchDataError,
    load_research,
    parse_research,
)
from observatory.catalog.snapshot import load_entries
from observatory.core import capacity, claims, kvcache, roofline
from observatory.core.claims import CAVEATS, FAILS, HOLDS, UNSOURCED, Inputs, check, matches
from observatory.store.ingest import derive

ENTRIES = {e.id: e for e in load_entries()}


def _geom(model_id):
    return derive(ENTRIES[model_id].raw_text).geometry


@pytest.fixture(scope="module")
def inputs() -> Inputs:
    ids = {m for c in claims.CLAIMS for m in c.models}
    return Inputs(geometries={i: _geom(i) for i in ids}, parameters={i: ENTRIES[i].num_parameters for i in ids},
                  devices={d.id: d for d in load_catalog()})


def _claim(claim_id):
    return next(c for c in claims.CLAIMS if c.id == claim_id)


def _figure(result, prefix):
    return next(f for f in result["figures"] if f["label"].startswith(prefix))


# ---- matching ------------------------------------------------------------------------------------

def test_matches_is_relative_and_takes_ranges():
    assert matches(2.684, 2.68) and matches(0.3355, 0.33)  # 1.7%: a two-digit quote
    assert not matches(0.671, 0.33) and not matches(None, 1.0) and not matches(1.0, None)
    assert matches(1.44, (1.3, 1.5)) and not matches(2.95, (1.3, 1.5)) and not matches(1.2, (1.3, 1.5))
    assert matches(0, 0) and not matches(1e-9, 0)


# ---- each claim -----------------------------------------------------------------------------------

def test_llama2_70b_textbook_figures_are_element_counts(inputs):
    result = check(_claim("llama2-70b-kv-2048"), inputs)
    assert (result["verdict"], result["arithmetic_verdict"]) == (UNSOURCED, CAVEATS)
    # 2 x 8 x 128 x 80 x 2048 elements x 2 B, and the same with 64 KV heads (worked by hand)
    assert _figure(result, "GQA cache")["ours"] * 1e9 == pytest.approx(671_088_640)
    assert _figure(result, "MHA cache, fp16")["ours"] * 1e9 == pytest.approx(5_368_709_120)
    assert _figure(result, "MHA / GQA")["ours"] == 8 and _figure(result, "MHA / GQA")["matches"]
    matching = [r["reading"] for r in result["readings"] if r["matches"]]
    assert len(matching) == 2 and all("1 byte" in r or "K alone" in r for r in matching)
    gib = next(r for r in result["readings"] if "GiB" in r["reading"])
    assert (gib["mha_gb"], gib["gqa_gb"]) == (5.0, 0.625) and not gib["matches"]


def test_llama2_verdict_follows_the_readings(inputs):
    # A geometry with half the head dim makes the fp16 reading itself match: then the quote holds.
    geom = inputs.geometries[claims.LLAMA2_70B]
    halved = replace(geom, head_dim=64, v_head_dim=64, kv_elements_per_token=geom.kv_elements_per_token // 2)
    result = check(_claim("llama2-70b-kv-2048"), replace(inputs, geometries={claims.LLAMA2_70B: halved}))
    assert (result["verdict"], result["arithmetic_verdict"]) == (UNSOURCED, HOLDS)


def test_deepseek_v2_93_percent_needs_6_bit_cache_and_the_67b_baseline(inputs):
    result = check(_claim("deepseek-v2-kv-93"), inputs)
    assert result["verdict"] == CAVEATS
    # V2: 60 x (512 + 64) = 34,560 elements; 67B: 95 x 2 x 8 x 128 = 194,560 elements
    assert _figure(result, "vs DeepSeek 67B, V2 cache at 6 bits")["ours"] == pytest.approx(1 - 34_560 * 0.75 / 389_120)
    assert _figure(result, "vs DeepSeek 67B, both bf16")["ours"] == pytest.approx(1 - 69_120 / 389_120)
    assert _figure(result, "vs DeepSeek-V2's MHA twin")["ours"] == pytest.approx(1 - 69_120 / (60 * 128 * 320 * 2))
    # with a 67B of 8x the cache (an MHA 67B) the equal-precision reading matches: the claim holds
    d67 = inputs.geometries[claims.DEEPSEEK_67B]
    bigger = replace(d67, num_kv_heads=64, kv_elements_per_token=d67.kv_elements_per_token * 8, group_size=1.0)
    other = check(_claim("deepseek-v2-kv-93"),
                  replace(inputs, geometries={**inputs.geometries, claims.DEEPSEEK_67B: bigger}))
    assert _figure(other, "vs DeepSeek 67B, both bf16")["ours"] == pytest.approx(1 - 69_120 / (389_120 * 8))


def test_trtllm_gain_is_the_whole_step_roofline(inputs):
    result = check(_claim("trtllm-gqa-70b-throughput"), inputs)
    assert result["arithmetic_verdict"] == CAVEATS and result["context"] == 8192
    # No primary source for "+30-50%" has been found: the verdict says so first, whatever the roofline shows.
    assert result["verdict"] == UNSOURCED and result["summary"].startswith("Unsourced: no primary source")
    geom, params = inputs.geometries[claims.LLAMA2_70B], inputs.parameters[claims.LLAMA2_70B]
    node = claims.node(get_device("h100-sxm"), 8)
    assert node.memory_bytes == 640 * 10**9 and node.bandwidth_bytes_per_s == pytest.approx(8 * 3.35e12)
    twin = kvcache.mha_counterfactual(geom)
    fits = (roofline.max_batch(geom, node, 8192, params=params), roofline.max_batch(twin, node, 8192, params=params))
    assert _figure(result, "sequences of 8k tokens")["ours"] == fits[0]
    assert _figure(result, "the same for the MHA twin")["ours"] == fits[1] < fits[0]
    for row in result["ladder"]:
        gqa = roofline.decode_estimate(geom, node, 8192, row["batch"], params=params)
        assert row["gqa_tokens_per_s"] == pytest.approx(gqa.tokens_per_s)
        if row["batch"] <= fits[1]:
            mha = roofline.decode_estimate(twin, node, 8192, row["batch"], params=params)
            assert row["speedup"] == pytest.approx(mha.time_s / gqa.time_s)
        else:
            assert row["speedup"] is None  # the MHA twin's cache does not fit
    speedups = [r["speedup"] for r in result["ladder"] if r["speedup"]]
    assert speedups == sorted(speedups) and speedups[0] < 1.3 < 1.5 < speedups[-1]
    assert _figure(result, "throughput gain at batch")["claimed_high"] == 1.5


def test_trtllm_fails_when_the_ceiling_is_below_the_claim(inputs):
    # an MHA "twin" that is the model itself leaves no dividend: +30% would exceed the ceiling
    geom = inputs.geometries[claims.LLAMA2_70B]
    mha_like = replace(geom, num_kv_heads=geom.num_query_heads, group_size=1.0,
                       kv_elements_per_token=kvcache.mha_counterfactual(geom).kv_elements_per_token)
    result = check(_claim("trtllm-gqa-70b-throughput"), replace(inputs, geometries={claims.LLAMA2_70B: mha_like}))
    assert (result["verdict"], result["arithmetic_verdict"]) == (UNSOURCED, FAILS)


def test_trtllm_needs_a_parameter_count(inputs):
    result = check(_claim("trtllm-gqa-70b-throughput"), replace(inputs, parameters={}))
    assert result["arithmetic_verdict"] is None and "parameter count" in result["summary"]


def test_hf_llama31_table_405b_row_is_twice_the_config(inputs):
    result = check(_claim("hf-llama31-kv-128k"), inputs)
    assert result["verdict"] == FAILS
    rows = {f["label"].split(" ")[0]: f for f in result["figures"]}
    assert rows["Llama-3.1-8B"]["ours"] == 131_072 * 128_000 / 2**30 == 15.625 and rows["Llama-3.1-8B"]["matches"]
    assert rows["Llama-3.1-70B-Instruct"]["matches"]
    assert rows["Llama-3.1-405B"]["claimed"] / rows["Llama-3.1-405B"]["ours"] == pytest.approx(2.0, rel=1e-3)
    # with 16 KV heads, as the table assumed, every row matches (and the units are still GiB)
    g405 = inputs.geometries[claims.LLAMA31_405B]
    sixteen = replace(g405, num_kv_heads=16, kv_elements_per_token=g405.kv_elements_per_token * 2)
    fixed = check(_claim("hf-llama31-kv-128k"),
                  replace(inputs, geometries={**inputs.geometries, claims.LLAMA31_405B: sixteen}))
    assert fixed["verdict"] == CAVEATS


def test_mistral_rolling_buffer_is_8x_and_needs_the_window(inputs):
    result = check(_claim("mistral-7b-rolling-buffer"), inputs)
    assert result["verdict"] == HOLDS and result["figures"][0]["ours"] == 32768 / 4096
    config = json.loads(ENTRIES[claims.MISTRAL_7B].raw_text)
    del config["sliding_window"]
    unwindowed = derive(json.dumps(config)).geometry
    plain = check(_claim("mistral-7b-rolling-buffer"), replace(inputs, geometries={claims.MISTRAL_7B: unwindowed}))
    assert plain["verdict"] == FAILS and plain["figures"][0]["ours"] == 1


def test_isca_per_token_figures_are_exact(inputs):
    result = check(_claim("deepseek-v3-kv-per-token"), inputs)
    assert result["verdict"] == HOLDS
    assert [f["ours"] for f in result["figures"]] == [70.272, 327.68, 516.096]  # kB = 1,000 B


def test_a_claim_about_a_model_not_in_the_store_is_unchecked(inputs):
    partial = replace(inputs, geometries={k: v for k, v in inputs.geometries.items() if k != claims.DEEPSEEK_67B})
    result = check(_claim("deepseek-v2-kv-93"), partial)
    assert result["verdict"] is None and result["missing"] == [claims.DEEPSEEK_67B]
    assert result["figures"] == [] and "not in the store" in result["summary"]
    no_device = check(_claim("trtllm-gqa-70b-throughput"), replace(inputs, devices={}))
    assert no_device["arithmetic_verdict"] is None and no_device["missing"] == ["h100-sxm"]
    assert no_device["verdict"] == UNSOURCED  # unsourced whatever the arithmetic shows, even none


def test_a_sourced_claim_keeps_its_arithmetic_verdict_and_an_unsourced_one_never_does(inputs):
    for result in claims.check_all(inputs):
        claim = _claim(result["id"])
        if claim.source.url is None:
            assert result["verdict"] == UNSOURCED and result["summary"].startswith("Unsourced")
        else:
            assert result["verdict"] == result["arithmetic_verdict"] != UNSOURCED
    assert {r["id"] for r in claims.check_all(inputs) if r["verdict"] == UNSOURCED} == {
        "llama2-70b-kv-2048", "trtllm-gqa-70b-throughput", "tp-kv-heads"}


def test_every_claim_has_a_source_and_a_known_verdict(inputs):
    from dataclasses import replace

    from test_uptraining_verdict import H, grid, paper_like

    run = {"cells": grid(paper_like), "sizes": {"shape": {"heads": H}}, "run_key": "abcdef12", "scale": 1.0,
           "seed": 0, "corpus": {"sha256": "0" * 64}}
    results = claims.check_all(replace(inputs, uptrain=run))
    assert len(results) == len(claims.CLAIMS) >= 6
    for result in results:
        assert result["statement"] and result["source"]["title"] and result["source"]["note"] is not None
        assert result["verdict"] in claims.VERDICTS and result["summary"] and result["steps"]
        assert all(f["unit"] for f in result["figures"])


# ---- capacity -------------------------------------------------------------------------------------

def test_sequences_beside_weights_is_roofline_max_batch():
    for model_id in ("meta-llama/Llama-3.1-8B", "google/gemma-2-27b", "deepseek-ai/DeepSeek-V2-Lite",
                     "mistralai/Mistral-7B-v0.1"):
        from observatory.core.config_dialects import ConfigError  # noqa: F401  (estimate_parameters raises it)
        from observatory.core.params import estimate_parameters

        entry = ENTRIES[model_id]
        geom = _geom(model_id)
        params = entry.num_parameters or estimate_parameters(json.loads(entry.raw_text)).total
        for device in load_catalog():
            expected = roofline.max_batch(geom, device, 32768, params=params)
            got = capacity.sequences_beside_weights(device.memory_bytes, params, kvcache.cache_bytes(geom, 32768))
            assert got == expected, (model_id, device.id)


def test_sequences_beside_weights_edges():
    assert capacity.sequences_beside_weights(100, 50, 1) == 0  # weights fill it exactly
    assert capacity.sequences_beside_weights(100, 60, 1) == 0  # weights alone do not fit
    assert capacity.sequences_beside_weights(1000, 100, 300) == 2
    with pytest.raises(ValueError, match="sequence_bytes"):
        capacity.sequences_beside_weights(100, 1, 0)


def test_capacity_trend_windows_and_today():
    gb = 10**9
    models = [
        capacity.ModelSize("old", date(2020, 1, 1), 1 * gb, 1 * gb),
        capacity.ModelSize("edge", date(2021, 1, 1), 10 * gb, 1 * gb),  # exactly on the release day: counted
        capacity.ModelSize("new", date(2021, 6, 1), 100 * gb, 2 * gb),
    ]
    devices = [capacity.DeviceMemory("d", "D", date(2021, 1, 1), 80 * gb)]
    trend = capacity.capacity_trend(devices, models, window_days=400)  # 2020-01-01 is inside
    row = trend["rows"][0]
    assert trend["today"] == date(2021, 6, 1)
    assert row["at_release"] == {"median": 69.0, "n": 2, "weights_do_not_fit": 0}  # (78, 60): median 69
    assert row["today"] == {"median": 30.0, "n": 2, "weights_do_not_fit": 1}  # edge 60, new 0 (200 GB > 80 GB)
    assert capacity.capacity_trend(devices, [])["rows"][0]["at_release"] == {"median": None, "n": 0,
                                                                             "weights_do_not_fit": 0}
    with pytest.raises(ValueError, match="window_days"):
        capacity.capacity_trend(devices, models, window_days=0)


def test_chips_needed_for_weights_and_one_sequence():
    # Llama-3-8B-like: 16.06 GB of bf16 weights + a 4 GiB 32k cache over Groq's 230 MB: 88.5 -> 89 chips.
    assert capacity.chips_needed(230_000_000, 8_030_000_000, 4 * 2**30) == 89
    assert capacity.chips_needed(80 * 10**9, 8_030_000_000, 4 * 2**30) == 1
    assert capacity.chips_needed(100, 25, 50) == 1 and capacity.chips_needed(100, 25, 51) == 2  # 100 B exactly fits
    with pytest.raises(ValueError, match="chip_bytes and sequence_bytes must be positive"):
        capacity.chips_needed(0, 1, 1)


def test_chips_trend_counts_sram_only_for_chips_with_two_tiers():
    gb = 10**9
    models = [capacity.ModelSize("a", date(2025, 1, 1), 8 * gb, 4 * gb), capacity.ModelSize("b", date(2025, 2, 1), 70 * gb, 10 * gb)]
    corsair = capacity.DeviceMemory("c", "Corsair", date(2024, 11, 19), 258 * gb, 2 * gb)
    groq = capacity.DeviceMemory("g", "Groq", date(2020, 5, 30), 230_000_000, 230_000_000)
    rows = {r["id"]: r for r in capacity.capacity_trend([corsair, groq], models)["rows"]}
    assert rows["c"]["chips_today"] == {"median": 1.0, "n": 2, "max": 1}  # 20 GB and 150 GB within 258 GB
    assert rows["c"]["chips_today_on_chip"] == {"median": 42.5, "n": 2, "max": 75}  # ceil(20/2) = 10, ceil(150/2) = 75
    assert rows["g"]["chips_today"] == {"median": 370.0, "n": 2, "max": 653}  # 87 and 653 chips of 230 MB
    assert rows["g"]["chips_today_on_chip"] is None  # all of Groq's memory is on chip already


def test_median_by_period():
    points = [(date(2024, 1, 5), 1.0), (date(2024, 3, 30), 2.0), (date(2024, 4, 1), 10.0)]
    assert capacity.median_by_period(points) == [
        {"period_start": date(2024, 1, 1), "median": 1.5, "n": 2},
        {"period_start": date(2024, 4, 1), "median": 10.0, "n": 1},
    ]
    assert capacity.median_by_period([]) == []


# ---- the research table -----------------------------------------------------------------------------

def test_research_rows_have_paper_table_and_page():
    research = load_research()
    papers = research["papers"]
    assert {"gqa", "llama2", "deepseek-v2", "mqa"} <= set(papers)  # the minimum
    assert any(r["quality_metric"] == "validation perplexity" for r in research["rows"])  # a later ppl-vs-KV curve
    for row in research["rows"]:
        assert row["paper_url"].startswith("https://arxiv.org/abs/") and row["table"]
        assert row["page"] or row["page_note"], row["id"]


def test_research_derivations():
    rows = {r["id"]: r for r in load_research()["rows"]}
    mha = rows["llama2-30b-mha"]
    assert mha["quality_derived"] and mha["quality_n"] == 11
    assert mha["quality_value"] == pytest.approx(sum(mha["scores"].values()) / 11)
    assert rows["gqa-t5-xxl-gqa8"]["quality_value"] == 47.1 and not rows["gqa-t5-xxl-gqa8"]["quality_derived"]
    assert rows["gqa-t5-xxl-gqa8"]["kv_ratio"] == 0.125  # 8 of 64 KV heads
    assert rows["gqa-t5-xxl-mha"]["kv_bytes_per_token"] == 24 * 2 * 64 * 64 * 2
    assert rows["deepseek-v2-large-moe-mla"]["kv_bytes_per_token"] == 34_600 * 2
    assert rows["deepseek-v2-large-moe-mla"]["kv_ratio"] == pytest.approx(34.6 / 860.2)  # the paper's "4%"
    # perplexity: lower is better, so a rise is a negative change
    assert rows["cla-h128-mqa"]["quality_change"] == pytest.approx(-(13.54 - 13.15) / 13.15)
    assert rows["cla-h128-mha"]["quality_change"] == 0.0 and rows["cla-h128-mha"]["kv_ratio"] == 1.0
    assert rows["llama2-30b-gqa"]["kv_ratio"] is None  # the paper gives no head count


def _research_raw():
    return json.loads(RESEARCH_PATH.read_text())


@pytest.mark.parametrize("breakage, message", [
    (lambda d: d["rows"][0].update(page=None, page_note=None), "page must be a positive integer"),
    (lambda d: d["rows"][2].update(paper="nope"), "paper 'nope' is not in 'papers'"),
    (lambda d: d["rows"][2].update(baseline="nope"), "baseline 'nope' is not a row"),
    (lambda d: d["rows"][3].update(id=d["rows"][2]["id"]), "duplicate id"),
    (lambda d: d["papers"]["gqa"].update(url="http://arxiv.org/abs/2305.13245"), "url must be https://"),
    (lambda d: d["rows"][2]["quality"].update(value="47"), "quality.value must be a number or null"),
    (lambda d: d["rows"][2]["kv"].update(bytes_per_token=-1), "kv.bytes_per_token must be a positive number"),
    (lambda d: d["rows"][2].pop("table"), "table is required"),
    (lambda d: d.update(rows=[]), "'rows' must be a non-empty list"),
])
def test_bad_research_data_is_refused_with_one_line(breakage, message):
    data = copy.deepcopy(_research_raw())
    breakage(data)
    with pytest.raises(ResearchDataError, match=message) as exc:
        parse_research(data)
    assert "\n" not in str(exc.value)


# ---- the price history: data guard -------------------------------------------------------------------

def test_every_price_row_has_a_source_a_date_and_explicit_units():
    raw = json.loads(PRICES_PATH.read_text())
    assert raw["currency"] == "USD" and raw["unit"] == "per 1,000,000 tokens"  # stated in the file itself
    prices = load_prices()
    assert len(prices["rows"]) >= 10
    for row in prices["rows"]:
        assert row["source_url"].startswith("https://") and row["source_note"].strip()
        assert isinstance(row["date"], date) and row["date_basis"].strip()
        assert row["currency"] == "USD" and row["unit"] == "per 1,000,000 tokens"
        assert 0 < row["usd_per_1m_input"] and 0 < row["usd_per_1m_output"]
    assert [r["date"] for r in prices["rows"]] == sorted(r["date"] for r in prices["rows"])
    assert {True, False} == {r["open_weights"] for r in prices["rows"]}  # open weights and a closed reference set


def test_a_price_is_dated_by_when_it_took_effect_not_by_a_trackers_update():
    # Issue 22: the DeepSeek-V3.2 row carried an aggregator's update day (2025-12-09); the price took
    # effect with V3.2-Exp on 2025-09-29. A row dated only by a page that listed it says "listed".
    rows = {r["id"]: r for r in load_prices()["rows"]}
    v32 = rows["deepseek-v3.2-chat"]
    assert (v32["date"], v32["date_kind"]) == (date(2025, 9, 29), "took effect")
    assert {r["date_kind"] for r in rows.values()} == {"took effect", "listed"}


@pytest.mark.parametrize("breakage, message", [
    (lambda d: d.update(currency="EUR"), "currency must be 'USD'"),
    (lambda d: d.update(unit="per 1,000 tokens"), "unit must be"),
    (lambda d: d["rows"][0].pop("source_url"), "source_url is required"),
    (lambda d: d["rows"][0].update(source_url="ftp://x"), "source_url must be https://"),
    (lambda d: d["rows"][0].update(date="March 2023"), "date must be an ISO date"),
    (lambda d: d["rows"][0].pop("date"), "date must be an ISO date"),
    (lambda d: d["rows"][0].update(usd_per_1m_input=-1), "usd_per_1m_input must be a positive number"),
    (lambda d: d["rows"][0].update(usd_per_1m_output="2"), "usd_per_1m_output must be a positive number"),
    (lambda d: d["rows"][1].update(id=d["rows"][0]["id"]), "duplicate id"),
    (lambda d: d["rows"][0].update(open_weights="yes"), "open_weights must be true or false"),
    (lambda d: d["rows"][0].pop("date_kind"), "date_kind must be one of took effect, listed"),
    (lambda d: d["rows"][0].update(date_kind="announced maybe"), "date_kind must be one of"),
])
def test_bad_price_data_is_refused_with_one_line(breakage, message):
    data = copy.deepcopy(json.loads(PRICES_PATH.read_text()))
    breakage(data)
    with pytest.raises(PriceDataError, match=message) as exc:
        parse_prices(data)
    assert "\n" not in str(exc.value)


def test_unreadable_data_files_say_which(tmp_path):
    broken = tmp_path / "x.json"
    broken.write_text("{not json")
    with pytest.raises(PriceDataError, match="cannot read price history"):
        load_prices(broken)
    with pytest.raises(ResearchDataError, match="cannot read research table"):
        load_research(broken)


# ---- "TP cannot split across KV heads" ------------------------------------------------------------

TP8_QUARTERS = ({"label": "2025-Q3", "n": 4, "share": 1.0, "share_mla": 0.5},  # thin: not quoted
                {"label": "2025-Q2", "n": 12, "share": 0.75, "share_mla": 0.25})


def test_tp_kv_heads_holds_with_caveats(inputs):
    # The quote's primary source is not found, so the claim reads "unsourced"; its arithmetic still judges.
    result = check(_claim("tp-kv-heads"), replace(inputs, tp8_quarters=TP8_QUARTERS))
    assert result["verdict"] == UNSOURCED and result["arithmetic_verdict"] == CAVEATS
    copies = [f["ours"] for f in result["figures"][:5]]
    assert copies == [1.0, 2.0, 8.0, 8.0, 1.0]  # Llama-3-70B TP 8 / 16, StarCoder TP 8, DeepSeek-V3 TP / DP
    assert _figure(result, "Llama-3-70B 32k sequences on 8 x H100")["ours"] == 46
    assert _figure(result, "the same on 16 x H100")["ours"] == 53
    share = _figure(result, "new originals filling a TP = 8 node")
    assert share["ours"] == 0.75 and "2025-Q2" in share["label"] and "n = 12" in share["how"]  # the last non-thin
    assert "read literally, it does not" in result["summary"]


def test_tp_kv_heads_fails_when_the_geometry_would_shard_past_k(inputs):
    # A Llama-3-70B with 16 KV heads would split over 16 GPUs without copies: the claim's case is gone.
    wide = replace(_geom(claims.LLAMA3_70B), num_kv_heads=16, group_size=4.0)
    wide = replace(wide, kv_elements_per_token=sum(wide.layer_kv_elements()))
    result = check(_claim("tp-kv-heads"), replace(inputs, geometries={**inputs.geometries, claims.LLAMA3_70B: wide}))
    assert result["arithmetic_verdict"] == FAILS


def test_tp_kv_heads_without_a_judged_quarter_says_so(inputs):
    result = check(_claim("tp-kv-heads"), replace(inputs, tp8_quarters=TP8_QUARTERS[:1]))
    assert not any(f["label"].startswith("new originals") for f in result["figures"])
    assert any("no quarter holds 5" in step for step in result["steps"])
