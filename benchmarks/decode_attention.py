"""Decode-attention comparison table: the bundled kernels against their peers on this machine.

For each model shape and context it prints our time, each peer's time in ms and (in brackets) how
many times slower it is than ours, the cache bytes our kernel read per second and that rate as a
share of reading the same bytes ("%read": a C loop that reads every line of the same, rotated, K and
V tensors with the same threads and does nothing else, kernels/cpu_decode.c read_lines) and of the
machine's copy bandwidth ("%copy": bytes read + written per second by a large copy, both buffers
written before timing so page faults do not count), and the FLOP/s it did as a share of a large
matmul's in the same dtype; the read, the copy and the matmul are timed in the same interleaved
rounds. Shapes are one attention layer of each model, batch 1 by default. On a busy machine %read
can pass 100%: each contender's median is its own, and a neighbour that takes a core stalls the
read loop's OpenMP threads as it stalls ours, in different rounds.

GQA models run ``gqa_decode``; MLA models (DeepSeek-V3, Kimi-K2, GLM-5, MiniCPM3, DeepSeek-V2-Lite,
their configs taken from the bundled snapshot) run ``mla_decode`` in the absorbed form, beside the
naive absorbed form in PyTorch matmuls ("mla_matmul") and FlashMLA / FlashInfer where installed.

"ours" is what the entry point runs by default (the C kernel on a CPU, Triton on CUDA); on a CPU the
"torch path" column times our pure-PyTorch implementation in the same rounds, for comparison.
``--counterfactual`` also times each model's MHA counterfactual (K = H) in the same rounds and
prints the measured speed-up beside the roofline's.

    python benchmarks/decode_attention.py                     # CPU table (fp32), about 10 minutes
    python benchmarks/decode_attention.py --contexts 32768 --models llama-3-8b deepseek-v3   # the floor rows
    python benchmarks/decode_attention.py --device cuda --dtype bf16 --batches 1 8   # a GPU
    python benchmarks/decode_attention.py --contexts 4096 32768 --models llama-3-8b qwen3-30b-a3b \
        starcoder-mqa deepseek-v3 --dtype fp32 --results benchmarks/results/decode_attention.json

``--results`` also writes the table, each row and the floors' verdicts to a JSON file stamped with
the date, the machine, the thread count and the load average before and after (the committed
``benchmarks/results/decode_attention.json`` is what the README quotes; a test holds them equal).
``--best-of N`` runs the whole measurement N times and keeps, per row, the run where ours was
fastest (on a shared machine the quietest run is the closest to the machine's own figures).

The floors this CPU is held to (batch 1, on a quiet machine), printed PASS/FAIL after the table:
Llama-3-8B ≥ 75% of the read rate at 32k and ≥ 60% at 4k, and ahead of SDPA ``enable_gqa``;
DeepSeek-V3 (MLA, compute-bound, fp32, 32k) ≥ 50% of the measured matmul FLOP/s and ≥ 2× the naive
absorbed matmuls.

Peers (kernels/peers.py): SDPA enable_gqa and transformers' repeat_kv + SDPA on (b, K, L, d) views
of the same cache ("sdpa_gqa", "repeat_kv_sdpa"), the same two on a contiguous copy in the Hugging
Face layout made outside the timing ("..._bkld"), and flash_attn / flashinfer where installed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))

import results_file as results  # benchmarks/results_file.py, beside this file

from observatory.bench.runner import local_device, measure  # noqa: E402
from observatory.bench.shapes import attention_shape, counterfactual_shape  # noqa: E402
from observatory.catalog.snapshot import load_entries  # noqa: E402
from observatory.core.geometry import parse_config_text, parse_geometry  # noqa: E402

# Attention settings as each model's config.json spells them (only the keys the geometry needs).
MODELS = {
    "llama-3-8b": {"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8,
                   "hidden_size": 4096, "num_hidden_layers": 32},
    "llama-3-70b": {"model_type": "llama", "num_attention_heads": 64, "num_key_value_heads": 8,
                    "hidden_size": 8192, "num_hidden_layers": 80},
    "qwen3-30b-a3b": {"model_type": "qwen3_moe", "num_attention_heads": 32, "num_key_value_heads": 4,
                      "head_dim": 128, "hidden_size": 2048, "num_hidden_layers": 48},
    "qwen3-235b-a22b": {"model_type": "qwen3_moe", "num_attention_heads": 64, "num_key_value_heads": 4,
                        "head_dim": 128, "hidden_size": 4096, "num_hidden_layers": 94},
    "starcoder-mqa": {"model_type": "gpt_bigcode", "n_head": 48, "n_embd": 6144, "n_layer": 40,
                      "multi_query": True},
    "llama-2-7b-mha": {"model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 32,
                       "hidden_size": 4096, "num_hidden_layers": 32},
}
# MLA models, read from the bundled snapshot (observatory/catalog/data/snapshot.json and its configs).
SNAPSHOT_MODELS = {
    "deepseek-v3": "deepseek-ai/DeepSeek-V3",  # H = 128, latent 512 + 64
    "kimi-k2": "moonshotai/Kimi-K2-Instruct",  # H = 64
    "glm-5": "zai-org/GLM-5",  # H = 64
    "minicpm3": "openbmb/MiniCPM3-4B",  # H = 40, latent 256 + 32
    "deepseek-v2-lite": "deepseek-ai/DeepSeek-V2-Lite",  # H = 16
}
FLOOR_CONTEXT = 32768


def geometry(name: str):
    if name in MODELS:
        return parse_geometry(MODELS[name])
    entry = next(e for e in load_entries() if e.id == SNAPSHOT_MODELS[name])
    return parse_geometry(parse_config_text(entry.raw_text))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    names = list(MODELS) + list(SNAPSHOT_MODELS)
    parser.add_argument("--models", nargs="+", choices=names, default=names)
    parser.add_argument("--contexts", nargs="+", type=int, default=[4096, 16384, 32768])
    parser.add_argument("--batches", nargs="+", type=int, default=[1])
    parser.add_argument("--dtype", choices=["fp32", "fp16", "bf16"], default=None,
                        help="default: fp32 on the CPU, bf16 on CUDA")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--repeats", type=int, default=20,
                        help="interleaved rounds; the median shrugs off a burst from a noisy neighbour")
    parser.add_argument("--best-of", type=int, default=1, metavar="N",
                        help="measure each row N times and keep the run where ours was fastest")
    parser.add_argument("--backend", choices=["auto", "cpu", "torch", "triton"], default="auto",
                        help="which of our implementations is 'ours' (default: what the entry point picks)")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--counterfactual", action="store_true",
                        help="also time each model's MHA counterfactual (K = H) in the same rounds")
    parser.add_argument("--json", action="store_true", help="one JSON object per row instead of the table")
    parser.add_argument("--results", type=Path, metavar="FILE",
                        help="also write the table, the rows and the floors to FILE (JSON, stamped)")
    parser.add_argument("--readme-cell", type=Path, metavar="FILE",
                        help="print the README's result cell made from a results file, and exit")
    args = parser.parse_args(argv)
    if args.readme_cell:
        try:
            print(readme_cell(results.read(args.readme_cell)))
        except (OSError, ValueError, KeyError) as exc:  # missing, not JSON, or not a results file
            parser.error(f"cannot make the README cell from {args.readme_cell}: {type(exc).__name__}: {exc}")
        return 0
    if args.best_of < 1:
        parser.error("--best-of must be at least 1")

    device = local_device(args.device)
    dtype = args.dtype or ("bf16" if device.type == "cuda" else "fp32")
    stamp = results.stamp(device, argv if argv is not None else sys.argv[1:])
    lines = [(f"device: {device.name}; {dtype}; ours: {args.backend} backend; torch {device.software['torch']}, "
              f"triton {device.software['triton'] or '-'}, {device.software['threads']} threads; "
              f"median of {args.repeats} interleaved runs, best of {args.best_of}; "
              f"load average {results.load_text(stamp['load_average_before'])} at the start")]
    say = (lambda line: None) if args.json else (lambda line: print(line, flush=True))
    say(lines[0])
    header_for = None
    cases = []
    for name in args.models:
        geom = geometry(name)
        for context in args.contexts:
            for batch in args.batches:
                shape = attention_shape(geom, batch, context)
                mha = counterfactual_shape(geom, batch, context) if args.counterfactual else None
                runs = [measure(shape, dtype, device, geometry=geom, peers=not args.no_peers, repeats=args.repeats,
                                backend=args.backend, counterfactual=mha,
                                also_backends=("torch",) if device.type == "cpu" else ())
                        for _ in range(args.best_of)]
                case = min(runs, key=lambda c: c.ours.median_s)
                cases.append((name, case))
                if args.json:
                    print(json.dumps(row(name, case)), flush=True)
                    continue
                out = []
                if header_for != shape.kernel:  # GQA and MLA rows have different peers
                    out += ["", header(case)]
                    header_for = shape.kernel
                out.append(text_row(name, case))
                out += [f"    {peer} did not run: {error}" for peer, error in case.peer_errors.items()]
                for line in out:
                    say(line)
                lines += out
    verdicts = floors(cases, dtype) if device.type == "cpu" else []
    if verdicts:
        say("")
        for line in verdicts:
            say(line)
    if args.results:
        stamp["load_average_after"] = list(os.getloadavg())
        results.write(args.results, stamp, lines + ([""] + verdicts if verdicts else []),
                      [row(name, case) for name, case in cases], verdicts)
        say(f"wrote {args.results}")
    return 0


PEER_COLUMNS = ("sdpa_gqa", "repeat_kv_sdpa", "sdpa_gqa_bkld", "repeat_kv_sdpa_bkld", "flash_attn", "flashinfer",
                "mla_matmul", "flash_mla", "flashinfer_mla")
ALWAYS = {"gqa": PEER_COLUMNS[:4], "mla": ("mla_matmul",)}  # the PyTorch peers; the others only where installed


def _columns(case) -> list[str]:
    return [p for p in PEER_COLUMNS if p in case.peers or p in ALWAYS[case.shape.kernel]]


def header(case) -> str:
    peers = "".join(f" {p:>20}" for p in _columns(case))
    others = "".join(f" {f'{b} path':>20}" for b in case.other_backends)
    cf = f" {'MHA ms':>9} {'measured':>8} {'roofline':>8}" if case.counterfactual else ""
    return (f"{'model':<17} {'shape':<22} {'b':>3} {'L':>7} {'ours':>6} {'ours ms':>9} {'GB/s':>6} {'%read':>6} {'%copy':>6} "
            f"{'GFLOP/s':>8} {'%matmul':>7} {'roof ms':>8} {'bound':>7}{cf}{others}{peers}")


def text_row(name, case) -> str:
    s = case.shape
    shape = s.label().split(" ", 1)[1].rsplit(" L=", 1)[0]  # without batch and context: they have columns
    cells = [f" {_vs_ours(t, case):>20}" for t in case.other_backends.values()]
    for peer in _columns(case):
        cells.append(f" {_vs_ours(case.peers[peer], case) if peer in case.peers else '-':>20}")
    cf = ""
    if case.counterfactual:
        timing = case.counterfactual.timing
        cf = (f" {timing.median_s * 1e3 if timing else float('nan'):>9.2f} {_x(case.measured_speedup):>8} "
              f"{_x(case.predicted_speedup):>8}")
    return (f"{name:<17} {shape:<22} {s.batch:>3} {s.context:>7} {case.backend:>6} {case.ours.median_s * 1e3:>9.3f} "
            f"{case.bytes_per_s / 1e9:>6.1f} {_pct(case.fraction_of_read):>6} {case.fraction_of_ceiling:>6.0%} "
            f"{case.flops_per_s / 1e9:>8.1f} "
            f"{case.fraction_of_matmul or 0:>7.0%} {(case.predicted_s or 0) * 1e3:>8.3f} {case.predicted_bound or '-':>7}"
            + cf + "".join(cells))


def _pct(value) -> str:
    return "—" if value is None else f"{value:.0%}"


def _x(value) -> str:
    return f"{value:.2f}x" if value else "-"


def _vs_ours(timing, case) -> str:
    return f"{timing.median_s * 1e3:.2f} ({timing.median_s / case.ours.median_s:.1f}x)"


READ_FLOORS = {4096: 0.60, 32768: 0.75}  # share of the read rate, Llama-3-8B, batch 1, quiet machine


def floors(cases, dtype: str) -> list[str]:
    """PASS/FAIL of this CPU's floors (batch 1) on the rows that measure them."""
    lines = []
    for name, case in cases:
        s = case.shape
        if s.batch != 1:
            continue
        if name == "llama-3-8b" and s.context in READ_FLOORS:
            floor, share = READ_FLOORS[s.context], case.fraction_of_read
            label = f"llama-3-8b {s.context // 1024}k b=1 {dtype}"
            lines.append(_verdict(share is not None and share >= floor,
                                  f"{label}: {_pct(share)} of the read rate (floor {floor:.0%}, 2 threads, quiet machine)"))
            if "sdpa_gqa" in case.speedups:
                x = case.speedups["sdpa_gqa"]
                lines.append(_verdict(x > 1, f"{label}: {x:.2f}x SDPA enable_gqa (floor: ahead)"))
        if name == "deepseek-v3" and (s.context, dtype) == (FLOOR_CONTEXT, "fp32"):
            share = case.fraction_of_matmul or 0
            lines.append(_verdict(share >= 0.5, f"deepseek-v3 (MLA) 32k b=1: {share:.0%} of the measured matmul "
                                                f"FLOP/s ({case.flops_per_s / 1e9:.1f} of {case.matmul_flops_per_s / 1e9:.1f} "
                                                "GFLOP/s; floor 50%)"))
            if "mla_matmul" in case.speedups:
                x = case.speedups["mla_matmul"]
                lines.append(_verdict(x >= 2, f"deepseek-v3 (MLA) 32k b=1: {x:.2f}x the naive absorbed matmuls (floor 2x)"))
    return lines or ["(no floor rows: Llama-3-8B at 4k or 32k, DeepSeek-V3 fp32 at 32k, batch 1)"]


def _verdict(ok: bool, text: str) -> str:
    return f"{'PASS' if ok else 'FAIL'}  {text}"


def row(name, case) -> dict:
    cf = case.counterfactual
    return {"model": name, **case.shape.to_dict(), "kernel": case.shape.kernel, "dtype": case.dtype,
            "backend": case.backend, "ours_s": case.ours.median_s, "ours_min_s": case.ours.min_s,
            "kv_bytes": case.kv_bytes, "bytes_per_s": case.bytes_per_s, "read_bytes_per_s": case.read_bytes_per_s,
            "fraction_of_read": case.fraction_of_read, "ceiling_bytes_per_s": case.ceiling_bytes_per_s,
            "fraction_of_ceiling": case.fraction_of_ceiling, "flops": case.flops, "flops_per_s": case.flops_per_s,
            "matmul_flops_per_s": case.matmul_flops_per_s, "fraction_of_matmul": case.fraction_of_matmul,
            "predicted_s": case.predicted_s, "predicted_bound": case.predicted_bound,
            "peers_s": {p: t.median_s for p, t in case.peers.items()}, "speedups": case.speedups,
            "other_backends_s": {b: t.median_s for b, t in case.other_backends.items()},
            "peer_errors": case.peer_errors,
            "mha_s": cf.timing.median_s if cf and cf.timing else None, "mha_error": cf.error if cf else None,
            "measured_speedup": case.measured_speedup, "predicted_speedup": case.predicted_speedup}


# -- the README's kernel figures, made from the committed results file -----------------------------

RESULTS_FILE = Path(__file__).resolve().parent / "results" / "decode_attention.json"
README_LABELS = {"llama-3-8b": "Llama-3-8B (G = 4)", "qwen3-30b-a3b": "Qwen3-30B-A3B (G = 8)",
                 "starcoder-mqa": "StarCoder MQA (G = 48)", "llama-2-7b-mha": "Llama-2-7B MHA (G = 1)",
                 "deepseek-v3": "DeepSeek-V3 (MLA, H = 128)", "kimi-k2": "Kimi-K2 (MLA, H = 64)"}
QUIET_LOAD = 0.5  # a 1-minute load average below this, at the start and the end, is a quiet machine


def readme_cell(results: dict) -> str:
    """The README's result cell for this benchmark, every number in it taken from ``results`` (a
    results file as ``--results`` writes it); tests/unit/test_readme_kernel_figures.py holds the
    README to it, and ``--readme-cell FILE`` prints it for pasting."""
    before = results["load_average_before"][0]
    after = results.get("load_average_after", [before])[0]
    quiet = max(before, after) < QUIET_LOAD
    machine = results["machine"]
    head = (f"`benchmarks/results/decode_attention.json` ({results['date'][:10]}, {machine['device']}, "
            f"{machine['threads']} threads, fp32, batch 1; 1-minute load average {before:.1f} at the start and "
            f"{after:.1f} at the end on {machine['cpus']} CPUs"
            + ("" if quiet else ": a busy machine, so every figure is below this CPU's own and the quiet-machine "
                                "floors are unverified") + ")")
    parts = []
    for name in dict.fromkeys(r["model"] for r in results["rows"]):
        rows = [r for r in results["rows"] if r["model"] == name and r["batch"] == 1]
        label = README_LABELS.get(name, name)
        parts.append(f"{label}: " + ", ".join(_readme_row(r) for r in sorted(rows, key=lambda r: r["context"])))
    fails = [v.removeprefix("FAIL").strip() for v in results["verdicts"] if v.startswith("FAIL")]
    passes = sum(v.startswith("PASS") for v in results["verdicts"])
    floors = f"floors: {passes} pass" + (f", {len(fails)} fail ({'; '.join(fails)})" if fails else "")
    return head + ". " + "; ".join(parts) + "; " + floors


def _readme_row(r: dict) -> str:
    ms = r["ours_s"] * 1e3
    context = f"{r['context'] // 1024}k"
    if r["kernel"] == "mla":
        text = (f"{context} {ms:.1f} ms, {r['flops_per_s'] / 1e9:.0f} GFLOP/s = "
                f"{r['fraction_of_matmul']:.0%} of the measured matmul rate")
        naive = r["speedups"].get("mla_matmul")
        return text + (f", {naive:.2f}× the naive absorbed matmuls" if naive else "")
    text = (f"{context} {ms:.1f} ms at {_pct(r['fraction_of_read'])} of the read rate "
            f"({r['fraction_of_ceiling']:.0%} of copy)")
    sdpa = r["speedups"].get("sdpa_gqa")
    return text + (f", {sdpa:.1f}× SDPA `enable_gqa`" if sdpa else "")


if __name__ == "__main__":
    sys.exit(main())
