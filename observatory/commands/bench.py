"""``observatory bench``: spot-benchmark stored models' decode attention on this machine, each beside
its MHA counterfactual."""

from __future__ import annotations

import json

import click

from observatory.settings import get_settings
from observatory.store.db import get_engine, upgrade

DTYPES = ("auto", "fp32", "fp16", "bf16")
MAX_CONTEXT = 1 << 20
MAX_BATCH = 4096


@click.command("bench")
@click.option("--model", "model_ids", multiple=True, metavar="ID",
              help="A stored model id (repeatable). Default: notable models not yet benchmarked on this device.")
@click.option("--context", "contexts", multiple=True, type=click.IntRange(1, MAX_CONTEXT),
              help="Cached tokens per sequence (repeatable).  [default: 4096; with --dividend 4k, 32k, 128k]")
@click.option("--batch", "batches", multiple=True, type=click.IntRange(1, MAX_BATCH),
              help="Sequences per call (repeatable).  [default: 1; with --dividend 1, 4, 16, 64]")
@click.option("--dividend", is_flag=True,
              help="Measure the GQA dividend: every context × batch of the sweep (shapes that do not fit in "
                   "memory are recorded as skipped) and a table of measured against roofline speed-ups over "
                   "the MHA counterfactual.")
@click.option("--dtype", type=click.Choice(DTYPES), default="auto", show_default=True,
              help="Element type; auto = bf16 on CUDA, fp32 on the CPU.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--backend", type=click.Choice(["auto", "triton", "cpu", "torch"]), default="auto", show_default=True,
              help="Which implementation of the kernel runs: auto = Triton on CUDA, the C kernel on the CPU "
                   "(PyTorch ops where it cannot build), torch = PyTorch ops.")
@click.option("--limit", type=click.IntRange(1, 1000), default=3, show_default=True,
              help="How many models to pick when no --model is given.")
@click.option("--repeats", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Timed calls per contender (the median is reported).")
@click.option("--no-peers", is_flag=True, help="Time only the bundled kernel (and the copy and matmul ceilings).")
@click.option("--no-counterfactual", is_flag=True, help="Do not time the model's MHA counterfactual (K = H).")
@click.option("--no-store", is_flag=True, help="Print results without storing them.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per result, one per line.")
def bench(model_ids, contexts, batches, dividend, dtype, device, backend, limit, repeats, no_peers, no_counterfactual,
          no_store, as_json) -> None:
    """Run models' decode-attention shapes with the bundled kernels and their peers on this machine.

    GQA models run gqa_decode; MLA models run mla_decode in the absorbed form (one shared latent).
    Each result gives the median time of one attention call (one layer), the cache bytes it read
    per second as a share of this device's copy bandwidth, its FLOP/s as a share of a large matmul's
    (both measured in the same interleaved rounds), the roofline prediction (memory- or
    compute-bound), the speed-up over each peer (SDPA enable_gqa, repeat_kv + SDPA, the naive
    absorbed MLA matmuls, FlashAttention/FlashInfer/FlashMLA when installed), and the model's MHA
    counterfactual (same H and head dims, K = H) timed in the same rounds: the speed-up measured
    beside the roofline's. Results are stored for the model pages unless --no-store.
    """
    from kernels.api import choose_backend
    from observatory.bench.jobs import (
        DIVIDEND_BATCHES,
        DIVIDEND_CONTEXTS,
        UnknownModel,
        bench_models,
        notable_unbenchmarked,
    )
    from observatory.bench.runner import local_device
    from observatory.bench.store import row_dict

    settings = get_settings()
    try:
        local = local_device(device)
        if backend == "triton" and local.type != "cuda":
            raise ValueError("--backend triton runs on CUDA (on the CPU Triton only interprets, for tests)")
        choose_backend(local.torch_device, backend)  # no compiler, no triton: say so before any work
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    upgrade(settings.resolved_database_url)
    engine = get_engine(settings)
    ids = list(model_ids) or notable_unbenchmarked(engine, local.name, settings.bench_min_downloads, limit)
    if not ids:
        raise click.ClickException("nothing to benchmark: no --model given and every notable model "
                                   "already has a result on this device")
    shown = []

    def show(row) -> None:
        if as_json:
            click.echo(json.dumps(row_dict(row), sort_keys=True, default=_iso))
            return
        if not shown:
            compiler = f", C kernel built by {local.software['cc']}" if local.software.get("cc") else ""
            click.echo(f"device: {local.name}  (torch {local.software['torch']}, "
                       f"triton {local.software['triton'] or 'not installed'}{compiler})")
        shown.append(row)
        click.echo(line(row))

    try:
        bench_models(engine, ids, contexts=contexts or (DIVIDEND_CONTEXTS if dividend else (4096,)),
                     batches=batches or (DIVIDEND_BATCHES if dividend else (1,)),
                     dtype=None if dtype == "auto" else dtype, device=local, peers=not no_peers,
                     counterfactual=not no_counterfactual, repeats=repeats, store_results=not no_store,
                     on_result=show, backend=backend)
    except UnknownModel as exc:
        raise click.ClickException(str(exc)) from None
    if dividend and not as_json:
        click.echo("\n" + dividend_table(shown))


def _iso(value):
    return value.isoformat()  # datetimes are the only non-JSON values in a result


def shape_text(row) -> str:
    if row.kernel == "mla":
        return f"H={row.num_heads} latent={row.head_dim_v}+{row.head_dim - row.head_dim_v}"
    dims = f"d={row.head_dim}" + (f"/{row.head_dim_v}" if row.head_dim_v not in (None, row.head_dim) else "")
    return f"H={row.num_heads} K={row.num_kv_heads} {dims}"


def line(row) -> str:
    """One result as a line of text."""
    where = f"{row.model_id}  b={row.batch} L={row.context} {row.dtype}"
    if row.status != "ok":
        return f"{where}  {row.status}: {row.reason}"
    peers = ", ".join(f"{name} {t * 1e3:.2f} ms ({t / row.median_s:.1f}x)" for name, t in row.peer_times_s.items())
    predicted = f", roofline {row.predicted_s * 1e3:.3f} ms ({row.predicted_bound}-bound)" if row.predicted_s else ""
    matmul = f" = {row.fraction_of_matmul:.0%} of matmul" if row.fraction_of_matmul else ""
    if row.mha_median_s:
        predicted_x = f", roofline {row.predicted_speedup:.2f}x" if row.predicted_speedup else ""
        mha = f"; MHA counterfactual {row.mha_median_s * 1e3:.3f} ms: {row.measured_speedup:.2f}x measured{predicted_x}"
    else:
        mha = f"; MHA counterfactual {row.mha_error}" if row.mha_error else ""
    return (f"{where}  {shape_text(row)}  {row.backend} {row.median_s * 1e3:.3f} ms, {row.bytes_per_s / 1e9:.1f} GB/s = "
            f"{row.fraction_of_ceiling:.0%} of copy, {row.flops_per_s / 1e9:.1f} GFLOP/s{matmul}{predicted}{mha}"
            + (f"; peers: {peers}" if peers else ""))


def dividend_table(rows) -> str:
    """The measured and roofline speed-ups over the MHA counterfactual, one line per result."""
    header = (f"{'model':<34} {'shape':<22} {'b':>3} {'L':>7} {'ours ms':>9} {'MHA ms':>9} {'measured':>9} "
              f"{'roofline':>9} {'bound':>8} {'%copy':>6} {'%matmul':>8}")
    lines = [header]
    for row in rows:
        start = f"{row.model_id or '-':<34} {shape_text(row) if row.num_heads else '-':<22} {row.batch:>3} {row.context:>7}"
        if row.status != "ok":
            lines.append(f"{start}  {row.status}: {row.reason}")
            continue
        mha = f"{row.mha_median_s * 1e3:>9.2f}" if row.mha_median_s else f"{'-':>9}"
        measured = f"{row.measured_speedup:>8.2f}x" if row.measured_speedup else f"{'-':>9}"
        predicted = f"{row.predicted_speedup:>8.2f}x" if row.predicted_speedup else f"{'-':>9}"
        lines.append(f"{start} {row.median_s * 1e3:>9.2f} {mha} {measured} {predicted} {row.predicted_bound or '-':>8} "
                     f"{row.fraction_of_ceiling:>6.0%} {(row.fraction_of_matmul or 0):>8.0%}"
                     + (f"  (MHA {row.mha_error})" if row.mha_error else ""))
    return "\n".join(lines)
