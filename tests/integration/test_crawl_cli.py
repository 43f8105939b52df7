"""``observatory crawl``: summary, --json, --list, --failures and bad input, against the stand-in."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from crawler_support import LLAMA, runs

from observatory.cli import main
from observatory.settings import get_settings
from observatory.testing.hub_standin import populate


@pytest.fixture
def invoke(hub_settings, monkeypatch):
    monkeypatch.setenv("OBSERVATORY_DATA_DIR", str(hub_settings.data_dir))
    monkeypatch.setenv("HF_ENDPOINT", hub_settings.hf_endpoint)
    monkeypatch.setenv("OBSERVATORY_HUB_TIMEOUT_S", "2")
    monkeypatch.delenv("OBSERVATORY_DATABASE_URL", raising=False)
    get_settings.cache_clear()

    def run(*args: str):
        return CliRunner().invoke(main, ["crawl", *args], catch_exceptions=False)

    yield run
    get_settings.cache_clear()


def test_crawl_prints_a_summary_and_json_and_stores_the_run(engine, hub, invoke):
    populate(hub, 12)
    hub.add_repo("meta/gated", LLAMA, gated="auto")

    human = invoke("--since", "2000-01-01", "--no-progress")
    assert human.exit_code == 0, human.output
    assert "new 12" in human.output and "failed 1" in human.output and "gated 1" in human.output
    assert "requests 15 (config 12, listing 3)" in human.output

    result = invoke("--json", "--no-progress")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["status"] == "ok" and data["new"] == 0 and data["stats"]["requests_by_kind"] == {"listing": 2}
    assert [r.id for r in runs(engine)] == [data["id"] - 1, data["id"]]


def test_list_and_failures(engine, hub, invoke):
    populate(hub, 3)
    hub.add_repo("odd/html", "<html/>")
    invoke("--since", "7d", "--no-progress")

    listed = json.loads(invoke("--list", "--json").output)
    assert [r["new"] for r in listed] == [3]
    assert "ok" in invoke("--list").output
    failures = json.loads(invoke("--failures", "--json").output)
    assert [(f["model_id"], f["reason"], f["transient"]) for f in failures] == [("odd/html", "not_json", False)]
    assert "not_json" in invoke("--failures").output


@pytest.mark.parametrize(("args", "message"), [
    (["--since", "last tuesday"], "neither a date"),
    (["--max-models", "0"], "x>=1"),
    (["--min-downloads", "-1"], "x>=0"),
])
def test_bad_options_are_refused_with_a_clear_message(invoke, args, message):
    result = invoke(*args)
    assert result.exit_code == 2 and message in result.output


def test_scope_reused_with_other_filters_is_one_clear_error(hub, invoke):
    populate(hub, 2)
    assert invoke("--since", "7d", "--no-progress").exit_code == 0
    result = invoke("--min-downloads", "100", "--no-progress")
    assert result.exit_code == 1
    assert "Error: scope 'default' was first crawled with other filters" in result.output


def test_a_listing_the_hub_refuses_fails_the_run_with_one_line(engine, hub, invoke):
    hub.add_fault("listing", 400, times=-1, body=b'{"error": "bad query"}')
    result = invoke("--since", "1d", "--no-progress")
    assert result.exit_code == 1 and result.output.startswith("Error: crawl failed: BadRequestError")
    assert len(result.output.strip().splitlines()) == 1
    assert [(r.status, r.error[:15]) for r in runs(engine)] == [("failed", "BadRequestError")]


def test_json_is_always_one_result_object(engine, hub, invoke):
    populate(hub, 2)
    ok = invoke("--since", "7d", "--json", "--no-progress")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["ok"] is True

    hub.add_fault("listing", 400, times=-1, body=b'{"error": "bad query"}')
    failed = invoke("--json", "--no-progress")
    data = json.loads(failed.stdout)
    assert failed.exit_code == 1 and data["ok"] is False and data["status"] == "failed"
    assert data["error"].startswith("BadRequestError") and failed.stderr.startswith("Error: crawl failed: BadRequestError")

    mismatch = invoke("--json", "--min-downloads", "5", "--no-progress")  # refused before any run starts
    refused = json.loads(mismatch.stdout)
    assert mismatch.exit_code == 1 and refused == {"ok": False, "error": refused["error"]}
    assert refused["error"].startswith("scope 'default' was first crawled with other filters")


def test_an_unreachable_hub_is_one_line_naming_what_to_set(engine, invoke, monkeypatch):
    from observatory.testing.server import free_port

    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    get_settings.cache_clear()
    human = invoke("--since", "1d", "--no-progress")
    assert human.exit_code == 1 and human.stdout == ""
    [line] = human.stderr.strip().splitlines()
    assert line.startswith("Error: crawl unreachable: Hub not reachable at http://127.0.0.1:")
    assert "HF_ENDPOINT" in line and "HTTPS_PROXY" in line

    data = json.loads(invoke("--json", "--no-progress").stdout)
    assert data["ok"] is False and data["status"] == "unreachable" and data["requests"] == 1
    assert [r.status for r in runs(engine)] == ["unreachable", "unreachable"]


def test_a_rate_limited_run_exits_3_and_says_when_to_retry(engine, hub, invoke):
    populate(hub, 2)
    hub.add_fault("listing", 429, times=-1, headers={"Retry-After": "100000"})
    result = invoke("--since", "7d", "--no-progress")
    assert result.exit_code == 3
    assert "crawl #1 rate_limited" in result.stdout and "stopped: RateLimited: the Hub asked to wait 100000s" in result.stdout
    assert "retry after" in result.stdout


def test_off_a_terminal_the_crawl_prints_progress_lines_with_a_projection(engine, hub, invoke):
    populate(hub, 25)

    result = invoke("--since", "2000-01-01")

    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("crawl created:")]
    assert lines, result.stderr
    assert "\r" not in result.stderr  # no bar drawn into a log
    assert re.search(r"listed \d+ \(~\d+% of the span down to 2000-01-01 00:00\)", lines[0]), lines[0]
    assert re.search(r"projected ~\S+ left at the (anonymous request budget|pace so far)", lines[0]), lines[0]
    assert "requests " in lines[0] and "listed/s" in lines[0]
    assert "new 25" in result.stdout  # the summary, on stdout as before


def test_no_progress_prints_no_lines(engine, hub, invoke):
    populate(hub, 5)
    result = invoke("--since", "2000-01-01", "--no-progress")
    assert result.exit_code == 0 and "crawl created:" not in result.stderr
