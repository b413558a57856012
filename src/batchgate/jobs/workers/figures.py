"""A worker's report figures per job, so a job finished by `batchgate worker` gets a report as
full as a `batchgate run` report (elapsed, runs, providers, retries).

One worker's gateway runs the chunks of several jobs, as a server's does, so each job's figures
are its own tallies (`Progress(shared_gateway=True)`: `provider_figures.own_providers`), and its
elapsed time is the span from the worker's first claim of the job to its last chunk's end. Each
worker keeps one report segment per job (run id `worker-<owner>`) in the job's `report` blob,
replaced after each of its chunks under the job's lock (a worker finding it locked tries again
after its next chunk); the worker that finishes the job puts its own latest segment in first.
"""

from __future__ import annotations

from dataclasses import dataclass

from batchgate.clock import Clock
from batchgate.errors import JobLockedError
from batchgate.jobs.progress.counters import Progress
from batchgate.jobs.report.build import REPORT_BLOB, run_segment
from batchgate.jobs.report.shapes import Segment, dump_segments, load_segments
from batchgate.jobs.store.protocol import JobStore
from batchgate.stats import GatewayStatistics


@dataclass(slots=True)
class _WorkerJob:
    progress: Progress
    first: float  # the clock's time of the worker's first claim of the job
    last: float  # ... and of its last chunk's end


class WorkerFigures:
    def __init__(self, owner: str, clock: Clock) -> None:
        self.run_id = f"worker-{owner}"
        self.clock = clock
        self._jobs: dict[str, _WorkerJob] = {}

    def progress(self, job_id: str) -> Progress:
        """The job's own figures in this worker (made at its first claim)."""
        found = self._jobs.get(job_id)
        if found is None:
            now = self.clock.now()
            progress = Progress(started=self.clock.wall(), total=0, shared_gateway=True)
            found = self._jobs[job_id] = _WorkerJob(progress, now, now)
        return found.progress

    def forget(self, job_id: str) -> None:
        """The job is finished: its figures are in its report."""
        self._jobs.pop(job_id, None)

    def segment(self, job_id: str, stats: GatewayStatistics) -> Segment | None:
        """This worker's segment of the job's report (None: it never claimed a chunk of it)."""
        job = self._jobs.get(job_id)
        if job is None:
            return None
        job.last = self.clock.now()
        return run_segment(stats, job.last - job.first, job.progress, run_id=self.run_id)

    def merged(self, segments: list[Segment], job_id: str, stats: GatewayStatistics) -> list[Segment]:
        """`segments` with this worker's replaced by its latest (or added; none known: unchanged)."""
        own = self.segment(job_id, stats)
        if own is None:  # never claimed here, or finished and forgotten: what is stored stays
            return segments
        return [*(s for s in segments if s.get("run_id") != self.run_id), own]

    async def save(self, store: JobStore, job_id: str, stats: GatewayStatistics) -> None:
        """Put this worker's latest segment into the job's report blob (skipped while another
        process or lane holds the job's lock: the next chunk, or the finisher, writes it)."""
        try:
            with store.lock_job(job_id):
                segments = load_segments(await store.get_blob(job_id, REPORT_BLOB))
                await store.put_blob(job_id, REPORT_BLOB, dump_segments(self.merged(segments, job_id, stats)))
        except JobLockedError:
            return
