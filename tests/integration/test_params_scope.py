"""An estimate that leaves part of the checkpoint out says so: "language model only" in the API and
on the model page, with the sections it leaves out (issue 20, item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import observatory
from observatory.store.db import session_scope
from observatory.store.ingest import record_config, upsert_model

CONFIGS = Path(observatory.__file__).parent / "catalog" / "data" / "configs"


@pytest.fixture
def client(settings, engine):
    from observatory.web.app import create_app

    with session_scope(engine) as s:
        for model_id, name in (("sesame/csm-1b", "eustlb__csm-1b.json"),
                               ("Qwen/Qwen2.5-7B-Instruct", "Qwen__Qwen2.5-7B-Instruct.json")):
            upsert_model(s, model_id)
            record_config(s, model_id, (CONFIGS / name).read_text(), "a" * 40)
    with TestClient(create_app(settings)) as c:
        yield c


def test_language_model_only_in_api_and_page(client):
    csm = client.get("/api/v1/models/sesame/csm-1b").json()["geometry"]
    assert csm["params_estimate"] > 0
    assert (csm["params_scope"], csm["params_uncounted"]) == ("language model only",
                                                              ["codec_config", "depth_decoder_config"])
    page = client.get("/models/sesame/csm-1b")
    assert page.status_code == 200 and "language model only" in page.text
    assert "codec_config, depth_decoder_config" in page.text
    qwen = client.get("/api/v1/models/Qwen/Qwen2.5-7B-Instruct").json()["geometry"]
    assert (qwen["params_scope"], qwen["params_uncounted"]) == ("whole checkpoint", [])
    assert "language model only" not in client.get("/models/Qwen/Qwen2.5-7B-Instruct").text
