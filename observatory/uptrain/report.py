"""The results as a plain-text table: perplexity by pooling, K and uptraining fraction."""

from __future__ import annotations

from observatory.uptrain.plan import CONTROL, FRACTIONS


def table(results: dict) -> str:
    cells = results["cells"]
    by_row: dict[tuple[str, int], dict[float, dict]] = {}
    for c in cells:
        by_row.setdefault((c["method"], c["kv_heads"]), {})[c["fraction"]] = c
    n = sorted({c["scored_bytes"] for c in cells})
    base = results.get("base") or {}
    lines = [(f"held-out perplexity per byte (n = {', '.join(f'{x:,}' for x in n)} bytes per cell; "
              f"MHA base after {base.get('steps', '—')} steps: {base.get('perplexity', float('nan')):.4f})"),
             f"{'method':<7} {'K':>3} {'G':>3} {'KV B/token':>10} " + " ".join(f"{f:>7.1%}" for f in FRACTIONS)
             + f" {'attn tok/s':>11}"]
    order = sorted(by_row, key=lambda key: (key[0] != CONTROL, key[0], -key[1]))
    for method, k in order:
        row = by_row[(method, k)]
        any_cell = next(iter(row.values()))
        speed = any_cell.get("decode_tokens_per_s")
        lines.append(f"{method:<7} {k:>3} {any_cell['group_size']:>3} {any_cell['kv_bytes_per_token'] or 0:>10,} "
                     + " ".join(f"{row[f]['perplexity']:>7.4f}" if f in row else f"{'—':>7}" for f in FRACTIONS)
                     + (f" {speed:>11,.0f}" if speed else f" {'—':>11}"))
    speed = results.get("speed") or {}
    if speed:
        lines.append(f"attention tok/s: the bundled kernel ({speed['backend']}, {speed['dtype']}), {speed['context']:,} "
                     f"cached tokens, batch {speed['batch']}, {speed['layers']} layers; this machine, "
                     f"{results['software'].get('threads')} thread(s)")
    lines.append(f"run time {results['wall_s'] / 60:.1f} min; corpus {results['corpus']['sha256'][:12]} "
                 f"(Python {results['corpus']['python']} stdlib, {results['corpus']['files']} files)")
    return "\n".join(lines)
