"""OUT appended as results are committed, so a long run can be tailed and a kill -9 leaves the
lines done so far.

At the start of a run, OUT is brought in line with the store: when it does not hold exactly one
whole line per finished task (a first run over an old file, a kill between a commit and its append,
a `--retry-failed` that put failed tasks back), it is rewritten from the store by atomic rename.
Then each group commit's lines are appended with one `write` of whole lines, after the store has
them (the file is never ahead of the store, so a resume continues it without duplicates). The end
of the run only fsyncs it; a failed append (a full disk) stops appending and the end of the run
rewrites OUT from the store, which names the problem. `--ordered` jobs and fan-out / pipeline jobs
(one joined line per input) are written at the end by atomic rename instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from batchgate.jobs.output.files import write_outputs
from batchgate.jobs.store.protocol import JobStore, TaskOutcome, TaskState

_CHUNK = 1 << 20


class LiveOutput:
    """OUT, open for appending; `lines` is what it holds (None once an append failed)."""

    def __init__(self, path: Path, fd: int, lines: int) -> None:
        self.path = path
        self._fd: int | None = fd
        self.lines: int | None = lines

    @classmethod
    async def open(cls, store: JobStore, job_id: str, path: Path) -> LiveOutput:
        """OUT with one line per task the store holds as finished, ready for appending."""
        counts = await store.counts(job_id)
        done = counts[TaskState.SUCCEEDED] + counts[TaskState.FAILED]
        if await asyncio.to_thread(whole_lines, path) != done:
            await write_outputs(store, job_id, path, None, ordered=False)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        return cls(path, fd, done)

    def committed(self, outcomes: Sequence[TaskOutcome]) -> None:
        """Append the OUT lines of outcomes the store has just committed."""
        if self._fd is None or not outcomes:
            return
        data = memoryview(b"".join(o.output_line + b"\n" for o in outcomes))
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        except OSError:  # a full disk, say: the end of the run rewrites OUT from the store
            self.lines = None
            self._drop()
            return
        if self.lines is not None:
            self.lines += len(outcomes)

    def close(self) -> int | None:
        """Flush OUT to disk and close it; the lines it holds (None: it must be rewritten)."""
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            except OSError:
                self.lines = None
            self._drop()
        return self.lines

    def _drop(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def whole_lines(path: Path) -> int | None:
    """How many lines `path` holds, when it ends with a whole line (None: missing a line's end);
    0 for a missing file."""
    try:
        f = path.open("rb")
    except FileNotFoundError:
        return 0
    count = 0
    last = b"\n"
    with f:
        while chunk := f.read(_CHUNK):
            count += chunk.count(b"\n")
            last = chunk[-1:]
    return count if last == b"\n" else None
