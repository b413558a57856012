"""`asyncio.gather` behind one global `asyncio.Semaphore(spec.concurrency)`, SDK default retries."""

from __future__ import annotations

import asyncio

from workload import Request, Spec

from systems.common import Recorder
from systems.sdk import SdkClients


async def _main(spec: Spec, rec: Recorder) -> None:
    clients = SdkClients(spec)
    gate = asyncio.Semaphore(spec.concurrency)

    async def one(r: Request) -> None:
        async with gate:
            await clients.send_recorded(r, rec)

    rec.start()
    await asyncio.gather(*(one(r) for r in spec.requests))
    rec.finish()
    await clients.close()


def run(spec: Spec, rec: Recorder) -> None:
    asyncio.run(_main(spec, rec))
