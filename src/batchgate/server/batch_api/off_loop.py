"""A worker process for the CPU work on a tenant's input that would hold the GIL — and so the
event loop — for long: parsing a 100,000-request message batch (`orjson.loads` of 36 MB is one C
call of about half a second that no thread can interleave with; the 100,000 objects it makes
then cost the loop's collector too). One process (started on first use, from a fresh
interpreter: `forkserver`; `batchgate serve` starts it before it listens, so no tenant waits for
it and multiprocessing's own files — a temp folder, the forkserver's socket — are made before
any tenant is served), shut down with the runs; a worker that died is replaced at the next
call. Processes are started from a thread, never on the loop. What runs there takes and returns
plain values (bytes, ints, str).
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TypeVar, TypeVarTuple

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class OffLoop:
    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None

    async def start(self) -> None:
        """The worker process up and answering (in a thread: starting it blocks)."""
        await self.run(int)

    async def run(self, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        """`fn(*args)` in the worker process (a module-level function of batchgate)."""
        pool = self._pool
        if pool is None:
            context = multiprocessing.get_context("forkserver")
            pool = self._pool = ProcessPoolExecutor(max_workers=1, mp_context=context)
        try:
            # submitted from a thread: the first submit starts the forkserver and the worker
            future = await asyncio.to_thread(lambda: pool.submit(fn, *args))
            return await asyncio.wrap_future(future)
        except BrokenProcessPool:
            self._pool = None  # the next call starts a new worker
            raise

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
