"""The alert pages in headless Debian Chromium against the real server: subscribe through the form,
manage with the owner token, no console errors or CSP violations, usable on a phone and without
JavaScript."""

from __future__ import annotations

import re

import pytest

# The real server, Debian Chromium and the page opener that collects console errors, failed
# requests and uncaught exceptions: the same fixtures as the site's browser tests (that module
# skips itself when Chromium or Playwright is missing, and so does this one).
from test_browser import browser, open_page, server  # noqa: F401

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("javascript", [True, False])
@pytest.mark.slow
def test_subscribe_and_manage_through_the_pages(open_page, javascript):
    page, problems = open_page("/alerts", java_script_enabled=javascript)
    assert page.locator("h1").inner_text() == "Alerts"
    page.fill("input[name=name]", "<b>ops</b> watch")
    page.select_option("select[name=kind]", "kind_share")
    page.select_option("select[name=attention_kind]", "MLA")
    page.fill("input[name=threshold_pct]", "25")
    page.fill("input[name=author]", "deepseek-ai")
    with page.expect_navigation():
        page.click("form[action='/alerts/subscribe'] button[type=submit]")
    assert page.locator("h1").inner_text() == "Subscription created"
    token = page.locator("dd code").nth(1).inner_text()
    assert re.fullmatch(r"obs_[\w-]{40,}", token)
    main = page.inner_text("main")
    assert "<b>ops</b> watch" in main and "Share of MLA >= 25% (month) [originals;author=deepseek-ai]" in main

    page.goto(page.url.rsplit("/alerts", 1)[0] + "/alerts/manage")
    page.fill("input[name=token]", token)
    with page.expect_navigation():
        page.click("form[action='/alerts/manage'] button[type=submit]")
    assert page.locator("section.subscription h2").inner_text().startswith("<b>ops</b> watch")
    with page.expect_navigation():
        page.click("button[value=pause]")
    assert "paused" in page.locator(".notice").inner_text()
    assert page.locator("section.subscription .tag").inner_text() == "paused"
    assert problems == []


def test_alert_page_fits_a_phone(open_page):
    page, problems = open_page("/alerts", viewport={"width": 390, "height": 844}, device_scale_factor=2,
                               is_mobile=True, has_touch=True)
    page.wait_for_load_state("networkidle")
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"/alerts is {overflow}px wider than the phone"
    assert problems == []

