// The dashboard: jobs, a job's page, providers. Reads the JSON under /v1/dashboard/ with the
// client key kept in sessionStorage, polling (no page reloads); cancel is POST /v1/jobs/{id}/cancel.
import { chart, duration, el, figures, money, renderJob } from "./jobview.js";

const KEY = "batchgate.key";
const MIN_POLL_MS = 250;  // `?poll=1` would ask the server 1,000 times a second (issue 40)
const POLL_MS = Math.max(MIN_POLL_MS, Number(new URLSearchParams(location.search).get("poll")) || 2000);
document.body.dataset.poll = String(POLL_MS);  // what the page polls at, for its tests
const CANCELLABLE = ["scheduled", "queued", "running", "paused"];  // job states a cancel applies to
const view = document.getElementById("view");
const status = document.getElementById("status");
let timer = null;

async function api(path, method = "GET") {
  const res = await fetch(path, { method, headers: { Authorization: "Bearer " + (sessionStorage.getItem(KEY) || "") } });
  const body = await res.json();
  if (!res.ok) throw new Error(body.error ? body.error.message : res.statusText);
  return body;
}

function jobsTable(jobs) {
  const table = el("table", { id: "jobs", "aria-label": "Jobs" });
  table.append(el("tr", {}, ...["job", "state", "priority", "progress", "ETA", "cost"].map((h) => el("th", {}, h))));
  for (const j of jobs) {
    const p = j.progress, done = p.succeeded + p.failed, name = j.name || j.id;
    const bar = el("progress", { max: String(p.total || 1), value: String(done), "aria-label": "Progress of " + name });
    table.append(el("tr", { "data-job": j.id },
      el("td", {}, el("a", { href: "#/jobs/" + j.id }, name)),
      el("td", { class: "state-" + j.state }, j.state), el("td", {}, j.priority),
      el("td", {}, bar, " ", done + " / " + p.total + (p.failed ? " (" + p.failed + " failed)" : "")),
      el("td", {}, duration(p.eta_s)), el("td", {}, money(j.cost_usd))));
  }
  return table;
}

async function showJobs() {
  const { data } = await api("/v1/dashboard/jobs");
  view.replaceChildren(el("h2", {}, "Jobs"), data.length ? jobsTable(data) : el("p", { class: "muted" }, "No jobs yet."));
}

async function cancel(job, button) {
  button.disabled = true;
  try { await api(job.cancel_path || "/v1/jobs/" + job.id + "/cancel", "POST"); } catch (e) { status.textContent = e.message; }
  refresh();
}

async function showJob(id) {
  const { job, page } = await api("/v1/dashboard/jobs/" + encodeURIComponent(id));
  const button = el("button", { class: "danger", id: "cancel", "aria-label": "Cancel job " + (job.name || job.id) }, "Cancel");
  button.disabled = !CANCELLABLE.includes(job.state);
  button.addEventListener("click", () => cancel(job, button));
  const head = el("div", {}, el("h2", {}, (job.name || job.id) + " "), el("span", { id: "job-state" }, job.state), " ", button);
  const body = el("div", { id: "job" });
  view.replaceChildren(head, body);
  if (page) renderJob(body, page, "");
  else figures(body, [["state", job.state], ["items", job.request_counts.total]]);
}

function providerCharts(parent, name, samples) {
  const t = samples.map((s) => s.t);
  const at = (s) => s.providers[name] || { requests: 0, rate_limited: 0, dims: {} };
  const sent = [null], r429 = [null];
  for (let i = 1; i < samples.length; i++) {
    const dt = t[i] - t[i - 1];
    sent.push(dt > 0 ? (60 * (at(samples[i]).requests - at(samples[i - 1]).requests)) / dt : null);
    r429.push(at(samples[i]).rate_limited - at(samples[i - 1]).rate_limited);
  }
  const limit = samples.map((s) => (at(s).dims.requests || {}).limit_per_min ?? null);
  const pace = samples.map((s) => (at(s).dims.requests || {}).pace_per_min ?? null);
  chart(parent, name + ": requests per minute against the limit", t, { sent, limit, pace }, "per min");
  const used = {};
  for (const dim of Object.keys(at(samples[samples.length - 1]).dims)) {
    used[dim] = samples.map((s) => ((at(s).dims[dim] || {}).used ?? null) * 100);
  }
  used["429s"] = r429;
  chart(parent, name + ": quota bucket in use (%) and 429s", t, used, "%");
}

async function showProviders() {
  const { samples } = await api("/v1/dashboard/providers");
  const charts = el("div", { class: "charts", id: "provider-charts" });
  view.replaceChildren(el("h2", {}, "Providers"), charts);
  const names = samples.length ? Object.keys(samples[samples.length - 1].providers) : [];
  if (samples.length < 2) charts.append(el("p", { class: "muted" }, "Waiting for samples."));
  else for (const name of names.sort()) providerCharts(charts, name, samples);
}

async function refresh() {
  clearTimeout(timer);
  const route = location.hash.replace(/^#\/?/, "").split("/");
  try {
    if (!sessionStorage.getItem(KEY)) view.replaceChildren(el("p", {}, "Enter a client key (batchgate keys create) above."));
    else if (route[0] === "jobs" && route[1]) await showJob(decodeURIComponent(route[1]));
    else if (route[0] === "providers") await showProviders();
    else await showJobs();
    status.textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    status.textContent = e.message;
  }
  timer = setTimeout(refresh, POLL_MS);
}

document.getElementById("key-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const input = document.getElementById("key");
  sessionStorage.setItem(KEY, input.value.trim());
  input.value = "";
  refresh();
});
window.addEventListener("hashchange", refresh);
refresh();
