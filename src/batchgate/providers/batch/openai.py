"""The client for the OpenAI Batch API: upload a JSONL file (`purpose=batch`), create the batch on
its requests' endpoint (`/v1/chat/completions`, `/v1/embeddings`, `/v1/responses` or
`/v1/completions`, as each body names it: `batchgate.endpoints`; one endpoint per batch,
shared/PROTOCOLS.md) with a 24 h window, poll it with growing intervals, download the output
and error files, cancel. A result's usage is read in its endpoint's shape.

A failed batch creation deletes the file it uploaded (best effort). Output and error lines are
turned into `BatchItemResult`s by `openai_item_result`; the status into a `BatchStatus` by
`openai_status`. Both are pure and unit-tested.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp
import orjson

from batchgate.clock import Clock, LoopClock
from batchgate.config import ProviderConfig, TimeoutConfig
from batchgate.endpoints import PATHS, endpoint_of, wire_body
from batchgate.errors import ProviderError
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
from batchgate.providers.classify import error_fields, malformed
from batchgate.providers.openai import openai_headers, usage_of_answer
from batchgate.urls import joined

COMPLETION_WINDOW = "24h"
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024
STATES: Mapping[str, BatchState] = {
    "validating": "in_progress",
    "in_progress": "in_progress",
    "finalizing": "in_progress",
    "cancelling": "in_progress",
    "completed": "completed",
    "expired": "expired",
    "cancelled": "cancelled",
    "failed": "failed",
}


def openai_status(raw: Mapping[str, Any]) -> BatchStatus:
    """The neutral status of an OpenAI batch object; ValueError when it is not one."""
    state = STATES.get(raw.get("status"))  # type: ignore[arg-type]
    if state is None:
        raise ValueError(f"unknown batch status {raw.get('status')!r}")
    counts = raw.get("request_counts")
    counts = counts if isinstance(counts, Mapping) else {}
    total, completed, failed = (_int(counts.get(k)) for k in ("total", "completed", "failed"))
    processing = max(0, total - completed - failed) if state == "in_progress" else 0
    return BatchStatus(state, BatchCounts(total, processing, completed, failed), raw)


def openai_item_result(line: Mapping[str, Any]) -> BatchItemResult:
    """One line of an output or error file as a result; ValueError when it is not one."""
    custom_id = line.get("custom_id")
    if not isinstance(custom_id, str):
        raise ValueError("no custom_id")
    error = line.get("error")
    if isinstance(error, Mapping):
        code, message = error.get("code"), error.get("message")
        return BatchItemResult(
            custom_id,
            ok=False,
            error=ItemError(
                code if isinstance(code, str) else "error", message if isinstance(message, str) else ""
            ),
        )
    response = line.get("response")
    if not isinstance(response, Mapping):
        raise ValueError("neither a response nor an error")
    status = _int(response.get("status_code"))
    body = response.get("body")
    if 200 <= status < 300 and isinstance(body, dict):
        return BatchItemResult(custom_id, ok=True, body=body, usage=usage_of_answer(body), status_code=status)
    etype, ecode, message = error_fields(body)
    return BatchItemResult(
        custom_id,
        ok=False,
        error=ItemError(ecode or etype or f"http_{status}", message or ""),
        status_code=status,
    )


def _int(value: Any) -> int:
    return value if type(value) is int else 0


class OpenAIBatchClient:
    """Runs batches on one OpenAI-compatible provider's Batch API."""

    kind = "openai"

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
    ) -> None:
        self.name = config.name
        self.base_url = (base_url or config.base_url).rstrip("/")
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        headers = openai_headers(config, {"Accept": "application/json"})
        self._http = BatchHTTP(session, timeouts, config.name, config.secret, headers, config.network)
        collections = self.collections_base(config)
        self._files = joined(collections, "files")
        self._batches = joined(collections, "batches")
        self._calls = calls = BatchCalls(
            self.name,
            self.kind,
            self._http,
            self._batches,
            openai_status,
            clock or LoopClock(),
            poll or PollPolicy(),
        )
        # status, poll_until_done and cancel are the same calls on every Batch API
        self.status, self.poll_until_done, self.cancel = calls.status, calls.poll_until_done, calls.cancel

    def collections_base(self, config: ProviderConfig) -> str:
        """The base of the `files` and `batches` collections (a query in it stays after them)."""
        return self.base_url

    def line_url(self, path: str) -> str:
        """The `url` of an input line and the batch's `endpoint` for endpoint path `path`."""
        return f"/v1/{path}"

    def wire_model(self, model: str | None) -> str | None:
        """The `model` each line's body names (None: the request's own)."""
        return model

    def _line(self, request: BatchRequest, model: str | None) -> bytes:
        path, body = wire_body(body_for(request, self.wire_model(model), self.name))
        line = {"custom_id": request.custom_id, "method": "POST", "url": self.line_url(path), "body": body}
        return orjson.dumps(line)

    def split(
        self, requests: Sequence[BatchRequest], *, model: str | None = None
    ) -> list[list[BatchRequest]]:
        """`requests` cut into input files within `max_requests` lines and `max_bytes` bytes."""
        return split_for_batches(
            requests, self.max_requests, self.max_bytes, lambda r: len(self._line(r, model)) + 1
        )

    async def submit(
        self,
        requests: Sequence[BatchRequest],
        *,
        model: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> BatchHandle:
        """Upload `requests` as one input file and create the batch; its handle."""
        if not requests:
            raise ValueError("a batch needs at least one request")
        endpoints = {endpoint_of(r.body) for r in requests}
        if len(endpoints) > 1:
            raise ValueError(f"one endpoint per batch, got {', '.join(sorted(endpoints))}")
        data = b"".join(self._line(r, model) + b"\n" for r in requests)
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", data, filename="batchgate-input.jsonl", content_type="application/jsonl")
        uploaded = await self._http.json("POST", self._files, form, json_body=False)
        file_id = uploaded.get("id")
        if not isinstance(file_id, str):
            raise malformed(self.name, 200, {}, orjson.dumps(uploaded), "the file object has no id")
        payload: dict[str, Any] = {
            "input_file_id": file_id,
            "endpoint": self.line_url(PATHS[endpoints.pop()].removeprefix("/v1/")),
            "completion_window": COMPLETION_WINDOW,
        }
        if metadata:
            payload["metadata"] = dict(metadata)
        try:
            batch = await self._http.json("POST", self._batches, orjson.dumps(payload))
        except ProviderError:
            with contextlib.suppress(ProviderError):
                await self._http.raw("DELETE", joined(self._files, file_id))
            raise
        batch_id = batch.get("id")
        if not isinstance(batch_id, str):
            raise malformed(self.name, 200, {}, orjson.dumps(batch), "the batch object has no id")
        return BatchHandle(self.name, batch_id, self.kind)

    async def results(self, handle: BatchHandle) -> list[BatchItemResult]:
        """Every result of an ended batch (output file, then error file); [] for a failed one."""
        status = await self._calls.ended(handle)
        results: list[BatchItemResult] = []
        for key in ("output_file_id", "error_file_id"):
            file_id = status.raw.get(key)
            if isinstance(file_id, str) and file_id:
                data = await self._http.raw("GET", joined(self._files, file_id, "content"))
                results.extend(self._calls.items(data, f"batch {key[:-8]} file", openai_item_result))
        return results

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"
