"""The pure core (``observatory.core``) imports nothing with I/O: no store, web, Hub or clock.

Read from the source with ``ast`` so a lazy import inside a function is caught too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import observatory.core

CORE = Path(observatory.core.__file__).parent
# What a pure module may import besides the standard library and other core modules.
ALLOWED_THIRD_PARTY = {"numpy"}
# Standard-library modules that reach the outside world or the clock.
FORBIDDEN_STDLIB = {"socket", "sqlite3", "subprocess", "urllib", "http", "os", "shutil", "time", "threading"}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def test_core_modules_import_only_the_core_numpy_and_pure_stdlib():
    modules = sorted(CORE.glob("*.py"))
    assert len(modules) >= 6
    bad = []
    for path in modules:
        for line, name in _imports(path):
            top = name.split(".")[0]
            if name.startswith("observatory."):
                ok = name == "observatory.core" or name.startswith("observatory.core.")
            elif top in sys.stdlib_module_names:
                ok = top not in FORBIDDEN_STDLIB
            else:
                ok = top in ALLOWED_THIRD_PARTY
            if not ok:
                bad.append(f"{path.name}:{line} imports {name}")
    assert not bad, bad


def test_nothing_in_the_core_reads_the_clock():
    for path in CORE.glob("*.py"):
        text = path.read_text()
        for call in ("datetime.now(", "date.today(", "datetime.utcnow(", "time.time("):
            assert call not in text, f"{path.name} calls {call}"
