"""One ~6-minute GPU session for the bundled Triton kernel on a lent H100/H200. Installs nothing.

    python benchmarks/decode_attention_gpu.py            # from the repository root; needs torch (CUDA) + triton

It does, in order, and prints as it goes (each step is skipped when the time budget runs short):

1. **Correctness** of the compiled kernel against the float64 references: the interpreter test cases
   (GQA and absorbed MLA at H = 16/64/128; fp16/fp32, ragged, paged, empty sequences) plus bf16
   copies of them.
2. **Launch tuning** on the floor shapes (H=32, K=8, d=128, bf16, 32k context, batch 1 and 8):
   BLOCK_N × warps × stages, then how many programs per SM the split count aims for, each timed
   interleaved with a large copy; the best is kept for step 3 (and worth making the default).
3. **The comparison table** (``benchmarks/decode_attention.py`` rows, bf16) at 4k/32k/128k and batch
   1/8 for Llama-3-8B/70B, Qwen3 G=8/16, an MQA and an MHA model: our time, each peer's
   (SDPA enable_gqa, HF-layout SDPA, repeat_kv + SDPA, flash_attn / flashinfer when installed),
   and % of measured copy bandwidth.
4. **MLA rows** (``mla_decode``, bf16): DeepSeek-V3's shape (H = 128, latent 512 + 64) at 4k/32k and
   batch 1/64/128, Kimi-K2's (H = 64) at batch 64, beside the naive absorbed matmuls and FlashMLA /
   FlashInfer's MLA when installed; FLOP/s as a share of a bf16 matmul measured in the same rounds.
5. **The floors**: ≥ 80% of copy bandwidth at batch 8 / 32k / K=8, ≥ 50% at batch 1, and not slower
   than flash_attn_with_kvcache where installed; for MLA, ≥ 60% of FlashMLA's published
   compute-bound rate (580–660 TFLOPS bf16 on H800 SXM5, scaled by this device's dense bf16 peak
   over H800's 989 TFLOPS) at batch ≥ 64 — each printed PASS/FAIL with its number.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "unit"))  # kernel_support: the shared correctness cases

STARTED = time.monotonic()


def elapsed() -> float:
    return time.monotonic() - STARTED


def say(*parts) -> None:
    print(f"[{elapsed():6.1f}s]", *parts, flush=True)


def check_correctness(torch) -> bool:
    from dataclasses import replace

    from kernel_support import (
        TRITON_CASES,
        TRITON_MLA_CASES,
        assert_close,
        run_triton_cases,
    )

    base = list(TRITON_CASES) + list(TRITON_MLA_CASES)
    cases = base + [replace(c, id=c.id + "-bf16", dtype="bf16") for c in base]
    ok = True
    for case in cases:
        try:
            result = run_triton_cases([case], device="cuda")[case.id]
            assert_close(case, result)
            say(f"  ok    {case.id:28s} rel {result['rel_err']:.2e}  lse {result['lse_err']:.2e}")
        except Exception as exc:  # keep going: every failing case is worth seeing
            ok = False
            say(f"  FAIL  {case.id:28s} {type(exc).__name__}: {exc}")
    return ok


def race(torch, device, calls_for_batch) -> dict[str, list[float]]:
    """Time variants of our kernel on the floor shapes (H=32, K=8, d=128, bf16, 32k; batch 1 then 8),
    interleaved with a 1 GiB copy; returns each variant's fractions of the copy bandwidth.

    ``calls_for_batch(batch, inputs)`` gives ``{label: call}``; a call that fails its first run
    (e.g. a launch config that does not fit in shared memory) is reported and left out.
    """
    from observatory.bench.shapes import AttentionShape, make_inputs
    from observatory.bench.timing import Contender, copy_contender, time_interleaved

    fractions: dict[str, list[float]] = {}
    for batch in (1, 8):
        inputs = make_inputs(AttentionShape(batch, 32, 8, 128, 32768), "bf16", device.torch_device, copies=2)
        kv_bytes = inputs[0][1].nbytes + inputs[0][2].nbytes
        contenders = []
        for label, call in calls_for_batch(batch, inputs).items():
            try:
                call(inputs[0])  # compiles now
            except Exception as exc:
                say(f"  skip {label}: {type(exc).__name__}: {str(exc)[:120]}")
                continue
            contenders.append(Contender(label, call, inputs))
        copy, moved = copy_contender(device.torch_device, 2**30)
        timings = time_interleaved(contenders + [copy], device.torch_device, warmup=2, repeats=20)
        ceiling = moved / timings.pop("copy").median_s
        for label, t in sorted(timings.items(), key=lambda item: item[1].median_s):
            frac = kv_bytes / t.median_s / ceiling
            fractions.setdefault(label, []).append(frac)
            say(f"  b={batch} {label:32s} {t.median_s * 1e6:8.1f} us  {frac:6.1%} of copy ({ceiling / 1e12:.2f} TB/s)")
        del inputs
        torch.cuda.empty_cache()
    return {label: fracs for label, fracs in fractions.items() if len(fracs) == 2}


def tune(torch, device, budget_s: float) -> dict | None:
    """The launch config (BLOCK_N, warps, stages) with the best bandwidth summed over batch 1 and 8."""
    from kernels.api import check_inputs
    from kernels.triton_decode import gqa_decode_triton

    configs = {f"block_n={n} warps={w} stages={s}": dict(block_n=n, num_warps=w, num_stages=s)
               for n, w, s in itertools.product((32, 64, 128), (4, 8), (2, 3, 4))}

    def calls(batch, inputs):
        if elapsed() > budget_s:
            say("  tuning skipped: time budget")
            return {}

        def call(args, config):
            q, k, v, seqlens = args
            gqa_decode_triton(q, k, v, seqlens, None, 128 ** -0.5, check_inputs(q, k, v, seqlens),
                              torch.empty_like(q), **config)

        return {label: (lambda args, c=config: call(args, c)) for label, config in configs.items()}

    scores = race(torch, device, calls)
    if not scores:
        return None
    best = max(scores, key=lambda label: sum(scores[label]))
    say(f"  best launch config: {best} ({scores[best][0]:.1%} at b=1, {scores[best][1]:.1%} at b=8)")
    return configs[best]


def tune_splits(torch, device) -> int | None:
    """Programs per SM the split heuristic aims for (kernels.triton_decode.PROGRAMS_PER_SM)."""
    from kernels import gqa_decode
    from kernels.triton_decode import choose_splits

    sms = torch.cuda.get_device_properties(device.torch_device).multi_processor_count

    def calls(batch, inputs):
        out = {}
        for per_sm in (1, 2, 4, 8):
            splits = choose_splits(batch, 8, 32768, sms, per_sm)
            out[f"{per_sm}/SM ({splits} splits)"] = lambda args, s=splits: gqa_decode(*args, backend="triton",
                                                                                      num_splits=s)
        return out

    scores = race(torch, device, calls)
    if not scores:
        return None
    best = max(scores, key=lambda label: sum(scores[label]))
    say(f"  best: {best}")
    return int(best.split("/")[0])


GQA_ROWS = list(itertools.product((32768, 4096, 131072), (1, 8), [
    "llama-3-8b", "llama-3-70b", "qwen3-30b-a3b", "qwen3-235b-a22b", "starcoder-mqa", "llama-2-7b-mha"]))
MLA_ROWS = [(4096, 128, "deepseek-v3"), (32768, 64, "deepseek-v3"), (4096, 64, "kimi-k2"), (32768, 1, "deepseek-v3"),
            (4096, 1, "deepseek-v3"), (8192, 128, "deepseek-v3")]
# FlashMLA's README: "660 TFLOPS in computation-bound configuration on H800 SXM5" (CUDA 12.8; 580 with
# CUDA 12.6); H800 SXM5 has H100 SXM's dense bf16 peak, 989 TFLOPS.
FLASH_MLA_TFLOPS = (580.0, 660.0)
H800_BF16_TFLOPS = 989.0
MLA_FLOOR = 0.6


def table(device, budget_s: float, repeats: int, rows_wanted=GQA_ROWS) -> list:
    from benchmarks.decode_attention import geometry, header, text_row
    from observatory.bench.runner import measure
    from observatory.bench.shapes import attention_shape

    rows, printed = [], None
    for context, batch, name in rows_wanted:
        if elapsed() > budget_s:
            say("  table stopped: time budget")
            break
        geom = geometry(name)
        shape = attention_shape(geom, batch, context)
        try:  # peers that would not fit in memory (repeat_kv's G copies) are reported as not run
            case = measure(shape, "bf16", device, geometry=geom, repeats=repeats)
        except Exception as exc:
            say(f"  {name} {shape.label()}: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        if printed != shape.kernel:
            print(header(case), flush=True)
            printed = shape.kernel
        print(text_row(name, case), flush=True)
        for peer, error in case.peer_errors.items():
            print(f"    {peer} did not run: {error[:200]}", flush=True)
        rows.append((name, case))
    return rows


def mla_floor(rows) -> None:
    """The best MLA rate at batch >= 64 against 60% of FlashMLA's published compute-bound rate."""
    best = max(((case.flops_per_s, name, case) for name, case in rows
                if case.shape.latent and case.shape.batch >= 64), default=None, key=lambda t: t[0])
    if best is None:
        say("  (no MLA rows at batch >= 64 ran)")
        return
    rate, name, case = best
    import torch

    from observatory.catalog.hardware import match_device

    catalog = match_device(torch.cuda.get_device_name())
    peak = catalog.bf16_dense_flops / 1e12 if catalog and catalog.bf16_dense_flops else H800_BF16_TFLOPS
    for anchor in FLASH_MLA_TFLOPS:
        floor = MLA_FLOOR * anchor * peak / H800_BF16_TFLOPS
        say(f"  {'PASS' if rate / 1e12 >= floor else 'FAIL'} MLA {name} {case.shape.label()}: {rate / 1e12:.0f} TFLOPS "
            f"vs {MLA_FLOOR:.0%} of FlashMLA's {anchor:.0f} TFLOPS on H800, scaled to this device's "
            f"{peak:.0f} TFLOPS peak: floor {floor:.0f} TFLOPS ({case.fraction_of_matmul or 0:.0%} of the measured matmul)")
    if "flash_mla" in case.peers:
        say(f"  FlashMLA on the same shape: {case.shape.flops / case.peers['flash_mla'].median_s / 1e12:.0f} TFLOPS "
            f"({case.speedups['flash_mla']:.2f}x our time)")


def floors(rows) -> None:
    mla_floor(rows)
    for name, case in rows:
        s = case.shape
        if (name, s.context) != ("llama-3-8b", 32768):
            continue
        need = 0.8 if s.batch == 8 else 0.5
        verdict = "PASS" if case.fraction_of_ceiling >= need else "FAIL"
        say(f"  {verdict} b={s.batch} 32k K=8: {case.fraction_of_ceiling:.1%} of copy (floor {need:.0%})")
        if "flash_attn" in case.peers:
            ratio = case.peers["flash_attn"].median_s / case.ours.median_s
            say(f"  {'PASS' if ratio >= 1 else 'FAIL'} b={s.batch} 32k vs flash_attn_with_kvcache: {ratio:.2f}x")
        else:
            say(f"  (flash_attn not installed or failed: {case.peer_errors.get('flash_attn', 'not installed')})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="GPU checks for the bundled decode kernel")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds before optional steps stop")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--skip-tuning", action="store_true")
    args = parser.parse_args(argv)
    try:
        import torch
        import triton
    except ImportError as exc:
        print(f"cannot run: {exc} (this script installs nothing)")
        return 2
    if not torch.cuda.is_available():
        print("cannot run: torch sees no CUDA device")
        return 2
    from kernels import triton_decode
    from observatory.bench.runner import local_device

    device = local_device("cuda")
    props = torch.cuda.get_device_properties(device.torch_device)
    say(f"device {device.name} ({props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB), "
        f"catalog {device.catalog.id if device.catalog else '-'}; torch {torch.__version__}, triton {triton.__version__}, "
        f"cuda {torch.version.cuda}")
    for package in ("flash_attn", "flashinfer"):
        try:
            module = __import__(package)
            say(f"{package} {getattr(module, '__version__', '?')} installed")
        except Exception as exc:
            say(f"{package} not available ({type(exc).__name__})")

    say("1. correctness (compiled kernel vs float64 reference)")
    correct = check_correctness(torch)
    if not correct:
        say("correctness FAILED: the numbers below are not to be trusted")
    if not args.skip_tuning:
        say("2. launch tuning, H=32 K=8 d=128 bf16 32k")
        try:
            best = tune(torch, device, budget_s=args.budget * 0.45)
        except Exception:
            traceback.print_exc()
            best = None
        if best:
            triton_decode.LAUNCH.update(best)
            try:
                triton_decode.PROGRAMS_PER_SM = tune_splits(torch, device) or triton_decode.PROGRAMS_PER_SM
            except Exception:
                traceback.print_exc()
    say(f"3. comparison table (bf16, median of {args.repeats}; launch {triton_decode.LAUNCH or 'defaults'}, "
        f"{triton_decode.PROGRAMS_PER_SM} programs per SM)")
    rows = table(device, budget_s=args.budget * 0.8, repeats=args.repeats)
    say("4. MLA rows (bf16)")
    rows += table(device, budget_s=args.budget, repeats=args.repeats, rows_wanted=MLA_ROWS)
    say("5. floors")
    floors(rows)
    say("done")
    return 0 if correct else 1


if __name__ == "__main__":
    sys.exit(main())
