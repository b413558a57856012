"""Group commit: many task outcomes, few transactions.

`GroupCommitter.add` only buffers. A write starts when `max_batch` outcomes are waiting, when the
oldest waiting outcome has waited `max_delay` (a timer from the injected clock, no polling), or on
`flush`/`close`. One write runs at a time; outcomes that arrive meanwhile join the next one. A
failed write keeps its outcomes buffered and re-raises its error on the next `add`, `flush` or
`close` (once), so a broken store is never silently ignored.

By default it writes with `JobStore.complete_tasks`; a worker passes `write` (its chunk's fenced
`commit_chunk`), so a lost lease surfaces as the `LeaseLostError` of that write. `after` hears each
batch once it is written (a run appends its lines to OUT).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from batchgate.clock import Clock, TimerHandle
from batchgate.jobs.engine_types import Committed
from batchgate.jobs.store.protocol import JobStore, TaskOutcome

Write = Callable[[Sequence[TaskOutcome]], Awaitable[None]]


class GroupCommitter:
    """Buffers `TaskOutcome`s for one job and writes them with `JobStore.complete_tasks` (or `write`)."""

    def __init__(
        self,
        store: JobStore,
        job_id: str,
        clock: Clock,
        max_batch: int = 1000,
        max_delay: float = 0.05,
        *,
        write: Write | None = None,
        after: Committed | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        if max_delay < 0:
            raise ValueError("max_delay must not be negative")
        self._job_id = job_id
        self._write_batch: Write = write or (lambda batch: store.complete_tasks(job_id, batch))
        self._clock = clock
        self._after = after
        self._max_batch = max_batch
        self._max_delay = max_delay
        self._buffer: list[TaskOutcome] = []
        self._timer: TimerHandle | None = None
        self._due = False  # a timer fired or a flush asked: write even a partial batch
        self._writer: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self._closed = False
        self.committed = 0
        self.transactions = 0

    @property
    def pending(self) -> int:
        """Outcomes accepted but not yet committed."""
        return len(self._buffer)

    def add(self, outcome: TaskOutcome) -> None:
        """Accept an outcome; raises (and does not accept it) if an earlier write failed."""
        if self._closed:
            raise RuntimeError("GroupCommitter is closed")
        self._raise_error()
        self._buffer.append(outcome)
        if len(self._buffer) >= self._max_batch:
            self._kick()
        elif self._timer is None:
            self._timer = self._clock.call_at(self._clock.now() + self._max_delay, self._on_timer)

    async def flush(self) -> None:
        """Write everything accepted so far; raises the error of a failed write."""
        self._raise_error()
        while self._buffer or self._writing:
            if self._buffer:
                self._due = True
                self._kick()
            assert self._writer is not None
            await asyncio.shield(self._writer)
            self._raise_error()

    async def close(self) -> None:
        """Flush, then refuse further outcomes. Idempotent."""
        try:
            await self.flush()
        finally:
            self._closed = True
            self._cancel_timer()

    @property
    def _writing(self) -> bool:
        return self._writer is not None and not self._writer.done()

    def _on_timer(self) -> None:
        self._timer = None
        if self._buffer:
            self._due = True
            self._kick()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _kick(self) -> None:
        if not self._writing:
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        while self._buffer and (self._due or len(self._buffer) >= self._max_batch):
            batch = self._buffer[: self._max_batch]
            del self._buffer[: self._max_batch]
            if not self._buffer:
                self._due = False
                self._cancel_timer()
            try:
                await self._write_batch(batch)
            except BaseException as exc:
                self._buffer[:0] = batch  # keep them: nothing is lost, a later flush retries
                self._due = False
                if not isinstance(exc, asyncio.CancelledError):
                    self._error = exc
                    return
                raise
            self.committed += len(batch)
            self.transactions += 1
            if self._after is not None:
                self._after(batch)
        if self._buffer and self._timer is None:
            self._timer = self._clock.call_at(self._clock.now() + self._max_delay, self._on_timer)

    def _raise_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error

    def __repr__(self) -> str:
        return (
            f"GroupCommitter(job={self._job_id!r}, committed={self.committed}, pending={self.pending}, "
            f"transactions={self.transactions}, writing={self._writing})"
        )
