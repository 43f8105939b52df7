"""Writing a run's results to the store and reading them back, and the committed results file.

Both carry the same dict (``experiment.results``): the run's description and one row per cell. The
pages read the newest complete run in the store; a store without one (a fresh install) falls back
to the results file committed with the code (``benchmarks/results/uptrain.json``), and says so.
"""

from __future__ import annotations

import json
from pathlib import Path

from sqlmodel import Session, select

from observatory.store.db import PROJECT_ROOT
from observatory.uptrain.tables import UptrainCell, UptrainRun

COMMITTED_RESULTS = PROJECT_ROOT / "benchmarks" / "results" / "uptrain.json"
CELL_FIELDS = ("method", "kv_heads", "group_size", "fraction", "uptrain_steps", "loss", "perplexity",
               "bits_per_byte", "scored_bytes", "kv_bytes_per_token", "decode_tokens_per_s")
RUN_FIELDS = ("run_key", "complete", "started_at", "finished_at", "wall_s", "scale", "seed", "corpus", "sizes",
              "software", "base", "speed")


class ResultsFileError(ValueError):
    """A results file that is not one ``observatory uptrain`` wrote."""


def save_results(session: Session, results: dict) -> int:
    """Insert or update the run (by its key) and replace its cells; return the run's id."""
    run = session.exec(select(UptrainRun).where(UptrainRun.run_key == results["run_key"])).first()
    values = {name: results[name] for name in RUN_FIELDS}
    values["corpus_sha256"] = results["corpus"]["sha256"]
    if run is None:
        run = UptrainRun(**values)
    else:
        for name, value in values.items():
            setattr(run, name, value)
    session.add(run)
    session.flush()
    for old in session.exec(select(UptrainCell).where(UptrainCell.run_id == run.id)).all():
        session.delete(old)
    session.flush()
    for cell in results["cells"]:
        session.add(UptrainCell(run_id=run.id, **{name: cell[name] for name in CELL_FIELDS}))
    session.commit()
    return run.id


def _as_results(run: UptrainRun, cells: list[UptrainCell]) -> dict:
    return {**{name: getattr(run, name) for name in RUN_FIELDS}, "id": run.id,
            "cells": [{name: getattr(c, name) for name in CELL_FIELDS} for c in cells]}


def latest_run(session: Session) -> dict | None:
    """The newest complete run in the store, as ``experiment.results`` gives it, or None."""
    run = session.exec(select(UptrainRun).where(UptrainRun.complete)
                       .order_by(UptrainRun.created_at.desc(), UptrainRun.id.desc())).first()
    if run is None:
        return None
    cells = session.exec(select(UptrainCell).where(UptrainCell.run_id == run.id)
                         .order_by(UptrainCell.method, UptrainCell.kv_heads.desc(), UptrainCell.fraction)).all()
    return _as_results(run, list(cells))


def write_results_file(path: Path, results: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


def read_results_file(path: Path = COMMITTED_RESULTS) -> dict | None:
    """The results file, or None when there is none; ``ResultsFileError`` when it is malformed."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise ResultsFileError(f"{path} is not JSON: {exc}") from exc
    missing = [name for name in (*RUN_FIELDS, "cells") if name not in data]
    if missing or not isinstance(data["cells"], list):
        raise ResultsFileError(f"{path} lacks {', '.join(missing) or 'a cells list'}: not an uptrain results file")
    for index, cell in enumerate(data["cells"]):
        absent = [name for name in CELL_FIELDS if name not in cell]
        if absent:
            raise ResultsFileError(f"{path}: cell #{index} lacks {', '.join(absent)}")
    return data


def shown_run(session: Session) -> tuple[dict | None, str | None]:
    """The run the pages show and where it came from: the store's newest complete run, else the
    committed results file; (None, None) when there is neither."""
    run = latest_run(session)
    if run is not None:
        return run, f"the store (run {run['id']})"
    committed = read_results_file()
    if committed is not None and committed.get("complete"):
        return committed, "the results file committed with the code (benchmarks/results/uptrain.json)"
    return None, None
