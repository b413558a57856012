"""Storing a job's input as it is read, behind the sending: one pass over the file validates each
line, hashes its bytes and stores the accepted tasks in chunks (`InputPass`, `Ingest`).

The first `FIRST_CHUNK` tasks are read before the job exists (a line wrong among them: the whole
file is validated, every bad line told, nothing created or sent); the rest is read and stored
while the first requests are out. Before a chunk's tasks are stored, an `IngestMark` records how
far the input is read: its first `offset` bytes and their sha256, and the file's size, mtime and
inode. A re-run of a job whose input is not all stored (killed, or stopped at a bad line) checks
that prefix (by stat, or by hashing it when the stat differs: an edited prefix is a changed
input), sends the stored tasks at once and reads the file again from the top (validation needs
every custom_id), storing the tasks it does not have. A whole input's mark lets a re-run skip
hashing the file when its stat is the one recorded.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import orjson

from batchgate.jobs.cache.cached import JobCache
from batchgate.jobs.input.read import (
    MAX_REPORTED_PROBLEMS,
    BodyCheck,
    InputProblem,
    ValidationReport,
    read_tasks_hashed,
)
from batchgate.jobs.progress.counters import Progress
from batchgate.jobs.store.protocol import JobStore, TaskOutcome, TaskSpec

INGEST_BLOB = "ingest_mark"
FIRST_CHUNK = 256  # tasks validated before the job is created and its first request leaves
CHUNK = 4096  # tasks stored at a time after that (one mark each)
SLICE = 256  # lines read in one turn of the event loop (a few ms: the sending goes on between)
AHEAD = 4 * CHUNK  # tasks read ahead of those the run has claimed, at most
_HASH_CHUNK = 1 << 20


def input_stat(path: Path) -> tuple[int, int, int]:
    """(size, mtime_ns, inode): what a re-run compares before trusting the input unchanged."""
    st = path.stat()
    return st.st_size, st.st_mtime_ns, st.st_ino


@dataclass(frozen=True, slots=True)
class IngestMark:
    """How far a job's input is read: its first `offset` bytes (sha256 `sha256`); `done`: all of
    it; `stat`: the file's `input_stat` when reading began."""

    offset: int
    sha256: str
    stat: tuple[int, int, int]
    done: bool = False

    def dump(self) -> bytes:
        return orjson.dumps([self.offset, self.sha256, list(self.stat), self.done])

    @classmethod
    def load(cls, data: bytes | None) -> IngestMark | None:
        if not data:
            return None
        offset, sha, stat, done = orjson.loads(data)
        return cls(int(offset), str(sha), (int(stat[0]), int(stat[1]), int(stat[2])), bool(done))


def prefix_sha256(path: Path, offset: int) -> str:
    """The sha256 of the file's first `offset` bytes."""
    hasher = hashlib.sha256()
    left = offset
    with path.open("rb") as f:
        while left > 0 and (chunk := f.read(min(_HASH_CHUNK, left))):
            hasher.update(chunk)
            left -= len(chunk)
    return hasher.hexdigest()


class _CountingSha:
    """sha256 of the bytes read so far, and how many."""

    def __init__(self) -> None:
        self.sha = hashlib.sha256()
        self.offset = 0

    def update(self, data: bytes, /) -> None:
        self.sha.update(data)
        self.offset += len(data)


class InputPass:
    """One read of the input: each line validated (duplicates included) and hashed, in order.
    `take(n)` gives the next tasks; without `skip_invalid` it stops at the first bad line
    (`failed`), after which `finish()` validates the rest to count and list every problem."""

    def __init__(
        self, path: Path, known_models: Collection[str] | None, check: BodyCheck | None, *, skip_invalid: bool
    ) -> None:
        self.path = path
        self.stat = input_stat(path) if path.is_file() else (0, 0, 0)
        self._hasher = _CountingSha()
        self._lines = [0]
        self._items: Iterator[TaskSpec | InputProblem] = read_tasks_hashed(
            path, self._hasher, self._lines, known_models=known_models, check=check
        )
        self._skip = skip_invalid
        self.tasks = 0
        self.problem_count = 0
        self.problems: list[InputProblem] = []
        self.done = False
        self.failed = False
        self.pending: list[TaskSpec] = []  # taken before the job existed (`input_stream.open_input`)

    def take(self, n: int) -> list[TaskSpec]:
        out: list[TaskSpec] = []
        while len(out) < n and not self.done and not self.failed:
            item = next(self._items, None)
            if item is None:
                self.done = True
            elif isinstance(item, TaskSpec):
                out.append(item)
                self.tasks += 1
            else:
                self._problem(item)
                self.failed = not self._skip
        return out

    def finish(self, limit: int | None = None) -> bool:
        """Read the rest (at most `limit` more lines), counting its tasks and problems (nothing
        is stored); True once at the end."""
        for n, item in enumerate(self._items, start=1):
            if isinstance(item, TaskSpec):
                self.tasks += 1
            else:
                self._problem(item)
            if limit is not None and n >= limit:
                return False
        self.done = True
        return True

    def _problem(self, problem: InputProblem) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_REPORTED_PROBLEMS:
            self.problems.append(problem)

    def mark(self) -> IngestMark:
        """Where the pass is now (the end of the last line read)."""
        return IngestMark(self._hasher.offset, self._hasher.sha.copy().hexdigest(), self.stat, self.done)

    def report(self) -> ValidationReport:
        """What the pass found (the sha256 is the whole file's once `done`)."""
        sha = self._hasher.sha.hexdigest()
        return ValidationReport(
            str(self.path), sha, self.tasks, self._lines[0], self.problem_count, self.problems
        )


class IngestSink(Protocol):
    """The run that sends the stored tasks (`JobEngine`)."""

    progress: Progress

    def tasks_arrived(self, total: int) -> None: ...


class Ingest:
    """Stores the rest of `reading`'s tasks (those from seq `stored` on) into the job, a chunk at a
    time behind the sending, telling `sink` of each. A bad line (without --skip-invalid) ends the
    storing: the tasks stored before it are still sent, `failed` is set and the pass is finished
    (nothing more stored), for the caller to tell every problem."""

    def __init__(
        self,
        reading: InputPass,
        store: JobStore,
        job_id: str,
        *,
        stored: int,
        marked: int = 0,
        cache: JobCache | None = None,
    ) -> None:
        """`stored`: the tasks the job holds (seqs below it are not stored again); `marked`: the
        offset its mark is at (a re-read does not move it back); `cache`: the response cache, whose
        answers are stored as finished tasks (`JobStore.add_done`), a chunk at a time."""
        self.reading = reading
        self._marked = marked
        self._store = store
        self._job_id = job_id
        self._stored = stored
        self.sink: IngestSink | None = None
        self.cache = cache
        self.on_done: Callable[[Sequence[TaskOutcome]], None] | None = None  # hits' outcomes, stored
        self.failed = False
        self._claimed = 0
        self._room = asyncio.Event()

    @property
    def stored(self) -> int:
        return self._stored

    async def store_chunk(self, specs: list[TaskSpec], mark: IngestMark | None = None) -> None:
        """Record the mark (where reading was when the chunk was taken), then store the chunk's
        tasks not stored yet (the mark first: a task is never stored past its job's mark)."""
        mark = mark or self.reading.mark()
        if mark.offset > self._marked:
            await self._store.put_blob(self._job_id, INGEST_BLOB, mark.dump())
            self._marked = mark.offset
        new = [s for s in specs if s.seq >= self._stored]
        if new:
            misses = await self._answered(new)
            self._stored = new[-1].seq + 1
            await self._store.update_job(self._job_id, task_total=self._stored)
            self.claimed(misses[0].seq if misses else self._stored)  # answered tasks are never claimed
        if self.sink is not None:
            self.sink.tasks_arrived(self._stored)

    async def _answered(self, specs: list[TaskSpec]) -> list[TaskSpec]:
        """Store the chunk: with a response cache, the tasks it answers as finished (one bulk
        lookup) and the others pending, in one transaction (a chunk goes in whole, so what a
        killed run stored is a prefix of the input); returns the pending ones."""
        if self.cache is None:
            await self._store.add_tasks(self._job_id, specs)
            return specs
        hits, misses = await self.cache.split(specs)
        await self._store.add_done(self._job_id, hits, misses)
        if hits:
            if self.on_done is not None:
                self.on_done([outcome for _, outcome in hits])  # OUT, after the store has them
            if self.sink is not None:
                self.sink.progress.done_before += len(hits)  # finished without this run sending
        return misses

    def claimed(self, upto: int) -> None:
        """The run claimed the tasks before seq `upto`: reading may go on to `AHEAD` past it."""
        self._claimed = max(self._claimed, upto)
        if self.reading.tasks - self._claimed <= AHEAD:
            self._room.set()

    async def run(self) -> bool:
        """Read and store to the end of the input, in the event loop's thread a `SLICE` at a time
        (a reading thread would hold the GIL against the sending), at most `AHEAD` tasks past
        what the run claimed; True if it all went in (False: a bad line)."""
        reading = self.reading
        specs: list[TaskSpec] = []
        writing: asyncio.Future[None] | None = None  # the last chunk's storing, behind the reading
        try:
            while not reading.done:
                while self.sink is not None and reading.tasks - self._claimed > AHEAD:
                    self._room.clear()
                    await self._room.wait()
                specs += reading.take(SLICE)
                if reading.failed:  # the chunk holding its bad line is not stored: the mark stays behind it
                    self.failed = True  # the tasks stored are sent, no more; the rest is validated
                    if writing is not None:
                        await writing
                    finished = False
                    while not finished:
                        finished = reading.finish(SLICE)
                        await asyncio.sleep(0)  # the sending of the stored tasks goes on between slices
                    return False
                if len(specs) >= CHUNK or reading.done:
                    if writing is not None:
                        await writing  # one chunk stored at a time, in order; the next is read meanwhile
                    writing = asyncio.ensure_future(self.store_chunk(specs, reading.mark()))
                    specs = []
                await asyncio.sleep(0)
            if writing is not None:
                await writing
        finally:
            if writing is not None and not writing.done():
                writing.cancel()
        return True
