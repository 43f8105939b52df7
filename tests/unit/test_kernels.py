"""The PyTorch decode path, the float64 references (GQA and absorbed MLA), input checks and the peers
(the C kernel has test_kernels_cpu.py, the Triton kernel test_kernels_triton.py)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from kernel_support import Case, assert_close, compare, make_inputs, mla_case, run_case
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from kernels import (
    check_inputs,
    gqa_decode,
    gqa_decode_reference,
    mla_decode,
    mla_decode_reference,
)
from kernels.peers import available_peers, repeat_kv
from kernels.torch_decode import (
    _block_attention,
    chunk_tokens,
    gqa_decode_torch,
    matmul_attention,
    merge,
)

TORCH_CASES = [
    # (heads, kv_heads): MHA G=1, GQA G=2/4/8/16, MQA G=8/16
    Case("mha-g1-d64", 4, 4, 64, (37, 5)),
    Case("gqa-g2-d128", 8, 4, 128, (100,)),
    Case("gqa-g4-d128-ragged", 8, 2, 128, (70, 0, 19, 70)),
    Case("mqa-g8-d256", 8, 1, 256, (65, 64)),
    Case("gqa-g16-d64", 32, 2, 64, (33, 1)),
    Case("mqa-g16-d128", 16, 1, 128, (45,)),
    Case("fp16-g4", 8, 2, 64, (50, 50, 7), "fp16"),
    Case("bf16-g8", 16, 2, 128, (41,), "bf16"),
    Case("paged-bs16", 8, 2, 64, (50, 0, 17), block_size=16),
    Case("paged-bs7-fp16", 4, 1, 128, (30, 30), "fp16", block_size=7),
    Case("paged-bs1", 4, 2, 64, (11, 6), block_size=1),
    Case("all-empty", 4, 2, 64, (0, 0)),
    Case("custom-scale", 8, 2, 64, (29,), scale=0.3),
    # Small chunks so short sequences take the chunked path: whole chunks plus a tail, merged by LSE.
    Case("chunked-tail", 8, 2, 64, (100, 100, 33), chunk=16),
    Case("chunked-exact-fp16", 8, 4, 64, (64,), "fp16", chunk=16),
    Case("chunked-paged-bf16", 8, 2, 128, (90, 45), "bf16", block_size=8, chunk=16),
    # Keys wider than values (DeepSeek's MHA: 192 over 128): the matmul path, chunked and not.
    Case("dk192-dv128", 8, 8, 192, (40, 7), head_dim_v=128),
    Case("dk192-dv128-chunked-paged-fp16", 8, 2, 192, (90, 45), "fp16", block_size=8, chunk=16, head_dim_v=128),
]

# Absorbed MLA on the PyTorch path: H = 16/64/128, DeepSeek's 512 + 64 and MiniCPM3's 256 + 32,
# ragged and paged (gathered once for keys and values), dtypes, chunks merged by their LSE.
TORCH_MLA_CASES = [
    mla_case("mla-h16-512+64", 16, 512, 64, (37, 0, 9)),
    mla_case("mla-h64-fp16", 64, 512, 64, (45,), "fp16"),
    mla_case("mla-h128-bf16", 128, 512, 64, (50, 17), "bf16"),
    mla_case("mla-minicpm3-h40-paged-bs7", 40, 256, 32, (30, 12), block_size=7),
    mla_case("mla-h128-chunked-paged-fp16", 128, 512, 64, (90, 45), "fp16", block_size=8, chunk=16),
    mla_case("mla-v2lite-h16-chunked", 16, 512, 64, (100, 100, 33), chunk=16),
    mla_case("mla-all-empty", 16, 512, 64, (0, 0)),
]


def run_torch(case: Case, seed: int = 0) -> dict:
    q, k, v, seqlens, block_table = make_inputs(case, seed)
    if case.latent:
        from kernels.api import latent_views
        k, v = latent_views(q, k, case.value_dim)
    poisoned = q.new_full((q.shape[0], case.heads, case.value_dim), math.nan)
    shape = check_inputs(q, k, v, seqlens, block_table, case.scale, poisoned)
    scale = case.scale or 1 / math.sqrt(case.head_dim)
    lse = gqa_decode_torch(q, k, v, seqlens, block_table, scale, shape, poisoned, chunk=case.chunk,
                           shared_kv=case.latent)
    return compare(case, poisoned, lse, *gqa_decode_reference(q, k, v, seqlens, block_table, case.scale))


@pytest.mark.parametrize("case", TORCH_CASES, ids=lambda c: c.id)
def test_torch_path_matches_reference(case):
    assert_close(case, run_torch(case))


@pytest.mark.parametrize("case", TORCH_MLA_CASES, ids=lambda c: c.id)
def test_torch_path_mla_matches_reference(case):
    assert_close(case, run_torch(case))
    assert_close(case, run_case(case, "torch"))  # and through mla_decode


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fresh_inputs_each_seed(seed):
    assert_close(TORCH_CASES[2], run_torch(TORCH_CASES[2], seed))


@pytest.mark.parametrize(("heads", "nope", "rope", "rank", "v_dim"), [
    (16, 128, 64, 512, 128),  # DeepSeek-V2-Lite / V3 per-head sizes
    (40, 64, 32, 256, 64),  # MiniCPM3 (v_head_dim = qk_nope_head_dim)
])
def test_absorbed_mla_equals_attention_with_decompressed_keys_and_values(heads, nope, rope, rank, v_dim):
    # The absorption mla_decode relies on, checked on its own terms: with per-head up-projections
    # W_UK (rank -> nope) and W_UV (rank -> v_dim), attention over decompressed keys [c·W_UK, k_rope]
    # and values c·W_UV equals latent attention of q_lat = [W_UK·q_nope, q_rope] over rows [c, k_rope],
    # followed by the latent output times W_UV. Both at the model's scale 1/sqrt(nope + rope).
    gen = torch.Generator().manual_seed(0)
    length = 23
    c = torch.randn(length, rank, generator=gen, dtype=torch.float64)
    k_rope = torch.randn(length, rope, generator=gen, dtype=torch.float64)
    q_nope = torch.randn(heads, nope, generator=gen, dtype=torch.float64)
    q_rope = torch.randn(heads, rope, generator=gen, dtype=torch.float64)
    w_uk = torch.randn(heads, rank, nope, generator=gen, dtype=torch.float64) / rank ** 0.5
    w_uv = torch.randn(heads, rank, v_dim, generator=gen, dtype=torch.float64) / rank ** 0.5
    scale = (nope + rope) ** -0.5

    keys = torch.cat([torch.einsum("lr,hrn->lhn", c, w_uk), k_rope[:, None].expand(length, heads, rope)], -1)
    values = torch.einsum("lr,hrv->lhv", c, w_uv)
    expected = F.scaled_dot_product_attention(torch.cat([q_nope, q_rope], -1)[:, None], keys.transpose(0, 1),
                                              values.transpose(0, 1), scale=scale)[:, 0]

    q_latent = torch.cat([torch.einsum("hn,hrn->hr", q_nope, w_uk), q_rope], -1).float()[None]
    latent = torch.cat([c, k_rope], -1).float()[None]
    seqlens = torch.tensor([length], dtype=torch.int32)
    ref, _ = mla_decode_reference(q_latent, latent, seqlens, scale=scale, head_dim_v=rank)
    assert torch.allclose(torch.einsum("hr,hrv->hv", ref[0], w_uv), expected, atol=1e-5)
    ours = mla_decode(q_latent, latent, seqlens, scale=scale, head_dim_v=rank)
    assert torch.allclose(torch.einsum("hr,hrv->hv", ours[0].double(), w_uv), expected, atol=1e-5)


def test_mla_reference_agrees_with_the_gqa_reference_over_one_shared_head():
    case = mla_case("views", 8, 64, 16, (30, 0, 12), block_size=8)
    q, latent, _, seqlens, table = make_inputs(case)
    keys = latent.unsqueeze(2)
    mla_out, mla_lse = mla_decode_reference(q, latent, seqlens, table, head_dim_v=64)
    gqa_out, gqa_lse = gqa_decode_reference(q, keys, keys[..., :64].contiguous(), seqlens, table)
    assert torch.allclose(mla_out, gqa_out, atol=1e-12, equal_nan=False)
    assert torch.equal(mla_lse.isinf(), gqa_lse.isinf()) and torch.allclose(mla_lse[1:2], gqa_lse[1:2])


@pytest.mark.slow
def test_default_chunking_on_a_long_sequence():
    # K=8, d=128, fp32: 256-token chunks, so 5000 tokens = 19 chunks and a 136-token tail.
    case = Case("long", 32, 8, 128, (5000,))
    assert chunk_tokens(8, 128, 4) == 256
    assert_close(case, run_torch(case))


def test_public_entry_point_runs_the_torch_path_when_asked():
    case = Case("api", 8, 2, 64, (20, 9))
    q, k, v, seqlens, _ = make_inputs(case)
    out, lse = gqa_decode(q, k, v, seqlens, return_lse=True, backend="torch")
    ref_out, ref_lse = gqa_decode_reference(q, k, v, seqlens)
    assert_close(case, compare(case, out, lse, ref_out, ref_lse))


def test_reference_agrees_with_sdpa_enable_gqa():
    # An independent statement of the semantics: query head h uses KV head h // G.
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 8, 32, generator=gen, dtype=torch.float64)
    k = torch.randn(2, 10, 2, 32, generator=gen, dtype=torch.float64)
    v = torch.randn(2, 10, 2, 32, generator=gen, dtype=torch.float64)
    q32, k32, v32 = q.float(), k.float(), v.float()
    out, lse = gqa_decode_reference(q32, k32, v32, torch.tensor([10, 10], dtype=torch.int32))
    expected = F.scaled_dot_product_attention(q32.double().unsqueeze(2), k32.double().transpose(1, 2),
                                              v32.double().transpose(1, 2), enable_gqa=True).squeeze(2)
    assert torch.allclose(out, expected, atol=1e-12)
    scores = torch.einsum("bhd,blhd->bhl", q32.double(), k32.double().repeat_interleave(4, dim=2)) / math.sqrt(32)
    assert torch.allclose(lse, torch.logsumexp(scores, -1), atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_matmul_fallback_agrees_with_the_fused_cpu_kernel(dtype):
    # The fallback serves devices other than the CPU; here both run on strided (b, L, K, d) views.
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 4, 32, generator=gen).to(dtype)
    cache = torch.randn(2, 50, 3, 32, generator=gen).to(dtype)
    fused, fallback = (f(q, cache.transpose(1, 2), cache.transpose(1, 2), 0.2)
                       for f in (_block_attention, matmul_attention))
    assert fallback[0].dtype == dtype and fallback[1].dtype == torch.float32
    assert torch.allclose(fused[0].float(), fallback[0].float(), atol=2e-3 if dtype == torch.float16 else 1e-5)
    assert torch.allclose(fused[1], fallback[1], atol=1e-4)


def test_merge_of_partials_equals_one_pass():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 4, 16, generator=gen), torch.randn(1, 2, 40, 16, generator=gen),
               torch.randn(1, 2, 40, 16, generator=gen))
    def attend(keys, values):
        s = q @ keys.transpose(-1, -2)
        return torch.softmax(s, -1) @ values, torch.logsumexp(s, -1)
    whole_out, whole_lse = attend(k, v)
    parts = [attend(k[:, :, a:b], v[:, :, a:b]) for a, b in ((0, 13), (13, 30), (30, 40))]
    empty = (torch.zeros_like(whole_out), torch.full_like(whole_lse, -math.inf))  # an empty split adds nothing
    out, lse = merge(torch.stack([p[0] for p in parts] + [empty[0]]), torch.stack([p[1] for p in parts] + [empty[1]]))
    assert torch.allclose(out, whole_out, atol=1e-6) and torch.allclose(lse, whole_lse, atol=1e-6)
    out, lse = merge(torch.stack([empty[0], empty[0]]), torch.stack([empty[1], empty[1]]))
    assert not out.isnan().any() and (out == 0).all() and (lse == -math.inf).all()


class LargestNewTensor(TorchDispatchMode):
    """Records the largest storage any op allocates and the bytes of all of them (views of existing
    storage do not count)."""

    def __init__(self):
        super().__init__()
        self.largest, self.op, self.total = 0, None, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in inputs:
                self.total += t.untyped_storage().nbytes()
                if t.untyped_storage().nbytes() > self.largest:
                    self.largest, self.op = t.untyped_storage().nbytes(), str(func)
        return out


@pytest.mark.parametrize("backend", ["torch", "cpu"])
@pytest.mark.parametrize("paged", [False, True])
def test_never_materialises_repeated_kv(paged, backend):
    q, k, v = torch.randn(1, 32, 128), torch.randn(1, 4096, 2, 128), torch.randn(1, 4096, 2, 128)
    seqlens = torch.tensor([4096], dtype=torch.int32)
    args = (q, k.view(64, 64, 2, 128), v.view(64, 64, 2, 128), seqlens,
            torch.arange(64, dtype=torch.int32)[None]) if paged else (q, k, v, seqlens)
    with LargestNewTensor() as watch:
        gqa_decode(*args, backend=backend)
    # The PyTorch path gathers paged caches once (1x) and the C kernel reads pages in place;
    # repeating K/V over G = 16 would be 16x.
    bound = k.nbytes if paged and backend == "torch" else k.nbytes // 8
    assert watch.largest <= bound, (watch.op, watch.largest / k.nbytes)
    with LargestNewTensor() as watch:  # the check can fail: transformers' repeat_kv does materialise
        repeat_kv(k.transpose(1, 2), 16)
    assert watch.largest == 16 * k.nbytes


@pytest.mark.parametrize("backend", ["torch", "cpu"])
def test_mla_fetches_a_paged_latent_once_for_keys_and_values(backend):
    # Values are a view of the latent rows: the C kernel reads pages in place, the PyTorch path
    # gathers the pages in use once for both (gathering keys and values apart would be 2x).
    latent = torch.randn(64, 64, 576)
    q, seqlens, table = torch.randn(1, 16, 576), torch.tensor([4096], dtype=torch.int32), torch.arange(64, dtype=torch.int32)[None]
    with LargestNewTensor() as watch:
        mla_decode(q, latent, seqlens, table, head_dim_v=512, backend=backend, num_splits=1 if backend == "cpu" else None)
    bound = latent.nbytes * 1.5 if backend == "torch" else latent.nbytes // 8  # + scores and partials
    assert watch.total <= bound, (watch.op, watch.total / latent.nbytes)


# -- bad input: one clear ValueError each ------------------------------------------------------------

def _good():
    return (torch.zeros(2, 8, 64), torch.zeros(2, 16, 2, 64), torch.zeros(2, 16, 2, 64),
            torch.tensor([16, 3], dtype=torch.int32))


@pytest.mark.parametrize(("change", "message"), [
    (lambda a: {"q": a["q"][0]}, "q must be"),
    (lambda a: {"k_cache": a["k_cache"][0]}, "k_cache must be"),
    (lambda a: {"v_cache": a["v_cache"][:, :8]}, "v_cache shape"),
    (lambda a: {"q": a["q"].double(), "k_cache": a["k_cache"].double(), "v_cache": a["v_cache"].double()}, "dtype"),
    (lambda a: {"k_cache": a["k_cache"].half(), "v_cache": a["v_cache"].half()}, "share a dtype"),
    (lambda a: {"q": torch.zeros(2, 8, 32)}, "head_dim"),
    (lambda a: {"q": torch.zeros(2, 6, 64), "k_cache": torch.zeros(2, 16, 4, 64),
                "v_cache": torch.zeros(2, 16, 4, 64)}, "multiple of num_kv_heads"),
    (lambda a: {"q": torch.zeros(3, 8, 64), "cache_seqlens": torch.tensor([1, 2, 3], dtype=torch.int32)},
     "k_cache batch"),
    (lambda a: {"cache_seqlens": a["cache_seqlens"].long()}, "int32"),
    (lambda a: {"cache_seqlens": torch.tensor([16], dtype=torch.int32)}, "cache_seqlens must be int32 of shape"),
    (lambda a: {"cache_seqlens": torch.tensor([17, 3], dtype=torch.int32)}, r"\[0, 16\]"),
    (lambda a: {"cache_seqlens": torch.tensor([-1, 3], dtype=torch.int32)}, r"\[0, 16\]"),
    (lambda a: {"q": torch.zeros(2, 64, 8).transpose(1, 2)}, "contiguous"),
    (lambda a: {"scale": -1.0}, "scale"),
    (lambda a: {"scale": math.nan}, "scale"),
    (lambda a: {"out": torch.zeros(2, 8, 32)}, "out must be"),
    (lambda a: {"q": [[0.0]]}, "torch.Tensor"),
])
def test_bad_inputs_are_named(change, message):
    q, k, v, seqlens = _good()
    args = {"q": q, "k_cache": k, "v_cache": v, "cache_seqlens": seqlens} | change(
        {"q": q, "k_cache": k, "v_cache": v, "cache_seqlens": seqlens})
    with pytest.raises(ValueError, match=message):
        gqa_decode(**args)


@pytest.mark.parametrize(("table", "message"), [
    (torch.tensor([[0, 1], [2, 3]], dtype=torch.int64), "block_table must be int32"),
    (torch.tensor([[0, 1]], dtype=torch.int32), "block_table must be int32"),
    (torch.tensor([[0, 9], [2, 3]], dtype=torch.int32), "block_table entries"),
    (torch.tensor([[0, 1], [-1, 3]], dtype=torch.int32), "block_table entries"),
])
def test_bad_block_tables_are_named(table, message):
    q = torch.zeros(2, 8, 64)
    pages = torch.zeros(4, 8, 2, 64)  # 4 blocks of 8 tokens; each sequence may use 2
    with pytest.raises(ValueError, match=message):
        gqa_decode(q, pages, pages, torch.tensor([16, 3], dtype=torch.int32), table)


def _latent_good():
    return torch.zeros(2, 16, 576), torch.zeros(2, 10, 576), torch.tensor([10, 3], dtype=torch.int32)


@pytest.mark.parametrize(("change", "message"), [
    ({"latent_cache": [[0.0]]}, "latent_cache must be a torch.Tensor"),
    ({"latent_cache": torch.zeros(2, 10, 1, 576)}, r"latent_cache must be \(batch, max_seqlen, kv_lora_rank \+ rope\)"),
    ({"head_dim_v": 0}, r"head_dim_v must be a whole number in \[1, 576\]"),
    ({"head_dim_v": 577}, r"head_dim_v must be a whole number in \[1, 576\]"),
    ({"head_dim_v": 512.0}, "head_dim_v must be a whole number"),
    ({"head_dim_v": True}, "head_dim_v must be a whole number"),
    ({"q": torch.zeros(2, 16, 512)}, r"q width \(512\) and latent_cache width \(576\) differ"),
    ({"q": torch.zeros(2, 16, 576, dtype=torch.float16)}, "share a dtype"),
    ({"cache_seqlens": torch.tensor([11, 3], dtype=torch.int32)}, r"\[0, 10\]"),
    ({"out": torch.zeros(2, 16, 576)}, r"out must be a tensor of shape \(2, 16, 512\)"),
    ({"scale": 0.0}, "scale"),
])
def test_bad_mla_inputs_are_named(change, message):
    q, latent, seqlens = _latent_good()
    args = {"q": q, "latent_cache": latent, "cache_seqlens": seqlens, "head_dim_v": 512} | change
    with pytest.raises(ValueError, match=message):
        mla_decode(**args)
    if "out" not in change:  # the reference takes no out; it checks the rest the same way
        with pytest.raises(ValueError, match=message):
            mla_decode_reference(**args)


def test_value_heads_may_be_narrower_than_key_heads():
    q, k, v, seqlens = _good()
    out = gqa_decode(q, k, v[..., :32].contiguous(), seqlens)
    assert out.shape == (2, 8, 32)
    with pytest.raises(ValueError, match="only the last, head_dim, dimension may differ"):
        gqa_decode(q, k, v[:, :, :1], seqlens)


def test_unused_block_table_entries_are_not_checked():
    # Only blocks a sequence reaches are read, so garbage past them (e.g. -1 padding) is allowed.
    q, pages = torch.randn(1, 4, 64), torch.randn(3, 8, 2, 64)
    out = gqa_decode(q, pages, pages, torch.tensor([5], dtype=torch.int32), torch.tensor([[2, -1]], dtype=torch.int32))
    assert torch.isfinite(out).all()


def test_unknown_backend_is_refused():
    q, k, v, seqlens = _good()
    with pytest.raises(ValueError, match="backend must be one of"):
        gqa_decode(q, k, v, seqlens, backend="cuda")


# -- peers ------------------------------------------------------------------------------------------

def test_peers_agree_with_the_reference():
    q, k, v, seqlens, _ = make_inputs(Case("peers", 8, 2, 64, (40, 40), spare=0))
    ref, _ = gqa_decode_reference(q, k, v, seqlens)
    peers = available_peers(torch.device("cpu"))
    assert {p.name for p in peers} >= {"sdpa_gqa", "repeat_kv_sdpa", "sdpa_gqa_bkld", "repeat_kv_sdpa_bkld"}
    for peer in peers:
        out = peer.run(peer.prepare(q, k, v, seqlens))
        assert (out.double() - ref).abs().max() / ref.abs().max() < 2e-5, peer.name


def test_peers_refuse_ragged_batches():
    q, k, v, _, _ = make_inputs(Case("ragged", 8, 2, 64, (40, 30), spare=0))
    with pytest.raises(ValueError, match="equal lengths"):
        available_peers(torch.device("cpu"))[0].prepare(q, k, v, torch.tensor([40, 30], dtype=torch.int32))


def test_repeat_kv_is_repeat_interleave():
    x = torch.randn(2, 3, 5, 4)
    assert torch.equal(repeat_kv(x, 4), x.repeat_interleave(4, dim=1))
    assert repeat_kv(x, 1) is x
