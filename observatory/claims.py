"""The claims page's data: every claim of ``observatory.core.claims`` checked on the geometry in the
store, beside our own measurement where the spot-benchmarks have one.

A claim about a model the store does not hold is shown unchecked (verdict null), never checked
against a config from elsewhere: the page recomputes from what the site publishes.
"""

from __future__ import annotations

from sqlmodel import Session

from observatory.bench.store import results_for_model
from observatory.core.claims import CLAIMS, Inputs, check_all
from observatory.hardware import load_catalog
from observatory.queries import current_geometry
from observatory.tables import HubModel


def claim_inputs(session: Session) -> Inputs:
    """The current geometry and parameter count of every model a claim names, and the catalog."""
    geometries, parameters = {}, {}
    for model_id in sorted({m for claim in CLAIMS for m in claim.models}):
        model = session.get(HubModel, model_id)
        if model is None:
            continue
        _, geom = current_geometry(session, model)
        if geom is not None:
            geometries[model_id] = geom
            parameters[model_id] = model.num_parameters
    return Inputs(geometries=geometries, parameters=parameters, devices={d.id: d for d in load_catalog()})


def measured_gqa_dividend(session: Session, model_id: str) -> dict | None:
    """Our measured GQA dividend for ``model_id`` (MHA-twin time / own time), or None while the
    store holds none.

    The spot-benchmarks gain the MHA counterfactual with issue 15 part 1; a result carries the
    dividend once it has ``measured_speedup`` (and, beside it, the roofline's
    ``predicted_speedup``). This is the one place that reads it, so it follows that schema as it
    grows.
    """
    for row in results_for_model(session, model_id):
        speedup = row.get("measured_speedup")
        if row.get("status") == "ok" and speedup is not None:
            return {"speedup": speedup, "predicted_speedup": row.get("predicted_speedup"),
                    "context": row.get("context"), "batch": row.get("batch"), "device": row.get("device"),
                    "backend": row.get("backend"), "dtype": row.get("dtype"), "created_at": row.get("created_at")}
    return None


def claims_data(session: Session) -> list[dict]:
    """Every claim, checked; measurable claims carry ``measurement`` (None: not measured yet)."""
    results = check_all(claim_inputs(session))
    for result in results:
        result["measurement"] = (measured_gqa_dividend(session, result["models"][0])
                                 if result["measurable"] else None)
    return results
