"""The README's benchmark figures are rendered from the committed results files: a block that
differs from its file (a number edited by hand, a file rewritten by a new run and the README not)
fails here. ``python benchmarks/results.py`` rewrites the blocks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import results


def test_every_readme_block_matches_its_results_file():
    text = (ROOT / "README.md").read_text()
    names = [m["name"] for m in results.BLOCK.finditer(text)]
    assert "api" in names
    assert results.stale_blocks(text) == []


def test_a_changed_number_is_caught(tmp_path):
    text = (ROOT / "README.md").read_text()
    data = json.loads((results.RESULTS / "api.json").read_text())
    cell = str(data["rows"][0][3])
    block = results.markdown("api")
    assert f"| {cell} |" in block
    edited = text.replace(block, block.replace(f"| {cell} |", f"| {cell}0 |", 1), 1)
    assert edited != text and results.stale_blocks(edited) == ["api"]


def test_every_results_file_the_readme_renders_is_stamped():
    # The decode, export, params and uptrain files carry their own stamps (tests/unit/
    # test_readme_kernel_figures.py holds the decode one); this stamp is results.py's.
    names = {m["name"] for m in results.BLOCK.finditer((ROOT / "README.md").read_text())}
    for path in (results.RESULTS / f"{name}.json" for name in sorted(names)):
        stamp = json.loads(path.read_text())["stamp"]
        assert stamp["date"].endswith("UTC") and stamp["cpus"] >= 1 and stamp["machine"]
        assert len(stamp["load_average_start"]) == 3 and len(stamp["load_average_end"]) == 3
