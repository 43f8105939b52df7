"""'This observatory, small scale': our uptraining run as rows beside the papers' on /research.

Each cell becomes a research row in the papers' own terms: quality (held-out perplexity per byte,
lower is better) against the MHA control uptrained for the same steps, and KV per token against
that control's. The run itself (corpus hash, sizes, software, where it was read from) travels with
the rows, and ``CAN_AND_CANNOT`` is the plain sentence the page prints above them.
"""

from __future__ import annotations

from observatory.core.uptraining import CONTROL, gaps
from observatory.uptrain.plan import FRACTIONS

PAPER_SHORT = "this observatory, small scale"
CAN_AND_CANNOT = (
    "A half-million-parameter byte-level model trained for minutes on Python source can show whether the "
    "mechanics of the recipe hold: which pooling starts closest, how fast each K closes the gap to an equally "
    "trained MHA model, and whether one KV head recovers less than several. It cannot tell how T5 (an "
    "encoder-decoder at 0.2 to 11 billion parameters on C4) or Llama (billions of parameters on trillions of "
    "tokens) behave: quality at scale, on natural language and on downstream tasks, the head dimension of 128, "
    "and uptraining against a long pre-training run are all outside what it measured.")


def _label(cell: dict) -> str:
    if cell["method"] == CONTROL:
        return f"MHA control, {cell['fraction']:.1%} more training"
    return f"{cell['method']}-pooled K = {cell['kv_heads']} (G = {cell['group_size']}), {cell['fraction']:.1%} uptraining"


def ours_rows(run: dict | None, source: str | None) -> list[dict]:
    """Research rows of the run (ResearchRow's fields), the control first."""
    if run is None:
        return []
    heads = run["sizes"]["shape"]["heads"]
    control = {c["fraction"]: c for c in run["cells"] if c["method"] == CONTROL}
    gap = {m: gaps(run["cells"], m) for m in ("mean", "first", "random")}
    order = sorted(run["cells"], key=lambda c: (c["method"] != CONTROL, c["method"], -c["kv_heads"], c["fraction"]))
    rows = []
    for cell in order:
        base = control.get(cell["fraction"])
        change = 0.0 if cell["method"] == CONTROL else (
            -gap[cell["method"]][(cell["kv_heads"], cell["fraction"])] if base else None)
        kind = "MHA" if cell["kv_heads"] == heads else "MQA" if cell["kv_heads"] == 1 else "GQA"
        rows.append({
            "id": f"ours-{cell['method']}-k{cell['kv_heads']}-f{cell['fraction']:g}",
            "paper": "observatory", "paper_short": PAPER_SHORT, "paper_title": "observatory uptrain: "
            "the GQA uptraining recipe on a small byte-level decoder", "paper_url": "/methodology#uptraining",
            "paper_year": int(run["started_at"][:4]), "table": f"run {run['run_key'][:8]} ({source})", "page": None,
            "page_note": "our measurement", "setting": (
                f"{heads}-head byte-level Llama, {run['sizes']['shape']['layers']} layers, "
                f"{run['sizes']['steps']} base steps, Python {run['corpus']['python']} standard library"),
            "variant": _label(cell), "attention": kind,
            "baseline": f"ours-{CONTROL}-k{heads}-f{cell['fraction']:g}",
            "quality": {"metric": "held-out perplexity per byte", "value": cell["perplexity"],
                        "higher_is_better": False, "n": cell["scored_bytes"]},
            "quality_metric": "held-out perplexity per byte", "quality_value": cell["perplexity"],
            "quality_derived": False, "quality_n": cell["scored_bytes"], "quality_change": change,
            "scores": {}, "kv_bytes_per_token": cell["kv_bytes_per_token"],
            "kv_ratio": cell["kv_heads"] / heads,
            "kv": {"heads": cell["kv_heads"], "bytes_per_token": cell["kv_bytes_per_token"],
                   "basis": "our model's config: 2 x K x head dim x layers x 2 B (bf16)"},
            "speed": ({"metric": "attention-only decode tokens/s, the bundled kernel, this machine",
                       "value": cell["decode_tokens_per_s"]} if cell["decode_tokens_per_s"] else None),
            "method": cell["method"], "kv_heads": cell["kv_heads"], "fraction": cell["fraction"],
            "uptrain_steps": cell["uptrain_steps"],
        })
    return rows


def run_summary(run: dict | None, source: str | None) -> dict | None:
    if run is None:
        return None
    return {"source": source, **{k: run[k] for k in ("run_key", "complete", "started_at", "finished_at", "wall_s",
                                                     "scale", "seed", "corpus", "sizes", "software", "base",
                                                     "speed")},
            "fractions": list(FRACTIONS), "can_and_cannot": CAN_AND_CANNOT}


def pivot(rows: list[dict]) -> list[dict]:
    """One line per (pooling, K): the perplexity and change vs the control at each fraction."""
    lines: dict[tuple[str, int], dict] = {}
    for r in rows:
        line = lines.setdefault((r["method"], r["kv_heads"]), {
            "method": r["method"], "kv_heads": r["kv_heads"], "attention": r["attention"],
            "kv_bytes_per_token": r["kv_bytes_per_token"], "kv_ratio": r["kv_ratio"],
            "speed": (r["speed"] or {}).get("value"), "by_fraction": {}})
        line["by_fraction"][r["fraction"]] = {"perplexity": r["quality_value"], "change": r["quality_change"],
                                              "n": r["quality_n"], "steps": r["uptrain_steps"]}
    return list(lines.values())
