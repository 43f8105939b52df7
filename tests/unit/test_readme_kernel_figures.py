"""The README's kernel figures are the committed results file's, never memory: its result cell for
benchmarks/decode_attention.py must be exactly what the benchmark makes of
benchmarks/results/decode_attention.json, so a number edited by hand, or a rerun not pasted, fails."""

from __future__ import annotations

import copy
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results" / "decode_attention.json"
README = ROOT / "README.md"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("decode_attention_benchmark", ROOT / "benchmarks" / "decode_attention.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def results(bench):
    return bench.results.read(RESULTS)


def readme_cell() -> str:
    rows = [line for line in README.read_text(encoding="utf-8").splitlines()
            if line.startswith("| `benchmarks/decode_attention.py` |")]
    assert len(rows) == 1, "the README's benchmark table has one decode_attention.py row"
    return rows[0].rstrip().removesuffix("|").rsplit(" | ", 1)[1].strip()


def test_the_results_file_is_stamped(results):
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", results["date"])
    assert results["machine"]["device"] and results["machine"]["cpus"] >= 1 and results["machine"]["threads"] >= 1
    assert len(results["load_average_before"]) == len(results["load_average_after"]) == 3
    assert results["command"].startswith("python benchmarks/decode_attention.py")
    assert results["table"] and results["rows"] and results["verdicts"]
    # The printed table is the rows': every row's time is in it as printed.
    for row in results["rows"]:
        assert any(f"{row['ours_s'] * 1e3:.3f}" in line for line in results["table"]), row["model"]


def test_the_readme_quotes_the_results_file(bench, results):
    assert readme_cell() == bench.readme_cell(results)


def test_a_changed_number_is_caught(bench, results):
    # The check can fail: the same file with one time 1% slower, or one peer ratio changed, no longer
    # makes the README's cell.
    slower = copy.deepcopy(results)
    slower["rows"][0]["ours_s"] *= 1.01
    assert bench.readme_cell(slower) != readme_cell()
    ratio = copy.deepcopy(results)
    row = next(r for r in ratio["rows"] if "sdpa_gqa" in r["speedups"])
    row["speedups"]["sdpa_gqa"] += 0.5
    assert bench.readme_cell(ratio) != readme_cell()


def test_a_busy_machine_is_said_beside_the_figures(bench, results):
    busy = copy.deepcopy(results)
    busy["load_average_before"][0] = busy["load_average_after"][0] = 3.0
    assert "a busy machine" in bench.readme_cell(busy) and "unverified" in bench.readme_cell(busy)
    quiet = copy.deepcopy(results)
    quiet["load_average_before"][0] = quiet["load_average_after"][0] = 0.1
    assert "busy" not in bench.readme_cell(quiet)
