"""What every Batch API client does the same way, whatever the provider: checking a handle is
its own, reading and parsing batch objects, polling until a batch ends, cancelling, and turning
result lines into `BatchItemResult`s. The provider clients add how they submit and where their
results live."""

from __future__ import annotations

from collections.abc import Callable, Mapping
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


class BatchClientBase:
    kind: str
    name: str
    base_url: str
    _http: BatchHTTP
    _clock: Clock
    _poll: PollPolicy

    def _batches_url(self) -> str:
        """The collection URL; a batch is `{this}/{batch_id}`."""
        raise NotImplementedError

    def _parse_status(self, raw: Mapping[str, Any]) -> BatchStatus:
        raise NotImplementedError

    def _batch_url(self, handle: BatchHandle) -> str:
        if handle.kind != self.kind or handle.provider != self.name:
            raise ValueError(f"{self.name}: the handle {handle.to_dict()} belongs to another provider")
        return f"{self._batches_url()}/{handle.batch_id}"

    def _status(self, raw: dict[str, Any]) -> BatchStatus:
        try:
            return self._parse_status(raw)
        except ValueError as exc:
            raise malformed(self.name, 200, {}, orjson.dumps(raw), f"not a batch object: {exc}") from None

    async def status(self, handle: BatchHandle) -> BatchStatus:
        return self._status(await self._http.json("GET", self._batch_url(handle)))

    async def poll_until_done(
        self, handle: BatchHandle, *, on_status: Callable[[BatchStatus], None] | None = None
    ) -> BatchStatus:
        """Poll, with a growing interval on the injected clock, until the batch has ended."""
        return await poll_until_done(
            lambda: self.status(handle), self._clock, self._poll, on_status=on_status
        )

    async def cancel(self, handle: BatchHandle) -> BatchStatus:
        """Ask the provider to cancel; the answer is usually still in progress (cancelling)."""
        return self._status(await self._http.json("POST", f"{self._batch_url(handle)}/cancel"))

    async def _ended(self, handle: BatchHandle) -> BatchStatus:
        status = await self.status(handle)
        if not status.done:
            raise BatchgateError(f"{self.name}: batch {handle.batch_id} has not ended yet ({status.state})")
        return status

    def _items(
        self, data: bytes, what: str, parse: Callable[[Mapping[str, Any]], BatchItemResult]
    ) -> list[BatchItemResult]:
        results: list[BatchItemResult] = []
        for line in parse_jsonl(data, self.name, what):
            try:
                results.append(parse(line))
            except ValueError as exc:
                raise malformed(self.name, 200, {}, orjson.dumps(line), f"a {what} line: {exc}") from None
        return results

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, base_url={self.base_url!r})"
