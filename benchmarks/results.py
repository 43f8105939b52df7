"""Benchmark results as committed files, and the README's tables rendered from them.

Each benchmark writes ``benchmarks/results/<name>.json``: a stamp (UTC date, machine, CPUs and
load average at the start and the end of the run, since this machine is shared) and its table
rows. The README quotes each file between ``<!-- results:<name> -->`` and
``<!-- /results:<name> -->``; ``python benchmarks/results.py`` rewrites those blocks from the
files, and ``tests/unit/test_readme_results.py`` fails when a block differs from its file.
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
README = ROOT / "README.md"
BLOCK = re.compile(r"(<!-- results:(?P<name>[a-z0-9_-]+) -->\n)(?P<body>.*?)(<!-- /results:(?P=name) -->)", re.DOTALL)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def stamp() -> dict:
    """When and where a run started: date, machine, CPUs, load average (1, 5, 15 min)."""
    return {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": f"{platform.system()} {platform.machine()}, {_cpu_model()}",
            "cpus": os.cpu_count(), "python": platform.python_version(),
            "load_average_start": [round(x, 2) for x in os.getloadavg()]}


def write(name: str, run_stamp: dict, columns: list[str], rows: list[list], notes: list[str]) -> Path:
    """The results file: ``rows`` (already formatted cells) under ``columns``, with notes."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    body = {"stamp": {**run_stamp, "load_average_end": [round(x, 2) for x in os.getloadavg()]},
            "columns": columns, "rows": rows, "notes": notes}
    path.write_text(json.dumps(body, indent=1) + "\n")
    return path


def markdown(name: str) -> str:
    """The README block of one results file."""
    data = json.loads((RESULTS / f"{name}.json").read_text())
    s = data["stamp"]
    head = (f"`benchmarks/results/{name}.json`: {s['date']}, {s['machine']}, {s['cpus']} CPUs, load average "
            f"{' / '.join(map(str, s['load_average_start']))} at the start and "
            f"{' / '.join(map(str, s['load_average_end']))} at the end (1 / 5 / 15 min; a shared machine).")
    lines = [head, "",
             "| " + " | ".join(data["columns"]) + " |", "|" + "---|" * len(data["columns"])]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in data["rows"]]
    if data["notes"]:
        lines += [""] + [f"- {n}" for n in data["notes"]]
    return "\n".join(lines) + "\n"


def stale_blocks(text: str) -> list[str]:
    """Names of README blocks whose text differs from their results file (or whose file is missing)."""
    out = []
    for m in BLOCK.finditer(text):
        path = RESULTS / f"{m['name']}.json"
        if not path.exists() or m["body"] != markdown(m["name"]):
            out.append(m["name"])
    return out


def render_readme(text: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + markdown(m["name"]) + m.group(4), text)


if __name__ == "__main__":
    before = README.read_text()
    after = render_readme(before)
    README.write_text(after)
    print("README blocks rewritten" if after != before else "README blocks already match their files")
    sys.exit(0)
