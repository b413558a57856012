// A job's page: figures, charts over its timeline and its failures. Shared by the dashboard
// (app.js imports it) and `batchgate report --html` (inlined). Needs the global `uPlot`.

const COLORS = ["#2f6fdb", "#d9822b", "#2e9e5b", "#9b51e0", "#c43d3d", "#1aa3a3", "#7a6c00"];

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  for (const c of children) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return node;
}

export function money(x) { return "$" + Number(x || 0).toFixed(4); }

export function duration(s) {
  if (s === null || s === undefined) return "–";
  if (s < 90) return Math.round(s) + " s";
  if (s < 5400) return Math.round(s / 60) + " min";
  return (s / 3600).toFixed(1) + " h";
}

// Per-interval values from cumulative columns: rate (per second) or difference, or a ratio.
function perInterval(t, cum, how, denom) {
  const out = [null];
  for (let i = 1; i < t.length; i++) {
    const d = cum[i] - cum[i - 1], dt = t[i] - t[i - 1];
    if (how === "rate") out.push(dt > 0 ? d / dt : null);
    else if (how === "ratio") { const n = denom[i] - denom[i - 1]; out.push(n > 0 ? d / n : null); }
    else out.push(d);
  }
  return out;
}

// One chart: x = wall seconds, one series per name. Marks the node with its data points.
export function chart(parent, title, t, series, unit) {
  const box = el("figure", { class: "chart", role: "img", "aria-label": title });
  box.append(el("h3", {}, title));
  parent.append(box);
  const names = Object.keys(series);
  const points = names.reduce((n, k) => n + series[k].filter((v) => v !== null && v !== undefined).length, 0);
  box.dataset.points = String(points);
  const opts = {
    width: Math.max(320, (parent.clientWidth || 600) > 700 ? 540 : 480), height: 220,
    scales: { x: { time: true } },
    axes: [{}, { label: unit, size: 60 }],
    series: [{}, ...names.map((name, i) => ({ label: name, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: false }))],
  };
  new uPlot(opts, [t, ...names.map((k) => series[k])], box);
  return box;
}

function providerSeries(tl, column, how, denom) {
  const out = {};
  for (const [name, cols] of Object.entries(tl.providers || {})) {
    out[name] = perInterval(tl.t, cols[column], how, denom ? cols[denom] : null);
  }
  return out;
}

// A provider column's last value summed: this job's own count (a server's report shares the
// gateway's counters between its jobs); `fallback` without a timeline.
function jobCount(tl, column, fallback) {
  const cols = Object.values(tl.providers || {});
  return tl.t.length ? cols.reduce((n, c) => n + c[column][c[column].length - 1], 0) : fallback;
}

export function figures(parent, items) {
  const row = el("div", { class: "figures" });
  for (const [label, value] of items) row.append(el("div", { class: "figure" }, label, el("b", {}, value)));
  parent.append(row);
}

export function failuresPart(parent, failures) {
  parent.append(el("h2", {}, "Errors"));
  const kinds = Object.entries(failures.by_kind || {});
  if (!kinds.length) { parent.append(el("p", { class: "muted", id: "no-errors" }, "No failed items.")); return; }
  const byKind = el("table", { id: "errors-by-kind", "aria-label": "Failed items by error kind" });
  byKind.append(el("tr", {}, el("th", {}, "kind"), el("th", {}, "items")));
  for (const [k, n] of kinds) byKind.append(el("tr", {}, el("td", { class: "error" }, k), el("td", {}, n)));
  parent.append(byKind);
  parent.append(el("h3", {}, "First failures"));
  const first = el("table", { id: "first-failures", "aria-label": "First failures" });
  const withMeta = failures.first.some((f) => f.metadata);  // the input lines' metadata, when any has some
  first.append(el("tr", {}, el("th", {}, "custom_id"), el("th", {}, "kind"), el("th", {}, "attempts"), el("th", {}, "message"),
    ...(withMeta ? [el("th", {}, "metadata")] : [])));
  for (const f of failures.first) {
    first.append(el("tr", {}, el("td", {}, f.custom_id), el("td", { class: "error" }, f.code),
      el("td", {}, f.attempts), el("td", { class: "msg" }, f.message),
      ...(withMeta ? [el("td", { class: "msg" }, f.metadata ? JSON.stringify(f.metadata) : "")] : [])));
  }
  parent.append(first);
}

// The charts and tables of a job's page data (`web/job_page.py`), into `parent`; `title` heads it.
export function renderJob(parent, page, title = "Job " + page.job) {
  parent.replaceChildren();
  const r = page.report, tl = page.timeline;
  if (title) parent.append(el("h2", {}, title));
  figures(parent, [
    ["state", page.state], ["items", r.task_total], ["succeeded", r.success_count],
    ["failed", r.failed_count], ["pending", r.pending_count], ["cost", money(r.cost_usd)],
    ["429s", jobCount(tl, "rate_limited", r.rate_limited)], ["elapsed", duration(r.total_elapsed_ms / 1000)],
  ]);
  const charts = el("div", { class: "charts", id: "charts" });
  parent.append(charts);
  if (tl.t.length < 2) charts.append(el("p", { class: "muted" }, "The timeline has no interval yet."));
  else {
    chart(charts, "Answers per second, by provider", tl.t, providerSeries(tl, "answered", "rate"), "per s");
    chart(charts, "429s per interval, by provider", tl.t, providerSeries(tl, "rate_limited", "diff"), "429s");
    chart(charts, "Mean latency, by provider", tl.t, providerSeries(tl, "latency_ms", "ratio", "attempts"), "ms");
    chart(charts, "Items done and failed", tl.t, { done: tl.done, failed: tl.failed }, "items");
  }
  failuresPart(parent, page.failures);
}
