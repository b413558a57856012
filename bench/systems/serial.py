"""A plain loop: one request at a time with the official SDK (default retries).

It stops at the spec's `serial_budget` seconds and extrapolates the makespan from its pace, so a
baseline that would take an hour does not hold up the benchmark (the table says so).
"""

from __future__ import annotations

import asyncio
import time

from workload import Spec

from systems.common import Recorder
from systems.sdk import SdkClients


async def _main(spec: Spec, rec: Recorder) -> None:
    clients = SdkClients(spec)
    rec.start()
    deadline = time.perf_counter() + spec.serial_budget
    done = 0
    for r in spec.requests:
        if time.perf_counter() >= deadline:
            break
        await clients.send_recorded(r, rec)
        done += 1
    rec.finish()
    if done < len(spec.requests):
        assert rec.finished is not None
        elapsed = rec.finished - rec.started
        rec.extrapolated_makespan = elapsed / done * len(spec.requests)
        rec.notes.append(f"stopped after {spec.serial_budget:g} s ({done} requests); makespan extrapolated")
    await clients.close()


def run(spec: Spec, rec: Recorder) -> None:
    asyncio.run(_main(spec, rec))
