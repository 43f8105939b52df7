"""What the claims of ``observatory.core.claims`` are checked on: the stored geometry and parameter
count of every model a claim names, the hardware catalog and the originals' quarterly TP = 8 series
(``web.api.claims`` adds our own measurements from the spot-benchmarks).

A claim about a model the store does not hold is shown unchecked (verdict null), never checked
against a config from elsewhere: the page recomputes from what the site publishes.
"""

from __future__ import annotations

from sqlmodel import Session

from observatory.catalog.hardware import load_catalog
from observatory.core.claims import CLAIMS, Inputs
from observatory.core.trends import period_label
from observatory.store.queries.models import current_geometry
from observatory.store.queries.trends import read_trends
from observatory.store.tables import HubModel
from observatory.store.trends import Population


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
    quarters = tuple({"label": period_label(p.period_start, "quarter"), "n": p.tp8_count, "share": p.share_tp8_fill,
                      "share_mla": p.share_tp8_mla}
                     for p in read_trends(session, Population(), "quarter", "count").points if p.tp8_count)
    return Inputs(geometries=geometries, parameters=parameters, devices={d.id: d for d in load_catalog()},
                  tp8_quarters=quarters)
