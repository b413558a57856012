"""The Batch API calls every client makes the same way, whatever the provider: checking a handle is
the client's own, reading and parsing batch objects, polling until a batch ends, cancelling, and
turning result lines into `BatchItemResult`s. A client holds one `BatchCalls` (composition: the
one seam is the `BatchClient` protocol) and adds how it submits and where its results live."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from batchgate.clock import Clock
from batchgate.errors import BatchgateError
from batchgate.policy.poll import PollPolicy
from batchgate.providers.batch.common import (
    BatchHandle,
    BatchHTTP,
    BatchItemResult,
    BatchStatus,
    parse_jsonl,
    poll_until_done,
)
from batchgate.providers.classify import malformed
from batchgate.urls import joined


@dataclass(frozen=True, slots=True)
class BatchCalls:
    """One provider's batch collection at `batches_url` (a batch is `{batches_url}/{batch_id}`),
    its objects read by `parse_status` (ValueError: not a batch object)."""

    name: str
    kind: str
    http: BatchHTTP
    batches_url: str
    parse_status: Callable[[Mapping[str, Any]], BatchStatus]
    clock: Clock
    poll: PollPolicy

    def batch_url(self, handle: BatchHandle) -> str:
        if handle.kind != self.kind or handle.provider != self.name:
            raise ValueError(f"{self.name}: the handle {handle.to_dict()} belongs to another provider")
        return joined(self.batches_url, handle.batch_id)

    def _status(self, raw: dict[str, Any]) -> BatchStatus:
        try:
            return self.parse_status(raw)
        except ValueError as exc:
            raise malformed(self.name, 200, {}, orjson.dumps(raw), f"not a batch object: {exc}") from None

    async def status(self, handle: BatchHandle) -> BatchStatus:
        return self._status(await self.http.json("GET", self.batch_url(handle)))

    async def poll_until_done(
        self, handle: BatchHandle, *, on_status: Callable[[BatchStatus], None] | None = None
    ) -> BatchStatus:
        """Poll, with a growing interval on the injected clock, until the batch has ended."""
        return await poll_until_done(lambda: self.status(handle), self.clock, self.poll, on_status=on_status)

    async def cancel(self, handle: BatchHandle) -> BatchStatus:
        """Ask the provider to cancel; the answer is usually still in progress (cancelling)."""
        return self._status(await self.http.json("POST", joined(self.batch_url(handle), "cancel")))

    async def ended(self, handle: BatchHandle) -> BatchStatus:
        """The status of a batch that has ended; `BatchgateError` if it has not."""
        status = await self.status(handle)
        if not status.done:
            raise BatchgateError(f"{self.name}: batch {handle.batch_id} has not ended yet ({status.state})")
        return status

    def items(
        self, data: bytes, what: str, parse: Callable[[Mapping[str, Any]], BatchItemResult]
    ) -> list[BatchItemResult]:
        """Each JSONL line of `data` (a `what`) parsed into a result."""
        results: list[BatchItemResult] = []
        for line in parse_jsonl(data, self.name, what):
            try:
                results.append(parse(line))
            except ValueError as exc:
                raise malformed(self.name, 200, {}, orjson.dumps(line), f"a {what} line: {exc}") from None
        return results
