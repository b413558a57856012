"""Checks a model's answer against the job's expectation (a regular expression or a JSON Schema).

An answer that fails is retried up to a limit, then marked invalid and listed for review — never
written as a plain success. The expectation is the job owner's data (a tenant's, under `batchgate
serve`): it is compiled once, when the job is made (`schema_check`: no `$ref` outside the schema,
nothing fetched; `safe_regex`: patterns on an engine with a time limit), and `acheck` runs each
answer's check in a thread, given up after `CHECK_SECONDS` — a check that takes longer fails.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import orjson

from batchgate.errors import ConfigError, JobSpecError

if TYPE_CHECKING:
    from jsonschema.validators import _Validator  # only in the stubs: the class `create` makes
    from regex import Pattern

CHECK_SECONDS = 2.0  # the most one answer's check may take; past it the answer fails its check
TIMED_OUT = f"the output check took longer than {CHECK_SECONDS:g} s on this answer"
CHECK_THREADS = 4  # checks have threads of their own: a slow one never holds the loop's executor


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@functools.cache
def _checks() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="batchgate-check")


class OutputCheck:
    def __init__(
        self,
        regex: str | None = None,
        schema: Mapping[str, object] | None = None,
        *,
        source: str = "<config>",
    ) -> None:
        """A bad regex or schema raises `ConfigError` naming `source` and the `job.` key."""
        self._regex: Pattern[str] | None = None
        self._validator: _Validator | None = None
        self.pattern = regex
        if regex:
            from batchgate.jobs.checks import safe_regex  # noqa: PLC0415 — start-up: only for a job with a regex

            try:
                self._regex = safe_regex.compile_pattern(regex)
            except (ValueError, TypeError) as exc:
                raise ConfigError(
                    source, "job.validate_regex", f"invalid regular expression: {exc}"
                ) from None
        if schema is not None:
            from batchgate.jobs.checks import schema_check  # noqa: PLC0415 — start-up: only for a job with a schema

            try:
                self._validator = schema_check.compile_schema(schema)
            except schema_check.SchemaRefused as exc:
                raise ConfigError(source, "job.validate_schema", str(exc)) from None

    @property
    def active(self) -> bool:
        return self._regex is not None or self._validator is not None

    async def acheck(self, text: str | None) -> str | None:
        """`problem` in a thread of the checks' own pool, off the event loop. The time limit runs
        from the moment the check starts (a check queued behind others is not failed for their
        time); past it the answer fails its check and the thread stops at its next match."""
        loop = asyncio.get_running_loop()
        started: asyncio.Future[None] = loop.create_future()
        stop = threading.Event()

        def run() -> str | None:
            loop.call_soon_threadsafe(_resolve, started)
            return self.problem(text, stop)

        running = loop.run_in_executor(_checks(), run)
        try:
            await asyncio.shield(started)
            return await asyncio.wait_for(running, CHECK_SECONDS)
        except TimeoutError:
            return TIMED_OUT
        finally:
            stop.set()  # a no-op once the check has ended

    def problem(self, text: str | None, stop: threading.Event | None = None) -> str | None:
        """None when the answer is acceptable, else a one-line reason (never a traceback)."""
        if text is None:
            return "the answer has no text"
        if not self.active:
            return None
        from batchgate.jobs.checks import safe_regex  # noqa: PLC0415 — start-up: only for a job with a check

        token = safe_regex.stopping(stop)
        try:
            return self._problem(text)
        except safe_regex.CheckTimeout:
            return TIMED_OUT
        except Exception as exc:  # the validator failed on this answer: said by kind, no document
            return f"the output check could not run on this answer ({type(exc).__name__})"
        finally:
            safe_regex.reset(token)

    def _problem(self, text: str) -> str | None:
        from batchgate.jobs.checks import safe_regex  # noqa: PLC0415 — start-up: only for a job with a check

        if self._regex is not None and not safe_regex.fullmatch(self._regex, text.strip()):
            return f"the answer does not match {self.pattern!r}"
        if self._validator is not None:
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError:
                return "the answer is not JSON"
            error = next(iter(self._validator.iter_errors(value)), None)
            if error is not None:
                path = "/".join(str(p) for p in error.absolute_path) or "(root)"
                return f"the answer fails the schema at {path}: {error.message[:200]}"
        return None


def check_compiles(regex: str | None, schema: Mapping[str, object] | None) -> None:
    """A job's output check compiled as its run will compile it (`JobSpecError` naming
    `validate.regex` / `validate.schema`: a 400, as a check the engine cannot take is refused at
    creation); the `check_output` of `config.job_spec.parse_job_spec` for a tenant's job."""
    if regex is not None:
        from batchgate.jobs.checks import safe_regex  # noqa: PLC0415 — start-up: only for a job with a regex

        try:
            safe_regex.compile_pattern(regex)
        except safe_regex.PatternTooLarge as exc:
            raise JobSpecError("validate.regex", f"a pattern too large to compile ({exc})") from None
        except (ValueError, TypeError) as exc:
            raise JobSpecError("validate.regex", f"not a regular expression ({exc})") from None
    if schema is not None:
        from batchgate.jobs.checks import schema_check  # noqa: PLC0415 — start-up: only for a job with a schema

        try:
            schema_check.compile_schema(schema)
        except schema_check.SchemaRefused as exc:
            raise JobSpecError("validate.schema", str(exc)) from None
        except Exception as exc:  # a schema the validator library cannot even read: said by kind only
            reason = f"not a usable JSON Schema ({type(exc).__name__})"
            raise JobSpecError("validate.schema", reason) from None
