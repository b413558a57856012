"""The durable record of a job's provider batches, kept in the job store's blobs.

One blob per batch, key `batch:<provider>:<batch_id>`, holds orjson
`{"handle": BatchHandle.to_dict(), "seqs": [...], "model", "round", "submitted_at": wall,
"state": "submitted" | "done", "ended": provider state | null, "ended_at": wall | null}`;
the index blob `batches` lists those keys in submission order. A batch's blob is written, then the
index, right after the provider accepted the batch and before anything else happens; a batch is
marked `done` only after its items' outcomes are committed. A crash between the provider accepting
a batch and these two writes loses the handle: that batch's tasks are sent again after a restart.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any, Literal

import orjson

from batchgate.errors import JobError
from batchgate.jobs.store.protocol import JobStore
from batchgate.providers.batch.common import BatchHandle

INDEX_KEY = "batches"
KEY_PREFIX = "batch:"
RecordState = Literal["submitted", "done"]


def batch_key(handle: BatchHandle) -> str:
    return f"{KEY_PREFIX}{handle.provider}:{handle.batch_id}"


@dataclass(frozen=True, slots=True)
class ProviderBatch:
    handle: BatchHandle
    seqs: tuple[int, ...]
    model: str  # the model the batch's requests were sent with
    submitted_at: float  # wall seconds
    round: int = 1  # 1 for a first submission, 2 for the leftovers of an earlier batch, ...
    state: RecordState = "submitted"
    ended: str | None = None  # the provider state it ended in: completed | expired | cancelled | failed
    ended_at: float | None = None

    @property
    def key(self) -> str:
        return batch_key(self.handle)

    def to_json(self) -> bytes:
        return orjson.dumps(
            {
                "handle": self.handle.to_dict(),
                "seqs": list(self.seqs),
                "model": self.model,
                "submitted_at": self.submitted_at,
                "round": self.round,
                "state": self.state,
                "ended": self.ended,
                "ended_at": self.ended_at,
            }
        )

    @classmethod
    def from_json(cls, job_id: str, key: str, data: bytes) -> ProviderBatch:
        """Parse a stored record; `JobError` naming the job and key when it is unreadable."""
        try:
            raw: Any = orjson.loads(data)
            handle = BatchHandle.from_dict(raw["handle"])
            seqs = raw["seqs"]
            state = raw["state"]
            if not isinstance(seqs, list) or not all(type(s) is int for s in seqs):
                raise ValueError("seqs must be a list of integers")
            if state not in ("submitted", "done") or not isinstance(raw["model"], str):
                raise ValueError("bad state or model")
            ended, ended_at = raw.get("ended"), raw.get("ended_at")
            return cls(
                handle,
                tuple(seqs),
                raw["model"],
                float(raw["submitted_at"]),
                int(raw.get("round", 1)),
                state,
                ended if isinstance(ended, str) else None,
                float(ended_at) if isinstance(ended_at, int | float) else None,
            )
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise JobError(f"job {job_id!r}: the batch record {key!r} is unreadable ({exc})") from None


class BatchLedger:
    """Reads and writes one job's batch records (the only writer while the job is locked)."""

    def __init__(self, store: JobStore, job_id: str) -> None:
        self._store = store
        self._job_id = job_id
        self._keys: list[str] | None = None
        self._lock = asyncio.Lock()

    async def keys(self) -> list[str]:
        if self._keys is None:
            data = await self._store.get_blob(self._job_id, INDEX_KEY)
            keys: object = orjson.loads(data) if data else []
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise JobError(f"job {self._job_id!r}: the batch index blob is unreadable")
            self._keys = keys
        return list(self._keys)

    async def records(self) -> list[ProviderBatch]:
        """Every batch record, in submission order."""
        out: list[ProviderBatch] = []
        for key in await self.keys():
            data = await self._store.get_blob(self._job_id, key)
            if data:
                out.append(ProviderBatch.from_json(self._job_id, key, data))
        return out

    async def open_records(self) -> list[ProviderBatch]:
        """The batches whose items' outcomes are not all committed yet."""
        return [r for r in await self.records() if r.state == "submitted"]

    async def add(self, record: ProviderBatch) -> None:
        """Persist a just-submitted batch: its blob, then the index."""
        async with self._lock:
            await self._store.put_blob(self._job_id, record.key, record.to_json())
            keys = await self.keys()
            if record.key not in keys:
                keys.append(record.key)
                await self._store.put_blob(self._job_id, INDEX_KEY, orjson.dumps(keys))
                self._keys = keys

    async def finish(self, record: ProviderBatch, ended: str, ended_at: float) -> ProviderBatch:
        """Mark a batch done (its outcomes are committed): it is not resumed again."""
        done = replace(record, state="done", ended=ended, ended_at=ended_at)
        async with self._lock:
            await self._store.put_blob(self._job_id, record.key, done.to_json())
        return done
