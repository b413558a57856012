"""OpenAI's and Anthropic's batches as runs: a batch is created over a copy of its input file (an
uploaded file, or Anthropic's inline requests checked at once), recorded in the registry and
handed to the server's `Runs`, which runs it as a durable job, ends it at its window's end and
writes its output and error files. A batch's input is copied in a thread, and inline requests are
parsed and checked in the runs' worker process (`off_loop`), off the event loop: 100,000 requests
(36 MB) held every other tenant's requests 2.4–2.8 s once (issue 40)."""

from __future__ import annotations

import asyncio
import functools
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from batchgate.errors import ServiceRequestError
from batchgate.jobs.job_setup import job_id_for
from batchgate.server.batch_api.files import link_or_copy, write_private
from batchgate.server.batch_api.input_problems import line_problems
from batchgate.server.batch_api.runs import Runs
from batchgate.server.batch_api.shapes import ENDPOINT, WINDOW, create_fields, new_id, not_found
from batchgate.server.tenancy.registry import BatchRecord

PREFIXES = {"openai": "batch_", "anthropic": "msgbatch_"}


class Batches:
    """The OpenAI and Anthropic batches of the server, run by its `runs`."""

    def __init__(self, runs: Runs) -> None:
        self.runs = runs
        self.parts = runs.parts

    def visible(self, batch_id: str, owner: str | None, kind: str = "openai") -> BatchRecord:
        """The batch of `kind`, if `owner` may see it (None: an admin key); a 404 otherwise."""
        b = self.parts.registry.get_batch(batch_id)
        if b is None or b.kind != kind or (owner is not None and b.owner != owner):
            raise not_found("message batch" if kind == "anthropic" else "batch", batch_id)
        return b

    async def create(self, owner: str, viewer: str | None, body: Mapping[str, object]) -> BatchRecord:
        """A new batch over the input file `body` names (which `viewer` must be able to see)."""
        file_id, endpoint, metadata = create_fields(body)
        if self.parts.callbacks is not None:
            self.parts.callbacks.check_metadata(metadata, owner)
        files = self.parts.files
        source = files.visible(file_id, viewer)
        if source.purpose != "batch":
            raise ServiceRequestError(
                400, f"File '{file_id}' has purpose '{source.purpose}', not 'batch'.", param="input_file_id"
            )
        fill = functools.partial(link_or_copy, files.path(source.id))  # the file may be deleted
        return await self._open(
            owner, "openai", fill, input_file_id=file_id, endpoint=endpoint, metadata=metadata
        )

    async def create_inline(self, owner: str, kind: str, lines: Callable[[], bytes]) -> BatchRecord:
        """A new batch of inline requests (`lines()`: its input JSONL, made in a thread), refused
        with a 400 naming the first bad request before anything is created (Anthropic's API checks
        at once)."""
        data = await asyncio.to_thread(lines)
        record = await self._open(owner, kind, functools.partial(write_private, data=data), check=True)
        record.requests = data.count(b"\n")
        self.parts.registry.save_batch(record)
        return record

    async def _open(
        self,
        owner: str,
        kind: str,
        fill: Callable[[Path], object],
        *,
        input_file_id: str = "",
        endpoint: str = ENDPOINT,
        metadata: dict[str, str] | None = None,
        check: bool = False,
    ) -> BatchRecord:
        batch_id = new_id(PREFIXES[kind])
        folder = self.parts.folder / batch_id
        await asyncio.to_thread(self._fill, folder, fill)
        if check:
            await self._check(folder)
        record = BatchRecord(
            id=batch_id,
            owner=owner,
            input_file_id=input_file_id,
            endpoint=endpoint,
            completion_window=WINDOW,
            created_at=self.parts.now(),
            job_id=job_id_for(folder / "input.jsonl", folder / "output.jsonl"),
            metadata=metadata,
            kind=kind,
        )
        self.parts.registry.add_batch(record)
        self.runs.start(record)
        self.runs.arm_expiry(record)
        return record

    def _fill(self, folder: Path, fill: Callable[[Path], object]) -> None:
        """The batch's folder and its input copy (in a thread)."""
        folder.mkdir(mode=0o700)
        fill(folder / "input.jsonl")

    async def _check(self, folder: Path) -> None:
        """Every line checked in the runs' worker process (100,000 of them in a thread still held
        the loop for the GIL's turns), the batch refused (a 400 naming the first bad request, its
        folder gone) if one is bad."""
        check = functools.partial(line_problems, self.parts.config, folder / "input.jsonl", endpoint="chat")
        bad = await self.runs.off_loop.run(check)
        if bad:
            await asyncio.to_thread(shutil.rmtree, folder, ignore_errors=True)
            first = bad[0]
            raise ServiceRequestError(400, f"requests[{first['line'] - 1}]: {first['message']}")
