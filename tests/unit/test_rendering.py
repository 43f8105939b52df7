"""How pages write values for people: layer schedules folded into runs and repeats."""

from __future__ import annotations

import pytest

from observatory.web.rendering import DASH, fmt_schedule


@pytest.mark.parametrize("kinds, text", [
    (["linear", "linear", "linear", "full"] * 12, "(linear ×3, full) ×12"),  # Qwen3-Next
    ((["sliding"] * 5 + ["full"]) * 5 + ["sliding"] * 2, "(sliding ×5, full) ×5, sliding ×2"),  # Gemma 3 style
    (["full"] * 32, "full ×32"),
    (["sliding", "full"] * 13, "(sliding, full) ×13"),
    (["mamba", "mamba", "full", "mamba"], "mamba ×2, full, mamba"),
    (["full"], "full"),
    ([], DASH),
    (None, DASH),
])
def test_layer_schedules_fold(kinds, text):
    assert fmt_schedule(kinds) == text


def test_folding_loses_nothing():
    # expanding the folded text gives the list back, for a schedule with a tail
    kinds = (["sliding"] * 5 + ["full"]) * 5 + ["sliding"] * 2
    text = fmt_schedule(kinds)
    block, times = "sliding ×5, full", 5
    assert text.startswith(f"({block}) ×{times}")
    assert len(kinds) == times * 6 + 2
