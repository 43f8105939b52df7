"""/api/v1/claims, /api/v1/research and /api/v1/prices: well-known claims recomputed from the
stored geometry, the papers' quality-versus-compression results, and the price history of
hosted inference beside the median KV bytes per token of new models. Lists also come as CSV.

The ``*_data`` functions build what the routes and the pages' JSON twins both answer.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, Field
from sqlmodel import Session

from observatory.bench.store import measured_gqa_dividend
from observatory.catalog.claims import claim_inputs
from observatory.catalog.prices import load_prices
from observatory.catalog.research import load_research
from observatory.core.claims import VERDICTS, check_all
from observatory.store.queries.population import kv_by_quarter
from observatory.uptrain.store import shown_run
from observatory.web.api.common import CSV_RESPONSE, model_response
from observatory.web.deps import ReadSessionDep
from observatory.web.errors import ERROR_RESPONSES
from observatory.web.rendering import csv_response, jsonable
from observatory.web.small_scale import ours_rows, run_summary
from observatory.web.strict_params import StrictQueryRoute

router = APIRouter(prefix="/api/v1", tags=["claims"], responses=ERROR_RESPONSES, route_class=StrictQueryRoute)

Format = Annotated[Literal["json", "csv"], Query(description="csv: one row per item of the list")]


def claims_data(session: Session) -> list[dict]:
    """Every claim, checked; measurable claims carry ``measurement`` (None: not measured yet)."""
    run, _ = shown_run(session)
    results = check_all(replace(claim_inputs(session), uptrain=run))
    for result in results:
        result["measurement"] = (measured_gqa_dividend(session, result["models"][0])
                                 if result["measurable"] else None)
    return results


# ---- claims ---------------------------------------------------------------------------------------

class SourceOut(BaseModel):
    title: str
    url: str | None
    where: str
    note: str


class FigureOut(BaseModel):
    label: str
    claimed: float | None = Field(description="The source's number (a range's low end); null where it claims none")
    claimed_high: float | None = Field(description="A claimed range's high end")
    ours: float | None
    unit: str
    how: str
    matches: bool | None = Field(description="Within 2% of the claim (or inside its range); null if nothing claimed")


class MeasurementOut(BaseModel):
    speedup: float
    predicted_speedup: float | None
    context: int | None
    batch: int | None
    device: str | None
    backend: str | None
    dtype: str | None
    created_at: Any = None


class ClaimOut(BaseModel):
    id: str
    title: str
    statement: str
    source: SourceOut
    models: list[str]
    devices: list[str]
    missing: list[str] = Field(description="Models or devices the store lacks; the claim is then unchecked")
    verdict: str | None = Field(description=" | ".join(VERDICTS) + "; null when not checked. unsourced: no primary "
                                "source has been found, whatever the arithmetic shows")
    arithmetic_verdict: str | None = Field(description="What our arithmetic alone concludes (the verdict but for "
                                           "an unsourced claim); null when not checked")
    summary: str
    figures: list[FigureOut]
    steps: list[str] = Field(description="The arithmetic, one line per step")
    measurable: bool = Field(description="A spot-benchmark could measure it")
    measurement: MeasurementOut | None = Field(description="Our measured GQA dividend; null: not measured yet")
    readings: list[dict] | None = None
    ladder: list[dict] | None = None
    context: int | None = None


class ClaimsResponse(BaseModel):
    ok: bool = True
    claims: list[ClaimOut]


CLAIM_CSV_COLUMNS = ["id", "title", "verdict", "arithmetic_verdict", "statement", "source_title", "source_url", "source_where", "summary",
                     "measured_speedup"]


def claim_csv_rows(claims: list[dict]) -> list[dict]:
    return [{**c, "source_title": c["source"]["title"], "source_url": c["source"]["url"],
             "source_where": c["source"]["where"],
             "measured_speedup": c["measurement"]["speedup"] if c["measurement"] else None} for c in claims]


@router.get("/claims", response_model=ClaimsResponse, responses=CSV_RESPONSE, summary="Claims, recomputed")
def claims(session: ReadSessionDep, format: Format = "json"):
    """Each claim with its source, our numbers and how they were computed, and a verdict."""
    data = claims_data(session)
    if format == "csv":
        return csv_response(CLAIM_CSV_COLUMNS, claim_csv_rows(data), "claims.csv")
    return model_response(ClaimsResponse(claims=jsonable(data)))


@router.get("/claims.csv", response_class=Response, response_model=None, responses=CSV_RESPONSE,
            summary="Claims, recomputed, as CSV")
def claims_csv(session: ReadSessionDep) -> Response:
    return claims(session, "csv")


# ---- research -------------------------------------------------------------------------------------

class ResearchRow(BaseModel):
    id: str
    paper: str
    paper_short: str
    paper_title: str
    paper_url: str
    paper_year: int
    table: str
    page: int | None
    page_note: str | None = None
    setting: str
    variant: str
    attention: str
    baseline: str = Field(description="The row this one is compared with (the paper's MHA configuration)")
    quality: dict = Field(description="As printed: metric, value (null: no aggregate printed), higher_is_better, n")
    quality_metric: str
    quality_value: float | None
    quality_derived: bool = Field(description="True: the mean of the listed scores, our arithmetic")
    quality_n: int | None = Field(description="Scores behind quality_value")
    quality_change: float | None = Field(description="Relative change against the baseline; positive is better")
    scores: dict[str, float]
    kv_bytes_per_token: float | None = Field(description="Bytes per token, 16-bit elements")
    kv_ratio: float | None = Field(description="KV per token / the baseline's")
    kv: dict
    speed: dict | None
    # Our own rows only ("this observatory, small scale"): the cell of the uptraining grid.
    method: str | None = Field(default=None, description="mean | first | random | mha (the control)")
    kv_heads: int | None = None
    fraction: float | None = Field(default=None, description="Uptraining steps / the base run's steps")
    uptrain_steps: int | None = None


class ResearchResponse(BaseModel):
    ok: bool = True
    description: str
    rows: list[ResearchRow]
    ours_rows: list[ResearchRow] = Field(description="This observatory, small scale: one row per cell of the newest "
                                         "complete observatory uptrain run, quality against the MHA control "
                                         "uptrained for the same steps")
    ours: dict | None = Field(description="That run: source (store or committed file), corpus hash, sizes, "
                              "software, decode timing; null when none has run")


RESEARCH_CSV_COLUMNS = ["id", "paper", "paper_short", "paper_title", "paper_url", "table", "page", "page_note", "setting", "variant",
                        "attention", "baseline", "quality_metric", "quality_value", "quality_derived", "quality_n",
                        "quality_change", "kv_bytes_per_token", "kv_ratio", "kv_basis", "speed_metric", "speed_value"]


def research_csv_rows(rows: list[dict]) -> list[dict]:
    return [{**r, "kv_basis": r["kv"]["basis"], "speed_metric": (r["speed"] or {}).get("metric"),
             "speed_value": (r["speed"] or {}).get("value")} for r in rows]


def research_data(session: Session) -> dict:
    """The rows as the API declares them (the page's JSON twin answers the same)."""
    research = load_research()
    run, source = shown_run(session)
    return ResearchResponse(description=research["description"], rows=research["rows"],
                            ours_rows=ours_rows(run, source), ours=run_summary(run, source)).model_dump(exclude={"ok"})


@router.get("/research", response_model=ResearchResponse, responses=CSV_RESPONSE,
            summary="Quality against KV compression, from the papers and our small-scale run")
def research(session: ReadSessionDep, format: Format = "json"):
    """One row per reported configuration, with paper, table and page; then ours (CSV: both, papers first)."""
    data = research_data(session)
    if format == "csv":
        return csv_response(RESEARCH_CSV_COLUMNS, research_csv_rows(data["rows"] + data["ours_rows"]), "research.csv")
    return model_response(ResearchResponse(**data))


@router.get("/research.csv", response_class=Response, response_model=None, responses=CSV_RESPONSE,
            summary="Quality against KV compression, as CSV")
def research_csv(session: ReadSessionDep) -> Response:
    return research(session, "csv")


# ---- prices ---------------------------------------------------------------------------------------

class PriceRow(BaseModel):
    id: str
    date: date
    date_kind: str = Field(description="What date is the date of: took effect, or listed (only a day a page showed "
                                       "the price is known)")
    date_basis: str
    provider: str
    model: str
    open_weights: bool
    currency: str
    unit: str
    usd_per_1m_input: float
    usd_per_1m_output: float
    price_basis: str | None = None
    source_url: str
    source_note: str


class KvPoint(BaseModel):
    period_start: date
    median: float | None = Field(description="Median KV bytes per token (bf16)")
    n: int = Field(description="Models created in the period")


class KvPanel(BaseModel):
    population: str
    models: int
    period: str
    points: list[KvPoint]


class PricesResponse(BaseModel):
    ok: bool = True
    currency: str
    unit: str
    description: str
    rows: list[PriceRow]
    kv_per_token: KvPanel = Field(description="Median KV bytes per token of new models per quarter: correlation, "
                                  "not cause")


PRICE_CSV_COLUMNS = ["id", "date", "date_kind", "date_basis", "provider", "model", "open_weights", "currency", "unit",
                     "usd_per_1m_input", "usd_per_1m_output", "price_basis", "source_url", "source_note"]


def prices_data(session: Session) -> dict:
    prices = load_prices()
    return {**prices, "kv_per_token": kv_by_quarter(session)}


@router.get("/prices", response_model=PricesResponse, responses=CSV_RESPONSE, summary="Hosted inference prices")
def prices(session: ReadSessionDep, format: Format = "json"):
    """USD per million input and output tokens by date, each row with its source; beside it the
    median KV bytes per token of new models per quarter (CSV: the price rows)."""
    if format == "csv":
        return csv_response(PRICE_CSV_COLUMNS, load_prices()["rows"], "prices.csv")
    return model_response(PricesResponse(**prices_data(session)))


@router.get("/prices.csv", response_class=Response, response_model=None, responses=CSV_RESPONSE,
            summary="Hosted inference prices as CSV")
def prices_csv(session: ReadSessionDep) -> Response:
    return prices(session, "csv")
