"""The C decode kernel (kernels/cpu_decode.c), GQA and absorbed MLA: correctness against the float64
references, its build, and the fall-back to the PyTorch path where it cannot run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from kernel_support import (
    DTYPES,
    ROOT,
    RTOL,
    Case,
    assert_close,
    compare,
    make_inputs,
    mla_case,
    run_case,
)

from kernels import cpu_decode, gqa_decode, gqa_decode_reference, mla_decode
from kernels.api import choose_backend

# Tests that run the kernel need a C compiler; the build's error paths and the fall-back do not.
needs_kernel = pytest.mark.skipif(not cpu_decode.available(), reason=f"C kernel: {cpu_decode.unavailable_reason()}")

# Group sizes 1-16 (tiles of 4, 2 and 1 query rows: G=3 and G=6 take the narrow ones), head dims
# 64/128/256 and the vector tails of 48 and 80, lengths that split blocks of 32 tokens and the
# kernel's pairs of tokens unevenly, ragged batches with empty sequences, paged caches, fp16/bf16
# widened on load, and more slices than a sequence has tokens.
CPU_CASES = [
    Case("mha-g1-d64", 4, 4, 64, (37, 5)),
    Case("gqa-g2-d128", 8, 4, 128, (100,)),
    Case("gqa-g3-d128", 12, 4, 128, (65, 2)),
    Case("gqa-g4-d128-ragged", 8, 2, 128, (70, 0, 19, 70)),
    Case("gqa-g6-d64", 12, 2, 64, (33,)),
    Case("mqa-g8-d256", 8, 1, 256, (65, 64)),
    Case("gqa-g16-d64", 32, 2, 64, (33, 1)),
    Case("d48-tail", 8, 2, 48, (40,)),
    Case("d80-tail", 8, 4, 80, (31, 32)),
    Case("fp16-g4", 8, 2, 64, (50, 50, 7), "fp16"),
    Case("bf16-g8", 16, 2, 128, (41,), "bf16"),
    Case("paged-bs16", 8, 2, 64, (50, 0, 17), block_size=16),
    Case("paged-bs7-fp16", 4, 1, 128, (30, 30), "fp16", block_size=7),
    Case("paged-bs1-bf16", 4, 2, 64, (11, 6), "bf16", block_size=1),
    Case("all-empty", 4, 2, 64, (0, 0)),
    Case("custom-scale", 8, 2, 64, (29,), scale=0.3),
    Case("splits-3", 8, 2, 64, (100, 100, 33), num_splits=3),
    Case("splits-past-end", 8, 2, 64, (9, 70), num_splits=8),
    Case("splits-paged-fp16", 8, 2, 128, (90, 45), "fp16", block_size=8, num_splits=4),
    Case("long-default-splits", 32, 8, 128, (3000, 1500)),
    Case("g32-transposed-tiles-k2", 64, 2, 64, (45, 0, 20)),  # groups of 32+: the outer-product q·k tiles
    Case("g64-transposed-tiles-fp16-paged", 64, 1, 128, (40, 33), "fp16", block_size=16),
    # Keys wider than values: DeepSeek's MHA (192 over 128), the MLA models' counterfactual.
    Case("dk192-dv128-mha", 8, 8, 192, (40, 7), head_dim_v=128),
    Case("dk192-dv128-g4-paged-fp16", 8, 2, 192, (25, 9), "fp16", block_size=8, head_dim_v=128),
    # The model shapes the benchmark times, over several blocks of 32 tokens with a tail (the next
    # block's keys are prefetched while this one is scored, the last block is partial): Llama-3-8B
    # (G = 4), Qwen3-30B-A3B (G = 8), StarCoder's MQA (G = 48, tiles of 4 query rows) and MHA (G = 1),
    # in fp32 and fp16 (16 lanes widened by one vcvtph2ps each).
    Case("llama3-8b-g4-tails", 32, 8, 128, (97, 33, 1)),
    Case("llama3-8b-g4-tails-fp16", 32, 8, 128, (97, 65), "fp16"),
    Case("qwen3-g8-fp16-odd", 32, 4, 128, (301,), "fp16"),
    Case("qwen3-g8-fp32-splits", 32, 4, 128, (255, 129), num_splits=2),
    Case("starcoder-mqa-g48", 48, 1, 128, (129, 70)),
    Case("starcoder-mqa-g48-fp16-paged", 48, 1, 128, (95, 40), "fp16", block_size=16),
    Case("mha-g1-fp16-tails", 8, 8, 128, (95, 31), "fp16"),
]

# Absorbed MLA: H = 16/64/128 over DeepSeek's 512 + 64 latent (V2-Lite is H = 16), MiniCPM3's 40 heads
# over 256 + 32, GLM-4.7-Flash's 20 (tiles of 4 query rows) and an odd head count (tiles of 1);
# ragged and paged caches, fp16/bf16/fp32, default and forced slices, empty sequences.
CPU_MLA_CASES = [
    mla_case("mla-h16-512+64", 16, 512, 64, (37, 0, 9)),
    mla_case("mla-h64-512+64-fp16", 64, 512, 64, (45,), "fp16"),
    mla_case("mla-h128-512+64-bf16", 128, 512, 64, (50, 17), "bf16"),
    mla_case("mla-h128-long-default-splits", 128, 512, 64, (1100, 700)),
    mla_case("mla-h128-paged-bs64", 128, 512, 64, (130, 64), block_size=64),
    mla_case("mla-minicpm3-h40-256+32", 40, 256, 32, (50, 12)),
    mla_case("mla-minicpm3-paged-bs7-fp16", 40, 256, 32, (30, 30), "fp16", block_size=7),
    mla_case("mla-v2lite-h16-paged-bs16-bf16", 16, 512, 64, (41, 0, 17), "bf16", block_size=16),
    mla_case("mla-glm-flash-h20", 20, 512, 64, (33,)),
    mla_case("mla-h3-odd-heads", 3, 512, 64, (19, 5)),
    mla_case("mla-splits-past-end", 16, 512, 64, (9, 70), num_splits=8),
    mla_case("mla-all-empty", 16, 512, 64, (0, 0)),
    mla_case("mla-deepseek-scale", 128, 512, 64, (29,), scale=192 ** -0.5),
]


def run_cpu(case: Case, seed: int = 0) -> dict:
    result = run_case(case, "cpu", seed)
    assert result["wrote_into_out"]
    return result


@needs_kernel
@pytest.mark.parametrize("case", CPU_CASES, ids=lambda c: c.id)
def test_c_kernel_matches_reference(case):
    assert_close(case, run_cpu(case))


@needs_kernel
@pytest.mark.parametrize("case", CPU_MLA_CASES, ids=lambda c: c.id)
def test_c_kernel_mla_matches_reference(case):
    assert_close(case, run_cpu(case))


# The peer the benchmark measures against, as a second oracle: SDPA enable_gqa in float64 on
# (b, K, L, d) views of the same caches, over G = 1, 4, 8 and MQA, contexts that are no multiple of
# the 32-token block, and both dtypes the C kernel widens differently.
@needs_kernel
@pytest.mark.parametrize(("heads", "kv_heads", "length"), [(8, 8, 45), (32, 8, 333), (32, 4, 77), (16, 1, 130)],
                         ids=["g1", "g4", "g8", "mqa-g16"])
@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
def test_c_kernel_matches_sdpa(heads, kv_heads, length, dtype):
    case = Case(f"sdpa-{heads}-{kv_heads}", heads, kv_heads, 128, (length, length), dtype, spare=0)
    q, k, v, seqlens, _ = make_inputs(case)
    out = gqa_decode(q, k, v, seqlens, backend="cpu")
    want = torch.nn.functional.scaled_dot_product_attention(
        q.double().unsqueeze(2), k.double().transpose(1, 2), v.double().transpose(1, 2), enable_gqa=True).squeeze(2)
    rel = ((out.double() - want).abs().max() / want.abs().max()).item()
    assert rel <= RTOL[DTYPES[dtype]], f"relative error {rel:.3g} against SDPA"


# -- the read loop the decode benchmark sets beside the kernel -------------------------------------

@needs_kernel
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_read_lines_reads_every_whole_group_once(threads):
    # Distinct 64-bit words, so a group read twice or skipped changes the sum; sizes with tails under
    # the 256-byte group (left unread and not counted) and one buffer smaller than a group.
    tensors = [torch.arange(1, 1 + n, dtype=torch.int64) * 7919 for n in (4096 + 5, 32, 3, 1000)]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        read, checksum = cpu_decode.read_lines(tensors)
    finally:
        torch.set_num_threads(before)
    words = [t[: t.nbytes // 256 * 32] for t in tensors]  # 32 words of 8 bytes per group
    assert read == sum(w.nbytes for w in words) == (4096 // 32 + 1 + 0 + 1000 // 32) * 256
    assert checksum == sum(int(w.sum()) for w in words) % 2**64


@needs_kernel
def test_read_lines_refuses_strided_views():
    with pytest.raises(ValueError, match="contiguous CPU tensors"):
        cpu_decode.read_lines([torch.zeros(64, 64)[:, :32]])


@needs_kernel
def test_auto_runs_mla_on_the_c_kernel():
    case = CPU_MLA_CASES[0]
    q, latent, _, seqlens, _ = make_inputs(case)
    assert torch.equal(mla_decode(q, latent, seqlens, head_dim_v=512),
                       mla_decode(q, latent, seqlens, head_dim_v=512, backend="cpu"))


@needs_kernel
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fresh_inputs_each_seed(seed):
    assert_close(CPU_CASES[3], run_cpu(CPU_CASES[3], seed))


@needs_kernel
def test_auto_runs_the_c_kernel_on_cpu():
    assert choose_backend(torch.device("cpu")) == "cpu"
    case = Case("api", 8, 2, 64, (600, 9))
    q, k, v, seqlens, _ = make_inputs(case)
    out, lse = gqa_decode(q, k, v, seqlens, return_lse=True)
    assert_close(case, compare(case, out, lse, *gqa_decode_reference(q, k, v, seqlens)))
    assert torch.equal(out, gqa_decode(q, k, v, seqlens, backend="cpu"))


@needs_kernel
def test_strided_caches_and_query():
    # K and V interleaved in one tensor, q a slice of a wider one: only the last dim is contiguous.
    gen = torch.Generator().manual_seed(0)
    kv = torch.randn(2, 80, 2, 4, 64, generator=gen)
    q = torch.randn(2, 16, 3, 64, generator=gen)[:, :, 1]
    k, v = kv[:, :, 0], kv[:, :, 1]
    seqlens = torch.tensor([80, 47], dtype=torch.int32)
    out = gqa_decode(q, k, v, seqlens, backend="cpu", num_splits=2)
    ref, _ = gqa_decode_reference(q, k, v, seqlens)
    assert (out.double() - ref).abs().max() / ref.abs().max() < 2e-5


@needs_kernel
def test_thread_count_does_not_change_the_result():
    # Every slice is computed the same way whichever thread takes it, so for a fixed number of slices
    # the results are bit-identical.
    q, k, v, seqlens, _ = make_inputs(Case("threads", 16, 4, 128, (2000, 700, 0, 1500)))
    before = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            results.append(gqa_decode(q, k, v, seqlens, backend="cpu", num_splits=3))
    finally:
        torch.set_num_threads(before)
    assert all(torch.equal(results[0], r) for r in results[1:])


def test_splits_give_every_thread_equal_work_but_stay_long():
    assert cpu_decode.splits_for(batch=1, longest=32768, threads=2) == 2
    assert cpu_decode.splits_for(batch=3, longest=32768, threads=2) == 2  # 6 items, 3 each
    assert cpu_decode.splits_for(batch=8, longest=32768, threads=2) == 1
    assert cpu_decode.splits_for(batch=6, longest=32768, threads=4) == 2  # 12 items, 3 each
    assert cpu_decode.splits_for(batch=1, longest=32768, threads=16) == 16
    assert cpu_decode.splits_for(batch=1, longest=2000, threads=16) == 3  # slices >= 512 tokens
    assert cpu_decode.splits_for(batch=1, longest=0, threads=2) == 1


@needs_kernel
def test_head_dims_off_the_vector_width_take_the_pytorch_path():
    case = Case("d72", 8, 2, 72, (20,))
    q, k, v, seqlens, _ = make_inputs(case)
    assert choose_backend(q.device, "auto", q.dtype, 72) == "torch"
    with pytest.raises(ValueError, match="multiple of 16"):
        gqa_decode(q, k, v, seqlens, backend="cpu")
    out, lse = gqa_decode(q, k, v, seqlens, return_lse=True)
    assert_close(case, compare(case, out, lse, *gqa_decode_reference(q, k, v, seqlens)))


@needs_kernel
def test_value_widths_off_the_vector_width_take_the_pytorch_path():
    case = mla_case("rank-100", 4, 100, 28, (20,))  # keys 128 wide (fine), values 100 (not)
    q, latent, _, seqlens, _ = make_inputs(case)
    assert choose_backend(q.device, "auto", q.dtype, 128, 100) == "torch"
    with pytest.raises(ValueError, match="value head_dim a multiple of 16, got 100"):
        mla_decode(q, latent, seqlens, head_dim_v=100, backend="cpu")
    assert_close(case, run_case(case, "auto"))


# -- the build ---------------------------------------------------------------------------------------

@needs_kernel
def test_build_is_cached_by_content(tmp_path):
    first = cpu_decode.build(cache_dir=tmp_path)
    stamp = first.stat().st_mtime_ns
    assert cpu_decode.build(cache_dir=tmp_path) == first and first.stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no partial files left behind
    assert len(cpu_decode.load(first).gqa_decode_cpu.argtypes) == 26
    assert len(cpu_decode.load(first).read_lines.argtypes) == 4


def test_missing_compiler_is_a_clear_build_error(tmp_path):
    with pytest.raises(cpu_decode.BuildError, match="no C compiler: 'no-such-cc'"):
        cpu_decode.build(cc="no-such-cc", cache_dir=tmp_path)


def test_failing_compiler_is_a_clear_build_error(tmp_path):
    with pytest.raises(cpu_decode.BuildError, match="false failed to compile cpu_decode.c"):
        cpu_decode.build(cc="false", cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


@needs_kernel
def test_unwritable_cache_is_a_clear_build_error(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    with pytest.raises(cpu_decode.BuildError, match="cannot write the kernel cache"):
        cpu_decode.build(cache_dir=blocked / "kernels")


@needs_kernel
def test_loading_the_kernel_leaves_subnormals_alone():
    # Built with -ffast-math; linking that way would flush subnormals to zero process-wide.
    script = ("import torch; from kernels import cpu_decode; assert cpu_decode.available(); "
              "print(5e-324 * 1.0 > 0, bool(torch.tensor(1e-40) * 1.0 > 0))")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["True", "True"], done.stderr


FALLBACK_SCRIPT = """
import json, torch
from kernels import cpu_decode, gqa_decode
from kernels.api import choose_backend
q, k = torch.randn(1, 8, 64), torch.randn(1, 30, 2, 64)
seqlens = torch.tensor([30], dtype=torch.int32)
result = {"auto": choose_backend(torch.device("cpu")), "reason": cpu_decode.unavailable_reason(),
          "same_as_torch": torch.equal(gqa_decode(q, k, k, seqlens), gqa_decode(q, k, k, seqlens, backend="torch"))}
try:
    gqa_decode(q, k, k, seqlens, backend="cpu")
except ValueError as exc:
    result["explicit"] = str(exc)
print(json.dumps(result))
"""


def test_without_a_compiler_auto_falls_back_to_the_pytorch_path(tmp_path):
    # A fresh process, so the kernel is looked up from scratch with no compiler on offer.
    env = os.environ | {"CC": "no-such-cc", "XDG_CACHE_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", FALLBACK_SCRIPT], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["auto"] == "torch" and result["same_as_torch"]
    assert "no C compiler" in result["reason"]
    assert "backend='cpu' cannot run these inputs: no C compiler" in result["explicit"]
