"""Spot-benchmarks end to end: stored models in a real SQLite file, real timing on this CPU, the CLI:
GQA and MLA models, each beside its MHA counterfactual, within the free memory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from sqlmodel import select

from kernels import cpu_decode
from kernels.api import choose_backend
from observatory.bench.jobs import (
    UnknownModel,
    bench_models,
    bench_new_models,
    notable_unbenchmarked,
)
from observatory.bench.runner import (
    Budget,
    DoesNotFit,
    cache_tensors,
    local_device,
    measure,
)
from observatory.bench.shapes import (
    AttentionShape,
    SkipShape,
    attention_shape,
    counterfactual_shape,
    make_inputs,
    rotation_copies,
)
from observatory.bench.store import (
    benchmarked_models,
    latest_results,
    results_for_model,
)
from observatory.bench.tables import BenchResult
from observatory.bench.timing import Contender, read_contender, time_interleaved
from observatory.cli import main
from observatory.core.geometry import parse_geometry
from observatory.store.db import session_scope
from observatory.store.ingest import record_config, upsert_model

SMALL_GQA = {"model_type": "llama", "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 512,
             "num_hidden_layers": 4}
SMALL_MHA = {"model_type": "llama", "num_attention_heads": 4, "num_key_value_heads": 4, "hidden_size": 256,
             "num_hidden_layers": 2}
SMALL_MLA = {"model_type": "deepseek_v3", "num_attention_heads": 8, "num_key_value_heads": 8, "hidden_size": 512,
             "num_hidden_layers": 2, "kv_lora_rank": 64, "qk_rope_head_dim": 16, "qk_nope_head_dim": 32,
             "v_head_dim": 32, "q_lora_rank": 96}
PEERS = {"sdpa_gqa", "repeat_kv_sdpa", "sdpa_gqa_bkld", "repeat_kv_sdpa_bkld"}
# Small ceiling copy and matmul: these tests check plumbing, not speed.
FAST = {"copy_bytes": 2**20, "rotate_bytes": 2**20, "matmul_size": 64}


def add_model(engine, model_id, config=None, **fields):
    with session_scope(engine) as session:
        upsert_model(session, model_id, **fields)
        if config is not None:
            record_config(session, model_id, json.dumps(config), "a" * 40)


def test_results_are_measured_and_stored(engine):
    add_model(engine, "org/small-gqa", SMALL_GQA)
    add_model(engine, "org/small-mla", SMALL_MLA)
    add_model(engine, "org/small-mha", SMALL_MHA)
    rows = bench_models(engine, ["org/small-gqa", "org/small-mla", "org/small-mha"], contexts=[100], batches=[1, 2],
                        repeats=2, **FAST)
    assert [(r.model_id, r.batch, r.status, r.kernel) for r in rows] == [
        ("org/small-gqa", 1, "ok", "gqa"), ("org/small-gqa", 2, "ok", "gqa"), ("org/small-mla", 1, "ok", "mla"),
        ("org/small-mla", 2, "ok", "mla"), ("org/small-mha", 1, "ok", "gqa"), ("org/small-mha", 2, "ok", "gqa")]
    ok = rows[0]
    assert (ok.num_heads, ok.num_kv_heads, ok.head_dim, ok.head_dim_v, ok.context, ok.dtype) == (8, 2, 64, 64, 100, "fp32")
    assert ok.backend == choose_backend(torch.device("cpu"), "auto", torch.float32, 64)  # the C kernel where it builds
    assert ok.kv_bytes == 2 * 1 * 100 * 2 * 64 * 4
    assert ok.median_s > 0 and ok.min_s <= ok.median_s and ok.runs == 2
    assert ok.bytes_per_s == pytest.approx(ok.kv_bytes / ok.median_s)
    assert ok.fraction_of_ceiling == pytest.approx(ok.bytes_per_s / ok.ceiling_bytes_per_s)
    assert ok.flops == 2 * 100 * 8 * (64 + 64) and ok.flops_per_s == pytest.approx(ok.flops / ok.median_s)
    assert ok.matmul_flops_per_s > 0 and ok.fraction_of_matmul == pytest.approx(ok.flops_per_s / ok.matmul_flops_per_s)
    assert ok.predicted_s > 0 and ok.prediction_basis == "measured-copy-and-matmul"
    assert ok.predicted_bound in ("memory", "compute")
    assert set(ok.peer_times_s) == PEERS and not ok.peer_errors
    assert ok.speedups["sdpa_gqa"] == pytest.approx(ok.peer_times_s["sdpa_gqa"] / ok.median_s)
    assert ok.software["torch"] == torch.__version__ and ok.device.startswith("cpu: ")
    # The MHA counterfactual, timed in the same rounds: K = H = 8, the same head dims, 4x the bytes.
    assert (ok.mha_head_dim, ok.mha_head_dim_v, ok.mha_kv_bytes) == (64, 64, 4 * ok.kv_bytes) and not ok.mha_error
    assert ok.mha_median_s > 0 and ok.measured_speedup == pytest.approx(ok.mha_median_s / ok.median_s)
    # Equal FLOPs, 4x the bytes: predicted no slower (equal where the tiny test matmul makes both compute-bound).
    assert ok.mha_predicted_s >= ok.predicted_s and ok.predicted_speedup == pytest.approx(ok.mha_predicted_s / ok.predicted_s)

    mla = rows[2]  # absorbed: H = 8 over one latent of 64 + 16, values its first 64 elements
    assert (mla.num_heads, mla.num_kv_heads, mla.head_dim, mla.head_dim_v) == (8, 1, 80, 64)
    assert mla.kv_bytes == 100 * 80 * 4 and mla.flops == 2 * 100 * 8 * (80 + 64)
    assert set(mla.peer_times_s) == {"mla_matmul"} and not mla.peer_errors
    # Its counterfactual is the MHA that MLA replaces: 8 heads of 48-wide keys (nope 32 + rope 16), 32-wide values.
    assert (mla.mha_head_dim, mla.mha_head_dim_v, mla.mha_kv_bytes) == (48, 32, 100 * 8 * (48 + 32) * 4)
    assert mla.mha_median_s > 0 and mla.predicted_speedup > 0  # absorbed MLA does more FLOPs than its MHA: < 1 when compute-bound
    mha = rows[4]  # already K = H: nothing to compare with
    assert mha.mha_median_s is None and mha.mha_error is None and mha.measured_speedup is None

    with session_scope(engine) as session:
        stored = session.exec(select(BenchResult)).all()
        assert len(stored) == 6
        shown = results_for_model(session, "org/small-gqa")
        assert [r["batch"] for r in shown] == [2, 1]  # newest first
        assert shown[0]["speedups"].keys() == PEERS and shown[0]["measured_speedup"] > 0
        assert results_for_model(session, "org/small-mla")[0]["kernel"] == "mla"
        assert len(latest_results(session)) == 6
        assert benchmarked_models(session, local_device().name) == {"org/small-gqa", "org/small-mla", "org/small-mha"}


def test_shapes_that_do_not_fit_are_skipped_with_the_reason(engine):
    add_model(engine, "org/small-gqa", SMALL_GQA)
    [row] = bench_models(engine, ["org/small-gqa"], contexts=[4096], repeats=1, memory_bytes=1000, **FAST)
    assert row.status == "skipped" and "needs 0.0 GB of inputs" in row.reason and row.median_s is None
    assert "b=1 H=8 K=2 d=64 L=4096" in row.reason
    assert (row.kernel, row.num_heads, row.num_kv_heads, row.head_dim) == ("gqa", 8, 2, 64)  # the shape, for the pages


def test_counterfactual_and_peers_that_do_not_fit_are_reported_not_run():
    shape = AttentionShape(1, 8, 2, 64, 512)
    inputs = 8 * 64 * 4 + shape.kv_bytes("fp32") + 4
    # Room for the inputs (one copy) and a little more: not for the 4x counterfactual, nor for the peers' copies.
    case = measure(shape, "fp32", local_device(), repeats=1, counterfactual=AttentionShape(1, 8, 8, 64, 512),
                   memory_bytes=inputs + shape.kv_bytes("fp32") // 2, **FAST)
    assert case.ours.runs == 1 and case.counterfactual.timing is None and case.measured_speedup is None
    assert case.counterfactual.error.startswith("not run: needs 0.0 GB of inputs")
    assert case.peer_errors["repeat_kv_sdpa"].startswith("not run: needs about")
    assert "sdpa_gqa" in case.peers  # a view of the same cache: no extra memory
    with pytest.raises(DoesNotFit, match="needs"):
        measure(shape, "fp32", local_device(), repeats=1, memory_bytes=inputs - 1, **FAST)


def test_budget_counts_what_is_taken():
    budget = Budget(1000)
    assert budget.copies(300, 4) == 3 and budget.fits(1000)
    budget.take(700)
    assert budget.left == 300 and budget.copies(300, 4) == 1 and not budget.fits(301)
    assert Budget(None).copies(10**15, 4) == 4 and Budget(None).fits(10**15) and Budget(None).left is None


def test_unknown_model_stops_before_running(engine):
    add_model(engine, "org/small-gqa", SMALL_GQA)
    with pytest.raises(UnknownModel, match="org/missing"):
        bench_models(engine, ["org/small-gqa", "org/missing"], contexts=[16], **FAST)
    with session_scope(engine) as session:
        assert session.exec(select(BenchResult)).all() == []


def test_model_without_a_parsed_config_is_skipped(engine):
    add_model(engine, "org/broken", None)
    with session_scope(engine) as session:
        upsert_model(session, "org/broken")
        record_config(session, "org/broken", "{not json", "b" * 40)
    [row] = bench_models(engine, ["org/broken"], contexts=[16], **FAST)
    assert row.status == "skipped" and "geometry" in row.reason


@pytest.mark.slow
def test_scheduled_job_benchmarks_notable_new_models_once(engine, settings):
    add_model(engine, "org/popular", SMALL_GQA, downloads=5000)
    add_model(engine, "org/from-snapshot", SMALL_MHA, source="snapshot")
    add_model(engine, "org/popular-mla", SMALL_MLA, downloads=9000)
    add_model(engine, "org/obscure", SMALL_GQA, downloads=3)
    add_model(engine, "org/no-config", None, downloads=10**6)
    settings = settings.model_copy(update={"bench_context": 32, "bench_repeats": 1, "bench_min_downloads": 1000})
    device = local_device().name
    picked = set(notable_unbenchmarked(engine, device, 1000, 10))
    assert picked == {"org/popular", "org/from-snapshot", "org/popular-mla"}

    rows = bench_new_models(engine, settings, limit=10)
    assert {r.model_id: r.status for r in rows} == {"org/popular": "ok", "org/from-snapshot": "ok",
                                                   "org/popular-mla": "ok"}
    assert {r.model_id: r.mha_median_s is not None for r in rows} == {  # the MHA model is its own counterfactual
        "org/popular": True, "org/from-snapshot": False, "org/popular-mla": True}
    assert {(r.context, r.batch) for r in rows} == {(32, 1)}
    assert bench_new_models(engine, settings, limit=10) == []  # done (or skipped) models are not picked again


@pytest.mark.slow
def test_job_limit(engine, settings):
    for i in range(3):
        add_model(engine, f"org/popular-{i}", SMALL_GQA, downloads=5000)
    settings = settings.model_copy(update={"bench_context": 16, "bench_repeats": 1, "bench_job_limit": 2})
    assert len(bench_new_models(engine, settings)) == 2
    assert len(bench_new_models(engine, settings)) == 1


def test_cpu_results_record_the_compiler_that_built_the_kernel():
    software = local_device("cpu").software
    assert set(software) == {"torch", "python", "threads", "triton", "cc"}
    if cpu_decode.available():
        assert software["cc"] and software["cc"] == cpu_decode.compiler_version()
    else:
        assert software["cc"] is None


def test_measure_counts_the_bytes_read():
    shape = AttentionShape(batch=1, num_heads=4, num_kv_heads=2, head_dim=64, context=8)
    case = measure(shape, "fp32", local_device(), repeats=1, **FAST)
    assert case.ours.runs == 1 and case.kv_bytes == 2 * 8 * 2 * 64 * 4 and not case.peer_errors
    assert case.counterfactual is None and case.predicted_s is None  # no geometry: no roofline
    latent = AttentionShape(batch=2, num_heads=16, num_kv_heads=1, head_dim=576, context=8, head_dim_v=512, latent=True)
    case = measure(latent, "fp32", local_device(), repeats=1, **FAST)
    assert case.kv_bytes == 2 * 8 * 576 * 4  # the latent, read once for keys and values
    assert case.flops == 2 * 2 * 8 * 16 * (576 + 512) and set(case.peers) == {"mla_matmul"}


@pytest.mark.skipif(not cpu_decode.available(), reason=f"C kernel: {cpu_decode.unavailable_reason()}")
def test_the_read_ceiling_reads_the_kernels_own_bytes():
    # The read contender takes the same rotated input tuples as ours and reads their caches: keys
    # and values, or the latent once; %read is our bytes per second over its.
    for shape in (AttentionShape(batch=2, num_heads=8, num_kv_heads=2, head_dim=64, context=40),
                  AttentionShape(batch=1, num_heads=16, num_kv_heads=1, head_dim=576, context=24, head_dim_v=512,
                                 latent=True)):
        inputs = make_inputs(shape, "fp16", torch.device("cpu"), copies=2)
        contender, nbytes = read_contender(torch.device("cpu"), [cache_tensors(shape, args) for args in inputs])
        assert nbytes == shape.kv_bytes("fp16") and len(contender.inputs) == 2
        assert all(t.data_ptr() == a[1].data_ptr() for t, a in zip((c[0] for c in contender.inputs), inputs))
        case = measure(shape, "fp16", local_device(), repeats=2, peers=False, **FAST)
        assert case.read_bytes_per_s > 0
        assert case.fraction_of_read == pytest.approx(case.bytes_per_s / case.read_bytes_per_s)


def test_measure_times_our_other_implementations_apart_from_the_peers():
    shape = AttentionShape(batch=1, num_heads=4, num_kv_heads=2, head_dim=64, context=8)
    case = measure(shape, "fp32", local_device(), repeats=1, peers=False, also_backends=("torch", "cpu"), **FAST)
    assert case.backend in ("cpu", "torch") and not case.peers
    assert set(case.other_backends) == {"torch", "cpu"} - {case.backend}
    assert all(t.runs == 1 and t.median_s > 0 for t in case.other_backends.values())
    with pytest.raises(ValueError, match="backend must be one of"):
        measure(shape, "fp32", local_device(), repeats=1, peers=False, also_backends=("gpu",), **FAST)


def test_attention_shape_and_its_counterfactual():
    assert attention_shape(parse_geometry(SMALL_GQA), 2, 10) == AttentionShape(2, 8, 2, 64, 10)
    assert counterfactual_shape(parse_geometry(SMALL_GQA), 2, 10) == AttentionShape(2, 8, 8, 64, 10)
    assert counterfactual_shape(parse_geometry(SMALL_MHA), 2, 10) is None
    mla = attention_shape(parse_geometry(SMALL_MLA), 1, 10)
    assert mla == AttentionShape(1, 8, 1, 80, 10, head_dim_v=64, latent=True)
    assert mla.label() == "b=1 H=8 latent=64+16 L=10"
    assert counterfactual_shape(parse_geometry(SMALL_MLA), 1, 10) == AttentionShape(1, 8, 8, 48, 10, head_dim_v=32)
    assert AttentionShape(1, 8, 8, 48, 10, head_dim_v=32).label() == "b=1 H=8 K=8 d=48/32 L=10"
    with pytest.raises(SkipShape, match="no attention"):
        attention_shape(parse_geometry({"model_type": "mamba", "hidden_size": 256, "num_hidden_layers": 2}), 1, 10)
    with pytest.raises(ValueError, match="batch and context"):
        attention_shape(parse_geometry(SMALL_GQA), 0, 10)
    bert = {"model_type": "bert", "architectures": ["BertModel"], "num_attention_heads": 12, "hidden_size": 768,
            "num_hidden_layers": 12}
    with pytest.raises(SkipShape, match="encoder-only"):
        attention_shape(parse_geometry(bert), 1, 10)


def test_rotation_copies():
    assert rotation_copies(100 * 2**20, 768 * 2**20) == 4  # capped
    assert rotation_copies(300 * 2**20, 768 * 2**20) == 3
    assert rotation_copies(2 * 2**30, 768 * 2**20) == 1


def test_interleaved_timing_rotates_inputs_and_checks_arguments():
    seen = []
    timings = time_interleaved([Contender("a", seen.append, [0, 1, 2]), Contender("b", lambda x: None, [None])],
                               torch.device("cpu"), warmup=1, repeats=4)
    assert seen == [0, 1, 2, 0, 1]  # one warm-up call, then the next input copy each round
    assert timings["a"].runs == 4 and timings["b"].min_s <= timings["b"].median_s
    with pytest.raises(ValueError, match="repeats"):
        time_interleaved([], torch.device("cpu"), repeats=0)


def _cli() -> list[str]:
    script = shutil.which("observatory", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-c", "from observatory.cli import main; main()"]


@pytest.mark.slow
def test_cli_benchmarks_and_stores(engine, settings):
    add_model(engine, "org/small-gqa", SMALL_GQA)
    env = dict(os.environ, OBSERVATORY_DATA_DIR=str(settings.data_dir))
    proc = subprocess.run([*_cli(), "bench", "--model", "org/small-gqa", "--context", "64", "--context", "80",
                           "--repeats", "2", "--json"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["model_id"], r["context"], r["status"]) for r in lines] == [("org/small-gqa", 64, "ok"),
                                                                          ("org/small-gqa", 80, "ok")]
    assert lines[0]["fraction_of_ceiling"] > 0 and "sdpa_gqa" in lines[0]["speedups"]
    with session_scope(engine) as session:
        assert len(session.exec(select(BenchResult)).all()) == 2

    text = subprocess.run([*_cli(), "bench", "--model", "org/small-gqa", "--context", "32", "--repeats", "1",
                           "--no-peers", "--no-store"], env=env, capture_output=True, text=True, timeout=300)
    assert text.returncode == 0, text.stderr
    assert f"org/small-gqa  b=1 L=32 fp32  H=8 K=2 d=64  {lines[0]['backend']}" in text.stdout and "% of copy" in text.stdout
    with session_scope(engine) as session:
        assert len(session.exec(select(BenchResult)).all()) == 2  # --no-store


@pytest.mark.slow
def test_cli_dividend_table(engine, settings):
    add_model(engine, "org/small-gqa", SMALL_GQA)
    add_model(engine, "org/small-mla", SMALL_MLA)
    env = dict(os.environ, OBSERVATORY_DATA_DIR=str(settings.data_dir))
    proc = subprocess.run([*_cli(), "bench", "--model", "org/small-gqa", "--model", "org/small-mla", "--dividend",
                           "--context", "64", "--context", "128", "--batch", "2", "--repeats", "1", "--no-peers"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    table = proc.stdout[proc.stdout.index("model "):].splitlines()
    assert table[0].split()[:4] == ["model", "shape", "b", "L"] and "measured" in table[0] and "roofline" in table[0]
    assert [line.split()[0] for line in table[1:]] == ["org/small-gqa"] * 2 + ["org/small-mla"] * 2
    assert "H=8 latent=64+16" in table[3] and table[3].count("x") >= 2  # measured and roofline speed-ups
    with session_scope(engine) as session:
        rows = session.exec(select(BenchResult)).all()
        assert sorted((r.model_id, r.context, r.batch) for r in rows) == [
            ("org/small-gqa", 64, 2), ("org/small-gqa", 128, 2), ("org/small-mla", 64, 2), ("org/small-mla", 128, 2)]
        assert all(r.mha_median_s and r.mha_predicted_s for r in rows)

    proc = subprocess.run([*_cli(), "bench", "--model", "org/small-gqa", "--context", "32", "--repeats", "1",
                           "--no-peers", "--no-counterfactual", "--no-store", "--json"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["mha_median_s"] is None and result["measured_speedup"] is None and result["fraction_of_matmul"] > 0


@pytest.mark.slow
def test_cli_runs_the_backend_asked_for(engine, settings):
    add_model(engine, "org/small-gqa", SMALL_GQA)
    env = dict(os.environ, OBSERVATORY_DATA_DIR=str(settings.data_dir))
    proc = subprocess.run([*_cli(), "bench", "--model", "org/small-gqa", "--context", "40", "--repeats", "1",
                           "--no-peers", "--backend", "torch", "--json"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["backend"] == "torch"
    if not torch.cuda.is_available():
        proc = subprocess.run([*_cli(), "bench", "--model", "org/small-gqa", "--backend", "triton"], env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 1 and "--backend triton runs on CUDA" in proc.stderr
    proc = subprocess.run([*_cli(), "bench", "--model", "org/small-gqa", "--backend", "cpu"],
                          env=env | {"CC": "no-such-cc", "XDG_CACHE_HOME": str(settings.data_dir)},
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "backend='cpu' cannot run these inputs: no C compiler" in proc.stderr


@pytest.mark.slow
def test_cli_unknown_model_is_one_line(engine, settings):
    env = dict(os.environ, OBSERVATORY_DATA_DIR=str(settings.data_dir))
    proc = subprocess.run([*_cli(), "bench", "--model", "org/missing"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1 and proc.stderr.strip() == "Error: no stored model 'org/missing'"


@pytest.mark.parametrize(("args", "message"), [
    (["--context", "0"], "Invalid value for '--context'"),
    (["--batch", "x"], "Invalid value for '--batch'"),
    (["--dtype", "fp64"], "Invalid value for '--dtype'"),
    (["--device", "tpu"], "Invalid value for '--device'"),
    (["--backend", "numba"], "Invalid value for '--backend'"),
])
def test_cli_usage_errors(args, message):
    result = CliRunner().invoke(main, ["bench", *args])
    assert result.exit_code == 2 and message in result.output


def test_pages_show_mla_results_and_the_measured_dividend(engine, settings):
    import csv
    import io
    import re

    from fastapi.testclient import TestClient

    from observatory.web.app import create_app

    add_model(engine, "org/small-gqa", SMALL_GQA)
    add_model(engine, "org/small-mla", SMALL_MLA)
    bench_models(engine, ["org/small-gqa", "org/small-mla"], contexts=[64, 256], repeats=1, peers=False, **FAST)
    with TestClient(create_app(settings.model_copy(update={"scheduler_enabled": False}))) as client:
        data = client.get("/benchmarks.json").json()
        assert {(r["model_id"], r["kernel"]) for r in data["rows"]} == {("org/small-gqa", "gqa"), ("org/small-mla", "mla")}
        assert all(r["measured_speedup"] > 0 and r["predicted_speedup"] > 0 and r["fraction_of_matmul"] > 0
                   for r in data["rows"])
        rows = list(csv.DictReader(io.StringIO(client.get("/benchmarks.csv").text)))
        assert len(rows) == 4 and float(rows[0]["measured_speedup"]) > 0 and rows[0]["predicted_bound"] in ("memory", "compute")

        page = client.get("/benchmarks").text
        assert "MLA, H=8" in page and "latent 64 + 16" in page and "The measured GQA dividend" in page
        spec = json.loads(re.search(r'<script type="application/json" id="chart-dividend">(.*?)</script>', page, re.S)[1])
        drawn = [s for s in spec["series"] if not s["label"].startswith("_")]
        # Per model: measured and roofline series, each a point per context, each point naming its shape and runs.
        assert sorted(s["label"].split(":")[0] for s in drawn) == ["measured", "measured", "roofline", "roofline"]
        assert all([p["x"] for p in s["points"]] == [64, 256] for s in drawn)
        assert any("MLA H=8 latent 64+16, b=1, 256 tokens, median of 1 runs" in p["name"] for s in drawn for p in s["points"])

        api = client.get("/api/v1/models/org/small-mla").json()
        assert api["bench"][0]["kernel"] == "mla" and api["bench"][0]["head_dim_v"] == 64
        assert api["bench"][0]["measured_speedup"] > 0 and api["bench"][0]["predicted_bound"] in ("memory", "compute")

        model_page = client.get("/models/org/small-gqa").text
        assert 'id="chart-dividend"' in model_page and "H=8 K=2 d=64" in model_page
        assert "of matmul" in model_page or "FLOP/s (of matmul)" in model_page
