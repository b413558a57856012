"""`asyncio.gather` over every request at once, official SDKs with their default retries (2)."""

from __future__ import annotations

import asyncio

from workload import Spec

from systems.common import Recorder
from systems.sdk import SdkClients


async def _main(spec: Spec, rec: Recorder) -> None:
    clients = SdkClients(spec)
    rec.start()
    await asyncio.gather(*(clients.send_recorded(r, rec) for r in spec.requests))
    rec.finish()
    await clients.close()


def run(spec: Spec, rec: Recorder) -> None:
    asyncio.run(_main(spec, rec))
