"""The oracle in the product: real child processes (torch and transformers), a real SQLite store, the
real crawler against the stand-in Hub. Children that hang, crash or exhaust memory are made so by the
child's test hook (``OBSERVATORY_ORACLE_TEST_HOOK``), which the product never sets.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alert_support import add_model, gqa_config
from crawler_support import LONG_AGO
from sqlmodel import select

import observatory
from observatory import pipeline
from observatory.oracle import background
from observatory.oracle.check import check
from observatory.oracle.child import TEST_HOOK_ENV
from observatory.oracle.pool import read_configs
from observatory.store.db import read_session
from observatory.store.oracle_tables import OracleCheck
from observatory.store.queries.oracle import status_counts, status_table
from observatory.store.trends import Population, load_trend_rows
from observatory.testing.hub_standin import populate

pytest.importorskip("transformers", reason="the oracle needs transformers (a pinned dependency)")
pytestmark = pytest.mark.slow

CONFIGS = Path(observatory.__file__).parent / "catalog" / "data" / "configs"
QWEN3_PATH = CONFIGS / "Qwen__Qwen3-0.6B.json"
QWEN3 = json.loads(QWEN3_PATH.read_text())
# Our parser honours n_kv_heads as a llama dialect; transformers' LlamaConfig does not read it and
# builds K = H: a real disagreement, crafted so it stays one whatever the bundled data holds.
CRAFTED = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256,
           "num_attention_heads": 8, "n_kv_heads": 2, "num_hidden_layers": 2, "intermediate_size": 512,
           "vocab_size": 1000}
REMOTE = {"model_type": "chatglm", "architectures": ["ChatGLMModel"], "hidden_size": 4096, "num_attention_heads": 32,
          "multi_query_group_num": 2, "num_layers": 28, "kv_channels": 128}


def hook(monkeypatch, **actions: str) -> None:
    monkeypatch.setenv(TEST_HOOK_ENV, json.dumps(actions))


def test_the_pool_records_a_crash_and_a_memory_blowup_and_goes_on(monkeypatch):
    hook(monkeypatch, gpt2="crash", gpt_neo="oom")
    configs = [("crash", {"model_type": "gpt2", "n_head": 4, "n_embd": 64, "n_layer": 2}),
               ("oom", {"model_type": "gpt_neo", "num_heads": 4, "hidden_size": 64, "num_layers": 2}),
               ("qwen3", QWEN3)]
    outcomes = {o.key: o for o in read_configs(configs, workers=1, time_limit_s=300,
                                               memory_limit_bytes=1536 << 20)}
    assert outcomes["crash"].status == "failed"
    assert outcomes["crash"].reason.startswith("crash: the oracle's child killed by SIGABRT")
    assert outcomes["oom"].status == "failed"
    assert outcomes["oom"].reason == "memory limit: building it needed more than 1,536 MiB of address space"
    # Each failure cost one child; the next config got a fresh one and was read in full.
    good = outcomes["qwen3"]
    assert good.status == "read" and good.transformers
    assert good.reading.elements_per_token == 28 * 2 * 8 * 128 and good.reading.query_heads == 16


def test_the_pool_kills_a_config_past_its_time_limit(monkeypatch):
    hook(monkeypatch, gpt2="hang")
    [outcome] = read_configs([("hang", {"model_type": "gpt2", "n_head": 4, "n_embd": 64, "n_layer": 2})],
                             workers=1, time_limit_s=2)
    assert outcome.status == "failed"
    assert outcome.reason == "time limit: no answer within 2 s to this config; the child was killed"


def _oracle_children() -> list[int]:
    """Pids of this process's oracle children still alive (Linux: read from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and b"observatory.oracle.child" in cmdline and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_the_pool_stops_when_asked_and_leaves_no_child(monkeypatch):
    hook(monkeypatch, gpt2="hang")
    polls = []

    def should_stop() -> bool:  # polled several times a second while the children start and hang
        polls.append(_oracle_children())
        return len(polls) > 5 and bool(polls[-1])

    outcomes = read_configs([(i, {"model_type": "gpt2", "n_head": 4, "n_embd": 64, "n_layer": 2}) for i in range(3)],
                            workers=2, time_limit_s=3600, should_stop=should_stop)
    assert list(outcomes) == []  # every config hangs: nothing came back before the stop
    assert any(polls) and _oracle_children() == []


def _models(engine):
    now = datetime(2025, 3, 1, tzinfo=UTC)
    add_model(engine, "good/qwen3", QWEN3, now)
    add_model(engine, "odd/crafted", CRAFTED, now)
    add_model(engine, "remote/glm", REMOTE, now)
    add_model(engine, "plain/gqa", gqa_config(4), now)


@pytest.fixture
def oracle_settings(settings):
    return settings.model_copy(update={"oracle_enabled": True, "oracle_workers": 1})


def test_check_records_every_verdict_and_a_disagreement_makes_the_geometry_uncertain(engine, oracle_settings):
    settings = oracle_settings
    _models(engine)
    report = check(engine, settings)
    assert report.checked == report.due == 4 and not report.stopped
    assert report.new_disagreements == ["odd/crafted"]
    with read_session(engine) as session:
        rows = {r.model_id: r for r in session.exec(select(OracleCheck))}
        assert status_counts(session) == {"agree": 2, "disagree": 1, "unsupported": 1, "failed": 0}
        table = {r["model_type"]: r for r in status_table(session)}
    assert table["llama"] == {"model_type": "llama", "configs": 2, "agree": 1, "disagree": 1, "unsupported": 0,
                              "failed": 0}
    assert [table[t]["configs"] for t in ("chatglm", "qwen3")] == [1, 1]
    odd = rows["odd/crafted"]
    assert odd.status == "disagree" and odd.transformers_version == rows["good/qwen3"].transformers_version
    assert "KV elements per token: ours 256, transformers 1,024" in odd.reason
    assert odd.layers == [[0, 8, 32, 8, 32], [1, 8, 32, 8, 32]] and odd.elements_per_token == 1024
    assert rows["remote/glm"].status == "unsupported" and "trust_remote_code" in rows["remote/glm"].reason
    good = rows["good/qwen3"]
    assert good.parameters == good.our_parameters == 596_049_920 and good.elements_per_token == 57_344
    # Kept out of the trends exactly as an unknown layer type is.
    with engine.connect() as conn:
        trend = {r.model_id: r.uncertain for r in load_trend_rows(conn, Population(lineage="all"))}
    assert trend == {"good/qwen3": False, "odd/crafted": True, "remote/glm": False, "plain/gqa": False}
    # A second run finds nothing due: a verdict is kept until transformers or the parser changes.
    again = check(engine, settings)
    assert (again.due, again.checked, again.new_disagreements) == (0, 0, [])


def test_a_new_transformers_version_reads_everything_again(engine, oracle_settings):
    settings = oracle_settings
    _models(engine)
    check(engine, settings)
    with engine.begin() as conn:
        conn.execute(OracleCheck.__table__.update().values(transformers_version="4.0.0"))
    report = check(engine, settings, limit=2)
    assert (report.due, report.checked) == (2, 2)
    with read_session(engine) as session:
        versions = [r.transformers_version for r in session.exec(select(OracleCheck))]
    assert versions.count("4.0.0") == 2 and len(versions) == 4


def test_a_hanging_config_does_not_delay_a_crawl(engine, hub, hub_settings, monkeypatch):
    # Every synthetic config is a llama; each one hangs its child, and the time limit is an hour away.
    hook(monkeypatch, llama="hang")
    ids = populate(hub, 3)
    settings = hub_settings.model_copy(update={"oracle_time_limit_s": 3600.0, "oracle_workers": 1,
                                               "oracle_enabled": True})
    try:
        run = pipeline.crawl(engine, settings, since=LONG_AGO)
        # The crawl stored everything and returned while the oracle is still on its first config.
        assert run.status == "ok" and run.new == len(ids)
        assert background.running()
        with read_session(engine) as session:
            assert session.exec(select(OracleCheck)).all() == []
    finally:
        assert background.stop(timeout_s=60), "the background oracle did not stop when asked"
    assert not background.running()


def test_a_crawl_hands_the_oracle_what_arrived(engine, hub, hub_settings):
    populate(hub, 2)
    settings = hub_settings.model_copy(update={"oracle_workers": 1, "oracle_enabled": True})
    pipeline.crawl(engine, settings, since=LONG_AGO)
    thread = background._thread
    assert thread is not None
    thread.join(timeout=600)
    assert not thread.is_alive()
    with read_session(engine) as session:
        assert status_counts(session)["agree"] == 2


def test_a_disagreement_shows_on_the_model_page_api_methodology_crawl_page_and_alerts(engine, oracle_settings):
    from fastapi.testclient import TestClient

    from observatory.alerts.evaluate import evaluate
    from observatory.web.app import create_app

    settings = oracle_settings
    _models(engine)
    first = evaluate(engine, settings)  # history is absorbed: nothing about the oracle yet
    assert not [f for f in first.fired if f["labels"].get("what") == "oracle_disagreement"]
    check(engine, settings)
    report = evaluate(engine, settings)
    fired = [f for f in report.fired if f["labels"].get("what") == "oracle_disagreement"]
    assert len(fired) == 1 and fired[0]["labels"]["value"].startswith("odd/crafted: ")
    assert not [f for f in evaluate(engine, settings).fired if f["labels"].get("what") == "oracle_disagreement"]

    with TestClient(create_app(settings)) as client:
        detail = client.get("/api/v1/models/odd/crafted").json()
        geometry = detail["geometry"]
        assert geometry["uncertain"] is True and geometry["oracle"]["status"] == "disagree"
        assert geometry["oracle"]["elements_per_token"] == 1024 and geometry["kv_elements_per_token"] == 256
        assert any("reads this config otherwise" in w and "ours 256, transformers 1,024" in w
                   for w in geometry["warnings"])
        good = client.get("/api/v1/models/good/qwen3").json()["geometry"]
        assert good["uncertain"] is False and good["oracle"]["status"] == "agree"
        page = client.get("/models/odd/crafted").text
        assert "transformers disagrees" in page and "ours 256, transformers 1,024" in page
        methodology = client.get("/methodology.json").json()["oracle"]
        assert methodology["totals"] == {"configs": 4, "agree": 2, "disagree": 1, "unsupported": 1, "failed": 0}
        assert {d["id"] for d in methodology["differences"]} >= {"mla-latent", "falcon-kv-groups"}
        lines = client.get("/methodology.csv").text.splitlines()
        assert lines[0] == "model_type,configs,agree,disagree,unsupported,failed"
        assert "llama,2,1,1,0,0" in lines
        assert "oracle-differences" in client.get("/methodology").text
        crawl = client.get("/crawl.json").json()
        assert crawl["oracle"]["disagree"] == 1 and crawl["geometry_flags"]["uncertain"] == 1


def test_inspect_oracle_prints_both_readings_side_by_side(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from observatory.cli import main

    monkeypatch.setenv("OBSERVATORY_ORACLE_ENABLED", "true")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CRAFTED))
    result = CliRunner().invoke(main, ["inspect", "--oracle", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert any(line.strip().startswith("oracle") and line.rstrip().endswith(": disagree") for line in lines)
    assert [line.split()[-2:] for line in lines if line.startswith("    KV elements per token")] == [["256", "1,024"]]
    assert [" ".join(line.split()[2:]) for line in lines if line.startswith("    layers 0–1 ")] == [
        "2×32 K, 2×32 V 8×32 K, 8×32 V"]
    as_json = json.loads(CliRunner().invoke(main, ["inspect", "--json", "--oracle", str(QWEN3_PATH)]).output)
    assert as_json["oracle"]["status"] == "agree"
    assert as_json["oracle"]["reading"]["self_attention"][0] == [0, 8, 128, 8, 128]
