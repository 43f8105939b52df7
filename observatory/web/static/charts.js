// Draws every chart on a page from data the server embedded as JSON.
//
// Markup contract (templates/_chart.html):
//   <canvas data-chart="ID">  +  <script type="application/json" id="ID">{spec}</script>
// The spec holds data only; how it looks lives here. Two chart types:
//   "share": stacked bars, one per period, one segment per series (fractions 0..1).
//   "xy":    lines, points and bands over a time, linear or log x axis.
// Colours are read from the stylesheet's custom properties (Okabe–Ito palette), so the
// CSS is the one place that says which colour an attention kind has.
// Sample sizes: a point's "n" is named in its tooltip, a "thin" point (too few models) is
// drawn hollow or pale, and a spec's "counts" become a count strip under the plot.
(function () {
  "use strict";

  if (typeof window.Chart === "undefined") {
    return; // the vendored library failed to load; the tables under the charts remain
  }

  var css = getComputedStyle(document.documentElement);

  function colour(key, index) {
    var name = key ? "--" + String(key).replace(":", "-") : "--series-" + ((index % 8) + 1);
    var value = css.getPropertyValue(name).trim();
    if (!value) {
      value = css.getPropertyValue("--series-" + ((index % 8) + 1)).trim() || "#0072B2";
    }
    return value;
  }

  function alpha(hex, a) {
    var h = hex.replace("#", "");
    if (h.length === 3) {
      h = h[0] + h[0] + h[1] + h[1] + h[2] + h[2];
    }
    var n = parseInt(h, 16);
    return "rgba(" + ((n >> 16) & 255) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + a + ")";
  }

  // ---- number formatting (units are stated, never implied) -----------------------

  function sig(v, digits) {
    if (v === 0) return "0";
    var a = Math.abs(v);
    if (a >= 1000 || Number.isInteger(v)) return Math.round(v).toLocaleString("en-US");
    return Number(v.toPrecision(digits || 3)).toString();
  }

  function scaled(v, units) {
    // units: [[threshold, divisor, suffix], ...] from largest to smallest
    for (var i = 0; i < units.length; i++) {
      if (Math.abs(v) >= units[i][0]) return sig(v / units[i][1], 3) + " " + units[i][2];
    }
    return sig(v, 3) + " " + units[units.length - 1][2].replace(/^[kMGTPE]/, "");
  }

  var BYTES = [[1e15, 1e15, "PB"], [1e12, 1e12, "TB"], [1e9, 1e9, "GB"], [1e6, 1e6, "MB"], [1e3, 1e3, "kB"], [0, 1, "B"]];
  var FLOPS = [[1e15, 1e15, "PFLOP/s"], [1e12, 1e12, "TFLOP/s"], [1e9, 1e9, "GFLOP/s"], [0, 1, "FLOP/s"]];

  function formatter(unit) {
    switch (unit) {
      case "share":
        return function (v) { return sig(v * 100, 3) + "%"; };
      case "bytes":
        return function (v) { return scaled(v, BYTES); };
      case "flops":
        return function (v) { return scaled(v, FLOPS); };
      case "flop_per_byte":
        return function (v) { return sig(v, 3) + " FLOP/B"; };
      case "usd":
        return function (v) { return "$" + sig(v, 3); };
      case "seconds":
        return function (v) {
          if (v >= 1) return sig(v, 3) + " s";
          if (v >= 1e-3) return sig(v * 1e3, 3) + " ms";
          return sig(v * 1e6, 3) + " µs";
        };
      default:
        return function (v) { return sig(v, 3); };
    }
  }

  function monthLabel(ms) {
    var d = new Date(ms);
    var m = d.getUTCMonth() + 1;
    return d.getUTCFullYear() + "-" + (m < 10 ? "0" : "") + m;
  }

  function dayLabel(ms) {
    return new Date(ms).toISOString().slice(0, 10);
  }

  // Ticks on 1 January of each year (or every other year over long spans), not on
  // whatever round millisecond count a linear scale would pick.
  function yearTicks(scale) {
    var first = new Date(scale.min).getUTCFullYear();
    var last = new Date(scale.max).getUTCFullYear();
    var step = last - first > 10 ? 2 : 1;
    var ticks = [];
    for (var y = first; y <= last + 1; y += step) {
      var t = Date.UTC(y, 0, 1);
      if (t >= scale.min && t <= scale.max) ticks.push({ value: t });
    }
    if (ticks.length < 2) {
      // short spans: quarters
      for (var q = Date.UTC(first, 0, 1); q <= scale.max; ) {
        var d = new Date(q);
        if (q >= scale.min) ticks.push({ value: q });
        q = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 3, 1);
      }
    }
    scale.ticks = ticks;
  }

  // Powers of two (1, 2, 4, ... 64) on a log axis whose spec says base 2, as G is read.
  function powerOfTwoTicks(scale) {
    var ticks = [];
    for (var v = 1; v <= scale.max * 1.0001; v *= 2) {
      if (v >= scale.min * 0.9999) ticks.push({ value: v });
    }
    scale.ticks = ticks;
  }

  function axis(spec, which) {
    spec = spec || {};
    var kind = spec.type || "linear";
    var out = {
      type: kind === "log" ? "logarithmic" : "linear",
      title: { display: !!spec.title, text: spec.title || "" },
      grid: { color: "rgba(0,0,0,0.07)" },
      ticks: {},
    };
    if (spec.min !== undefined && spec.min !== null) out.min = spec.min;
    if (spec.max !== undefined && spec.max !== null) out.max = spec.max;
    if (kind === "time") {
      out.afterBuildTicks = yearTicks;
      out.ticks.callback = function (v) { return monthLabel(v).slice(0, 4) + (new Date(v).getUTCMonth() ? "-" + monthLabel(v).slice(5) : ""); };
      out.ticks.autoSkip = false;
      out.ticks.maxRotation = 0;
    } else if (kind === "log" && spec.base === 2) {
      out.afterBuildTicks = powerOfTwoTicks;
      out.ticks.callback = function (v) { return String(v); };
      out.ticks.autoSkip = false;
    } else {
      // tick labels stay short; the axis title carries the unit (tooltips spell it out)
      var f = spec.unit === "flop_per_byte" ? formatter(null) : formatter(spec.unit);
      out.ticks.callback = function (v) {
        if (out.type === "logarithmic") {
          // label only 1-2-5 steps on log axes
          var m = v / Math.pow(10, Math.floor(Math.log10(v) + 1e-9));
          if (Math.abs(m - 1) > 1e-6 && Math.abs(m - 2) > 1e-6 && Math.abs(m - 5) > 1e-6) return "";
        }
        return f(v);
      };
    }
    if (which === "x") out.ticks.maxTicksLimit = 12;
    // panels stacked on one time axis reserve the same width for their y labels, so the x axes line up
    if (spec.width) out.afterFit = function (scale) { scale.width = spec.width; };
    return out;
  }

  function xLabel(spec, v) {
    if (!spec || spec.type === "time") return spec && spec.resolution === "day" ? dayLabel(v) : monthLabel(v);
    return formatter(spec.unit)(v);
  }

  // ---- sample sizes ------------------------------------------------------------------

  var STRIP = 18; // px under the plot for the count strip
  var THIN_NOTE = " (thin sample)";

  function nText(n, label) {
    return (label || "models") + ": " + (n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"));
  }

  // Bars whose height is the number of models behind each period, drawn below the x axis.
  var countStrip = {
    id: "countStrip",
    afterDraw: function (chart) {
      var spec = chart.$spec;
      if (!spec || !spec.counts || !spec.counts.length) return;
      var ctx = chart.ctx, x = chart.scales.x, top = chart.height - STRIP + 2, h = STRIP - 6;
      var max = 0;
      spec.counts.forEach(function (c) { max = Math.max(max, typeof c === "number" ? c : c.n || 0); });
      if (!max) return;
      ctx.save();
      var step = spec.type === "share" && spec.counts.length > 1
        ? Math.abs(x.getPixelForValue(1) - x.getPixelForValue(0)) : 0;
      spec.counts.forEach(function (c, i) {
        var n = typeof c === "number" ? c : c.n, thin = typeof c === "number" ? spec.thin && spec.thin[i] : c.thin;
        var left, right;
        if (spec.type === "share") {
          var mid = x.getPixelForValue(i);
          left = mid - step * 0.35;
          right = mid + step * 0.35;
        } else {
          left = x.getPixelForValue(c.x) + 1;
          right = x.getPixelForValue(c.x2) - 1;
        }
        left = Math.max(left, chart.chartArea.left);
        right = Math.min(right, chart.chartArea.right);
        if (right <= left || !n) return;
        var bar = Math.max(1, (h * n) / max);
        ctx.fillStyle = thin ? "rgba(120,120,120,0.25)" : "rgba(80,80,80,0.55)";
        ctx.fillRect(left, top + h - bar, Math.max(1, right - left), bar);
      });
      ctx.fillStyle = "#555";
      ctx.font = "10px system-ui, sans-serif";
      ctx.textBaseline = "top";
      ctx.fillText("n, max " + max.toLocaleString("en-US"), 2, top - 1);
      ctx.restore();
    },
  };

  // Device names beside the points of series that ask for it (ridge points); a label that
  // would overlap one already drawn is left to the tooltip.
  var pointLabels = {
    id: "pointLabels",
    afterDatasetsDraw: function (chart) {
      var ctx = chart.ctx, drawn = [];
      ctx.save();
      ctx.font = "10px system-ui, sans-serif";
      ctx.fillStyle = "#333";
      ctx.textBaseline = "middle";
      chart.data.datasets.forEach(function (ds, di) {
        if (!ds.labelPoints || !chart.isDatasetVisible(di)) return;
        chart.getDatasetMeta(di).data.forEach(function (el, i) {
          var name = ds.data[i] && ds.data[i].name;
          if (!name) return;
          var w = ctx.measureText(name).width, bx = el.x + 6, by = el.y - 6;
          if (bx + w > chart.chartArea.right) bx = el.x - 6 - w;
          var box = [bx, by - 6, bx + w, by + 6];
          var clash = drawn.some(function (b) { return box[0] < b[2] && box[2] > b[0] && box[1] < b[3] && box[3] > b[1]; });
          if (clash) return;
          drawn.push(box);
          ctx.fillText(name, bx, by);
        });
      });
      ctx.restore();
    },
  };

  // ---- chart builders ---------------------------------------------------------------

  // Chart.js paints a series' swatch with its first mark's colour: the pale bar or the hollow
  // point when the first period is thin, a colour no full mark of the series has.
  function solidSwatches(chart) {
    var items = window.Chart.defaults.plugins.legend.labels.generateLabels(chart);
    items.forEach(function (item) {
      var ds = chart.data.datasets[item.datasetIndex];
      if (ds && ds.$colour) item.fillStyle = ds.$colour;
    });
    return items;
  }

  function shareChart(spec) {
    var pct = formatter("share");
    var thin = spec.thin || [];
    return {
      type: "bar",
      data: {
        labels: spec.labels,
        datasets: spec.series.map(function (s, i) {
          var c = colour(s.colour, i);
          return {
            label: s.label,
            data: s.values,
            // a thin period's bar is pale: too few models to read a mix from
            backgroundColor: spec.labels.map(function (_, j) { return thin[j] ? alpha(c, 0.3) : c; }),
            borderColor: "#ffffff",
            borderWidth: 0.5,
            stack: "share",
            $colour: c, // the series' colour: its legend swatch, whatever the first bar is
          };
        }),
      },
      options: {
        scales: {
          x: { stacked: true, grid: { display: false }, ticks: { autoSkip: true, maxRotation: 0 } },
          y: Object.assign(axis({ unit: "share", title: spec.y_title }, "y"), { stacked: true, min: 0, max: 1 }),
        },
        plugins: {
          legend: { labels: { generateLabels: solidSwatches } },
          tooltip: {
            mode: "index",
            callbacks: {
              label: function (ctx) { return ctx.dataset.label + ": " + pct(ctx.parsed.y); },
              footer: function (items) {
                var i = items.length ? items[0].dataIndex : -1;
                if (i < 0 || !spec.counts) return "";
                return nText(spec.counts[i], spec.count_label) + (thin[i] ? THIN_NOTE : "");
              },
            },
          },
        },
      },
    };
  }

  function xyChart(spec) {
    var yf = formatter(spec.y && spec.y.unit);
    var datasets = spec.series.map(function (s, i) {
      var c = colour(s.colour, i);
      var line = s.style !== "points";
      var ds = {
        label: s.label,
        data: s.points,
        showLine: line,
        borderColor: s.style === "band" ? alpha(c, 0.0) : c,
        backgroundColor: s.style === "band" ? alpha(c, 0.18) : alpha(c, s.style === "points" ? 0.55 : 1),
        pointRadius: line ? (s.point_radius === undefined ? 2 : s.point_radius) : (s.point_radius || 3),
        pointHoverRadius: 5,
        borderWidth: s.style === "band" ? 0 : (s.width || 2),
        borderDash: s.dashed ? [6, 4] : [],
        pointStyle: s.shape || "circle",
        fill: s.fill_to === undefined || s.fill_to === null ? false : s.fill_to,
        hidden: !!s.hidden,
        tension: 0,
        spanGaps: false, // an empty period is a gap, not a straight line across it
        order: s.style === "points" ? 0 : 1,
      };
      if (!line) {
        ds.pointBorderColor = alpha(c, 0.9);
        ds.pointBorderWidth = 1;
      }
      if (s.label_points) ds.labelPoints = true;
      if (s.points.some(function (p) { return p && p.thin; })) {
        // a thin period's point is hollow and the line into or out of it dashed
        var fill = ds.backgroundColor;
        ds.pointBackgroundColor = function (ctx) { return ctx.raw && ctx.raw.thin ? "#ffffff" : fill; };
        ds.pointBorderColor = c;
        ds.pointBorderWidth = 1.5;
        if (line && s.style !== "band") {
          ds.pointRadius = Math.max(ds.pointRadius, 3);
          ds.segment = {
            borderDash: function (ctx) {
              var a = s.points[ctx.p0DataIndex], b = s.points[ctx.p1DataIndex];
              return (a && a.thin) || (b && b.thin) ? [3, 3] : undefined;
            },
          };
        }
      }
      if (s.style === "band") {
        ds.pointRadius = 0;
        ds.pointHoverRadius = 0;
      }
      ds.$colour = ds.backgroundColor; // the swatch: a full mark's fill, never a thin (hollow) one's
      return ds;
    });
    return {
      type: "scatter",
      data: { datasets: datasets },
      options: {
        scales: { x: axis(spec.x, "x"), y: axis(spec.y, "y") },
        plugins: {
          legend: {
            labels: {
              // bands are explained by the series they surround; keep the legend short
              filter: function (item, data) { return !data.datasets[item.datasetIndex].label.startsWith("_"); },
              usePointStyle: !!spec.legend_shapes, // where shape, not only colour, tells series apart
              generateLabels: solidSwatches,
            },
          },
          tooltip: {
            callbacks: {
              title: function (items) {
                if (!items.length) return "";
                var raw = items[0].raw || {};
                return raw.name ? raw.name : xLabel(spec.x, items[0].parsed.x);
              },
              label: function (ctx) {
                var raw = ctx.raw || {};
                var label = ctx.dataset.label.replace(/^_/, "");
                var text = label + ": " + yf(ctx.parsed.y);
                if (raw.name) text += " (" + xLabel(spec.x, ctx.parsed.x) + ")";
                if (raw.n !== undefined) text += "; n = " + Number(raw.n).toLocaleString("en-US") +
                  (spec.n_label ? " " + spec.n_label : "") + (raw.thin ? THIN_NOTE : "");
                return text;
              },
            },
          },
        },
      },
    };
  }

  var BUILDERS = { share: shareChart, xy: xyChart };

  function render(canvas) {
    var id = canvas.getAttribute("data-chart");
    var holder = document.getElementById(id);
    if (!holder) {
      console.error("chart data block missing: " + id);
      return;
    }
    var spec = JSON.parse(holder.textContent);
    var build = BUILDERS[spec.type];
    if (!build) {
      console.error("unknown chart type: " + spec.type);
      return;
    }
    var config = build(spec);
    config.plugins = [countStrip, pointLabels];
    config.options = Object.assign(
      {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        interaction: { mode: "nearest", intersect: false },
      },
      config.options
    );
    config.options.plugins = Object.assign(
      { legend: { position: "bottom", labels: { boxWidth: 12 } } },
      config.options.plugins || {}
    );
    if (config.options.plugins.legend && !config.options.plugins.legend.position) {
      config.options.plugins.legend.position = "bottom";
      config.options.plugins.legend.labels = Object.assign({ boxWidth: 12 }, config.options.plugins.legend.labels);
    }
    if (spec.counts && spec.counts.length) {
      // room under the x axis for the count strip; the legend moves to the top
      config.options.layout = { padding: { bottom: STRIP } };
      config.options.plugins.legend.position = "top";
    }
    var chart = new window.Chart(canvas, config);
    chart.$spec = spec;
    chart.draw();
    canvas.setAttribute("data-rendered", "1");
    // the chart now carries the data; fold its table away (it stays one click away)
    var figure = canvas.closest("figure");
    var details = figure && figure.querySelector("details.chart-data");
    if (details) details.open = false;
  }

  document.querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
    try {
      render(canvas);
    } catch (err) {
      console.error("chart " + canvas.getAttribute("data-chart") + " failed: " + err);
    }
  });

  // Controls forms (trends population/weighting) apply on change; the submit button
  // stays for readers without scripts.
  document.querySelectorAll("form[data-autosubmit] select").forEach(function (el) {
    el.addEventListener("change", function () { el.form.requestSubmit ? el.form.requestSubmit() : el.form.submit(); });
  });
})();
