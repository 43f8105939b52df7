"""The floors of the house: which of our packages may import which, read from the source.

Read with ``ast`` so a lazy import inside a function counts too, in a fresh interpreter: CPython 3.11
keeps the AST constructor's recursion depth in shared state, so ``ast.parse`` beside another thread
parsing (a served app in the same test process) can fail with "AST constructor recursion depth
mismatch" (python/cpython#106905). ``FLOORS`` is the whole rule:
a package imports only itself, the floors named for it, the standard library and third-party
packages. ``observatory.core`` is stricter still: pure, no I/O, no clock.
"""

from __future__ import annotations

import functools
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import observatory

PACKAGE = Path(observatory.__file__).parent
ROOT = PACKAGE.parent

# floor -> the floors it may import (besides itself). Top-level modules are floors of their own.
_DOMAIN = {"core", "settings", "store"}
FLOORS: dict[str, set[str]] = {
    "core": set(),
    "settings": set(),
    "kernels": set(),  # the bundled kernels know nothing of the observatory
    "testing": set(),  # stand-ins for the tests (a Hub on loopback, a server runner)
    "store": {"core", "settings"},
    "catalog": _DOMAIN,
    "hub": _DOMAIN,
    "crawler": _DOMAIN | {"hub"},
    "alerts": _DOMAIN | {"hub"},  # webhooks read Retry-After as the Hub client does
    "bench": _DOMAIN | {"catalog", "kernels"},
    "oracle": _DOMAIN,  # transformers in its child processes; reads configs from the store
    "convert": {"core"},  # safetensors checkpoints in and out; what may be converted is decided in the core
    "uptrain": _DOMAIN | {"bench", "convert", "kernels"},  # the small-scale uptraining experiment and its results
    "pipeline": _DOMAIN | {"catalog", "hub", "crawler", "alerts", "bench", "oracle", "scheduler"},
    "scheduler": _DOMAIN | {"hub"},  # its jobs are named as "module:function" strings
    "web": _DOMAIN | {"catalog", "hub", "crawler", "alerts", "bench", "oracle", "pipeline", "scheduler", "uptrain"},
    "commands": _DOMAIN | {"catalog", "hub", "crawler", "alerts", "bench", "kernels", "oracle", "pipeline", "scheduler",
                          "web", "convert", "uptrain"},
    "cli": {"commands"},
}
# What a pure core module may import besides the standard library and other core modules.
CORE_THIRD_PARTY = {"numpy"}
# Standard-library modules that reach the outside world or the clock.
CORE_FORBIDDEN_STDLIB = {"socket", "sqlite3", "subprocess", "urllib", "http", "os", "shutil", "time", "threading"}


def _floor_of(path: Path) -> str:
    rel = path.relative_to(ROOT)
    if rel.parts[0] == "kernels":
        return "kernels"
    first = rel.parts[1]
    return first.removesuffix(".py")


def _floor_of_module(name: str) -> str | None:
    """The floor an imported dotted name belongs to, or None when it is not ours."""
    parts = name.split(".")
    if parts[0] == "kernels":
        return "kernels"
    if parts[0] != "observatory":
        return None
    return parts[1] if len(parts) > 1 else ""


_READ_IMPORTS = """
import ast, json, sys
out = {}
for path in sys.argv[1:]:
    found = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), filename=path)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module in ("observatory", "kernels"):
                found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.ImportFrom) and node.level:
            found.append((node.lineno, "." * node.level + (node.module or "")))
    out[path] = found
print(json.dumps(out))
"""


def _read_imports(paths: list[Path]) -> dict[Path, list[tuple[int, str]]]:
    """(line, dotted name) of every import in each file; ``from observatory import x`` names ``observatory.x``."""
    done = subprocess.run([sys.executable, "-c", _READ_IMPORTS, *map(str, paths)], capture_output=True, text=True,
                          timeout=60, check=True)
    return {Path(path): [tuple(item) for item in found] for path, found in json.loads(done.stdout).items()}


@functools.cache
def _all_imports() -> dict[Path, list[tuple[int, str]]]:
    return _read_imports(_sources())


def _imports(path: Path) -> list[tuple[int, str]]:
    found = _all_imports().get(path)
    return found if found is not None else _read_imports([path])[path]


def _sources() -> list[Path]:
    return sorted([*PACKAGE.rglob("*.py"), *(ROOT / "kernels").rglob("*.py")])


def test_every_source_file_has_a_floor():
    floors = {_floor_of(p) for p in _sources() if p.name != "__init__.py" or p.parent != PACKAGE}
    assert floors <= set(FLOORS), floors - set(FLOORS)
    assert {"core", "store", "catalog", "hub", "crawler", "bench", "alerts", "web", "commands"} <= floors


def test_no_module_imports_a_floor_it_may_not():
    bad = []
    for path in _sources():
        if path == PACKAGE / "__init__.py":
            continue
        own = _floor_of(path)
        for line, name in _imports(path):
            if name.startswith("."):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name} (relative: name the package)")
                continue
            floor = _floor_of_module(name)
            if floor is None or floor == own:
                continue
            if floor not in FLOORS[own]:
                bad.append(f"{path.relative_to(ROOT)}:{line} ({own}) imports {name} ({floor or 'the package'})")
    assert not bad, "\n".join(bad)


def test_nothing_imports_web_or_commands_from_below():
    # The table says so already; this names the rule the issue states, so a table edit cannot quietly drop it.
    for floor, allowed in FLOORS.items():
        if floor not in ("commands", "cli"):
            assert "commands" not in allowed, floor
        if floor not in ("web", "commands", "cli"):
            assert "web" not in allowed, floor


def test_the_floors_have_no_cycles():
    def visit(floor: str, path: tuple[str, ...]) -> None:
        assert floor not in path, " -> ".join((*path, floor))
        for below in FLOORS[floor]:
            visit(below, (*path, floor))

    for floor in FLOORS:
        visit(floor, ())


@pytest.mark.parametrize("package", sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py")))
def test_every_package_says_what_it_owns(package):
    doc = importlib.import_module(f"observatory.{package}").__doc__
    assert doc and len(doc.split()) >= 12, f"observatory/{package}/__init__.py needs a docstring: what it owns, what it imports"


def test_the_layer_check_catches_a_lazy_upward_import(tmp_path):
    # The check itself can fail: a function-level import of the web from the store is found.
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    from observatory.web.app import create_app\n    return create_app\n")
    names = [_floor_of_module(name) for _, name in _imports(source)]
    assert names == ["web"] and "web" not in FLOORS["store"]


def test_core_modules_import_only_the_core_numpy_and_pure_stdlib():
    modules = sorted((PACKAGE / "core").glob("*.py"))
    assert len(modules) >= 6
    bad = []
    for path in modules:
        for line, name in _imports(path):
            top = name.split(".")[0]
            if name.startswith("observatory."):
                ok = name.startswith("observatory.core.")
            elif top in sys.stdlib_module_names:
                ok = top not in CORE_FORBIDDEN_STDLIB
            else:
                ok = top in CORE_THIRD_PARTY
            if not ok:
                bad.append(f"{path.name}:{line} imports {name}")
    assert not bad, bad


def test_nothing_in_the_core_reads_the_clock():
    for path in (PACKAGE / "core").glob("*.py"):
        text = path.read_text()
        for call in ("datetime.now(", "date.today(", "datetime.utcnow(", "time.time("):
            assert call not in text, f"{path.name} calls {call}"
