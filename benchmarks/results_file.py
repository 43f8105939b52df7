"""Committed benchmark results: the printed table, its rows and its verdicts in one JSON file, stamped
with when, where and how loaded the machine was, so the README can quote a file rather than memory
(tests/unit/test_readme_kernel_figures.py holds the README to the decode benchmark's file)."""

from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path


def stamp(device, argv: list[str]) -> dict:
    """When and where a run happened: UTC date, the device and its software, CPU count, the command
    line, and the 1/5/15-minute load average as the run starts."""
    return {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": {"device": device.name, "cpus": os.cpu_count(), "platform": platform.platform(),
                        **device.software},
            "command": " ".join(["python", "benchmarks/decode_attention.py", *argv]),
            "load_average_before": list(os.getloadavg())}


def load_text(load: list[float]) -> str:
    return " / ".join(f"{x:.2f}" for x in load) + f" (1/5/15 min, {os.cpu_count()} CPUs)"


def write(path: Path, stamp: dict, table: list[str], rows: list[dict], verdicts: list[str]) -> None:
    """Write the results file (written whole to a temporary name, then renamed: never half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps({**stamp, "table": table, "verdicts": verdicts, "rows": rows}, indent=1,
                                  ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(partial, path)


def read(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))
