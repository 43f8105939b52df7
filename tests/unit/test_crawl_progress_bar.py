"""On a terminal ``observatory crawl`` draws a bar (a pseudo-terminal stands in for one): the
listed count against the projected total, its rate, and the time left."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import termios
from datetime import UTC, datetime, timedelta

from observatory.commands.crawl_progress import CrawlProgress
from observatory.settings import Settings

T = datetime(2026, 6, 1, tzinfo=UTC)


def test_a_terminal_gets_a_bar_with_the_projected_total_and_time_left(tmp_path):
    main_fd, term_fd = pty.openpty()
    fcntl.ioctl(term_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))  # a terminal 160 wide
    term = os.fdopen(term_fd, "w")
    try:
        bar = CrawlProgress(Settings(data_dir=tmp_path), stream=term)
        assert bar.bar is not None
        counts = {"pass": "created", "seen": 500, "new": 490, "changed": 0, "failed": 10,
                  "requests": {"listing": 1, "config": 490}, "first": T, "at": T - timedelta(days=1),
                  "stop": T - timedelta(days=4)}
        bar.update(counts)
        bar.bar.refresh()
        assert bar.bar.total == 2_000  # a quarter of the span: four times what was listed
        bar.close()
        shown = os.read(main_fd, 65536).decode(errors="replace")
    finally:
        term.close()
        os.close(main_fd)
    assert "500/2000" in shown and "new 490" in shown and "failed 10" in shown and "left ~" in shown


def test_off_a_terminal_there_is_no_bar(tmp_path):
    out = tmp_path / "log.txt"
    with out.open("w") as stream:
        bar = CrawlProgress(Settings(data_dir=tmp_path), stream=stream)
        assert bar.bar is None
        bar.update({"pass": "created", "seen": 5, "new": 5, "changed": 0, "failed": 0, "requests": {},
                    "first": T, "at": T - timedelta(days=1), "stop": T - timedelta(days=2)})
    assert out.read_text().startswith("crawl created: listed 5 (~50% of the span down to 2026-05-30 00:00)")
