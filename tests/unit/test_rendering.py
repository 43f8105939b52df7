"""How pages write values for people: layer schedules folded into runs and repeats, and byte sizes
rounded as the page scripts round them."""

from __future__ import annotations

import pytest

from observatory.web.rendering import DASH, fmt_bytes, fmt_bytes_binary, fmt_schedule


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


@pytest.mark.parametrize("value, binary, decimal", [
    (152.5 * 2**30, "153 GiB", "164 GB"),  # DeepSeek-V3's MHA counterfactual (issue 23): the script said 153
    (2.5 * 2**30, "2.50 GiB", "2.68 GB"),
    (10.25 * 2**20, "10.3 MiB", "10.7 MB"),  # 10.25 is exact in binary: a half, rounded up as Intl does
    (0.5, "1 B", "1 B"),
    (1536, "1.50 KiB", "1.54 kB"),
    (None, DASH, DASH),
])
def test_byte_sizes_round_halves_up_as_the_scripts_do(value, binary, decimal):
    assert fmt_bytes_binary(value) == binary and fmt_bytes(value) == decimal
