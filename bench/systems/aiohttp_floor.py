"""A reference floor, not a contender: raw aiohttp POSTs (orjson bodies, 64 in flight, keep-alive,
no retries, no quota logic) — what one request's HTTP round trip costs this machine's client CPU.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import orjson
from workload import Request, Spec

from systems.common import Recorder


async def _main(spec: Spec, rec: Recorder) -> None:
    gate = asyncio.Semaphore(spec.concurrency)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=spec.concurrency)) as session:

        async def one(r: Request) -> None:
            p = spec.providers[r.provider]
            if p.family == "openai":
                url, body = p.base_url + "/chat/completions", r.openai_body(p.model)
                headers = {"Authorization": "Bearer bench", "Content-Type": "application/json"}
            else:
                url, body = p.base_url + "/v1/messages", r.anthropic_body(p.model)
                headers = {"x-api-key": "bench", "anthropic-version": "2023-06-01"}
                headers["Content-Type"] = "application/json"
            async with gate:
                t0 = time.perf_counter()
                async with session.post(url, data=orjson.dumps(body), headers=headers) as resp:
                    orjson.loads(await resp.read())
                    ok = resp.status == 200
            lat = (time.perf_counter() - t0) * 1000
            if ok:
                rec.ok(r.id, lat)
            else:
                rec.fail(r.id, lat, f"status {resp.status}")

        rec.start()
        await asyncio.gather(*(one(r) for r in spec.requests))
        rec.finish()


def run(spec: Spec, rec: Recorder) -> None:
    asyncio.run(_main(spec, rec))
