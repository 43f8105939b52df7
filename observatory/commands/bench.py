"""``observatory bench``: spot-benchmark stored models' decode attention on this machine."""

from __future__ import annotations

import json

import click

from observatory.db import get_engine, upgrade
from observatory.settings import get_settings

DTYPES = ("auto", "fp32", "fp16", "bf16")
MAX_CONTEXT = 1 << 20
MAX_BATCH = 4096


@click.command("bench")
@click.option("--model", "model_ids", multiple=True, metavar="ID",
              help="A stored model id (repeatable). Default: notable models not yet benchmarked on this device.")
@click.option("--context", "contexts", multiple=True, type=click.IntRange(1, MAX_CONTEXT),
              help="Cached tokens per sequence (repeatable).  [default: 4096]")
@click.option("--batch", "batches", multiple=True, type=click.IntRange(1, MAX_BATCH),
              help="Sequences per call (repeatable).  [default: 1]")
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
@click.option("--no-peers", is_flag=True, help="Time only the bundled kernel (and the copy ceiling).")
@click.option("--no-store", is_flag=True, help="Print results without storing them.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per result, one per line.")
def bench(model_ids, contexts, batches, dtype, device, backend, limit, repeats, no_peers, no_store, as_json) -> None:
    """Run models' decode-attention shapes with the bundled kernel and its peers on this machine.

    Each result gives the median time of one attention call (one layer), the K/V bytes it read per
    second, that rate as a fraction of this device's measured copy bandwidth (bytes read + written
    by a large copy, measured in the same run), the roofline prediction, and the speed-up over each
    peer (SDPA enable_gqa, repeat_kv + SDPA, FlashAttention/FlashInfer when installed). Results
    are stored for the model pages unless --no-store.
    """
    from kernels.api import choose_backend
    from observatory.bench.jobs import UnknownModel, bench_models, notable_unbenchmarked
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
        bench_models(engine, ids, contexts=contexts or (4096,), batches=batches or (1,),
                     dtype=None if dtype == "auto" else dtype, device=local, peers=not no_peers,
                     repeats=repeats, store_results=not no_store, on_result=show, backend=backend)
    except UnknownModel as exc:
        raise click.ClickException(str(exc)) from None


def _iso(value):
    return value.isoformat()  # datetimes are the only non-JSON values in a result


def line(row) -> str:
    """One result as a line of text."""
    where = f"{row.model_id}  b={row.batch} L={row.context} {row.dtype}"
    if row.status != "ok":
        return f"{where}  {row.status}: {row.reason}"
    peers = ", ".join(f"{name} {t * 1e3:.2f} ms ({t / row.median_s:.1f}x)" for name, t in row.peer_times_s.items())
    predicted = f", roofline {row.predicted_s * 1e3:.3f} ms" if row.predicted_s else ""
    return (f"{where}  H={row.num_heads} K={row.num_kv_heads} d={row.head_dim}  {row.backend} "
            f"{row.median_s * 1e3:.3f} ms, {row.bytes_per_s / 1e9:.1f} GB/s = "
            f"{row.fraction_of_ceiling:.0%} of copy{predicted}" + (f"; peers: {peers}" if peers else ""))
