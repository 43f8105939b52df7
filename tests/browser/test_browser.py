"""The real server (``observatory serve``, scheduler on) in a subprocess on a free 127.0.0.1 port
with a fresh data directory and no network, driven by headless Debian Chromium.

Checks what only a browser can: every chart draws its data, no page logs a console error or
fails a request, the KV calculator recomputes as inputs change (and agrees with the server),
pages fit a phone's width, the trends controls apply on change, and pages still carry their
numbers with scripts off. Chromium is Debian's (/usr/bin/chromium, matching playwright 1.64's
bundled major version); no browser is ever downloaded.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from observatory.testing.server import ServerFailed, offline_env, running_server

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium); browser tests skipped",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")

LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
               "--no-first-run"]
LLAMA2_70B = "meta-llama/Llama-2-70b-hf"
GEMMA2 = "google/gemma-2-27b"  # sliding-window layers: the calculator's capped terms
HYBRID = "Qwen/Qwen3-Next-80B-A3B-Instruct"
# Every page and page state the README names: a hybrid and an MLA model, download weighting (the
# snapshot's counts are unknown: every model left out, and the page says so), the alerts page on a
# fresh store, the API reference.
PAGES = ["/", "/trends", "/trends?period=quarter&weighting=count", "/trends?weighting=downloads",
         "/trends?population=all&period=month", "/models", f"/models/{LLAMA2_70B}", f"/models/{HYBRID}",
         "/models/deepseek-ai/DeepSeek-V3", "/models/ai21labs/AI21-Jamba-1.5-Large",
    "/models/google/mt5-base", "/hardware", "/methodology", "/crawl", "/benchmarks", "/alerts",
         "/claims", "/research", "/prices", "/api/v1/docs",
         "/compare?models=meta-llama/Meta-Llama-3-70B,Qwen/Qwen3-32B,deepseek-ai/DeepSeek-V3"]


def screenshot(page, path: str, width: int, shots_dir: Path) -> None:
    """A full-page screenshot, kept as a test artifact (conftest prints the folder)."""
    name = (path.strip("/").replace("/", "_").replace("?", "_").replace("&", "_").replace("=", "-") or "home")
    page.screenshot(path=str(shots_dir / f"{name}-{width}.png"), full_page=True)
START_TIMEOUT_S = 90


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``observatory serve`` (scheduler on) on a fresh data dir; no Hub is reachable."""
    data_dir = tmp_path_factory.mktemp("browser") / "data"
    env = offline_env(data_dir, OBSERVATORY_HUB_TIMEOUT_S="2")
    try:
        with running_server(data_dir, "--log-level", "warning", env=env, timeout=START_TIMEOUT_S) as running:
            yield running.url
    except ServerFailed as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def open_page(browser, server):
    """``open_page(path, **context_options)`` -> (page, problems): every console error, uncaught
    exception and failed or 4xx/5xx request is collected in ``problems``."""
    contexts = []

    def opener(path: str, **options):
        context = browser.new_context(**{"viewport": {"width": 1280, "height": 900}, **options})
        contexts.append(context)
        page = context.new_page()
        problems: list[str] = []
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} {r.failure}"))
        page.on("response", lambda r: problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
        page.goto(server + path, wait_until="load")
        return page, problems

    yield opener
    for context in contexts:
        context.close()


CHART_STATE = """() => Array.from(document.querySelectorAll('canvas[data-chart]')).map(c => {
  const chart = Chart.getChart(c);
  const ctx = c.getContext('2d');
  const pixels = ctx.getImageData(0, 0, c.width, c.height).data;
  let painted = 0;
  for (let i = 3; i < pixels.length; i += 4 * 7) { if (pixels[i] > 0) painted++; }
  return {
    id: c.getAttribute('data-chart'), rendered: c.getAttribute('data-rendered'),
    width: c.width, height: c.height, painted: painted,
    datasets: chart ? chart.data.datasets.length : 0,
    points: chart ? chart.data.datasets.reduce((n, d) => n + d.data.filter(v =>
        v !== null && (typeof v !== 'object' || (v.y !== null && v.y !== undefined))).length, 0) : 0,
  };
})"""


@pytest.mark.parametrize("path", PAGES)
@pytest.mark.slow
def test_page_draws_its_charts_without_errors(open_page, path, screenshots):
    page, problems = open_page(path)
    page.wait_for_load_state("networkidle")
    if path == "/api/v1/docs":  # the vendored Swagger UI renders every operation, under the CSP
        page.wait_for_selector(".opblock", timeout=15_000)
        assert page.locator(".opblock").count() >= 20
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"{path} is {overflow}px wider than 1280 px"
    screenshot(page, path, 1280, screenshots)
    if path != "/api/v1/docs":  # Swagger UI's own tables are its own
        clipped = page.evaluate(CLIPPED_TABLES)
        assert clipped == [], (path, clipped)
    assert page.evaluate(STRAY_SWATCHES) == [], path
    charts = page.evaluate(CHART_STATE)
    expected = page.locator("canvas[data-chart]").count()
    assert len(charts) == expected
    for chart in charts:
        assert chart["rendered"] == "1", chart
        assert chart["datasets"] > 0 and chart["points"] > 0 or weighs_nothing(page, chart), chart
        assert chart["width"] > 100 and chart["height"] > 100, chart
        assert chart["painted"] > 200, chart  # the canvas is not blank
    assert problems == []
    if expected:  # the chart carries the data now; its table folds away but stays in the page
        assert page.locator("details.chart-data[open]").count() == 0
        assert page.locator("details.chart-data table").count() == expected


# Tables at 1280 px: none needs a sideways scroll, and no cell's content spills past its box.
CLIPPED_TABLES = """() => {
  const out = [];
  document.querySelectorAll('table').forEach(t => {
    if (!t.checkVisibility()) return;  // folded away (a chart's data table): not on screen
    const box = t.closest('.table-wrap') || t.parentElement;
    const name = (t.caption && t.caption.textContent.trim().slice(0, 50)) || t.className || 'table';
    if (t.scrollWidth > box.clientWidth + 1) out.push(name + ': ' + t.scrollWidth + ' px in ' + box.clientWidth);
    t.querySelectorAll('td, th').forEach(c => {
      if (c.scrollWidth > c.clientWidth + 1) out.push(name + ' cell "' + c.textContent.trim().slice(0, 30) + '"');
    });
  });
  return out;
}"""

# Each legend swatch takes the colour of a full mark of the series it names (a bar of a period
# that is not thin, the line, the points), never a colour no series is drawn in.
STRAY_SWATCHES = """() => {
  const norm = (c) => { const x = document.createElement('canvas').getContext('2d'); x.fillStyle = c; return x.fillStyle; };
  const out = [];
  document.querySelectorAll('canvas[data-chart]').forEach(canvas => {
    const chart = Chart.getChart(canvas);
    if (!chart || !chart.legend || !chart.legend.legendItems) return;
    const thin = (chart.$spec && chart.$spec.thin) || [];
    chart.legend.legendItems.forEach(item => {
      const ds = chart.data.datasets[item.datasetIndex];
      if (!ds) return;
      // what the reader sees of a series: its fills (bars, points, bands) and, for a line, its stroke;
      // a bar's white separating border names no series
      const drawn = new Set();
      const marks = [ds.backgroundColor, ds.pointBackgroundColor];
      if (ds.showLine) marks.push(ds.borderColor);
      marks.forEach(v => {
        if (Array.isArray(v)) {
          v.forEach((c, j) => { if (!thin[j] || thin.every(Boolean)) drawn.add(norm(c)); });
        } else if (typeof v === 'string') { drawn.add(norm(v)); }
      });
      const swatch = typeof item.fillStyle === 'string' ? norm(item.fillStyle) : String(item.fillStyle);
      if (!drawn.has(swatch)) {
        out.push(canvas.getAttribute('data-chart') + ': "' + item.text + '" ' + swatch + ' not in ' + [...drawn].join(','));
      }
    });
  });
  return out;
}"""


def _kv_text(page) -> dict:
    """The result line's figures (the cross-attention ones where the model has them)."""
    keys = ["bytes", "gb", "gib", "mha-bytes", "saving", "cross-gb", "cross-gib", "cross-per-token"]
    return page.evaluate("""(keys) => Object.fromEntries(keys.map(k => [k, document.getElementById('kv-' + k)])
        .filter(([, el]) => el).map(([k, el]) => [k, el.innerText]))""", keys)


@pytest.mark.parametrize("model_id, context, batch, dtype", [
    (LLAMA2_70B, 2048, 1, "fp16"),  # the seed example: 671,088,640 B against 5,368,709,120 B
    (LLAMA2_70B, 100000, 3, "fp8"),
    (GEMMA2, 50000, 2, "bf16"),  # past the 4,096-token window: sliding layers stop growing
    ("deepseek-ai/DeepSeek-V3", 131072, 4, "fp32"),
    ("google/mt5-base", 1000, 2, "fp8"),  # encoder-decoder: the cross-attention cache at 1,000 source tokens
])
def test_kv_calculator_updates_and_agrees_with_the_server(open_page, server, model_id, context, batch, dtype):
    page, problems = open_page(f"/models/{model_id}")
    before = _kv_text(page)
    page.fill("#kv-form input[name=context]", str(context))
    page.fill("#kv-form input[name=batch]", str(batch))
    page.select_option("#kv-form select[name=dtype]", dtype)
    if page.locator("#kv-form input[name=source]").count():  # as many source tokens as the server's default
        page.fill("#kv-form input[name=source]", str(context))
    live = _kv_text(page)
    assert live != before
    # The server's own rendering (scripts off, so kv-calculator.js does not touch it).
    server_page, _ = open_page(f"/models/{model_id}?context={context}&batch={batch}&dtype={dtype}",
                               java_script_enabled=False)
    assert live == _kv_text(server_page)  # the same numbers, computed twice from the same terms
    if (model_id, context) == (LLAMA2_70B, 2048):
        assert live["bytes"] == "671,088,640 B" and live["mha-bytes"] == "5,368,709,120 B"
    page.fill("#kv-form input[name=context]", "0")
    assert "Enter a context" in page.locator("#kv-status").inner_text()
    assert page.locator("#kv-form input[name=context][aria-invalid=true]").count() == 1
    # an error and a result never stand side by side: every figure of the result line is blanked
    shown = _kv_text(page)
    assert all(not any(ch.isdigit() for ch in text) for text in shown.values()), shown
    assert page.locator(".kv-result[data-state=error]").count() == 1
    page.fill("#kv-form input[name=context]", str(context))
    assert _kv_text(page) == live and page.locator("#kv-status").inner_text() == ""
    assert problems == []


@pytest.mark.parametrize("path", PAGES)
def test_phone_layout_has_no_horizontal_overflow(open_page, path, screenshots):
    page, problems = open_page(path, viewport={"width": 390, "height": 844}, device_scale_factor=2,
                               is_mobile=True, has_touch=True)
    page.wait_for_load_state("networkidle")
    screenshot(page, path, 390, screenshots)
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0, f"{path} is {overflow}px wider than the phone"
    for chart in page.evaluate(CHART_STATE):
        assert chart["rendered"] == "1" and (chart["points"] > 0 or weighs_nothing(page, chart)), chart
    assert problems == []


def weighs_nothing(page, chart: dict) -> bool:
    """A weighted chart may be empty only where the page says every model's weight is unknown;
    the G distribution (one point per model, unweighted) never is."""
    return chart["id"] != "chart-g-dist" and page.locator("#nothing-to-weigh").count() == 1


def test_trends_controls_apply_on_change(open_page):
    page, problems = open_page("/trends")
    with page.expect_navigation():
        page.select_option("form.controls select[name=period]", "quarter")
    assert "period=quarter" in page.url
    labels = page.evaluate("Chart.getChart(document.querySelector('canvas[data-chart=chart-kind-share]')).data.labels")
    assert labels and all("-Q" in label for label in labels)
    with page.expect_navigation():
        page.select_option("form.controls select[name=weighting]", "downloads")
    assert "weighting=downloads" in page.url and "period=quarter" in page.url
    assert problems == []


def test_select_rows_on_the_model_list_then_compare(open_page):
    page, problems = open_page("/models?q=Qwen3-3&size=10")
    boxes = page.locator("#compare-form input[type=checkbox][name=models]")
    assert boxes.count() >= 2
    chosen = [boxes.nth(i).get_attribute("value") for i in (0, 1)]
    boxes.nth(0).check()
    boxes.nth(1).check()
    with page.expect_navigation():
        page.click("#compare-form button[type=submit]")
    assert page.url.split("?")[0].endswith("/compare")
    headers = [a.get_attribute("title") for a in page.locator("table.compare thead th a").all()]
    assert headers == chosen  # both models, in the list's order
    page.wait_for_load_state("networkidle")
    (chart,) = [c for c in page.evaluate(CHART_STATE) if c["id"] == "chart-kv-context"]
    assert chart["rendered"] == "1" and chart["datasets"] == 2 and chart["points"] == 22
    # and from a model page: its compare-with form
    model, _ = open_page(f"/models/{LLAMA2_70B}")
    model.fill("form.compare-with input[name=models][type=text]", "meta-llama/Meta-Llama-3-70B")
    with model.expect_navigation():
        model.click("form.compare-with button[type=submit]")
    compared = [a.get_attribute("title") for a in model.locator("table.compare thead th a").all()]
    assert compared == [LLAMA2_70B, "meta-llama/Meta-Llama-3-70B"]
    assert problems == []


def test_pages_work_without_javascript(open_page):
    page, problems = open_page("/trends?period=quarter", java_script_enabled=False)
    assert page.locator("html.no-js").count() == 1
    assert page.locator("details.chart-data[open] table").count() == page.locator("canvas").count() > 0
    assert page.locator(".chart-box").first.is_hidden()
    assert page.locator("details.chart-data table").first.is_visible()
    page.fill("input[name=author]", "meta-llama")
    with page.expect_navigation():
        page.click("form.controls button[type=submit]")
    assert "author=meta-llama" in page.url and "originals;author=meta-llama" in page.inner_text("main")
    model, _ = open_page(f"/models/{LLAMA2_70B}?context=2048&dtype=fp16", java_script_enabled=False)
    assert model.locator("#kv-bytes").inner_text() == "671,088,640 B"
    assert problems == []


def test_scheduler_runs_in_the_served_process(server):
    """``observatory serve`` runs the crawl schedule in-process: a crawl run is recorded (no Hub is
    reachable: "unreachable", or still running), and pages keep answering meanwhile."""
    deadline = time.monotonic() + 45
    runs: list = []
    while not runs and time.monotonic() < deadline:
        runs = httpx.get(server + "/crawl.json", timeout=5).json()["runs"]
        time.sleep(0.5)
    assert runs, "no crawl run recorded by the in-process scheduler"
    assert runs[0]["status"] in ("running", "unreachable")
    assert httpx.get(server + "/", timeout=5).status_code == 200
