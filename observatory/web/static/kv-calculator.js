// KV-cache calculator on the model page.
//
// The server computes the same table for readers without scripts (GET form). Here the
// numbers update as the inputs change, from the cache terms the server embedded
// (<script type="application/json" id="kv-data">): the cache of a model is a sum of terms
// `elements_per_token × min(context, cap)` (cap = the sliding/chunked window, or none),
// times the dtype's bytes and the batch. The MHA counterfactual has its own terms.
(function () {
  "use strict";

  var holder = document.getElementById("kv-data");
  var form = document.getElementById("kv-form");
  if (!holder || !form) return;
  var data = JSON.parse(holder.textContent);

  var result = document.querySelector(".kv-result");
  // Every figure the result line shows (blanked while an input is out of range).
  var RESULTS = ["kv-bytes", "kv-gb", "kv-gib", "kv-mha-bytes", "kv-mha-gb", "kv-mha-gib", "kv-per-token",
                 "kv-cross-gb", "kv-cross-gib", "kv-cross-source", "kv-cross-per-token"];

  function cacheBytes(terms, context, batch, dtypeBytes) {
    var elements = 0;
    terms.forEach(function (t) {
      var tokens = t.cap === null || t.cap === undefined ? context : Math.min(context, t.cap);
      elements += t.elements_per_token * tokens;
    });
    return elements * dtypeBytes * batch;
  }

  function fmtBytes(v, base, units) {
    var i = 0;
    while (i < units.length - 1 && Math.abs(v) >= base) {
      v /= base;
      i++;
    }
    var digits = v >= 100 || i === 0 ? 0 : v >= 10 ? 1 : 2;
    return v.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits }) + " " + units[i];
  }

  function decimal(v) { return fmtBytes(v, 1000, ["B", "kB", "MB", "GB", "TB", "PB"]); }
  function binary(v) { return fmtBytes(v, 1024, ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]); }

  function setText(id, text) {
    var el = document.getElementById(id);
    if (el) el.textContent = text;
  }

  function readInt(name, lo, hi) {
    var el = form.elements[name];
    var v = parseInt(el.value, 10);
    if (!isFinite(v) || v < lo || v > hi) {
      el.setAttribute("aria-invalid", "true");
      return null;
    }
    el.removeAttribute("aria-invalid");
    return v;
  }

  function update() {
    var context = readInt("context", data.limits.context_min, data.limits.context_max);
    var batch = readInt("batch", data.limits.batch_min, data.limits.batch_max);
    // encoder-decoders only: the source tokens the cross-attention caches
    var cross = data.cross_elements_per_source_token;
    var source = cross ? readInt("source", data.limits.context_min, data.limits.context_max) : 0;
    var dtype = form.elements["dtype"].value;
    var dtypeBytes = data.dtype_bytes[dtype];
    if (context === null || batch === null || source === null || dtypeBytes === undefined) {
      // No figure may stand beside the error: the last one answered other inputs.
      RESULTS.forEach(function (id) { setText(id, "—"); });
      setText("kv-saving", "");
      setText("kv-status", "Enter a context " + (cross ? "and a source " : "") + "of " + data.limits.context_min + "–" +
        data.limits.context_max.toLocaleString("en-US") + " tokens and a batch of " + data.limits.batch_min + "–" +
        data.limits.batch_max + ".");
      if (result) result.setAttribute("data-state", "error");
      return;
    }
    setText("kv-status", "");
    if (result) result.setAttribute("data-state", "ok");
    var bytes = cacheBytes(data.terms, context, batch, dtypeBytes);
    setText("kv-bytes", bytes.toLocaleString("en-US") + " B");
    setText("kv-gb", decimal(bytes));
    setText("kv-gib", binary(bytes));
    var perToken = 0;
    data.terms.forEach(function (t) { perToken += t.elements_per_token * dtypeBytes; });
    setText("kv-per-token", decimal(perToken) + " per token at full context");
    if (cross) {
      var crossBytes = cross * dtypeBytes * source * batch;
      setText("kv-cross-gb", decimal(crossBytes));
      setText("kv-cross-gib", binary(crossBytes));
      setText("kv-cross-source", source.toLocaleString("en-US"));
      setText("kv-cross-per-token", decimal(cross * dtypeBytes));
    }
    if (data.mha_terms) {
      var mha = cacheBytes(data.mha_terms, context, batch, dtypeBytes);
      setText("kv-mha-bytes", mha.toLocaleString("en-US") + " B");
      setText("kv-mha-gb", decimal(mha));
      setText("kv-mha-gib", binary(mha));
      setText("kv-saving", bytes > 0 ? (mha / bytes).toFixed(2) + "× smaller than MHA" : "");
    }
    form.setAttribute("data-updated", String(Date.now()));
  }

  form.addEventListener("input", update);
  form.addEventListener("change", update);
  update();
})();
