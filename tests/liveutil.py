"""The live proxy on loopback for the streaming tests: `live_rig(emu, config)` starts a gateway
from `config` and serves its live routes (`LiveApi`, behind the server's error middleware) on a
free port of 127.0.0.1; the `Rig` says where, and what its quota pools hold open."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from batchgate import Gateway
from batchgate.config import config_from_dict
from batchgate.emulator import Emulator
from batchgate.server.app import errors
from batchgate.server.proxy.live import LiveApi
from loopback import serving

# quick retries, a stall ended at 0.5 s, a refused connection's target out at once
LIVE_SETTINGS: dict[str, Any] = {
    "retry": {"max_attempts": 2, "base_delay": 0.01, "max_delay": 0.02},
    "timeouts": {"connect": 2, "total": 20, "stream_idle": 0.5},
    "seed": 1,
    "circuit": {"take_out_after": 1},
}


@dataclass
class Rig:
    url: str
    emu: Emulator
    gw: Gateway

    def open_reservations(self) -> int:
        return sum(rt.pool.statistics().open for rt in self.gw.runtimes.values())

    def settled_twice(self) -> int:
        return sum(rt.pool.statistics().settled_twice for rt in self.gw.runtimes.values())


@asynccontextmanager
async def live_rig(emu: Emulator, config: dict[str, Any]) -> AsyncIterator[Rig]:
    async with Gateway(config_from_dict(config)) as gw:
        app = web.Application(middlewares=[errors])
        app.add_routes(LiveApi(gw, gw._clock).routes())
        async with serving(app) as url:
            yield Rig(url, emu, gw)
