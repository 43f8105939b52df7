"""Browser tests keep full-page screenshots of every page they open (1280 px and 390 px wide), as
artifacts to look at; the folder is printed at the end of the run. Set OBSERVATORY_SCREENSHOT_DIR to
choose it (CI can upload it); otherwise it lives in pytest's temporary directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_SHOTS: list[Path] = []


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    chosen = os.environ.get("OBSERVATORY_SCREENSHOT_DIR")
    folder = Path(chosen) if chosen else tmp_path_factory.getbasetemp() / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    _SHOTS.append(folder)
    return folder


def pytest_terminal_summary(terminalreporter):
    for folder in _SHOTS:
        count = len(list(folder.glob("*.png")))
        terminalreporter.write_line(f"browser screenshots: {count} in {folder}")
