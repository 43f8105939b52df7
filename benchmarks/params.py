"""Accuracy of the config-based parameter estimate against known counts, beside the rule of thumb.

    python benchmarks/params.py            # prints the tables; exit status 1 if a floor fails
    python benchmarks/params.py --json     # the rows as JSON

Known counts and their sources live in ``observatory/catalog/data/param_counts.json``: safetensors or
``.bin`` index totals read in public mirrors (exact), the Hub's own index files, model cards and
papers (rounded; their rounding is the row's tolerance). Every bundled config
(``observatory/catalog/data/configs/``) is estimated; those with a known total are compared.

The peer is the textbook rule of thumb N = 12 * layers * hidden^2 + embeddings (untied: twice),
which assumes MHA, a 4x non-gated MLP and no experts.

Floors (issue 10): median |error| <= 1 %, worst |error| <= 5 % over the comparable totals; the
active parameters of the mixture-of-experts models within 5 % of their publishers' figures, in
each publisher's convention (gpt-oss leaves the input embedding out; the others count both).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from observatory.core.config_dialects import ConfigError  # noqa: E402
from observatory.core.geometry import parse_geometry  # noqa: E402
from observatory.core.params import estimate_parameters  # noqa: E402

DATA = ROOT / "observatory" / "catalog" / "data"
MEDIAN_FLOOR, WORST_FLOOR, ACTIVE_FLOOR = 1.0, 5.0, 5.0


def rule_of_thumb(cfg: dict) -> int | None:
    geom = parse_geometry(cfg)
    est = estimate_parameters(cfg)
    if geom.hidden_size is None:
        return None
    embeddings = est.breakdown.get("embeddings", 0) + est.breakdown.get("lm_head", 0)
    return 12 * geom.num_layers * geom.hidden_size ** 2 + embeddings


def error_pct(estimate: int, known: int) -> float:
    return 100.0 * (estimate - known) / known


def rows() -> tuple[list[dict], list[dict], list[dict]]:
    known = {m["file"]: m for m in json.loads((DATA / "param_counts.json").read_text())["models"]}
    totals, actives, unknown = [], [], []
    for path in sorted((DATA / "configs").glob("*.json")):
        cfg = json.loads(path.read_text())
        try:
            est = estimate_parameters(cfg)
        except ConfigError as exc:
            unknown.append({"file": path.name, "estimate": None, "error": str(exc)})
            continue
        ref = known.get(path.name)
        if ref is None or ref.get("total") is None:
            unknown.append({"file": path.name, "estimate": est.total, "active": est.active if est.is_moe else None,
                            "why": (ref or {}).get("note", "no published count at hand")})
        else:
            peer = rule_of_thumb(cfg)
            totals.append({"file": path.name, "known": ref["total"], "tolerance": ref["total_tolerance"],
                           "source": ref["total_source"]["kind"], "estimate": est.total,
                           "error_pct": error_pct(est.total, ref["total"]),
                           "peer": peer, "peer_error_pct": error_pct(peer, ref["total"]) if peer else None,
                           "comparable": ref.get("comparable", True), "note": ref.get("note", "")})
        if ref is not None and ref.get("active") is not None:
            convention = ref["active_convention"]
            ours = est.active - (est.breakdown.get("embeddings", 0) if convention.startswith("without") else 0)
            actives.append({"file": path.name, "published": ref["active"], "convention": convention,
                            "estimate": ours, "estimate_both_embeddings": est.active,
                            "error_pct": error_pct(ours, ref["active"])})
    return totals, actives, unknown


def billions(n: int | None) -> str:
    return "—" if n is None else f"{n / 1e9:,.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args()
    totals, actives, unknown = rows()
    compared = [r for r in totals if r["comparable"]]
    errors = [abs(r["error_pct"]) for r in compared]
    peer_errors = [abs(r["peer_error_pct"]) for r in compared if r["peer_error_pct"] is not None]
    median, worst = statistics.median(errors), max(errors)
    active_worst = max(abs(r["error_pct"]) for r in actives)
    ok = median <= MEDIAN_FLOOR and worst <= WORST_FLOOR and active_worst <= ACTIVE_FLOOR
    if args.json:
        print(json.dumps({"totals": totals, "actives": actives, "unknown": unknown, "median_abs_error_pct": median,
                          "worst_abs_error_pct": worst, "active_worst_abs_error_pct": active_worst, "pass": ok},
                         indent=1))
        return 0 if ok else 1
    print("Total parameters (B = 1e9): estimate from config.json vs known count")
    print(f"{'config':<52} {'known B':>10} {'±B':>6} {'source':<17} {'ours B':>10} {'error':>8}"
          f" {'12Lh²+E B':>10} {'error':>8}")
    for r in totals:
        flag = "" if r["comparable"] else "  (not compared: " + r["note"].split(",")[0] + ")"
        peer = f"{r['peer_error_pct']:+7.2f}%" if r["peer_error_pct"] is not None else "—"
        print(f"{r['file'].removesuffix('.json')[:52]:<52} {billions(r['known']):>10} {r['tolerance'] / 1e9:>6.3f}"
              f" {r['source']:<17} {billions(r['estimate']):>10} {r['error_pct']:+7.3f}% {billions(r['peer']):>10}"
              f" {peer:>8}{flag}")
    print(f"\n{len(compared)} compared: median |error| {median:.3f}% (floor {MEDIAN_FLOOR}%), worst {worst:.3f}%"
          f" (floor {WORST_FLOOR}%); rule of thumb: median {statistics.median(peer_errors):.1f}%,"
          f" worst {max(peer_errors):.1f}% ({max(peer_errors) / worst:,.0f}x our worst)")
    print("\nActive parameters of mixture-of-experts models vs the publishers' figures")
    print(f"{'config':<52} {'published B':>11} {'convention':<28} {'ours B':>8} {'error':>8}")
    for r in actives:
        print(f"{r['file'].removesuffix('.json')[:52]:<52} {billions(r['published']):>11} {r['convention']:<28}"
              f" {billions(r['estimate']):>8} {r['error_pct']:+7.2f}%")
    print(f"worst |error| {active_worst:.2f}% (floor {ACTIVE_FLOOR}%)")
    print("\nBundled configs without a known total (estimate only)")
    for r in unknown:
        extra = f" active {billions(r['active'])}" if r.get("active") else ""
        print(f"  {r['file'].removesuffix('.json'):<52} {billions(r['estimate']):>10}{extra}"
              f"  {r.get('why') or r.get('error')}")
    print("\nPASS" if ok else "\nFAIL: a floor is not met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
