"""Decode-attention comparison table: the bundled kernel against its peers on this machine.

For each model shape and context it prints our time, each peer's time in ms and (in brackets) how
many times slower it is than ours, the K/V bytes our kernel read per second, and that rate as a share of the
machine's copy bandwidth (bytes read + written per second by a large copy, timed in the same
interleaved rounds). Shapes are one attention layer of each model, batch 1 by default.

"ours" is what ``gqa_decode`` runs by default (the C kernel on a CPU, Triton on CUDA); on a CPU the
"torch path" column times our pure-PyTorch implementation in the same rounds, for comparison.

    python benchmarks/decode_attention.py                     # CPU table (fp32), about 5 minutes
    python benchmarks/decode_attention.py --contexts 32768 --models llama-3-8b   # the floor row
    python benchmarks/decode_attention.py --device cuda --dtype bf16 --batches 1 8   # a GPU

Peers (kernels/peers.py): SDPA enable_gqa and transformers' repeat_kv + SDPA on (b, K, L, d) views
of the same cache ("sdpa_gqa", "repeat_kv_sdpa"), the same two on a contiguous copy in the Hugging
Face layout made outside the timing ("..._bkld"), and flash_attn / flashinfer where installed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from observatory.bench.runner import local_device, measure  # noqa: E402
from observatory.bench.shapes import attention_shape  # noqa: E402
from observatory.core.geometry import parse_geometry  # noqa: E402

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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--contexts", nargs="+", type=int, default=[4096, 16384, 32768])
    parser.add_argument("--batches", nargs="+", type=int, default=[1])
    parser.add_argument("--dtype", choices=["fp32", "fp16", "bf16"], default=None,
                        help="default: fp32 on the CPU, bf16 on CUDA")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--repeats", type=int, default=20,
                        help="interleaved rounds; the median shrugs off a burst from a noisy neighbour")
    parser.add_argument("--backend", choices=["auto", "cpu", "torch", "triton"], default="auto",
                        help="which of our implementations is 'ours' (default: what gqa_decode picks)")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--json", action="store_true", help="one JSON object per row instead of the table")
    args = parser.parse_args(argv)

    device = local_device(args.device)
    dtype = args.dtype or ("bf16" if device.type == "cuda" else "fp32")
    if not args.json:
        print(f"device: {device.name}; {dtype}; ours: {args.backend} backend; torch {device.software['torch']}, "
              f"triton {device.software['triton'] or '-'}, {device.software['threads']} threads; "
              f"median of {args.repeats} interleaved runs")
    header_done = False
    for name in args.models:
        geom = parse_geometry(MODELS[name])
        for context in args.contexts:
            for batch in args.batches:
                shape = attention_shape(geom, batch, context)
                case = measure(shape, dtype, device, geometry=geom, peers=not args.no_peers, repeats=args.repeats,
                               backend=args.backend, also_backends=("torch",) if device.type == "cpu" else ())
                if args.json:
                    print(json.dumps(row(name, case)), flush=True)
                    continue
                if not header_done:
                    print(header(case))
                    header_done = True
                print(text_row(name, case), flush=True)
                for peer, error in case.peer_errors.items():
                    print(f"    {peer} did not run: {error}")
    return 0


PEER_COLUMNS = ("sdpa_gqa", "repeat_kv_sdpa", "sdpa_gqa_bkld", "repeat_kv_sdpa_bkld", "flash_attn", "flashinfer")
ALWAYS = 4  # the PyTorch peers; the others only where installed


def header(case) -> str:
    peers = "".join(f" {p:>20}" for p in PEER_COLUMNS if p in case.peers or p in PEER_COLUMNS[:ALWAYS])
    others = "".join(f" {f'{b} path':>20}" for b in case.other_backends)
    return (f"{'model':<16} {'H':>3} {'K':>3} {'G':>3} {'d':>4} {'b':>3} {'L':>7} {'ours':>6} {'ours ms':>9} "
            f"{'GB/s':>6} {'%copy':>6} {'copy GB/s':>9} {'roof ms':>8}{others}{peers}")


def text_row(name, case) -> str:
    s = case.shape
    cells = [f" {_vs_ours(t, case):>20}" for t in case.other_backends.values()]
    for peer in PEER_COLUMNS:
        if peer in case.peers:
            cells.append(f" {_vs_ours(case.peers[peer], case):>20}")
        elif peer in PEER_COLUMNS[:ALWAYS]:
            cells.append(f" {'-':>20}")
    return (f"{name:<16} {s.num_heads:>3} {s.num_kv_heads:>3} {s.group_size:>3} {s.head_dim:>4} {s.batch:>3} "
            f"{s.context:>7} {case.backend:>6} {case.ours.median_s * 1e3:>9.3f} {case.bytes_per_s / 1e9:>6.1f} "
            f"{case.fraction_of_ceiling:>6.0%} {case.ceiling_bytes_per_s / 1e9:>9.1f} "
            f"{(case.predicted_s or 0) * 1e3:>8.3f}" + "".join(cells))


def _vs_ours(timing, case) -> str:
    return f"{timing.median_s * 1e3:.2f} ({timing.median_s / case.ours.median_s:.1f}x)"


def row(name, case) -> dict:
    return {"model": name, **case.shape.to_dict(), "dtype": case.dtype, "backend": case.backend,
            "ours_s": case.ours.median_s, "ours_min_s": case.ours.min_s, "kv_bytes": case.kv_bytes,
            "bytes_per_s": case.bytes_per_s, "ceiling_bytes_per_s": case.ceiling_bytes_per_s,
            "fraction_of_ceiling": case.fraction_of_ceiling, "predicted_s": case.predicted_s,
            "peers_s": {p: t.median_s for p, t in case.peers.items()}, "speedups": case.speedups,
            "other_backends_s": {b: t.median_s for b, t in case.other_backends.items()},
            "peer_errors": case.peer_errors}


if __name__ == "__main__":
    sys.exit(main())
