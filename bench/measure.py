"""Measurement: running one system in a child process (CPU time and peak RSS from `os.wait4`, a hard
timeout), reading what the emulated providers saw, the quota lower bound, and one table row.

What the provider saw comes from the emulator's operator endpoint, never from the client's own
account: 429s (`rejected.rate_limit`), tokens charged at admission, duplicate completions.
Tokens on failed attempts = tokens the emulator charged − the charge of each distinct successful
request (so retries of requests that later succeeded, duplicates and lost work all count).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workload import Charger, Charges, Request, median_reply_tokens


@dataclass(slots=True)
class ChildRun:
    returncode: int
    timed_out: bool
    wall_s: float
    cpu_s: float
    maxrss_mb: float
    stderr_tail: str


def run_child(cmd: Sequence[str], timeout: float, *, env: Mapping[str, str] | None = None) -> ChildRun:
    """Run `cmd` through `launch.py` (its own CPU time and peak RSS), killing it after `timeout` s."""
    base = Path(tempfile.gettempdir()) / f"bench-child-{os.getpid()}-{time.monotonic_ns()}"
    err_path, stats_path = base.with_suffix(".err"), base.with_suffix(".json")
    launcher = [sys.executable, str(Path(__file__).with_name("launch.py")), str(stats_path), "--"]
    with err_path.open("wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [*launcher, *cmd],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=dict(env) if env is not None else None,
            start_new_session=True,  # its own process group: a timeout ends the launcher and CMD
        )
        fired = threading.Event()

        def kill() -> None:
            fired.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            proc.wait()
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
    tail = err_path.read_text(errors="replace").strip().splitlines()[-3:]
    err_path.unlink(missing_ok=True)
    stats: dict[str, Any] = json.loads(stats_path.read_text()) if stats_path.exists() else {}
    stats_path.unlink(missing_ok=True)
    return ChildRun(
        returncode=int(stats.get("returncode", -1 if proc.returncode is None else proc.returncode) or 0),
        timed_out=fired.is_set(),
        wall_s=wall,
        cpu_s=stats.get("cpu_s", 0.0),
        maxrss_mb=stats.get("maxrss_kb", 0) / 1024.0,  # Linux reports KiB
        stderr_tail=" | ".join(tail),
    )


# -- what the providers saw ----------------------------------------------------------------------


@dataclass(slots=True)
class ProviderView:
    rate_limited: int = 0  # quota 429s
    injected_429: int = 0  # 429 faults (no hint / date hint), not caused by the client
    admitted: int = 0
    completed: int = 0
    duplicates: int = 0
    tokens_charged: int = 0
    faults: dict[str, int] = field(default_factory=dict)


def provider_view(stats: Mapping[str, Any]) -> ProviderView:
    v = ProviderView()
    for p in stats["providers"].values():
        v.rate_limited += p["rejected"]["rate_limit"]
        v.injected_429 += p["faults"]["rate_limit_no_hint"] + p["faults"]["retry_after_date"]
        v.admitted += p["admitted"]
        v.completed += p["completed"]
        v.duplicates += p["duplicates"]
        v.tokens_charged += p["tokens_charged"]["total"]
        for k, n in p["faults"].items():
            v.faults[k] = v.faults.get(k, 0) + n
    return v


# -- the quota lower bound -----------------------------------------------------------------------

_DIMS = (("rpm", "requests"), ("tpm", "tokens"), ("itpm", "input_tokens"), ("otpm", "output_tokens"))


@dataclass(frozen=True, slots=True)
class Bound:
    seconds: float
    provider: str
    dimension: str
    latency_s: float

    def describe(self) -> str:
        return (
            f"{self.seconds:.1f} s ({self.provider} {self.dimension}: "
            f"{self.seconds - self.latency_s:.1f} s of quota + {self.latency_s * 1000:.0f} ms median latency)"
        )


def quota_bound(
    charges: Mapping[str, Charges],
    enforced: Mapping[str, Mapping[str, int]],
    latency: Mapping[str, Mapping[str, float]],
) -> Bound | None:
    """max over providers and dimensions of charge / (limit per second), plus the binding provider's
    median latency (ttft p50 + per-token time × median reply tokens). None if nothing is limited."""
    best: tuple[float, str, str] | None = None
    for name, c in charges.items():
        for key, attr in _DIMS:
            limit = enforced.get(name, {}).get(key)
            if not limit or not c.requests:
                continue
            t = getattr(c, attr) / (limit / 60.0)
            if best is None or t > best[0]:
                best = (t, name, key)
    if best is None:
        return None
    t, name, key = best
    lat = latency.get(name, {})
    median_latency = (
        float(lat.get("ttft_p50_ms", 0.0))
        + float(lat.get("per_token_ms", 0.0)) * median_reply_tokens(charges[name])
    ) / 1000.0
    return Bound(t + median_latency, name, key, median_latency)


# -- one row of a table --------------------------------------------------------------------------


@dataclass(slots=True)
class Row:
    system: str
    status: str = "ok"  # ok | timed out | error: ... | not installed
    requests: int = 0
    completed: int | None = None
    failed: int | None = None
    makespan: float | None = None
    extrapolated: bool = False
    ratio: float | None = None
    r429_per_req: float | None = None
    duplicates: int | None = None
    waste_tokens: int | None = None
    waste_pct: float | None = None
    cpu_ms_per_req: float | None = None
    peak_rss_mb: float | None = None
    req_per_s: float | None = None
    p50_latency_ms: float | None = None
    notes: list[str] = field(default_factory=list)


def success_charge(
    charger: Charger, families: Mapping[str, str], requests: Sequence[Request]
) -> dict[str, int]:
    """What the emulator charges each request on success (its admission cost), by request id."""
    out = {}
    for r in requests:
        inp, outp, _ = charger.cost(families[r.provider], r)
        out[r.id] = inp + outp
    return out


def fill_row(
    row: Row,
    *,
    view: ProviderView,
    bound: Bound | None,
    ok_ids: Sequence[str] | None,
    failed: int | None,
    makespan: float | None,
    cost_by_id: Mapping[str, int] | None,
    latencies_ms: Sequence[float],
) -> None:
    n = row.requests
    if ok_ids is not None:
        row.completed = len(set(ok_ids))
        row.failed = failed if failed is not None else n - row.completed
    else:  # the client never reported (timed out): count what the providers completed, once each
        row.completed = view.completed - view.duplicates
        row.failed = None
    row.makespan = makespan
    if makespan and bound is not None:
        row.ratio = makespan / bound.seconds
    if makespan and row.completed:
        row.req_per_s = row.completed / makespan
    row.r429_per_req = view.rate_limited / n if n else None
    row.duplicates = view.duplicates
    if cost_by_id is not None and ok_ids is not None:
        useful = sum(cost_by_id.get(i, 0) for i in set(ok_ids))
        row.waste_tokens = max(0, view.tokens_charged - useful)
        row.waste_pct = 100.0 * row.waste_tokens / view.tokens_charged if view.tokens_charged else 0.0
    if latencies_ms:
        row.p50_latency_ms = statistics.median(latencies_ms)
    if view.injected_429:
        row.notes.append(f"{view.injected_429} injected 429s")
