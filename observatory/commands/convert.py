"""``observatory convert``: an MHA (or GQA) safetensors checkpoint to fewer KV heads."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click

from observatory.core.kv_conversion import DEFAULT_MAX_SHARD_BYTES, METHODS, ConversionRefused


@click.command("convert")
@click.argument("src", type=click.Path(file_okay=False, path_type=Path))
@click.argument("dst", type=click.Path(file_okay=False, path_type=Path))
@click.option("--kv-heads", "kv_heads", type=int, required=True, help="K: the KV heads the converted model has.")
@click.option("--method", type=click.Choice(METHODS), default="mean", show_default=True,
              help="mean: average each group's heads (the GQA paper's recipe); first: keep the first head; "
                   "random: fresh heads (the paper's from-scratch control).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --method random.")
@click.option("--max-shard-size", "max_shard_bytes", type=click.IntRange(min=1), default=DEFAULT_MAX_SHARD_BYTES,
              show_default=True, help="Bytes per output shard.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--debug", is_flag=True, help="Show the traceback of an unexpected failure.")
def convert(src: Path, dst: Path, kv_heads: int, method: str, seed: int, max_shard_bytes: int, as_json: bool,
            debug: bool) -> None:
    """Pool the K and V projection heads of the checkpoint in SRC into KV-HEADS groups and write it to DST.

    Llama, Mistral, Qwen2 and Qwen3 checkpoints in safetensors; tensors are read one at a time. Refused,
    with the reason: fused QKV, MLA, quantized weights, remote-code architectures, K not dividing H.
    The converted model needs uptraining to recover quality (see /research)."""
    from observatory.convert.checkpoint import convert_checkpoint  # torch: loaded only when converting

    try:
        report = convert_checkpoint(src, dst, kv_heads, method, seed=seed, max_shard_bytes=max_shard_bytes,
                                    progress=None if as_json else click.echo)
    except ConversionRefused as exc:
        raise click.ClickException(f"cannot convert: {exc}") from None
    except Exception as exc:  # one line; --debug for the traceback
        if debug:
            raise
        raise click.ClickException(f"convert failed: {type(exc).__name__}: {exc}") from None
    if as_json:
        click.echo(json.dumps(asdict(report), sort_keys=True))
        return
    click.echo(f"converted {src} -> {report.destination}: {report.from_kv_heads} -> {report.to_kv_heads} KV heads "
               f"({report.method}), {report.pooled} projections pooled, {report.tensors} tensors in "
               f"{report.shards} shard(s), {report.bytes_in:,} -> {report.bytes_out:,} bytes")
