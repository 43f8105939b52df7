"""`make test` as root installs chromium alone: no recommends (udev, systemd) and no upgrade."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_browser_target_installs_chromium_alone():
    recipe = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "browser"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    installs = [line for line in re.findall(r"apt-get[^;&|\"]*", recipe) if " install" in line]
    assert installs, recipe
    for line in installs:
        assert "--no-install-recommends" in line, line
        assert line.split()[-1] == "chromium", line  # chromium and nothing else named
    assert not re.search(r"apt-get[^;&|]*\b(upgrade|dist-upgrade|full-upgrade)\b", recipe), recipe


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_test_runs_the_whole_suite_slow_tests_included():
    # CI runs `make test`: the tests marked slow are marked for a quick local loop, never left out there.
    recipe = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "test"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    (pytest_line,) = [line for line in recipe.splitlines() if " -m pytest" in line]
    assert not re.search(r"\s(-m|-k|--deselect|--ignore\S*|--lf|--sw|-x)(\s|=|$)", pytest_line.split(" -m pytest", 1)[1]), (
        pytest_line)
