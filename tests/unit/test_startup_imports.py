"""What a process pays before its first line of work: the command line and the web app load
neither torch nor transformers (seconds of CPU each, in every command, server and worker process
the tests and a deployment start), and the command line not the web stack either."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "safetensors", "triton")
WEB = ("fastapi", "uvicorn", "jinja2")


def _loaded(statement: str, names: tuple[str, ...]) -> list[str]:
    probe = f"import sys; {statement}; print(' '.join(m for m in {names!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.split()


def test_the_command_line_starts_without_torch_or_the_web_stack():
    # torch, transformers and FastAPI load inside the commands that use them.
    assert _loaded("import observatory.cli", HEAVY + WEB) == []


@pytest.mark.parametrize("statement", [
    "from observatory.web.app import create_app; create_app()",
    "from observatory.commands.serve import served_app; served_app()",
])
def test_the_web_app_starts_without_torch(statement, tmp_path, monkeypatch):
    # The research page reads the uptraining plan's shapes (uptrain.shape), not the torch model.
    monkeypatch.setenv("OBSERVATORY_DATA_DIR", str(tmp_path))
    assert _loaded(statement, HEAVY) == []
