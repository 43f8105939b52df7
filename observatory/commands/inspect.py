"""``observatory inspect``: the attention geometry and KV-cache cost of config.json files."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import click

from observatory.core.geometry import (
    MAX_CONFIG_CHARS,
    ConfigError,
    Geometry,
    parse_config_text,
    parse_geometry,
)
from observatory.core.kvcache import (
    DTYPE_BYTES,
    bytes_per_token,
    cache_bytes,
    mha_counterfactual,
    saving_ratio,
)

CONTEXTS = {"4k": 4096, "32k": 32768, "128k": 131072}
# An indented array of plain words or numbers (layer_kinds, per-layer heads), to put on one line.
_SCALAR = r'(?:"[\w.:-]*"|-?\d+|null|true|false)'
_SCALAR_ARRAY = re.compile(r"\[\n\s+(" + _SCALAR + r"(?:,\n\s+" + _SCALAR + r")*)\n\s*\]")
MAX_READ_BYTES = MAX_CONFIG_CHARS * 4  # UTF-8 needs at most 4 bytes a character


@click.command("inspect")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object (one per line when several PATHs are given).")
@click.option("--dtype", type=click.Choice(list(DTYPE_BYTES)), default="bf16", show_default=True,
              help="Element type of the KV cache, for byte figures.")
@click.option("--oracle", "with_oracle", is_flag=True,
              help="Also build each config with transformers on the meta device (a child process under the "
                   "oracle's time and memory limits; never remote code, never a fetch) and print both readings "
                   "side by side.")
def inspect(paths: tuple[str, ...], as_json: bool, dtype: str, with_oracle: bool) -> None:
    """Derive attention geometry and KV-cache size from config.json files.

    PATH is a config.json file, or - to read one from standard input. Prints the attention kind,
    query heads H, KV heads K, group size G, head dim d, layers, KV bytes per token, the cache at
    4k/32k/128k tokens (batch 1) next to its MHA counterfactual, and any warnings. With --oracle,
    transformers' reading of the same file beside ours, and the verdict (agree, disagree, ...).
    """
    failed = False
    for path in paths:
        label = "<stdin>" if path == "-" else path
        try:
            text = _read(path)
            geom = parse_geometry(parse_config_text(text))
        except ConfigError as exc:
            if len(paths) == 1:
                raise click.ClickException(f"{label}: {exc}") from None
            click.echo(f"Error: {label}: {exc}", err=True)
            failed = True
            continue
        second = oracle_reading(text, geom) if with_oracle else None
        if as_json:
            report = inspection(geom, dtype) | {"path": label}
            if second is not None:
                report["oracle"] = second
            click.echo(_dumps(report) if len(paths) == 1 else json.dumps(report))
        else:
            click.echo(summary(geom, dtype, label))
            if second is not None:
                click.echo(oracle_summary(second))
    if failed:
        sys.exit(1)


def oracle_reading(text: bytes, geom: Geometry) -> dict[str, Any]:
    """transformers' reading of one config (one child, the oracle's limits) and the verdict."""
    from observatory.oracle.check import OracleUnavailable, installed_transformers
    from observatory.oracle.compare import comparable_estimate, judge, side_by_side
    from observatory.oracle.pool import read_configs
    from observatory.settings import get_settings

    raw = json.loads(text)
    try:
        installed_transformers()
    except OracleUnavailable as exc:
        raise click.ClickException(str(exc)) from None
    settings = get_settings()
    [outcome] = list(read_configs([(0, raw)], workers=1, time_limit_s=settings.oracle_time_limit_s,
                                  memory_limit_bytes=settings.oracle_memory_limit_mb << 20))
    ours_params = comparable_estimate(raw)
    if outcome.status != "read":
        return {"status": outcome.status, "reason": outcome.reason, "transformers_version": outcome.transformers,
                "rows": []}
    verdict = judge(raw, geom, outcome.reading)
    return {"status": verdict.status, "reason": verdict.reason, "differences": list(verdict.differences),
            "transformers_version": outcome.transformers, "reading": outcome.reading.to_dict(),
            "our_parameters": ours_params,
            "rows": [list(r) for r in side_by_side(geom, outcome.reading, ours_params)]}


def oracle_summary(second: dict[str, Any]) -> str:
    version = second.get("transformers_version") or "?"
    verdict = second["status"] + (f" (listed: {', '.join(second['differences'])})" if second.get("differences") else "")
    lines = [f"  oracle         transformers {version}: {verdict}"]
    if second.get("reason"):
        lines.append(f"    {second['reason']}")
    rows = second.get("rows") or []
    if rows:
        width = max(len(r[1]) for r in rows)
        lines.append(f"    {'':<32} {'ours':<{width}}   transformers")
        lines += [f"    {what:<32} {mine:<{width}}   {theirs}" for what, mine, theirs in rows]
    return "\n".join(lines)


def inspection(geom: Geometry, dtype: str) -> dict[str, Any]:
    """The geometry as JSON-safe data plus its KV-cache figures at ``dtype``."""
    counter = mha_counterfactual(geom)
    report = geom.to_dict()
    report["kv_cache_elements_per_token"] = report.pop("kv_elements_per_token")
    report["dtype"] = dtype
    report["kv_cache_bytes_per_token"] = bytes_per_token(geom, dtype)
    report["cross_kv_cache_bytes_per_source_token"] = geom.cross_kv_elements_per_source_token * DTYPE_BYTES[dtype]
    report["mha_counterfactual_bytes_per_token"] = bytes_per_token(counter, dtype)
    report["saving_ratio"] = saving_ratio(geom)
    report["kv_at_context"] = {
        str(tokens): {"batch": 1, "bytes": cache_bytes(geom, tokens, 1, dtype),
                      "mha_counterfactual_bytes": cache_bytes(counter, tokens, 1, dtype)}
        for tokens in CONTEXTS.values()
    }
    return report


def summary(geom: Geometry, dtype: str, label: str) -> str:
    arch = f" ({', '.join(geom.architectures)})" if geom.architectures else ""
    lines = [label, f"  model type     {geom.model_type or '(none given)'}{arch}"]
    if geom.attention_kind == "none":
        lines.append(f"  attention      none: no layer holds a per-token KV cache ({geom.num_layers} layers)")
    else:
        group = "n/a (MLA)" if geom.group_size is None else f"{geom.group_size:g}"
        hybrid = ", hybrid" if geom.is_hybrid else ""
        lines += [
            f"  attention      {geom.attention_kind}{hybrid}: H={geom.num_query_heads}, K={_kv_heads(geom)},"
            f" G={group}, d={_head_dim(geom)}"
            + (f", d_v={geom.v_head_dim}" if geom.v_head_dim != geom.head_dim else "")
            + (" (one tensor is both K and V)" if geom.k_equals_v else ""),
            f"  layers         {_layers(geom)}",
        ]
        if geom.encoder_only:
            lines.append("  KV cache       none: an encoder-only model reads its input at once and never decodes")
        else:
            lines += _cache_lines(geom, dtype)
    if geom.uncertain:
        lines.append("  uncertain      yes: a guess was made that can overstate the figures (see warnings)")
    lines.append("  warnings       " + ("none" if not geom.warnings else f"{len(geom.warnings)}"))
    lines += [f"    - {w}" for w in geom.warnings]
    return "\n".join(lines)


def _cache_lines(geom: Geometry, dtype: str) -> list[str]:
    lines = [f"  window         {_window(geom)}"]
    if geom.mla is not None:
        mla = geom.mla
        lines.append(f"  MLA latent     {mla.kv_lora_rank} + {mla.qk_rope_head_dim} ="
                     f" {mla.latent_elements_per_layer} elements per layer (q_lora_rank {mla.q_lora_rank})")
    counter = mha_counterfactual(geom)
    per = " per generated token" if geom.is_encoder_decoder else ""
    lines.append(f"  KV per token   {geom.kv_elements_per_token:,} elements = {bytes_per_token(geom, dtype):,} bytes"
                 f" ({dtype}){per}; MHA would be {bytes_per_token(counter, dtype):,} bytes")
    if geom.is_encoder_decoder:
        cross = geom.cross_kv_elements_per_source_token
        lines.append(f"  cross-attn     {cross:,} elements = {cross * DTYPE_BYTES[dtype]:,} bytes per source (encoder)"
                     " token, held for the whole generation")
    lines += [f"  KV cache, batch 1, {dtype}:", f"    {'context':>8} {'cache':>12} {'MHA (K=H)':>12} {'saving':>8}"]
    for name, tokens in CONTEXTS.items():
        actual, mha = cache_bytes(geom, tokens, 1, dtype), cache_bytes(counter, tokens, 1, dtype)
        saving = f"{mha / actual:>7.1f}x" if actual else f"{'—':>8}"
        # as the model page marks them: a context the model was not built for is arithmetic only
        beyond = (f"  beyond max context ({geom.max_position_embeddings:,})"
                  if geom.max_position_embeddings and tokens > geom.max_position_embeddings else "")
        lines.append(f"    {name:>8} {_size(actual):>12} {_size(mha):>12} {saving}{beyond}")
    return lines


def _layers(geom: Geometry) -> str:
    if geom.encoder_only:
        return f"{geom.num_layers} encoder layers, none of which holds a KV cache"
    stack = f"{geom.num_layers} decoder (encoder: {geom.encoder_layers if geom.encoder_layers is not None else '—'})" \
        if geom.is_encoder_decoder else f"{geom.num_layers}"
    shared = geom.layer_kinds.count("shared")
    reuse = f" ({shared} reuse an earlier layer's K/V)" if shared else ""
    return f"{stack}, of which {geom.kv_layers} hold a KV cache{reuse}"


def _kv_heads(geom: Geometry) -> str:
    others = sorted({k for k in geom.kv_heads_per_layer or ()} - {geom.num_kv_heads})
    return f"{geom.num_kv_heads}" + (f" ({'/'.join(map(str, others))} on some layers)" if others else "")


def _head_dim(geom: Geometry) -> str:
    others = sorted({d for d in geom.head_dims_per_layer or ()} - {geom.head_dim})
    return f"{geom.head_dim}" + (f" ({'/'.join(map(str, others))} on full-attention layers)" if others else "")


def _window(geom: Geometry) -> str:
    parts = []
    if geom.sliding_layers:
        parts.append(f"sliding {geom.sliding_window:,} tokens on {geom.sliding_layers} of {geom.num_layers} layers")
    elif geom.sliding_window is not None:
        parts.append(f"sliding_window {geom.sliding_window:,} declared but never binds")
    if geom.chunked:
        chunked = geom.layer_kinds.count("chunked")
        parts.append(f"chunked {geom.chunk_size:,} tokens on {chunked} of {geom.num_layers} layers")
    return "; ".join(parts) or "none (full attention)"


def _dumps(report: dict[str, Any]) -> str:
    """Indented JSON, with per-layer lists kept on one line each."""
    text = json.dumps(report, indent=2)
    return _SCALAR_ARRAY.sub(lambda m: "[" + re.sub(r",\n\s+", ", ", m.group(1)) + "]", text)


def _size(n: int) -> str:
    """Decimal units, as on a spec sheet: 1 GB = 10**9 bytes."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{n} B"


def _read(path: str) -> bytes:
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_READ_BYTES + 1)
        else:
            with Path(path).open("rb") as handle:
                data = handle.read(MAX_READ_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_READ_BYTES:
        raise ConfigError(f"larger than {MAX_READ_BYTES} bytes; not a config.json")
    return data
