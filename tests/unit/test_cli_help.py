"""Every command has --help, and the README's CLI tour names every command (docs checked by tests)."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from observatory.cli import main

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def _walk(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, cmd in sorted(group.commands.items()):
        path = prefix + (name,)
        yield path
        if isinstance(cmd, click.Group):
            yield from _walk(cmd, path)


COMMANDS = list(_walk(main))


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_every_command_has_help(path):
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_readme_tours_every_command(path):
    assert f"observatory {' '.join(path)}" in README, f"README does not mention `observatory {' '.join(path)}`"


def test_readme_commands_exist():
    known = {" ".join(p) for p in COMMANDS}
    for match in re.finditer(r"`observatory ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)?)", README):
        words = match.group(1).split()
        assert " ".join(words) in known or words[0] in known, f"README mentions unknown command {match.group(0)}"
