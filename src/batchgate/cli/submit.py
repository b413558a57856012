"""`batchgate submit INPUT --server URL [--priority P] [--follow] [--output OUT]`: send a job to
`batchgate serve` through its OpenAI-compatible API (upload INPUT, create a batch on the endpoint
its first line's `url` names: a batch takes one) and print the batch id — or, with any of the
job's own options (`--priority high|normal|low`, `--name`, `--not-before`, `--deadline`,
`--callback-url`, `--metadata KEY=VALUE`, `--mode`: the flags and the parser `run` uses,
`cli/job_flags`), through the native job API (`POST /v1/jobs` with them; its lines may mix
endpoints) and print the job id. With `--follow`, wait for it to end, printing its progress to
stderr, and write its output (and errors, `OUT.errors.jsonl`) when `--output` is given. The client
key comes from `--key` or `BATCHGATE_API_KEY`; it is never printed.

Exit codes: 0 submitted (or, with --follow, completed with every line answered), 4 completed with
failed lines, 3 the batch failed, was cancelled or expired, 2 a refusal or an unreachable server.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from batchgate.cli.job_flags import add_spec_options, spec_fields, spec_of
from batchgate.endpoints import PATHS
from batchgate.errors import JobError

if TYPE_CHECKING:
    import aiohttp

KEY_ENV = "BATCHGATE_API_KEY"
ENDPOINT = PATHS["chat"]  # a batch's endpoint when its first line names none (a plain line)
ENDED = ("completed", "failed", "cancelled", "expired")
POLL_FIRST_S, POLL_MAX_S = 0.5, 5.0
EXIT_OK, EXIT_ENDED_BADLY, EXIT_FAILED_ITEMS = 0, 3, 4


@dataclass(frozen=True, slots=True)
class _Kind:
    """What was submitted, and where its figures are: an OpenAI batch or a native job."""

    noun: str
    path: str
    status: str  # the key of its status
    ended: tuple[str, ...]
    done: str  # the key of its answered count in `request_counts`


BATCH = _Kind("batch", "/batches", "status", ENDED, "completed")
JOB = _Kind("job", "/jobs", "state", ("completed", "failed", "cancelled"), "succeeded")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "submit",
        help="send a JSONL job to a running `batchgate serve`",
        description="Upload INPUT to a batchgate server and run it as a batch there.",
    )
    parser.add_argument("input", type=Path, help="JSONL requests (any shape `batchgate run` accepts)")
    parser.add_argument("--server", required=True, help="the server's URL, e.g. http://127.0.0.1:8500")
    parser.add_argument("--key", default=None, help=f"client key (default: ${KEY_ENV})")
    add_spec_options(parser, local=False)  # any of them: a native job instead of a batch
    parser.add_argument("--follow", action="store_true", help="wait for the batch to end, showing progress")
    parser.add_argument("--output", type=Path, default=None, help="with --follow: write the results here")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    key = args.key or os.environ.get(KEY_ENV)
    if not key:
        raise JobError(
            f"no client key: pass --key or set {KEY_ENV} (create one with `batchgate keys create`)"
        )
    if not args.input.is_file():
        raise JobError(f"{args.input}: no such file")
    if args.output is not None and not args.follow:
        raise JobError("--output needs --follow (the results exist only once the batch has ended)")
    import asyncio  # noqa: PLC0415 — not at import: `--help` never needs asyncio (~40 ms)

    spec = spec_fields(args)
    spec_of(spec)  # refused here, naming the flag, before anything is uploaded
    return asyncio.run(_submit(args, key, spec))


async def _submit(args: argparse.Namespace, key: str, spec: dict[str, object]) -> int:
    import aiohttp  # noqa: PLC0415 — the HTTP stack only when submitting

    base = args.server.rstrip("/") + "/v1"
    headers = {"Authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        api = _Api(http, base)
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        data = args.input.read_bytes()
        form.add_field("file", data, filename=args.input.name)
        uploaded = await api.call("POST", "/files", data=form)
        kind = JOB if spec else BATCH
        body: dict[str, object] = {"input_file_id": uploaded["id"], **spec}
        if kind is BATCH:
            body.update(endpoint=batch_endpoint(data), completion_window="24h")
        made = await api.call("POST", kind.path, json=body)
        print(made["id"], flush=True)
        print(f"submitted {args.input} as {kind.noun} {made['id']} ({made[kind.status]})", file=sys.stderr)
        if not args.follow:
            return EXIT_OK
        made = await _follow(api, kind, made)
        if args.output is not None:
            await (_download(api, made, args.output) if kind is BATCH else _results(api, made, args.output))
        return _exit_code(kind, made)


def batch_endpoint(data: bytes) -> str:
    """The endpoint of a batch over `data`: its first line's `url` when that names one of the
    endpoints (the server checks that every line names the same), else chat."""
    first = next((line for line in data.splitlines() if line.strip()), b"")
    try:
        url = orjson.loads(first).get("url")
    except (orjson.JSONDecodeError, AttributeError):
        return ENDPOINT
    return url if url in PATHS.values() else ENDPOINT


class _Api:
    def __init__(self, http: aiohttp.ClientSession, base: str) -> None:
        self.http, self.base = http, base

    async def call(
        self,
        method: str,
        path: str,
        *,
        json: Mapping[str, object] | None = None,
        data: aiohttp.FormData | None = None,
    ) -> dict[str, object]:
        """The server's JSON object: a file, a batch or a job, its values read where they are used."""
        raw = await self.raw(method, path, json=json, data=data)
        result: dict[str, object] = orjson.loads(raw)
        return result

    async def raw(
        self,
        method: str,
        path: str,
        *,
        json: Mapping[str, object] | None = None,
        data: aiohttp.FormData | None = None,
    ) -> bytes:
        import aiohttp  # noqa: PLC0415 — the HTTP stack only when submitting

        try:
            async with self.http.request(method, self.base + path, json=json, data=data) as response:
                answer: bytes = await response.read()
                if response.status >= 400:
                    raise JobError(f"the server refused {method} {path}: {_message(answer, response.status)}")
                return answer
        except aiohttp.ClientError as exc:
            raise JobError(f"cannot reach the server at {self.base}: {exc.__class__.__name__}") from None


def _message(data: bytes, status: int) -> str:
    try:
        error = orjson.loads(data)["error"]
        return f"{status} {error['message']}"
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return f"HTTP {status}"


async def _follow(api: _Api, kind: _Kind, batch: dict[str, object]) -> dict[str, object]:
    """Poll the batch or job until it ends (a remote state: there is nothing to wait on but
    time), printing each change of its status or counts."""
    from batchgate.clock import LoopClock  # noqa: PLC0415 — the clock imports asyncio: not for --help

    clock = LoopClock()
    delay, seen = POLL_FIRST_S, ""
    while batch[kind.status] not in kind.ended:
        await clock.sleep(delay)
        delay = min(POLL_MAX_S, delay * 1.5)
        batch = await api.call("GET", f"{kind.path}/{batch['id']}")
        counts = _counts(batch)
        line = f"{batch[kind.status]}: {counts.get(kind.done, 0)} done, {counts.get('failed', 0)} failed"
        line += f" of {counts.get('total', 0)}"
        if line != seen:
            print(line, file=sys.stderr, flush=True)
            seen = line
    return batch


async def _download(api: _Api, batch: Mapping[str, object], output: Path) -> None:
    errors_path = output.with_name(output.name + ".errors.jsonl")
    for file_id, path in ((batch.get("output_file_id"), output), (batch.get("error_file_id"), errors_path)):
        if file_id:
            path.write_bytes(await api.raw("GET", f"/files/{file_id}/content"))
            print(f"wrote {path}", file=sys.stderr)


async def _results(api: _Api, job: Mapping[str, object], output: Path) -> None:
    """A job's finished items: answered ones to `output`, failed ones to `OUT.errors.jsonl`."""
    errors_path = output.with_name(output.name + ".errors.jsonl")
    answered: list[bytes] = []
    failed: list[bytes] = []
    for line in (await api.raw("GET", f"/jobs/{job['id']}/results")).splitlines():
        if line.strip():
            (failed if orjson.loads(line).get("error") else answered).append(line + b"\n")
    for path, lines in ((output, answered), (errors_path, failed)):
        if lines or path is output:
            path.write_bytes(b"".join(lines))
            print(f"wrote {path}", file=sys.stderr)


def _exit_code(kind: _Kind, batch: Mapping[str, object]) -> int:
    if batch[kind.status] != "completed":
        print(f"{kind.noun} {batch['id']} ended {batch[kind.status]}: {batch.get('errors')}", file=sys.stderr)
        return EXIT_ENDED_BADLY
    return EXIT_FAILED_ITEMS if _counts(batch).get("failed") else EXIT_OK


def _counts(batch: Mapping[str, object]) -> Mapping[str, object]:
    """A batch's or job's `request_counts` (none yet: empty)."""
    counts = batch.get("request_counts")
    return counts if isinstance(counts, dict) else {}
