"""The emulated Gemini batch mode and the Files API it reads (shared/PROTOCOLS.md "Gemini";
https://ai.google.dev/gemini-api/docs/batch-mode, https://ai.google.dev/api/batch-mode,
https://ai.google.dev/api/files):

- `POST /v1beta/models/{model}:batchGenerateContent` with `{"batch": {"displayName", "inputConfig":
  {"requests": {"requests": [{"request", "metadata": {"key"}}]}} | {"fileName": "files/ID"}}}`; a
  file holds JSONL lines `{"key", "request"}`. Inline requests are capped at 20 MB, a file at 2 GB.
  Each request is validated later, as `generateContent` would, and a bad one is an error result.
- The batch is an operation: `{"name": "batches/ID", "metadata": {"@type": ...GenerateContentBatch,
  "model", "state": BATCH_STATE_PENDING|RUNNING|SUCCEEDED|FAILED|CANCELLED|EXPIRED, "batchStats"
  (int64 counts as strings), "output"}, "done", "response"}` at `GET /v1beta/batches/ID`; the SDK
  shows the states as JOB_STATE_*. `POST /v1beta/batches/ID:cancel` answers `{}`.
- Output: inline batches `inlinedResponses.inlinedResponses[{"response" | "error", "metadata"}]`,
  file batches a `responsesFile` of lines `{"key", "response" | "error"}`; requests not processed
  by the end (expired, cancelled) are absent.
- Files: the resumable upload `POST /upload/v1beta/files` (`X-Goog-Upload-Command: start` answers
  `X-Goog-Upload-URL`, then `upload, finalize` with the bytes answers `{"file": {"name", ...}}`),
  `GET /download/v1beta/files/ID:download?alt=media` (and without `/download`) the bytes. Every
  path is served under `v1` too (google-genai 3.x sends `v1`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from batchgate.emulator.batch.core import BatchProvider, BatchRun, StoredFile
from batchgate.emulator.batch.http import Route, json_object, json_response, read_limited, rfc3339_exact
from batchgate.emulator.wire import ApiError

INLINE_MAX_BYTES = 20 * 1024 * 1024
FILE_MAX_BYTES = 2 * 1024 * 1024 * 1024
BATCH_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch"
OUTPUT_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatchOutput"
_ENDED = {
    "completed": "BATCH_STATE_SUCCEEDED",
    "expired": "BATCH_STATE_EXPIRED",
    "cancelled": "BATCH_STATE_CANCELLED",
}


def _invalid(message: str) -> ApiError:
    return ApiError(400, "INVALID_ARGUMENT", message)


def _not_found(what: str) -> ApiError:
    return ApiError(404, "NOT_FOUND", f"Requested entity was not found: {what}", reason="not_found")


@dataclass(slots=True)
class GeminiBatch:
    id: str
    model: str
    display_name: str
    created_at: float
    run: BatchRun
    from_file: bool
    output: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        run = self.run
        if run.ended:
            state = _ENDED[run.end_reason or "completed"]
        else:
            state = "BATCH_STATE_PENDING" if run.done == 0 else "BATCH_STATE_RUNNING"
        stats = {
            "requestCount": str(run.total),
            "successfulRequestCount": str(run.succeeded),
            "failedRequestCount": str(run.errored),
            "pendingRequestCount": str(run.total - run.done),
        }
        metadata: dict[str, Any] = {
            "@type": BATCH_TYPE,
            "model": f"models/{self.model}",
            "displayName": self.display_name,
            "createTime": rfc3339_exact(self.created_at),
            "updateTime": rfc3339_exact(run.ended_wall or self.created_at),
            "state": state,
            "batchStats": stats,
            "name": f"batches/{self.id}",
        }
        out: dict[str, Any] = {"name": f"batches/{self.id}", "metadata": metadata, "done": run.ended}
        if run.ended and self.output is not None:
            metadata["endTime"] = rfc3339_exact(run.ended_wall or self.created_at)
            metadata["output"] = self.output
            out["response"] = {"@type": OUTPUT_TYPE, **self.output}
        return out


class GeminiBatchAPI:
    """The batch mode and Files API of one Gemini-family provider."""

    def __init__(self, bp: BatchProvider, next_id: Callable[[], int]) -> None:
        self.bp = bp
        self._next_id = next_id
        self._uploads: dict[str, str] = {}  # upload_id -> display name, between start and finalize

    def routes(self) -> Iterable[Route]:
        for v in ("v1beta", "v1"):
            yield ("POST", f"/{v}/models/{{model}}:batchGenerateContent", self.create)
            yield ("GET", f"/{v}/batches/{{batch_id}}", self.get_batch)
            yield ("POST", f"/{v}/batches/{{batch_id}}:cancel", self.cancel)
            yield ("POST", f"/upload/{v}/files", self.upload)
            yield ("GET", f"/download/{v}/files/{{file_id}}:download", self.download)
            yield ("GET", f"/{v}/files/{{file_id}}:download", self.download)  # where google-genai 3.x asks

    async def create(self, request: web.Request) -> web.StreamResponse:
        limit = min(INLINE_MAX_BYTES, self.bp.max_bytes)
        raw = await read_limited(request, limit)
        if raw is None:
            raise _invalid(f"Request payload size exceeds the limit: {limit} bytes.")
        body = json_object(raw, _invalid("Invalid JSON payload received."), _invalid("Expected an object."))
        batch = body.get("batch")
        config = batch.get("inputConfig", batch.get("input_config")) if isinstance(batch, dict) else None
        if not isinstance(batch, dict) or not isinstance(config, dict):
            raise _invalid("* BatchGenerateContentRequest.batch.input_config: input_config is not specified")
        model = request.match_info["model"]
        if self.bp.runtime.config.models is not None and model not in self.bp.runtime.config.models:
            raise self.bp.family.unknown_model(model)
        file_name = config.get("fileName", config.get("file_name"))
        entries = self._file_entries(file_name) if file_name is not None else self._inline_entries(config)
        if len(entries) > self.bp.max_requests:
            raise _invalid(f"* a batch may hold at most {self.bp.max_requests} requests, got {len(entries)}")
        if self.bp.config.fail_validation:
            raise _invalid("* BatchGenerateContentRequest.batch: the batch failed validation")
        items = [self.bp.parse_item(key, {**req, "model": model}) for key, req in entries]
        tokens = sum(item.request.prompt_tokens for item in items if item.request is not None)
        limit_tokens = self.bp.config.enqueued_token_limit
        if limit_tokens is not None and tokens > limit_tokens:
            raise _invalid(
                f"* this batch holds {tokens} input tokens, more than the whole limit of {limit_tokens}"
            )
        if not self.bp.reserve(tokens):
            raise ApiError(
                429,
                "RESOURCE_EXHAUSTED",
                f"Enqueued batch tokens would exceed the limit of {self.bp.config.enqueued_token_limit} "
                f"({self.bp.enqueued_tokens} in use). Please try again once some batches have ended.",
            )
        batch_id = f"{self._next_id():016x}"
        holder: list[GeminiBatch] = []
        run = self.bp.start_run(items, f"batch_{batch_id}", lambda run: self._ended(holder[0], run))
        name = batch.get("displayName", batch.get("display_name", ""))
        record = GeminiBatch(batch_id, model, str(name), self.bp.clock.wall(), run, file_name is not None)
        holder.append(record)
        self.bp.batches[batch_id] = record
        self.bp.stats.created += 1
        return json_response(record.to_dict())

    @staticmethod
    def _inline_entries(config: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        outer = config.get("requests")
        requests = outer.get("requests") if isinstance(outer, dict) else None
        if not isinstance(requests, list) or not requests:
            raise _invalid("* BatchGenerateContentRequest.batch.input_config.requests: requests is empty")
        out: list[tuple[str, dict[str, Any]]] = []
        for i, entry in enumerate(requests):
            req = entry.get("request") if isinstance(entry, dict) else None
            if not isinstance(req, dict):
                raise _invalid(f"* input_config.requests.requests[{i}].request: request is not specified")
            metadata = entry.get("metadata")
            key = metadata.get("key") if isinstance(metadata, dict) else None
            out.append((str(key) if key is not None else str(i), req))
        return out

    def _file_entries(self, file_name: Any) -> list[tuple[str, dict[str, Any]]]:
        stored = self.bp.files.get(str(file_name).removeprefix("files/"))
        if stored is None:
            raise _not_found(str(file_name))
        out: list[tuple[str, dict[str, Any]]] = []
        for number, line in enumerate(stored.data.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:
                raise _invalid(f"* input file line {number} is not JSON") from None
            req = entry.get("request") if isinstance(entry, dict) else None
            if not isinstance(req, dict):
                raise _invalid(f"* input file line {number} has no request")
            out.append((str(entry.get("key", number)), req))
        if not out:
            raise _invalid("* the input file holds no requests")
        return out

    def _ended(self, record: GeminiBatch, run: BatchRun) -> None:
        family = self.bp.family
        lines: list[dict[str, Any]] = []
        for i, item in enumerate(run.items):
            if item.outcome == "succeeded" and item.body is not None:
                lines.append({"response": orjson.loads(item.body), "key": item.custom_id})
            elif item.outcome == "errored" and item.error is not None:
                error = orjson.loads(family.error_body(item.error, f"req_{record.id}{i:06x}"))["error"]
                lines.append({"error": error, "key": item.custom_id})
        if not record.from_file:
            inlined = [
                {**{k: v for k, v in line.items() if k != "key"}, "metadata": {"key": line["key"]}}
                for line in lines
            ]
            record.output = {"inlinedResponses": {"inlinedResponses": inlined}}
            return
        file_id = f"batch-{record.id}"
        data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
        self.bp.files[file_id] = StoredFile(
            file_id, f"{file_id}.jsonl", "batch_output", data, int(self.bp.clock.wall())
        )
        record.output = {"responsesFile": f"files/{file_id}"}

    def _batch(self, request: web.Request) -> GeminiBatch:
        batch_id = request.match_info["batch_id"]
        record = self.bp.batches.get(batch_id)
        if not isinstance(record, GeminiBatch):
            raise _not_found(f"batches/{batch_id}")
        record.run.advance(self.bp.clock.now())
        return record

    async def get_batch(self, request: web.Request) -> web.StreamResponse:
        return json_response(self._batch(request).to_dict())

    async def cancel(self, request: web.Request) -> web.StreamResponse:
        record = self._batch(request)
        if record.run.ended:
            raise ApiError(400, "FAILED_PRECONDITION", f"Batch batches/{record.id} has already ended.")
        record.run.cancel(self.bp.clock.now())
        return json_response({})

    async def upload(self, request: web.Request) -> web.StreamResponse:
        command = request.headers.get("X-Goog-Upload-Command", "")
        if command == "start":
            if request.headers.get("X-Goog-Upload-Protocol") != "resumable":
                raise _invalid("Only the resumable upload protocol is emulated (X-Goog-Upload-Protocol).")
            meta = json_object(
                await request.read(),
                _invalid("Invalid JSON payload received."),
                _invalid("Expected an object."),
            )
            given = meta.get("file")
            file: dict[str, Any] = given if isinstance(given, dict) else {}
            upload_id = f"up{self._next_id():012x}"
            self._uploads[upload_id] = str(file.get("displayName", file.get("display_name", upload_id)))
            url = f"{request.url.origin()}{request.path}?upload_id={upload_id}&upload_protocol=resumable"
            return web.Response(
                status=200, headers={"X-Goog-Upload-URL": url, "X-Goog-Upload-Status": "active"}
            )
        upload_id = request.query.get("upload_id", "")
        if "finalize" not in command or upload_id not in self._uploads:
            raise _invalid("Unknown upload: start a resumable upload first (X-Goog-Upload-Command: start).")
        limit = min(FILE_MAX_BYTES, self.bp.max_bytes)
        data = await read_limited(request, limit)
        if data is None:
            raise _invalid(f"File size exceeds the limit of {limit} bytes.")
        file_id = f"f{self._next_id():012x}"
        wall = self.bp.clock.wall()
        self.bp.files[file_id] = StoredFile(file_id, self._uploads.pop(upload_id), "batch", data, int(wall))
        file = {
            "name": f"files/{file_id}",
            "displayName": self.bp.files[file_id].filename,
            "mimeType": "application/jsonl",
            "sizeBytes": str(len(data)),
            "createTime": rfc3339_exact(wall),
            "state": "ACTIVE",
            "uri": f"{request.url.origin()}/{self.bp.runtime.name}/v1beta/files/{file_id}",
        }
        response = json_response({"file": file})
        response.headers["X-Goog-Upload-Status"] = "final"
        return response

    async def download(self, request: web.Request) -> web.StreamResponse:
        file_id = request.match_info["file_id"]
        stored = self.bp.files.get(file_id)
        if stored is None:
            raise _not_found(f"files/{file_id}")
        return web.Response(body=stored.data, content_type="application/jsonl")
