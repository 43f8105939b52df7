"""Reading the JSON files bundled under ``observatory/data`` (hardware catalog, prices, research)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json(path: Path, error: type[Exception], what: str) -> Any:
    """The file's JSON; a file that cannot be read or parsed raises ``error`` naming ``what`` and the path."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise error(f"cannot read {what} {path}: {exc}") from None
