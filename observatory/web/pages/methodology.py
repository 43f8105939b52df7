"""The methodology page (/methodology), with its worked example, and the dataset download."""

from __future__ import annotations

from functools import lru_cache

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from observatory.core import kvcache, roofline
from observatory.core.geometry import PARSER_VERSION, parse_geometry
from observatory.core.trends import ATTENTION_KINDS as ATTENTION_KINDS_TREND
from observatory.core.trends import (
    G_TIPPING_POINT,
    ORIGINALS_MIN_PARAMS,
    PERIODS,
    POPULATIONS,
    SIZE_CLASSES,
    STACKS,
    THIN_N,
    WEIGHTINGS,
)
from observatory.store.queries.oracle import status_table
from observatory.store.trends import STANDARD_THRESHOLDS
from observatory.web.deps import request_reader
from observatory.web.pages.base import page_decorator
from observatory.web.rendering import csv_response, json_response, render

router = APIRouter(include_in_schema=False)
page = page_decorator(router)


# The worked example every page's numbers can be checked against: Llama 2 70B (H=64, K=8,
# d=128, 80 layers), 2,048 tokens, batch 1, fp16. Computed by the same code as every page.
EXAMPLE_CONFIG = {"model_type": "llama", "num_attention_heads": 64, "num_key_value_heads": 8,
                  "hidden_size": 8192, "num_hidden_layers": 80}


@lru_cache(maxsize=1)
def methodology_data() -> dict:
    geom = parse_geometry(EXAMPLE_CONFIG)
    counter = kvcache.mha_counterfactual(geom)
    gqa, mha = kvcache.cache_bytes(geom, 2048, 1, "fp16"), kvcache.cache_bytes(counter, 2048, 1, "fp16")
    return {
        "parser_version": PARSER_VERSION,
        "dtype_bytes": dict(kvcache.DTYPE_BYTES),
        "units": {"GB": kvcache.GB, "GiB": kvcache.GiB, "kB": 1000, "MB": 10**6},
        "attention_kinds": list(ATTENTION_KINDS_TREND),
        "stacks": list(STACKS),
        "populations": list(POPULATIONS),
        "originals_min_params": ORIGINALS_MIN_PARAMS,
        "thin_n": THIN_N,
        "dataset_url": f"/downloads/{DATASET_FILENAME}",
        "periods": list(PERIODS),
        "weightings": list(WEIGHTINGS),
        "size_classes": list(SIZE_CLASSES),
        "standard_download_thresholds": list(STANDARD_THRESHOLDS),
        "g_tipping_point": G_TIPPING_POINT,
        "roofline": {"per_call_s": roofline.DEFAULT_PER_CALL_S, "contexts": list(roofline.CONTEXTS),
                     "batches": list(roofline.BATCHES)},
        "example": {"config": EXAMPLE_CONFIG, "context": 2048, "batch": 1, "dtype": "fp16",
                    "bytes_per_token": kvcache.bytes_per_token(geom, "fp16"), "gqa_bytes": gqa, "mha_bytes": mha,
                    "elements_gqa": geom.kv_elements_per_token * 2048, "elements_mha": counter.kv_elements_per_token * 2048},
    }


DATASET_FILENAME = "gqa-observatory-snapshot.zip"


@router.get(f"/downloads/{DATASET_FILENAME}", include_in_schema=False)
async def dataset_download() -> Response:
    """The bundled snapshot as a Frictionless data package (zip): models.csv, datapackage.json, configs/."""
    from observatory.catalog.snapshot_export import bundled_zip_bytes

    body = await run_in_threadpool(bundled_zip_bytes)
    return Response(body, media_type="application/zip",
                    headers={"Content-Disposition": f'attachment; filename="{DATASET_FILENAME}"'})


ORACLE_CSV_COLUMNS = ["model_type", "configs", "agree", "disagree", "unsupported", "failed"]


def oracle_data(session) -> dict:
    """transformers' second opinion: verdicts per model_type of the stored configs, the listed
    deliberate differences, and the families the probe cannot run."""
    from observatory.oracle.compare import DIFFERENCES, PROBE_LIMITS

    table = status_table(session)
    totals = {key: sum(row[key] for row in table) for key in ORACLE_CSV_COLUMNS[1:]}
    return {"model_types": table, "totals": totals,
            "differences": [{"id": d.id, "reason": d.reason} for d in DIFFERENCES.values()],
            "probe_limits": [{"model_type": t, "reason": r} for t, r in sorted(PROBE_LIMITS.items())]}


@page("/methodology", formats=("json", "csv"))
def methodology_page(request: Request, fmt: str | None) -> Response:
    with request_reader(request) as session:
        data = {**methodology_data(), "oracle": oracle_data(session)}
    if fmt == "json":
        return json_response(data)
    if fmt == "csv":
        return csv_response(ORACLE_CSV_COLUMNS, data["oracle"]["model_types"], "oracle-by-model-type.csv")
    return render(request, "methodology.html", data, title="Methodology", nav="/methodology",
                  formats=("json", "csv"))
