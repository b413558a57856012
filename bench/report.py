"""Rendering the benchmark: one Markdown table per scenario, docs/benchmark.md (tables, machine, date,
the regenerating command) and docs/benchmark.png (makespan / bound and 429s per request per system).
"""

from __future__ import annotations

import datetime as dt
import os
import platform
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from measure import Bound, Row
from scenarios import COMPRESSION, COOKBOOK_PAUSE, Scenario

LABELS = {
    "serial": "serial loop (SDK)",
    "gather": "asyncio.gather (SDK retries)",
    "semaphore": "global semaphore (64)",
    "langchain": "LangChain abatch + InMemoryRateLimiter",
    "litellm": "LiteLLM Router (rpm/tpm)",
    "cookbook": "cookbook parallel processor",
    "batchgate": "**batchgate** (library)",
    "batchgate-cli": "**batchgate** (CLI)",
    "aiohttp-floor": "raw aiohttp (reference floor, no retries)",
}


@dataclass(slots=True)
class ScenarioResult:
    scenario: Scenario
    bound: Bound | None
    rows: list[Row]


def _f(value: float | None, fmt: str, dash: str = "—") -> str:
    return dash if value is None else format(value, fmt)


def render_table(res: ScenarioResult) -> str:
    sc = res.scenario
    per_item = sc.name == "three_providers"
    head = ["system", "status", "completed", "failed", "makespan s", "makespan / bound", "429s / req"]
    head += ["dup. completions", "tokens on failed attempts", "CPU ms / req", "req/s", "p50 latency ms"]
    if per_item:
        head.append("ms / item")
    head += ["peak RSS MB", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in res.rows:
        makespan = _f(r.makespan, ".1f") + (" (extrap.)" if r.extrapolated and r.makespan else "")
        completed = "—" if r.completed is None else f"{r.completed:,}/{r.requests:,}"
        waste = "—" if r.waste_tokens is None else f"{r.waste_tokens:,} ({_f(r.waste_pct, '.1f')}%)"
        cells = [
            LABELS.get(r.system, r.system),
            r.status,
            completed,
            "—" if r.failed is None else f"{r.failed:,}",
            makespan,
            _f(r.ratio, ".2f"),
            _f(r.r429_per_req, ".3f"),
            "—" if r.duplicates is None else str(r.duplicates),
            waste,
            _f(r.cpu_ms_per_req, ".2f"),
            _f(r.req_per_s, ",.0f"),
            _f(r.p50_latency_ms, ",.0f"),
        ]
        if per_item:
            cells.append(_f(r.makespan * 1000 / sc.items if r.makespan and sc.items else None, ".1f"))
        cells += [_f(r.peak_rss_mb, ",.0f"), "; ".join(r.notes)]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass

    return f"{os.cpu_count()} CPUs ({model}), Linux {platform.release()}, Python {platform.python_version()}"


def _versions() -> str:

    out = []
    for pkg in (
        "batchgate",
        "openai",
        "anthropic",
        "langchain-core",
        "langchain-openai",
        "litellm",
        "aiohttp",
    ):
        try:
            out.append(f"{pkg} {version(pkg)}")
        except PackageNotFoundError:
            out.append(f"{pkg} (not installed)")
    return ", ".join(out)


INTRO = """\
# Benchmark: batchgate against the usual ways of running a batch

Every scenario runs each system on the same input, against the same emulated providers
(`batchgate.emulator`, in its own process), one system at a time, each in its own child process so
its CPU time and peak RSS are its own. The emulator is reset before each system. What the providers
saw — 429s, tokens charged, duplicate completions — comes from the emulator's operator endpoint, not
from the clients' own accounts.

**Columns.** *completed / failed*: requests the client reports as succeeded / given up.
*makespan*: from the first request to the last answer (the CLI: the whole process, start-up
included). *makespan / bound*: the makespan over the quota lower bound — max over providers and
dimensions of (what the workload is charged) / (the *enforced* per-second limit), plus one median
latency; nothing can finish much below 1.0 (the providers' one-second burst allowance lets a
perfect client dip a few percent under it). *429s / req*: quota 429s the providers answered, per
request in the workload. *dup. completions*: requests the providers completed twice.
*tokens on failed attempts*: tokens the providers charged minus the charge of each distinct
successful request (share of all tokens charged); a request refused with a 429 is charged
nothing (as with real providers), so 429 storms cost time and failures, not tokens.
*CPU ms / req*: the client process's CPU time from its first request to its last answer
(start-up and imports excluded; the CLI: its whole process, start-up included) per request.
*peak RSS*: the client process's.

**Systems**, configured as their documentation recommends, each told the providers' *declared*
limits: a serial loop and `asyncio.gather` with the official `openai`/`anthropic` SDKs and their
default retries (2); the same behind one global `asyncio.Semaphore(64)`; LangChain chat models with
an `InMemoryRateLimiter` (requests/s = declared rpm / 60, bucket = one second's worth) and `abatch`;
LiteLLM's `Router` with `rpm`/`tpm` per deployment and `usage-based-routing-v2`; the OpenAI cookbook's
parallel-processor approach (two client-side buckets starting full at one minute's worth, an
up-front token estimate, up to 5 attempts, a pause after any 429), written here from its
description; batchgate as a library (`Gateway.abatch`) and as the CLI (`batchgate run`).

**Time compression.** Quotas are about {compression:g}× a typical paid tier's, so jobs that take
minutes against real providers take 10–40 s here; the cookbook's 15 s pause after a 429 is
compressed by the same factor to {pause:g} s. Per-minute limits are enforced over one-second windows.
The serial loop is stopped after its time budget and its makespan extrapolated from its pace
(marked "extrap."). Every run has a hard timeout of 3 × the bound + 60 s.

**The published three-model experiment** this reproduces sent every item to three providers and
compared a serial loop with batched concurrency (per-item latency and makespan), then hammered the
providers with unbounded concurrency and counted rate-limit errors and the share of tokens wasted
on retries. The first table is that experiment, time-compressed, with every system on one input.
"""


def write_docs(
    results: list[ScenarioResult], docs: Path, *, command: str, elapsed_s: float
) -> tuple[Path, Path]:
    docs.mkdir(parents=True, exist_ok=True)
    md, png = docs / "benchmark.md", docs / "benchmark.png"
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [INTRO.format(compression=COMPRESSION, pause=COOKBOOK_PAUSE)]
    parts.append(
        f"**Regenerate:** `{command}` (this run took {elapsed_s / 60:.1f} min).  \n"
        f"**Machine:** {machine()}.  \n**Date:** {now}.  \n**Versions:** {_versions()}.\n"
    )
    parts.append("![makespan / bound and 429s per request](benchmark.png)\n")
    for res in results:
        sc = res.scenario
        parts.append(f"## {sc.title}\n\n{sc.description}\n")
        if res.bound is not None:
            parts.append(f"Quota lower bound: {res.bound.describe()}.  ")
        if sc.targets:
            parts.append(f"Targets — {sc.targets}.\n")
        for note in sc.notes:
            parts.append(f"Note: {note}\n")
        parts.append(render_table(res) + "\n")
    md.write_text("\n".join(parts))
    chart(results, png)
    return md, png


def chart(results: list[ScenarioResult], path: Path) -> None:
    import matplotlib  # noqa: PLC0415 — the bench extra's plotting; only the chart needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 — after matplotlib.use("Agg"), as it must be

    bounded = [r for r in results if r.bound is not None]
    if not bounded:
        bounded = results[:1]
    fig, axes = plt.subplots(2, len(bounded), figsize=(4.2 * len(bounded), 7), squeeze=False)
    for col, res in enumerate(bounded):
        rows = [r for r in res.rows if r.status != "not installed"]
        names = [r.system for r in rows]
        colours = ["tab:green" if n.startswith("batchgate") else "tab:gray" for n in names]
        ratios = [min(r.ratio, 10.0) if r.ratio is not None else 0.0 for r in rows]
        ax = axes[0][col]
        ax.barh(names, ratios, color=colours)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_title(res.scenario.name, fontsize=10)
        ax.set_xlabel("makespan / quota bound (capped at 10)")
        ax.invert_yaxis()
        for i, r in enumerate(rows):
            if r.failed:
                ax.text(ratios[i], i, f" {r.failed} failed", va="center", fontsize=7, color="tab:red")
            elif r.status.startswith("timed out"):
                ax.text(ratios[i], i, " timed out", va="center", fontsize=7, color="tab:red")
        ax2 = axes[1][col]
        ax2.barh(names, [r.r429_per_req or 0.0 for r in rows], color=colours)
        ax2.set_xlabel("quota 429s per request")
        ax2.invert_yaxis()
    fig.suptitle("batchgate vs the usual ways (green: batchgate)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
