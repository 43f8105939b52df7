"""/claims, /research, /prices and the hardware page's capacity chart in headless Debian Chromium
against the real server: charts draw with every point carrying its n (and the tooltip says it),
the two price panels share one time axis, pages fit a phone, and the numbers stay readable with
scripts off."""

from __future__ import annotations

import pytest

from observatory.testing.server import ServerFailed, offline_env, running_server

pytestmark = pytest.mark.browser

# The Chromium launch and the page opener (which collects console errors and failed requests) are
# test_browser's; this module brings its own server, without the scheduler.
from test_browser import browser, open_page  # noqa: E402,F401  (fixtures)

PAGES = ["/claims", "/research", "/prices", "/hardware"]
CHARTS = {"/research": ["chart-research", "chart-uptrain"], "/prices": ["chart-prices", "chart-kv"], "/hardware": ["chart-capacity"]}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("claims-browser") / "data"
    try:
        with running_server(data_dir, "--no-scheduler", "--log-level", "warning", env=offline_env(data_dir)) as running:
            yield running.url
    except ServerFailed as exc:
        pytest.fail(str(exc))


POINTS = """id => {
  const chart = Chart.getChart(document.querySelector(`canvas[data-chart=${id}]`));
  return chart.data.datasets.flatMap(d => d.data.map(p => ({n: p.n, y: p.y})));
}"""

TOOLTIP = """id => {
  const chart = Chart.getChart(document.querySelector(`canvas[data-chart=${id}]`));
  const di = chart.data.datasets.findIndex(d => d.data.length > 0);
  const meta = chart.getDatasetMeta(di);
  chart.tooltip.setActiveElements([{datasetIndex: di, index: 0}], {x: meta.data[0].x, y: meta.data[0].y});
  chart.update();
  return chart.tooltip.body.flatMap(b => b.lines);
}"""


@pytest.mark.parametrize("path", PAGES)
@pytest.mark.slow
def test_charts_draw_and_every_point_carries_its_n(open_page, path):
    page, problems = open_page(path)
    for chart_id in CHARTS.get(path, []):
        canvas = page.locator(f"canvas[data-chart={chart_id}]")
        assert canvas.get_attribute("data-rendered") == "1", chart_id
        points = page.evaluate(POINTS, chart_id)
        assert points and all(isinstance(p["n"], int) and p["n"] >= 1 for p in points), chart_id
        lines = page.evaluate(TOOLTIP, chart_id)
        assert any("; n = " in line for line in lines), (chart_id, lines)
    assert page.locator("details.chart-data[open]").count() == 0  # drawn charts fold their tables away
    assert problems == []


def test_price_panels_share_one_time_axis(open_page):
    page, problems = open_page("/prices")
    axes = page.evaluate("""() => ['chart-prices', 'chart-kv'].map(id => {
      const x = Chart.getChart(document.querySelector(`canvas[data-chart=${id}]`)).scales.x;
      return {min: x.min, max: x.max, left: x.left, right: x.right};
    })""")
    prices, kv = axes
    assert (prices["min"], prices["max"], prices["left"]) == (kv["min"], kv["max"], kv["left"])  # same dates and start
    assert abs(prices["right"] - kv["right"]) <= 2  # the last tick label may shift the end by a pixel
    assert problems == []


def test_claims_page_reads_as_text(open_page):
    page, problems = open_page("/claims")
    text = page.inner_text("main")
    for verdict in ("holds", "holds with caveats", "does not hold"):
        assert page.locator(f".verdict:text-is('{verdict}')").count() >= 1
    assert "5.369" in text and "0.6711" in text and "not measured yet" in text
    assert problems == []


@pytest.mark.parametrize("path", PAGES)
def test_phone_layout_has_no_horizontal_overflow(open_page, path):
    page, problems = open_page(path, viewport={"width": 390, "height": 844}, device_scale_factor=2,
                               is_mobile=True, has_touch=True)
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"{path} is {overflow}px wider than the phone"
    assert problems == []


@pytest.mark.parametrize("path", PAGES)
def test_pages_carry_their_numbers_without_javascript(open_page, path):
    page, problems = open_page(path, java_script_enabled=False)
    assert page.locator("details.chart-data[open] table").count() == page.locator("canvas").count()
    for table in page.locator("details.chart-data table").all():
        assert table.is_visible() and table.locator("tbody tr").count() > 0
    assert problems == []
