"""Running a job end to end, as `batchgate run` and `batchgate resume` do: validate the input, create
or find the job in the store, hold its lock, run the engine under signal handlers (a `batchgate cancel`
from another terminal arrives as SIGTERM), then write OUT, the errors file and the report from the
store (`finish`), so each custom_id appears in OUT exactly once. The job's life is logged as
events (`batchgate.logs`, logger `batchgate.job`): started, stopping, batch events, and how it ended
(finished, stopped or cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace

from batchgate import trace_hooks
from batchgate.clock import Clock, LoopClock
from batchgate.config import GatewayConfig
from batchgate.jobs.batch.policy import job_config, job_deadline
from batchgate.jobs.cache.cached import close_job_cache, open_job_cache
from batchgate.jobs.checks.output_check import OutputCheck
from batchgate.jobs.engine import CANCEL_BLOB, CANCEL_REASON, JobEngine
from batchgate.jobs.engine_types import EngineHooks, EngineHost, EngineOutcome, JobFacts
from batchgate.jobs.finish import Finished, earlier_segments, finish_job, refused_tokens, run_in_rounds
from batchgate.jobs.graph.expand import GraphTasks
from batchgate.jobs.graph.output import render_graph_summary
from batchgate.jobs.graph.setup import job_graph, restore, step_checks
from batchgate.jobs.input_stream import end_ingest, feed, open_input, set_up_job, stop_feeding
from batchgate.jobs.job_setup import (
    RunRequest,
    appends,
    check_input,
    check_request,
    job_id_for,
    open_job_store,
)
from batchgate.jobs.lifecycle.callback import announce_end
from batchgate.jobs.lifecycle.start import before_start
from batchgate.jobs.output.live import LiveOutput
from batchgate.jobs.output.same_file import check_output_writable
from batchgate.jobs.progress.counters import LIVE_BLOB, ProgressSink, QuietSink, Reachability
from batchgate.jobs.progress.shapes import Snapshot, snapshot_json
from batchgate.jobs.progress.snapshot import snapshot
from batchgate.jobs.progress.timeline import TIMELINE_BLOB, Timeline, load_timeline
from batchgate.jobs.report.build import OPEN_SEGMENT_BLOB, run_segment
from batchgate.jobs.report.shapes import Segment, segment_json
from batchgate.jobs.report.summary import render_summary
from batchgate.jobs.store.location import resume_hint, store_exists
from batchgate.jobs.store.protocol import JobRecord, JobStore, TaskState
from batchgate.logs import INFO, WARNING, event, get_logger
from batchgate.stats import GatewayStatistics
from batchgate.text import plural

__all__ = ["run_job"]

EXIT_OK = 0  # every item succeeded
EXIT_STOPPED = 3  # stopped by a guard (budget, error rate, an exhausted account)
EXIT_FAILED_ITEMS = 4  # finished, but some items failed (retry them with --retry-failed)
EXIT_NO_TARGET = 5  # stopped: a route had no target left (its key refused, or it cannot be reached)
EXIT_ROUTES_STOPPED = 6  # finished, but a route stopped (every target refused its key): its items failed
EXIT_INTERRUPTED = 130
REFRESH_S = 0.5  # the live display's refresh
STORE_EVERY = 4  # refreshes between stored snapshots

_log = get_logger("job")


async def run_job(
    req: RunRequest,
    config: GatewayConfig,
    sink: ProgressSink | None = None,
    *,
    out: Callable[[str], None] = print,
    err: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
    clock: Clock | None = None,
) -> int:
    sink = sink or QuietSink()
    clock = clock or LoopClock()
    OutputCheck(config.job.validate_regex, config.job.validate_schema, source=config.source)  # fail early
    check_request(req, config, err)  # before a job exists: no output over an input, the whole config valid
    check_output_writable(req.output_path)
    check_output_writable(req.errors_file)
    check_output_writable(req.report_file)
    job_id = job_id_for(req.input_path, req.output_path)
    first = None  # a new store: the input's first lines (a graph's: all) validated before creating it
    if not store_exists(req.store_path):
        first = check_input(req, config, err) if req.graph is not None else open_input(req, config, err)
    req = replace(req, cache=await open_job_cache(config, req.cache))  # the response cache (issue 43)
    store = await open_job_store(req, config)
    try:
        with store.lock_job(job_id):
            req = replace(req, graph=job_graph(req.graph, await store.get_job(job_id)))
            job, ingest = await set_up_job(store, job_id, req, config, clock, err, first)
            config = job_config(config, job)
            await before_start(config.job.spec, job_id, clock, err)  # its not_before; its callback's secret
            segments = await earlier_segments(store, job_id)
            await store.put_blob(job_id, CANCEL_BLOB, b"")  # a cancel meant for an earlier run
            await store.update_job(job_id, status="running", stop_reason="")  # "" clears an old stop
            deadline = job_deadline(config, job.created_at)
            rounds = req.spec.retry_failed or config.job.spec.retry_failed
            live = await LiveOutput.open(store, job_id, req.output_path) if appends(req) else None
            req, feeding = feed(replace(req, on_commit=live.committed if live is not None else None), ingest)
            run = functools.partial(_run_engine, store, job_id, config, req, sink, segments, deadline, clock)
            again = functools.partial(_run_all, store, job_id, req, run)  # --retry-failed N: in rounds
            try:
                outcome, graph = await run_in_rounds(store, job_id, rounds, again, segments, err)
            finally:
                appended = live.close() if live is not None else None
                more = await stop_feeding(ingest, feeding)  # why the input is not all stored, if not
            if ingest is not None and not ingest.failed:
                await end_ingest(store, job_id, ingest, req, config, err)  # its sha256, skipped lines
            code = await _finish(store, job, outcome, req, segments, sink, out, err, graph, appended, more)
            if req.gateway is None:  # a server's runs: its outbox posts their ends
                await announce_end(config.job.spec, job_id, code, clock, err, config.network)
            if ingest is not None and ingest.failed:
                await end_ingest(store, job_id, ingest, req, config, err)  # a bad line read late raises
            return code
    finally:
        sink.close()
        await close_job_cache(req.cache)
        await store.close()


async def _run_all(
    store: JobStore, job_id: str, req: RunRequest, run: Callable[..., Awaitable[EngineOutcome]]
) -> tuple[EngineOutcome, GraphTasks | None]:
    """Run the engine; for a fan-out or pipeline job, with its graph restored from the store, and
    again while the batch-mode results it stored (without follow-ups) made more tasks ready."""
    graph = None if req.graph is None else (await restore(store, job_id, req.graph, req.input_path))[0]
    outcome: EngineOutcome = await run(graph)
    while graph is not None and outcome.status == "completed" and await graph.recover(store, job_id):
        outcome = await run(graph)
    return outcome, graph


async def _run_engine(
    store: JobStore,
    job_id: str,
    config: GatewayConfig,
    req: RunRequest,
    sink: ProgressSink,
    segments: list[Segment],
    deadline: float | None,
    clock: Clock,
    graph: GraphTasks | None = None,
) -> EngineOutcome:
    ticker: _Ticker | None = None

    def on_event(name: str, fields: dict[str, object]) -> None:
        sink.event(name, **fields)
        event(_log, INFO, name, **fields)  # the batch events: ids, counts and states
        if ticker is not None:
            ticker.batch_event()  # this run's figures are stored at once

    checks = step_checks(graph.graph, config) if graph is not None else {}
    engine = JobEngine(
        config,
        store,
        job_id,
        req.engine,
        job=JobFacts(graph, checks, deadline, spent_extra_tokens=refused_tokens(segments), cache=req.cache),
        hooks=EngineHooks(on_event, req.on_result, req.on_commit),
        host=EngineHost(clock, req.gateway),
    )
    if req.on_engine is not None:
        req.on_engine(engine)
    run_id = f"run-{os.getpid()}-{int(engine.clock.wall() * 1e9)}"
    ticker = _Ticker(engine, store, sink, run_id, Timeline(req.timeline_s))
    with _signals(engine, sink, req.engine.grace_seconds, req.handle_signals):
        ticking = asyncio.ensure_future(ticker.run())
        try:
            counts = await store.counts(job_id)
            started = {
                "total": sum(counts.values()),
                "done": counts[TaskState.SUCCEEDED] + counts[TaskState.FAILED],
                "pending": counts[TaskState.PENDING] + counts[TaskState.RUNNING],
            }
            sink.event("started", job=job_id, **started)
            event(_log, INFO, "job_started", job=job_id, run=run_id, **started)
            outcome = await trace_hooks.job(job_id, engine.run())  # its span, when tracing is on
        finally:
            ticking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticking
    await ticker.sample(force=True)  # the run's last figures close its timeline
    _publish(engine, sink, outcome.elapsed_s, outcome.statistics)
    segments.append(run_segment(outcome.statistics, outcome.elapsed_s, outcome.progress, run_id=run_id))
    return outcome


@contextlib.contextmanager
def _signals(engine: JobEngine, sink: ProgressSink, grace_s: float, wanted: bool = True) -> Iterator[None]:
    """SIGINT/SIGTERM stop the run (the second one ends the grace period). `batchgate cancel`
    records its request in the store and sends SIGTERM: the engine reads the request at its stop."""
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        first = not engine.stopping
        engine.interrupt(f"interrupted by {sig.name}")
        if first:
            event(_log, INFO, "job_stopping", job=engine.job_id, reason=engine.stop_reason, grace_s=grace_s)
            sink.event(
                "stopping",
                job=engine.job_id,
                reason=engine.stop_reason,
                grace_s=grace_s,
                in_flight=_sending(engine),
            )

    # Signal handlers only where Python allows them: the main thread (a notebook's worker thread
    # runs without; the caller stops the job there), and not under a server, which owns them.
    main = wanted and threading.current_thread() is threading.main_thread()
    signals = (signal.SIGINT, signal.SIGTERM) if main else ()
    for sig in signals:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        yield
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


def _sending(engine: JobEngine) -> int:
    """Requests at the providers right now (the engine's other active tasks wait for quota)."""
    gw = engine.gateway
    if gw is None:
        return engine.progress.in_flight
    return sum(p.in_flight for p in gw.statistics().providers.values())


def _publish(
    engine: JobEngine, sink: ProgressSink, elapsed: float, stats: GatewayStatistics | None
) -> Snapshot:
    wall = engine.clock.wall()
    snap = snapshot(engine.job_id, engine.progress, stats, elapsed, wall, engine.budget.view())
    sink.update(snap)
    return snap


class _Ticker:
    """Refreshes the display every `REFRESH_S` of the run's clock; every `STORE_EVERY` refreshes,
    and at once after a batch event, stores the live snapshot (for `batchgate status` elsewhere)
    and this run's report figures so far (kept if the run is killed); every `timeline.every_s` it
    stores a timeline sample. It waits on one event, set by a clock timer or by a batch event;
    nothing is polled."""

    def __init__(
        self, engine: JobEngine, store: JobStore, sink: ProgressSink, run_id: str, timeline: Timeline
    ) -> None:
        self._engine = engine
        self._timeline = timeline
        self._store = store
        self._sink = sink
        self._run_id = run_id
        self._wake = asyncio.Event()
        self._store_now = False
        self._reachability = Reachability(sink)

    def batch_event(self) -> None:
        self._store_now = True
        self._wake.set()

    async def run(self) -> None:
        engine, clock = self._engine, self._engine.clock
        started = clock.now()
        beat = 0
        await self.sample()  # the run's start: its first interval begins here
        while True:
            timer = clock.call_at(clock.now() + REFRESH_S, self._wake.set)
            try:
                await self._wake.wait()
            finally:
                timer.cancel()
            self._wake.clear()
            elapsed = clock.now() - started
            gw = engine.gateway
            stats = gw.statistics() if gw else None
            snap = _publish(engine, self._sink, elapsed, stats)
            self._reachability.see(snap)
            await self.sample()
            beat += 1
            if beat % STORE_EVERY == 0 or self._store_now:
                self._store_now = False
                await self._store.put_blob(engine.job_id, LIVE_BLOB, snapshot_json(snap))
                if stats is not None:
                    seg = run_segment(stats, elapsed, engine.progress, run_id=self._run_id, finished=False)
                    await self._store.put_blob(engine.job_id, OPEN_SEGMENT_BLOB, segment_json(seg))
                if not engine.stopping and await engine.cancel_asked():  # a cancel on Postgres: no signal
                    engine.request_cancel()

    async def sample(self, *, force: bool = False) -> None:
        """A timeline sample when one is due (`force`: now), stored at once."""
        engine, timeline = self._engine, self._timeline
        if not timeline.started:  # the first: continue what earlier runs stored
            timeline.start(load_timeline(await self._store.get_blob(engine.job_id, TIMELINE_BLOB)))
        if force or timeline.due(engine.clock.now()):
            timeline.take(engine.clock.now(), engine.clock.wall(), engine.progress)
            await self._store.put_blob(engine.job_id, TIMELINE_BLOB, timeline.dump())


async def _finish(
    store: JobStore,
    job: JobRecord,
    outcome: EngineOutcome,
    req: RunRequest,
    segments: list[Segment],
    sink: ProgressSink,
    out: Callable[[str], None],
    err: Callable[[str], None],
    graph: GraphTasks | None = None,
    appended: int | None = None,
    more_input: str | None = None,
) -> int:
    job_id = job.job_id
    files = req.files
    done = await finish_job(
        store,
        job_id,
        files,
        segments,
        stop_reason=outcome.stop_reason or more_input,
        emulator_stats=outcome.emulator_stats,
        graph=graph,
        appended=appended,
        more_input=more_input is not None,
        cache=req.cache,
    )
    status, reason, unfinished = done.status, done.reason, done.unfinished
    written, failed = done.written, done.failed
    resume = f"batchgate resume {job_id}{resume_hint(req.store_path)}"
    interrupted = bool(reason and (reason.startswith("interrupted") or reason == CANCEL_REASON))
    code = _exit_code(status, interrupted, failed, outcome.no_target, outcome.routes_stopped)
    ended = "job_finished" if status == "completed" else "job_stopped"
    ended = "job_cancelled" if reason == CANCEL_REASON else ended
    level = INFO if status == "completed" else WARNING
    counts = {"written": written, "failed": failed, "pending": unfinished}
    event(_log, level, ended, job=job_id, status=status, reason=reason, exit_code=code, **counts)
    if status == "completed":
        sink.event("finished", job=job_id, exit_code=code, written=written, failed=failed, **files.as_dict())
    else:
        sink.event(
            "stopped",
            job=job_id,
            exit_code=code,
            reason=reason,
            pending=unfinished,
            written=written,
            failed=failed,
            resume=resume,
            **files.as_dict(),
        )
    sink.close()  # the live display ends before the summary is printed under it
    _tell_outcome(done, req, job_id, resume, out, err)
    return code


def _tell_outcome(
    done: Finished,
    req: RunRequest,
    job_id: str,
    resume: str,
    out: Callable[[str], None],
    err: Callable[[str], None],
) -> None:
    """The summary and the lines that say what to do next (retry failed items, resume)."""
    status, reason, written, failed = done.status, done.reason, done.written, done.failed
    if not req.quiet:
        err(render_summary(done.report))
        if "graph" in done.report:
            err(render_graph_summary(done.report["graph"]))
    out(
        f"wrote {plural(written, 'result')} to {req.output_path}"
        + (f" ({failed} failed, also in {req.errors_file})" if failed else "")
        + f"; report in {req.report_file}"
    )
    if status == "completed" and failed:
        err(
            f"job {job_id} finished with {plural(failed, 'failed item')}; retry exactly those with: "
            f"batchgate retry {job_id}{resume_hint(req.store_path)}  "
            "(or re-run the same command with --retry-failed)"
        )
    if status != "completed":
        err(
            f"job {job_id} stopped: {reason}. {done.unfinished} tasks left; resume with: {resume}  "
            "(or re-run the same command)"
        )


def _exit_code(status: str, interrupted: bool, failed: int, no_target: bool, routes_stopped: bool) -> int:
    if status == "completed":
        return EXIT_ROUTES_STOPPED if routes_stopped else EXIT_FAILED_ITEMS if failed else EXIT_OK
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_NO_TARGET if no_target else EXIT_STOPPED
