"""What every system runner shares: the `Recorder` of per-request outcomes and `error_kind`.

A runner gets the `Spec` and a `Recorder`; it calls `rec.start()` just before its first request and
`rec.ok(id, latency_ms)` / `rec.fail(id, latency_ms, kind)` once per request, then returns. The child
entry point (`bench/run_system.py`) writes the recorder to JSON for the parent. The official SDK
clients live in `systems.sdk`, so systems that do not use them do not import them: each child's
heap (and so its garbage collector's work, counted in its CPU per request) is its own.
"""

from __future__ import annotations

import time
from typing import Any


class Recorder:
    def __init__(self) -> None:
        self.items: dict[str, tuple[bool, float | None, str | None]] = {}
        self.started = time.perf_counter()
        self.finished: float | None = None
        self.notes: list[str] = []
        self.extrapolated_makespan: float | None = None
        self._cpu_started = time.process_time()
        self._cpu_run: float | None = None

    def start(self) -> None:
        self.started = time.perf_counter()
        self._cpu_started = time.process_time()

    def ok(self, rid: str, latency_ms: float | None) -> None:
        self.items[rid] = (True, latency_ms, None)

    def fail(self, rid: str, latency_ms: float | None, kind: str) -> None:
        self.items[rid] = (False, latency_ms, kind)

    def finish(self) -> None:
        if self.finished is None:
            self.finished = time.perf_counter()
            self._cpu_run = time.process_time() - self._cpu_started

    def to_json(self) -> dict[str, Any]:
        self.finish()
        assert self.finished is not None
        kinds: dict[str, int] = {}
        for ok, _, kind in self.items.values():
            if not ok and kind:
                kinds[kind] = kinds.get(kind, 0) + 1
        return {
            "makespan": self.finished - self.started,
            "ok_ids": [rid for rid, (ok, _, _) in self.items.items() if ok],
            "failed": sum(1 for ok, _, _ in self.items.values() if not ok),
            "latencies_ms": [lat for ok, lat, _ in self.items.values() if ok and lat is not None],
            "failure_kinds": kinds,
            "notes": self.notes,
            "extrapolated_makespan": self.extrapolated_makespan,
            "cpu_run_s": self._cpu_run,  # CPU from the first request to the last answer
        }


def error_kind(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    return f"{name}({status})" if status else name
