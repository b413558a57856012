"""The client for Gemini's batch mode (AI Studio; half the live price): create a batch with
`POST {base}/v1beta/models/{model}:batchGenerateContent`, inline (up to 20 MB) or from a JSONL
file uploaded through the Files API's resumable upload (`/upload/v1beta/files`), poll the
operation at `/v1beta/batches/{id}` (states BATCH_STATE_* — the SDK's JOB_STATE_* — both read),
read its inlined responses or download its `responsesFile`, cancel with `:cancel`.
https://ai.google.dev/gemini-api/docs/batch-mode, https://ai.google.dev/api/batch-mode,
https://ai.google.dev/api/files.

Each request carries its custom_id as its `key` (`metadata.key` inline); each response is
normalised by `gemini_item_result` (a `chat.completion` via `gemini_answer`, or an error named by
its Google status). Requests a batch did not process (expired, cancelled) are absent from its
output: the batch runner tries them again. Vertex AI's batch prediction reads and writes Cloud
Storage or BigQuery and is not supported (a `ConfigError`: use `batch_api: false`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from batchgate.clock import Clock, LoopClock
from batchgate.config import ProviderConfig, TimeoutConfig
from batchgate.endpoints import wire_body
from batchgate.errors import BadRequestError, ConfigError, UnsupportedField
from batchgate.models import Usage
from batchgate.policy.poll import PollPolicy
from batchgate.providers.batch.calls import BatchCalls
from batchgate.providers.batch.common import (
    BatchCounts,
    BatchHandle,
    BatchHTTP,
    BatchItemResult,
    BatchRequest,
    BatchState,
    BatchStatus,
    ItemError,
    body_for,
    split_for_batches,
)
from batchgate.providers.classify import malformed
from batchgate.providers.gemini_answer import gemini_to_openai
from batchgate.providers.gemini_auth import api_key_headers
from batchgate.providers.gemini_translate import openai_to_gemini
from batchgate.urls import joined

MAX_REQUESTS = 100_000  # no count is documented; the file's 2 GB is
MAX_BYTES = 2 * 1024 * 1024 * 1024
INLINE_MAX_BYTES = 20 * 1024 * 1024  # "the total request size under 20MB" (batch-mode docs)
DISPLAY_NAME = "batchgate"
_STATES: Mapping[str, BatchState] = {
    "PENDING": "in_progress",
    "RUNNING": "in_progress",
    "SUCCEEDED": "completed",
    "FAILED": "failed",
    "CANCELLED": "cancelled",
    "EXPIRED": "expired",
}


def gemini_status(raw: Mapping[str, Any]) -> BatchStatus:
    """The neutral status of a batch operation; ValueError when it is not one."""
    metadata = raw.get("metadata")
    state = metadata.get("state") if isinstance(metadata, Mapping) else None
    if not isinstance(state, str):
        raise ValueError("no metadata.state")
    neutral = _STATES.get(state.removeprefix("BATCH_STATE_").removeprefix("JOB_STATE_"))
    if neutral is None:
        raise ValueError(f"unknown state {state!r}")
    assert isinstance(metadata, Mapping)
    stats = metadata.get("batchStats")
    s = stats if isinstance(stats, Mapping) else {}
    total, ok, failed, pending = (
        _int(s.get(k))
        for k in ("requestCount", "successfulRequestCount", "failedRequestCount", "pendingRequestCount")
    )
    unprocessed = pending if neutral in ("expired", "cancelled") else 0
    counts = BatchCounts(
        total=total,
        processing=0 if unprocessed else pending,
        succeeded=ok,
        errored=failed,
        cancelled=unprocessed if neutral == "cancelled" else 0,
        expired=unprocessed if neutral == "expired" else 0,
    )
    return BatchStatus(neutral, counts, raw)


def _int(value: Any) -> int:
    """An int64 count: proto3 JSON writes it as a string."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value if type(value) is int else 0


def gemini_item_result(key: Any, entry: Mapping[str, Any], model: str, created: int) -> BatchItemResult:
    """One response of a batch (`response` or `error`) as a result; ValueError when it is neither."""
    if not isinstance(key, str):
        raise ValueError("a response without its key")
    response = entry.get("response")
    if isinstance(response, Mapping):
        body = gemini_to_openai(response, model=model, created=created)
        u = body["usage"]
        usage = Usage(u["prompt_tokens"], u["completion_tokens"], u["prompt_tokens_details"]["cached_tokens"])
        return BatchItemResult(key, ok=True, body=body, usage=usage, status_code=200)
    error = entry.get("error")
    if not isinstance(error, Mapping):
        raise ValueError("neither a response nor an error")
    code, status, message = error.get("code"), error.get("status"), error.get("message")
    return BatchItemResult(
        key,
        ok=False,
        error=ItemError(
            status if isinstance(status, str) else "error", message if isinstance(message, str) else ""
        ),
        status_code=code if type(code) is int else None,
    )


class GeminiBatchClient:
    """Runs batches on one Gemini provider's batch mode (AI Studio)."""

    kind = "gemini"

    def __init__(
        self,
        config: ProviderConfig,
        session: aiohttp.ClientSession,
        timeouts: TimeoutConfig,
        *,
        base_url: str | None = None,
        clock: Clock | None = None,
        poll: PollPolicy | None = None,
        max_requests: int = MAX_REQUESTS,
        max_bytes: int = MAX_BYTES,
        inline_max_bytes: int = INLINE_MAX_BYTES,
    ) -> None:
        if config.vertex is not None:
            raise ConfigError(
                "<config>",
                f"providers.{config.name}.batch_api",
                "Vertex AI's batch prediction reads Cloud Storage or BigQuery, which batchgate does "
                "not write: set batch_api: false (or use an AI Studio entry for batch mode)",
            )
        self.name = config.name
        self.base_url = (base_url or config.base_url).rstrip("/")
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self.inline_max_bytes = inline_max_bytes
        self._clock: Clock = clock or LoopClock()
        headers = api_key_headers(config)
        headers.pop("Content-Type", None)

        def http(**extra: str) -> BatchHTTP:
            return BatchHTTP(
                session, timeouts, config.name, config.secret, {**headers, **extra}, config.network
            )

        self._http = http()
        self._start_upload = http(**{"X-Goog-Upload-Protocol": "resumable", "X-Goog-Upload-Command": "start"})
        self._finish_upload = http(
            **{"X-Goog-Upload-Command": "upload, finalize", "X-Goog-Upload-Offset": "0"}
        )
        self._calls = calls = BatchCalls(
            self.name,
            self.kind,
            self._http,
            joined(self.base_url, "v1beta/batches"),
            gemini_status,
            self._clock,
            poll or PollPolicy(),
        )
        self.status, self.poll_until_done = calls.status, calls.poll_until_done

    def _entry(self, request: BatchRequest, model: str | None) -> tuple[str, dict[str, Any]]:
        body = body_for(request, model, self.name)
        try:
            payload = wire_body({k: v for k, v in body.items() if k != "custom_id"})[1]  # no own keys
            return body["model"], openai_to_gemini(payload)
        except UnsupportedField as exc:
            raise BadRequestError(
                f"{self.name}: {exc} (custom_id {request.custom_id!r})", provider=self.name
            ) from None

    def split(
        self, requests: Sequence[BatchRequest], *, model: str | None = None
    ) -> list[list[BatchRequest]]:
        """`requests` cut into batches within `max_requests` requests and `max_bytes` bytes (each
        request measured as its inline entry, the larger of its two forms)."""
        return split_for_batches(
            requests,
            self.max_requests,
            self.max_bytes - len(_envelope([])),
            lambda r: len(orjson.dumps(_inline(self._line(r, model)))) + 1,
        )

    def _line(self, request: BatchRequest, model: str | None) -> dict[str, Any]:
        return {"key": request.custom_id, "request": self._entry(request, model)[1]}

    async def submit(
        self,
        requests: Sequence[BatchRequest],
        *,
        model: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> BatchHandle:
        """Create one batch of `requests`: inline when it fits in 20 MB, else from an uploaded file
        (`metadata` has no place in Gemini's batch: ignored). All requests go to one model."""
        if not requests:
            raise ValueError("a batch needs at least one request")
        target = self._entry(requests[0], model)[0]
        lines = [self._line(r, model) for r in requests]
        payload = _envelope([_inline(line) for line in lines])
        if len(payload) > self.inline_max_bytes:
            file_name = await self._upload(b"".join(orjson.dumps(line) + b"\n" for line in lines))
            payload = orjson.dumps(
                {"batch": {"displayName": DISPLAY_NAME, "inputConfig": {"fileName": file_name}}}
            )
        url = joined(self.base_url, f"v1beta/models/{target}:batchGenerateContent")
        batch = await self._http.json("POST", url, payload)
        name = batch.get("name")
        if not isinstance(name, str) or not name.startswith("batches/"):
            raise malformed(self.name, 200, {}, orjson.dumps(batch), "the batch operation has no name")
        return BatchHandle(self.name, name.removeprefix("batches/"), self.kind)

    async def _upload(self, data: bytes) -> str:
        """Upload `data` (JSONL) through the resumable protocol; the file's name (`files/ID`)."""
        start = joined(self.base_url, "upload/v1beta/files")
        meta = orjson.dumps({"file": {"displayName": "batchgate-input", "mimeType": "application/jsonl"}})
        status, headers, body = await self._start_upload.call("POST", start, meta)
        location = headers.get("X-Goog-Upload-URL")
        if not 200 <= status < 300 or not location:
            raise malformed(
                self.name, status, headers, body, "the upload did not start (no X-Goog-Upload-URL)"
            )
        # the key only ever goes to the configured base URL: its path, the answer's query
        finish = f"{start}?{urlsplit(location).query}"
        answer = await self._finish_upload.json("POST", finish, data, json_body=False)
        file = answer.get("file")
        name = file.get("name") if isinstance(file, Mapping) else None
        if not isinstance(name, str):
            raise malformed(self.name, 200, {}, orjson.dumps(answer), "the uploaded file has no name")
        return name

    async def results(self, handle: BatchHandle) -> list[BatchItemResult]:
        """Every response of an ended batch: its inlined responses or its downloaded file."""
        status = await self._calls.ended(handle)
        metadata = status.raw.get("metadata")
        meta: Mapping[str, Any] = metadata if isinstance(metadata, Mapping) else {}
        output = meta.get("output") or status.raw.get("response") or {}
        model = str(meta.get("model", "")).removeprefix("models/")
        created = int(self._clock.wall())
        file_name = output.get("responsesFile") if isinstance(output, Mapping) else None
        if isinstance(file_name, str):
            data = await self._http.raw(
                "GET", joined(self.base_url, f"download/v1beta/{file_name}:download?alt=media")
            )
            return self._calls.items(
                data, "batch result", lambda line: gemini_item_result(line.get("key"), line, model, created)
            )
        outer = output.get("inlinedResponses") if isinstance(output, Mapping) else None
        inlined = outer.get("inlinedResponses") if isinstance(outer, Mapping) else []
        data = b"\n".join(orjson.dumps(entry) for entry in inlined or [])
        return self._calls.items(
            data, "batch response", lambda e: gemini_item_result(_key(e), e, model, created)
        )

    async def cancel(self, handle: BatchHandle) -> BatchStatus:
        """Ask Gemini to cancel (it answers `{}`); the batch's status after."""
        await self._http.json("POST", f"{self._calls.batch_url(handle)}:cancel", b"{}")
        return await self.status(handle)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"


def _inline(line: Mapping[str, Any]) -> dict[str, Any]:
    """A file line `{"key", "request"}` as an inline entry `{"request", "metadata": {"key"}}`."""
    return {"request": line["request"], "metadata": {"key": line["key"]}}


def _envelope(inline: list[dict[str, Any]]) -> bytes:
    """The create body of an inline batch (`[]`: its size without the requests)."""
    return orjson.dumps(
        {"batch": {"displayName": DISPLAY_NAME, "inputConfig": {"requests": {"requests": inline}}}}
    )


def _key(entry: Mapping[str, Any]) -> Any:
    metadata = entry.get("metadata")
    return metadata.get("key") if isinstance(metadata, Mapping) else None
