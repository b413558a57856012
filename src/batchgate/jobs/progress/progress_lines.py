"""Progress for a run whose stderr is not a terminal (a CI log, `nohup`, a pipe): one plain line
every `every_s` seconds of the run, so a log shows that it is alive and what it waits for
(an unreachable provider, a quota) — never a silent half minute.

The lines are paced by the run's own clock: the ticker (event-loop timers) hands over a snapshot
twice a second and a line is written when the run's elapsed time passes the next multiple of
`every_s`."""

from __future__ import annotations

import sys
from typing import IO

from batchgate.jobs.progress.live_display import (
    budget_text,
    count_of,
    eta_text,
    fmt_duration,
    kinds_text,
    total_text,
)
from batchgate.jobs.progress.shapes import Snapshot
from batchgate.text import plural


def progress_line(snap: Snapshot) -> str:
    waiting_for = ", ".join(f"{n} {k}" for n, k in sorted(snap.get("waiting_for", {}).items()))
    parts = [
        f"batchgate: {fmt_duration(snap['elapsed_s'])}: {snap['done']}/{total_text(snap)} done "
        f"(ok {snap['succeeded']}, failed {snap['failed']}), {snap['pending']} pending, "
        f"{snap['rate_per_s']:.1f}/s, ETA {eta_text(snap)}",
        f"{snap['in_flight']} in flight, {snap.get('waiting', 0)} waiting for quota"
        + (f" (queued at {waiting_for})" if waiting_for else "")
        + f", {snap.get('backing_off', 0)} in retry backoff",
        f"{snap.get('retries', 0)} retries, {snap['rate_limited']} x 429, "
        f"errors: {kinds_text(snap.get('errors_by_kind', {}))}",
        f"${snap['cost_usd']:.4f}",
    ]
    budget = budget_text(snap.get("budget"))
    if budget:
        parts.append(budget)
    parts += snap.get("unreachable", [])
    return "  ·  ".join(parts)


class LineSink:
    """A progress line on stderr every `every_s` seconds; start and stop events as lines too."""

    def __init__(self, every_s: float = 10.0, stream: IO[str] | None = None) -> None:
        self._every = every_s
        self._next = every_s
        self._stream = stream or sys.stderr

    def _write(self, text: str) -> None:
        self._stream.write(text + "\n")
        self._stream.flush()

    def event(self, name: str, **fields: object) -> None:
        if name == "started":
            self._write(
                f"batchgate: job {fields.get('job')}: {fields.get('pending')} to run, "
                f"{fields.get('done')} already done"
            )
        elif name == "stopping":
            self._write(f"batchgate: stopping: {fields.get('reason')}")
        elif name == "provider_unreachable":
            self._write(
                f"batchgate: {fields.get('provider')} unreachable: {fields.get('cause')} "
                f"({plural(count_of(fields.get('attempts')), 'attempt')} so far)"
            )
        elif name == "provider_reachable":
            self._write(f"batchgate: {fields.get('provider')} answers again")

    def update(self, snap: Snapshot) -> None:
        if snap["elapsed_s"] + 1e-9 < self._next:
            return
        while self._next <= snap["elapsed_s"] + 1e-9:
            self._next += self._every
        self._write(progress_line(snap))

    def close(self) -> None:
        return None
