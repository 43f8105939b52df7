"""Chart data for the pages, as the JSON ``static/charts.js`` draws (data only, no styling).

Two spec types: ``share`` (stacked bars of fractions per period) and ``xy`` (series of
``{"x", "y", "name"?, "n"?, "thin"?}`` points drawn as lines, points or a filled band; x on a
time axis in epoch milliseconds, or linear/log). A series' ``colour`` names a CSS custom
property (``kind:GQA`` → ``--kind-GQA``) so the stylesheet alone decides the palette.

Every period statistic says how many models stand behind it: its points carry ``n`` (shown in
the tooltip), a period with fewer than ``THIN_N`` models carries ``thin`` (drawn hollow, its
bar pale), and the spec's ``counts`` (``[{"x", "x2", "n", "thin"}]`` on a time axis, a list of
n for share bars) is drawn as a thin count strip along the bottom of the plot.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, datetime, timezone
from typing import Any

from observatory.core.trends import (
    ATTENTION_KINDS,
    G_TIPPING_POINT,
    SIZE_CLASSES,
    STACKS,
    THIN_N,
    TrendPoint,
    next_period,
    period_label,
)

STACK_LABELS = {"attention": "attention only", "hybrid": "hybrid (attention + SSM/linear)",
                "attention-free": "attention-free"}
STACK_COLOURS = {"attention": "kind:GQA", "hybrid": "kind:hybrid", "attention-free": "kind:none"}


def epoch_ms(value: date | datetime | None) -> int | None:
    """Milliseconds since the epoch, UTC; dates count from their midnight."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        value = datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
    elif value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return int(value.timestamp() * 1000)


def kind_share(points: Sequence[TrendPoint], period: str) -> dict:
    """Attention kind of the attention layers per period, among models with attention layers
    (hybrids included; stacked to 1); empty periods stay empty."""
    return {
        "type": "share",
        "labels": [period_label(p.period_start, period) for p in points],
        "counts": [p.attn_count for p in points],
        "thin": [p.attn_count < THIN_N for p in points],
        "count_label": "models with attention layers",
        "y_title": "share of models with attention layers",
        "series": [
            {"label": kind, "colour": f"kind:{kind}", "values": [p.shares.get(kind) for p in points]}
            for kind in ATTENTION_KINDS
            if any(p.shares.get(kind) for p in points)
        ],
    }


def stack_share(points: Sequence[TrendPoint], period: str) -> dict:
    """Stack type per period (pure attention, hybrid, attention-free; stacked to 1)."""
    return {
        "type": "share",
        "labels": [period_label(p.period_start, period) for p in points],
        "counts": [p.count for p in points],
        "thin": [p.thin for p in points],
        "count_label": "models",
        "y_title": "share of models",
        "series": [
            {"label": STACK_LABELS[stack], "colour": STACK_COLOURS[stack],
             "values": [p.stack_shares.get(stack) for p in points]}
            for stack in STACKS
            if any(p.stack_shares.get(stack) for p in points)
        ],
    }


def _line(points: Iterable[TrendPoint], value, n=lambda p: p.count) -> list[dict]:
    """One point per period; ``n`` counts the models behind the value (its tooltip says so)."""
    return [{"x": epoch_ms(p.period_start), "y": value(p), "n": n(p), "thin": n(p) < THIN_N} for p in points]


def count_strip(points: Sequence[TrendPoint], n=lambda p: p.count) -> list[dict]:
    """The count strip under a time chart: models per period, each period's span on the x axis."""
    return [{"x": epoch_ms(p.period_start), "x2": epoch_ms(next_period(p.period_start, p.period)), "n": n(p),
             "thin": n(p) < THIN_N} for p in points]


def time_axis(points: Sequence[TrendPoint], **extra: Any) -> dict:
    """A time x axis spanning exactly the periods shown (no padding to round years)."""
    axis: dict[str, Any] = {"type": "time", **extra}
    if points:
        axis["min"] = epoch_ms(points[0].period_start)
        axis["max"] = epoch_ms(next_period(points[-1].period_start, points[-1].period))
    return axis


def g_distribution(points: Sequence[TrendPoint], models: Iterable[Any] = ()) -> dict:
    """Quartile band and median of G per period, every model as a point, the G = 16 line.

    ``models`` are rows with ``model_id``, ``created_at``, ``group_size`` and ``attention_kind``.
    """
    g_n = lambda p: p.g_count  # noqa: E731 - the models behind a G statistic are those with a G
    series: list[dict] = [
        {"label": "p25–p75 of G", "style": "band", "colour": "series:1", "fill_to": "+1",
         "points": _line(points, lambda p: p.g_p75, g_n)},
        {"label": "_p25", "style": "band", "colour": "series:1", "points": _line(points, lambda p: p.g_p25, g_n)},
        {"label": "median G", "style": "line", "colour": "series:1", "point_radius": 3,
         "points": _line(points, lambda p: p.g_median, g_n)},
    ]
    by_kind: dict[str, list[dict]] = {}
    for row in models:
        if row.group_size is None or row.created_at is None:
            continue
        by_kind.setdefault(row.attention_kind, []).append(
            {"x": epoch_ms(row.created_at), "y": row.group_size, "name": row.model_id}
        )
    for kind in ("MHA", "MQA", "GQA"):
        if kind in by_kind:
            series.append({"label": f"{kind} model", "style": "points", "colour": f"kind:{kind}",
                           "point_radius": 3, "points": by_kind.pop(kind)})
    for kind, pts in sorted(by_kind.items()):  # hybrids and anything else with a G
        series.append({"label": f"{kind} model", "style": "points", "colour": "kind:hybrid", "points": pts})
    axis = time_axis(points)
    if points:
        series.append({"label": f"G = {G_TIPPING_POINT}", "style": "line", "colour": "series:8", "dashed": True,
                       "width": 1, "point_radius": 0,
                       "points": [{"x": axis["min"], "y": G_TIPPING_POINT}, {"x": axis["max"], "y": G_TIPPING_POINT}]})
    return {"type": "xy", "x": axis, "y": {"type": "log", "base": 2, "title": "G = query heads / KV heads", "min": 0.8},
            "series": series, "counts": count_strip(points, g_n), "count_label": "models with a G"}


def share_g_over(points: Sequence[TrendPoint]) -> dict:
    return {
        "type": "xy",
        "x": time_axis(points),
        "y": {"unit": "share", "min": 0, "title": f"share of models with G > {G_TIPPING_POINT}"},
        "series": [{"label": f"G > {G_TIPPING_POINT}", "colour": "series:6", "style": "line",
                    "points": _line(points, lambda p: p.share_g_over_16, lambda p: p.g_count)}],
        "counts": count_strip(points, lambda p: p.g_count), "count_label": "models with a G",
    }


def tp8_fill(points: Sequence[TrendPoint]) -> dict:
    """Share of models whose KV heads fill a TP = 8 node without replication, and its MLA part."""
    n = lambda p: p.tp8_count  # noqa: E731 - the models whose KV heads are known
    return {
        "type": "xy",
        "x": time_axis(points),
        "y": {"unit": "share", "min": 0, "max": 1, "title": "share of models with known KV heads"},
        "series": [{"label": "fill TP = 8 without replication", "colour": "series:8", "style": "line", "width": 3,
                    "points": _line(points, lambda p: p.share_tp8_fill, n)},
                   {"label": "of which MLA (needs data-parallel attention)", "colour": "kind:MLA", "style": "line",
                    "dashed": True, "points": _line(points, lambda p: p.share_tp8_mla, n)}],
        "counts": count_strip(points, n), "count_label": "models with known KV heads",
    }


def kv_per_token(points: Sequence[TrendPoint], by_size: bool = True) -> dict:
    """Median KV bytes per token (bf16) per period, overall and per parameter-size class."""
    series = [{"label": "median, all models", "colour": "series:8", "style": "line", "width": 3,
               "points": _line(points, lambda p: p.kv_median, lambda p: p.kv_count)}]
    if by_size:
        for i, cls in enumerate(c for c in SIZE_CLASSES if c != "unknown"):
            def size_n(p, c=cls):
                return p.kv_by_size[c].count if c in p.kv_by_size else 0
            values = _line(points, lambda p, c=cls: p.kv_by_size[c].kv_median if c in p.kv_by_size else None, size_n)
            if any(v["y"] is not None for v in values):
                series.append({"label": f"median, {cls} parameters", "colour": f"series:{i + 1}",
                               "style": "line", "width": 1.5, "point_radius": 2, "points": values})
    return {"type": "xy", "x": time_axis(points),
            "y": {"type": "log", "unit": "bytes", "title": "KV cache bytes per token (bf16)"}, "series": series,
            "counts": count_strip(points, lambda p: p.kv_count), "count_label": "models with a KV cache"}


def ridge_points(devices: Iterable[dict]) -> dict:
    """Ridge point (dense FLOP/s ÷ bytes/s) of each catalogued device against its release date."""
    series: dict[str, list[dict]] = {}
    for d in devices:
        for key, label in (("ridge_bf16", "BF16 dense"), ("ridge_fp8", "FP8 dense")):
            if d.get(key) and d.get("released"):
                series.setdefault(label, []).append(
                    {"x": epoch_ms(date.fromisoformat(str(d["released"])[:10])), "y": d[key], "name": d["name"]}
                )
    return {
        "type": "xy",
        "x": {"type": "time", "resolution": "day"},
        "y": {"type": "log", "unit": "flop_per_byte", "title": "ridge point (FLOP per byte)"},
        "series": [{"label": label, "style": "points", "colour": f"series:{i + 1}", "point_radius": 4,
                    "label_points": True, "points": pts}
                   for i, (label, pts) in enumerate(series.items())],
    }


def roofline(devices: Sequence[dict], marks: Sequence[dict]) -> dict:
    """Attainable FLOP/s against arithmetic intensity: one roof per device (bandwidth slope,
    then the flat compute peak), and the model's decode attention as points on each roof.

    ``devices``: ``{"name", "bandwidth", "peak_flops"}``; ``marks``: ``{"label", "ai"}`` (FLOP/byte).
    """
    ais = [m["ai"] for m in marks if m.get("ai")] + [d["peak_flops"] / d["bandwidth"] for d in devices]
    lo = min([0.25] + [a / 4 for a in ais])
    hi = max([4096.0] + [a * 4 for a in ais])
    series = []
    for i, d in enumerate(devices):
        ridge = d["peak_flops"] / d["bandwidth"]
        series.append({
            "label": d["name"], "style": "line", "colour": f"series:{i % 6 + 1}", "point_radius": 0, "width": 1.5,
            "points": [{"x": lo, "y": lo * d["bandwidth"]}, {"x": ridge, "y": d["peak_flops"]},
                       {"x": hi, "y": d["peak_flops"]}],
        })
    for m in marks:
        if not m.get("ai"):
            continue
        series.append({
            "label": m["label"], "style": "points", "colour": "kind:none" if m.get("counterfactual") else "series:8",
            "shape": "triangle" if m.get("counterfactual") else "rectRot", "point_radius": 6,
            "points": [{"x": m["ai"], "y": min(d["peak_flops"], m["ai"] * d["bandwidth"]), "name": f"{m['label']} on {d['name']}"}
                       for d in devices],
        })
    return {"type": "xy", "x": {"type": "log", "unit": "flop_per_byte", "title": "arithmetic intensity (FLOP per byte)"},
            "y": {"type": "log", "unit": "flops", "title": "attainable FLOP/s"}, "series": series}


def dividend(rows: Iterable[dict], by_model: bool = False, batch: int | None = None, limit: int = 8) -> dict:
    """Speed-up over the MHA counterfactual against context: measured (solid) and roofline-predicted
    (dashed), one pair of series per (model when ``by_model``, device, dtype, batch), the newest
    result per context. Every point names its shape and how many runs its median took.

    ``rows`` are ``bench.store.row_dict`` results, newest first; only ``batch`` when given; at most
    ``limit`` groups are drawn.
    """
    groups: dict[tuple, dict[int, dict]] = {}
    for row in rows:
        if row.get("status") != "ok" or not (row.get("measured_speedup") or row.get("predicted_speedup")):
            continue
        if batch is not None and row["batch"] != batch:
            continue
        key = ((row["model_id"] if by_model else None), row["device"], row["dtype"], row["batch"])
        if key not in groups and len(groups) >= limit:
            continue
        groups.setdefault(key, {}).setdefault(row["context"], row)  # newest first: keep the first seen
    series: list[dict] = []
    for i, ((model, device, dtype, batch), by_context) in enumerate(groups.items()):
        label = f"{model + ', ' if model else ''}b={batch}, {dtype}, {device}"
        points = [by_context[c] for c in sorted(by_context)]
        for kind, key, dashed in (("measured", "measured_speedup", False), ("roofline", "predicted_speedup", True)):
            pts = [{"x": r["context"], "y": r[key], "name": _dividend_point(r, kind)} for r in points if r.get(key)]
            if pts:
                series.append({"label": f"{kind}: {label}", "style": "line", "colour": f"series:{i % 8 + 1}",
                               "dashed": dashed, "point_radius": 3, "points": pts})
    contexts = [p["x"] for s in series for p in s["points"]]
    if contexts:
        series.append({"label": "_parity", "style": "line", "colour": "series:8", "dashed": True, "width": 1,
                       "point_radius": 0, "points": [{"x": min(contexts), "y": 1}, {"x": max(contexts), "y": 1}]})
    return {"type": "xy", "x": {"type": "log", "title": "cached tokens per sequence"},
            "y": {"type": "log", "title": "MHA counterfactual time ÷ this model's time (×)"}, "series": series}


def _dividend_point(row: dict, kind: str) -> str:
    if row["kernel"] == "mla":
        shape = f"MLA H={row['num_heads']} latent {row['head_dim_v']}+{row['head_dim'] - row['head_dim_v']}"
    else:
        shape = f"H={row['num_heads']} K={row['num_kv_heads']} d={row['head_dim']}"
    who = f"{row['model_id']}: " if row.get("model_id") else ""
    runs = f", median of {row['runs']} runs" if row.get("runs") else ""
    bound = f", {row['predicted_bound']}-bound" if kind == "roofline" and row.get("predicted_bound") else ""
    return f"{who}{kind}, {shape}, b={row['batch']}, {row['context']:,} tokens{runs}{bound}"


# ---- issue 15: research, prices, the median new model's KV and its room on each device ----------

PAPER_COLOURS = ("series:1", "series:2", "series:3", "series:4", "series:6", "series:5", "series:8")
PAPER_SHAPES = ("circle", "triangle", "rectRot", "rect", "star", "crossRot", "circle")  # colour is not the only cue


def research_quality(rows: Sequence[dict], papers: Sequence[str]) -> dict:
    """Each paper's configurations: quality change against the paper's own MHA baseline (positive
    is better) over KV per token as a fraction of that baseline's. Rows without both are left out."""
    series = []
    for paper in papers:
        points = [{"x": r["kv_ratio"], "y": r["quality_change"], "name": f"{r['variant']} ({r['table']})",
                   "n": r["quality_n"]}
                  for r in rows if r["paper"] == paper and r["kv_ratio"] and r["quality_change"] is not None]
        if points:
            label = next(r["paper_short"] for r in rows if r["paper"] == paper)
            series.append({"label": label, "style": "points", "colour": PAPER_COLOURS[len(series) % len(PAPER_COLOURS)],
                           "shape": PAPER_SHAPES[len(series) % len(PAPER_SHAPES)], "point_radius": 5,
                           "points": points})
    return {"type": "xy", "n_label": "scores averaged", "legend_shapes": True,
            "x": {"type": "log", "title": "KV per token ÷ the paper's MHA baseline (1/G for GQA)"},
            "y": {"unit": "share", "title": "quality vs baseline"},
            "series": series}


def _quarter_axis(first: date, last: date) -> dict:
    start = date(first.year, (first.month - 1) // 3 * 3 + 1, 1)
    end = next_period(date(last.year, (last.month - 1) // 3 * 3 + 1, 1), "quarter")
    return {"type": "time", "resolution": "day", "min": epoch_ms(start), "max": epoch_ms(end)}


PANEL_Y_WIDTH = 84  # px for the y labels of the two price panels, so their time axes line up


def price_axis(prices: Sequence[dict], kv_points: Sequence[dict]) -> dict:
    """The time axis both price panels share: from the first price's quarter to the last datum's."""
    days = [p["date"] for p in prices]
    last = max(days + [k["period_start"] for k in kv_points]) if days else None
    return _quarter_axis(min(days), last) if days else {"type": "time", "resolution": "day"}


def prices_over_time(prices: Sequence[dict], axis: dict) -> dict:
    """USD per million tokens by date: open-weight and closed models, output (filled) and input."""
    series = []
    for open_weights, label, colour in ((True, "open weights", "series:3"), (False, "closed (reference)", "series:6")):
        rows = [p for p in prices if p["open_weights"] is open_weights]
        for side, shape in (("output", "circle"), ("input", "triangle")):
            series.append({"label": f"{label}, {side}", "style": "points", "colour": colour, "shape": shape,
                           "point_radius": 5 if side == "output" else 4,
                           "points": [{"x": epoch_ms(p["date"]), "y": p[f"usd_per_1m_{side}"],
                                       "name": f"{p['provider']} {p['model']}", "n": 1} for p in rows]})
    return {"type": "xy", "n_label": "price row", "legend_shapes": True, "x": dict(axis),
            "y": {"type": "log", "unit": "usd", "title": "USD per 1M tokens", "width": PANEL_Y_WIDTH},
            "series": series}


def kv_points_in_axis(points: Sequence[dict], axis: dict) -> list[dict]:
    """The quarters with a median that fall inside the shared time axis (what the panel draws)."""
    lo, hi = axis.get("min"), axis.get("max")
    return [p for p in points if p["median"] is not None
            and (lo is None or lo <= epoch_ms(p["period_start"]) < hi)]


def kv_over_time(points: Sequence[dict], axis: dict) -> dict:
    """Median KV bytes per token of new models per quarter, on the price chart's time axis."""
    shown = kv_points_in_axis(points, axis)
    return {"type": "xy", "n_label": "models", "x": dict(axis),
            "y": {"type": "log", "unit": "bytes", "title": "KV bytes per token", "width": PANEL_Y_WIDTH},
            "series": [{"label": "median, new models per quarter", "style": "line", "colour": "series:8",
                        "point_radius": 3,
                        "points": [{"x": epoch_ms(p["period_start"]), "y": p["median"], "n": p["n"],
                                    "thin": p["n"] < THIN_N} for p in shown]}]}


def sequences_beside_weights(rows: Sequence[dict], context: int) -> dict:
    """Per device by release date: median sequences of ``context`` tokens beside the weights."""
    series = []
    for key, label, colour in (("at_release", "models new at the device's release", "series:1"),
                               ("today", "the newest models (the year before the last release date)", "series:2")):
        series.append({"label": label, "style": "points", "colour": colour, "point_radius": 5,
                       "shape": "circle" if key == "at_release" else "rectRot",
                       "points": [{"x": epoch_ms(date.fromisoformat(str(r["released"])[:10])), "y": r[key]["median"],
                                   "name": r["name"], "n": r[key]["n"], "thin": r[key]["n"] < THIN_N}
                                  for r in rows if r[key]["median"] is not None]})
    return {"type": "xy", "n_label": "models", "legend_shapes": True, "x": {"type": "time", "resolution": "day"},
            "y": {"min": 0, "title": f"{context // 1024}k sequences (median)"},
            "series": series}


def kv_against_context(models: Sequence[dict]) -> dict:
    """Each compared model's bf16 KV cache of one sequence against its length (both axes log):
    straight lines of slope 1, bent where sliding-window layers stop growing."""
    series = []
    for i, m in enumerate(models):
        if not m["curve"]:
            continue
        series.append({"label": m["id"], "style": "line", "colour": f"series:{i % 8 + 1}", "point_radius": 3,
                       "shape": PAPER_SHAPES[i % len(PAPER_SHAPES)],
                       "points": [{"x": p["context"], "y": p["bytes"],
                                   "name": f"{m['id']}: {p['context']:,} tokens"
                                           + (" (beyond its max context)" if p["beyond_max_context"] else "")}
                                  for p in m["curve"]]})
    return {"type": "xy", "legend_shapes": True, "x": {"type": "log", "title": "tokens per sequence"},
            "y": {"type": "log", "unit": "bytes", "title": "KV cache of one sequence (bf16)"}, "series": series}


def uptrain_recovery(rows: Sequence[dict]) -> dict:
    """Our run: held-out perplexity against the uptraining fraction, one line per K (mean pooling),
    the MHA control dashed. Each point's n is the held-out bytes scored."""
    series = []
    control = [r for r in rows if r["method"] == "mha"]
    ks = sorted({r["kv_heads"] for r in rows if r["method"] == "mean"}, reverse=True)
    for i, k in enumerate(ks):
        points = [{"x": r["fraction"], "y": r["quality_value"], "n": r["quality_n"], "name": r["variant"]}
                  for r in rows if r["method"] == "mean" and r["kv_heads"] == k]
        label = f"mean-pooled K = {k}" + (" (MQA)" if k == 1 else "")
        series.append({"label": label, "style": "line", "colour": PAPER_COLOURS[i % len(PAPER_COLOURS)],
                       "shape": PAPER_SHAPES[i % len(PAPER_SHAPES)], "point_radius": 4, "points": points})
    if control:
        series.append({"label": "MHA control (same steps)", "style": "line", "colour": "series:8", "dashed": True,
                       "point_radius": 4, "points": [{"x": r["fraction"], "y": r["quality_value"], "n": r["quality_n"],
                                                      "name": r["variant"]} for r in control]})
    return {"type": "xy", "n_label": "held-out bytes", "legend_shapes": True,
            "x": {"unit": "share", "title": "uptraining steps ÷ the base run's steps"},
            # log y: a conversion before uptraining can sit 100x above the control, the recovery near it
            "y": {"type": "log", "title": "perplexity per byte (log; lower is better)"},
            "series": series}
