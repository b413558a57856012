"""Jobs from Python: the durable job `batchgate run` makes — store, resume, budget, output
validation, fan-out, pipelines, report — as an object beside `Gateway`.

`Job(...)` names a job exactly as the CLI does (the same input and output paths are the same
job, so running it again resumes it, and a job started by the CLI can be finished from Python and
the other way round). `await job.arun()` / `job.run()` run it to the end and return the report —
the same JSON the CLI writes. `async for r in job.results()` yields every result of the job: those
earlier runs stored first (all of them, after `run()`), then this run's as each is stored. An
iterable input is first written to `OUTPUT.input.jsonl` (rewritten only when it differs) so the
job can resume from it. `run()` works in a notebook: where an event loop already runs in this
thread, it runs the job on a fresh loop in a worker thread, as `Gateway.batch` does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import orjson

from batchgate.config import GatewayConfig, RouteMode, load_config, parse_job_spec
from batchgate.jobs.batch.policy import with_job_overrides
from batchgate.jobs.engine_types import EngineOptions
from batchgate.jobs.finish import JobReport
from batchgate.jobs.graph.expand import answer_of
from batchgate.jobs.graph.setup import requested_graph
from batchgate.jobs.job_setup import RunRequest, job_id_for
from batchgate.jobs.pricing import check_prices, unpriced_warning
from batchgate.jobs.progress.shapes import Snapshot
from batchgate.jobs.runner import run_job
from batchgate.jobs.store.location import choose_location, open_store, parse_location, store_exists
from batchgate.jobs.store.protocol import TaskOutcome, TaskRecord, TaskSpec, TaskState
from batchgate.request_fields import out_line_metadata, task_metadata

__all__ = ["Job", "JobResult"]

ProgressCallback = Callable[[dict[str, object]], None]  # a snapshot, or an event: its own fields
_SPEC_ARGS = {  # `Job(...)` argument → its job-spec field (`config.job_spec`)
    **{name: name for name in ("name", "priority", "not_before", "deadline", "deadline_hours",
                               "callback_url", "callback_secret_env", "metadata", "mode",
                               "validate_regex", "validate_schema", "retry_failed")},
    "budget_usd": "budget",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class JobResult:
    """One stored outcome: a line's answer (for a fan-out or pipeline, one step's)."""

    custom_id: str
    ok: bool
    answer: str | None
    error: str | None
    step: str | None  # fan-out: the route; pipeline: the step; None for a plain job
    route: str | None
    line: dict[str, Any]  # the OUT line of this task (OpenAI Batch output shape)
    metadata: dict[str, object]  # the input line's metadata (fields that are not request fields)

    @classmethod
    def of(cls, spec: TaskSpec, outcome: TaskOutcome) -> JobResult:
        ok = outcome.state is TaskState.SUCCEEDED
        return cls(
            custom_id=spec.custom_id,
            ok=ok,
            answer=answer_of(outcome.output_line) if ok else None,
            error=outcome.error,
            step=spec.step,
            route=spec.route,
            line=orjson.loads(outcome.output_line) if outcome.output_line else {},
            metadata=task_metadata(spec.body),
        )

    @classmethod
    def of_record(cls, record: TaskRecord) -> JobResult:
        """A result an earlier run stored."""
        ok = record.state is TaskState.SUCCEEDED
        line = record.output_line
        return cls(
            custom_id=record.custom_id,
            ok=ok,
            answer=answer_of(line) if ok and line else None,
            error=record.error,
            step=record.step,
            route=record.route,
            line=(parsed := orjson.loads(line) if line else {}),
            metadata=out_line_metadata(parsed),  # written back on its OUT line
        )


class _CallbackSink:
    """Progress as plain dicts: each snapshot, and each event as `{"event": name, ...}`."""

    def __init__(self, fn: ProgressCallback) -> None:
        self._fn = fn

    def event(self, name: str, **fields: object) -> None:
        self._fn({"event": name, **fields})

    def update(self, snap: Snapshot) -> None:
        self._fn(dict(snap))

    def close(self) -> None:
        return None


class Job:
    """A durable batch job; see the module docstring. Options mirror `batchgate run`'s. The job's
    own options (`_SPEC_ARGS`: name, priority, not_before, deadline, callback_url, metadata,
    budget_usd, mode, validate_*, retry_failed) are read by the parser `run` flags, the YAML `job:`
    section and the jobs API use (a bad one raises `JobSpecError` naming it), and the job
    remembers them."""

    def __init__(
        self,
        input: str | Path | Iterable[Mapping[str, object]],
        *,
        config: str | Path | GatewayConfig,
        output: str | Path,
        store: str | Path | None = None,
        budget_usd: float | None = None,
        budget_tokens: int | None = None,
        validate_regex: str | None = None,
        validate_schema: Mapping[str, object] | None = None,
        fanout: Sequence[str] | None = None,
        pipeline: str | Path | None = None,
        on_progress: ProgressCallback | None = None,
        ordered: bool = False,
        skip_invalid: bool = False,
        allow_changed_input: bool = False,
        mode: RouteMode | None = None,
        deadline_hours: float | None = None,
        engine: EngineOptions | None = None,
        allow_unpriced: bool = False,
        name: str | None = None,
        priority: str | None = None,
        not_before: float | str | None = None,
        deadline: float | str | Mapping[str, float] | None = None,
        callback_url: str | None = None,
        callback_secret_env: str | None = None,
        metadata: Mapping[str, str] | None = None,
        retry_failed: int | None = None,
    ) -> None:
        given = locals()
        spec = parse_job_spec({field: given[arg] for arg, field in _SPEC_ARGS.items()})  # see the class
        self.output_path = Path(output)
        self.input_path = self._input_file(input)
        base = config if isinstance(config, GatewayConfig) else load_config(config)
        self.config = with_job_overrides(_token_budget(base, budget_tokens), spec)
        unpriced = check_prices(self.config, allow_unpriced)  # a money budget that cannot fire: an error now
        if unpriced:
            warnings.warn(unpriced_warning(unpriced, self.config), UserWarning, stacklevel=2)
        self.graph = requested_graph(self.config, list(fanout) if fanout else None,
                                     Path(pipeline) if pipeline is not None else None)  # fmt: skip
        given_store = None if store is None else parse_location(store)  # a path or a postgresql:// URL
        self.request = RunRequest(
            input_path=self.input_path,
            config_path=Path(self.config.source),
            output_path=self.output_path,
            store_path=choose_location(given_store, self.config.job.store),  # as the CLI does
            ordered=ordered,
            skip_invalid=skip_invalid,
            allow_changed_input=allow_changed_input,
            engine=engine or EngineOptions(),
            spec=spec,
            graph=self.graph,
            allow_unpriced=allow_unpriced,
            python=True,
        )
        self.on_progress = on_progress
        self.exit_code: int | None = None
        self.messages: list[str] = []  # what the CLI would print (summary, where files went)

    @property
    def report_path(self) -> Path:
        return self.request.report_file

    def report(self) -> JobReport:
        """The report of the last run (the same JSON `batchgate run` writes)."""
        return cast("JobReport", orjson.loads(self.report_path.read_bytes()))

    async def arun(self) -> JobReport:
        """Create or resume the job and run it to the end (or to a guard's stop); the report."""
        await self._run(None)
        return self.report()

    def run(self) -> JobReport:
        """Synchronous `arun`; in a running event loop (Jupyter), on a worker thread."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun())
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="batchgate-job") as pool:
            return pool.submit(asyncio.run, self.arun()).result()

    async def results(self) -> AsyncIterator[JobResult]:
        """Every result of the job: those stored by earlier runs (input order), then this run's as
        each is stored (a finished job yields all of its results and sends nothing); errors are
        raised after."""
        async for earlier in self._stored():
            yield earlier
        queue: asyncio.Queue[JobResult | None] = asyncio.Queue()
        task = asyncio.ensure_future(self._run(lambda spec, out: queue.put_nowait(JobResult.of(spec, out))))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (item := await queue.get()) is not None:
                yield item
            await task
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _stored(self) -> AsyncIterator[JobResult]:
        where = self.request.store_path
        if not store_exists(where):
            return
        store = await open_store(where, create=False)
        try:
            job_id = job_id_for(self.input_path, self.output_path)
            if await store.get_job(job_id) is None:
                return
            done = (TaskState.SUCCEEDED, TaskState.FAILED)
            async for record in store.iter_results(job_id, ordered=True, states=done):
                yield JobResult.of_record(record)
        finally:
            await store.close()

    async def _run(self, hook: Callable[[TaskSpec, TaskOutcome], None] | None) -> int:
        sink = _CallbackSink(self.on_progress) if self.on_progress is not None else None
        req = replace(self.request, on_result=hook)
        self.exit_code = await run_job(
            req, self.config, sink, out=self.messages.append, err=self.messages.append
        )
        return self.exit_code

    def _input_file(self, source: str | Path | Iterable[Mapping[str, object]]) -> Path:
        if isinstance(source, str | Path):
            return Path(source)
        path = self.output_path.with_name(self.output_path.name + ".input.jsonl")
        data = b"".join(orjson.dumps(dict(line)) + b"\n" for line in source)
        if not path.exists() or path.read_bytes() != data:  # unchanged bytes: the same job resumes
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return path


def _token_budget(config: GatewayConfig, budget_tokens: int | None) -> GatewayConfig:
    """The config with the given token budget (None keeps the config's)."""
    if budget_tokens is None:
        return config
    return replace(config, budget=replace(config.budget, max_tokens=budget_tokens))
