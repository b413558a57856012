"""A worker process for the CPU work on a tenant's input that would hold the GIL — and so the
event loop — for long: parsing a 100,000-request message batch (`orjson.loads` of 36 MB is one C
call of about half a second that no thread can interleave with; the 100,000 objects it makes
then cost the loop's collector too). One process (started on first use, from a fresh
interpreter: `forkserver`), shut down with the runs; a worker that died is replaced at the next
call. What runs there takes and returns plain values (bytes, ints, str).
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

T = TypeVar("T")


class OffLoop:
    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in the worker process (a module-level function of batchgate)."""
        if self._pool is None:
            context = multiprocessing.get_context("forkserver")
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=context)
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        except BrokenProcessPool:
            self._pool = None  # the next call starts a new worker
            raise

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
