"""The service's files: their bytes in `files/<id>` (owner-only) under the data folder, their
records in the registry. Uploads are streamed to disk, written whole or not at all."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

from batchgate.clock import Clock
from batchgate.errors import ServiceRequestError
from batchgate.server.batch_api.shapes import new_id, not_found
from batchgate.server.tenancy.registry import FileRecord, Registry

MAX_FILE_BYTES = 200 * 1024 * 1024  # OpenAI's limit for a batch input file


class Files:
    def __init__(
        self, registry: Registry, folder: Path, clock: Clock, max_bytes: int = MAX_FILE_BYTES
    ) -> None:
        self.registry = registry
        self.folder = folder
        self.clock = clock
        self.max_bytes = max_bytes  # an upload past it is cut off there: a 413
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)

    def path(self, file_id: str) -> Path:
        return self.folder / file_id

    def visible(self, file_id: str, owner: str | None) -> FileRecord:
        """The file, if `owner` may see it (None: an admin key); a 404 otherwise."""
        f = self.registry.get_file(file_id)
        if f is None or (owner is not None and f.owner != owner):
            raise not_found("file", file_id)
        return f

    async def save(self, owner: str, filename: str, purpose: str, chunks: AsyncIterator[bytes]) -> FileRecord:
        file_id = new_id("file-")
        target = self.path(file_id)
        tmp = target.with_name(file_id + ".part")
        size = 0
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > self.max_bytes:
                        raise ServiceRequestError(
                            413,
                            f"The file is larger than the limit of {self.max_bytes} bytes"
                            " (the server's --max-body upload=SIZE sets it).",
                            code="request_too_large",
                        )
                    out.write(chunk)
            os.replace(tmp, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        record = FileRecord(file_id, owner, filename, purpose, size, int(self.clock.wall()))
        self.registry.add_file(record)
        return record

    def writer(self, file_id: str | None = None) -> FileWriter:
        """A file the service writes itself (a batch's output or error file), line by line; a
        fixed `file_id` makes writing it again (after a restart) replace it, not add another."""
        return FileWriter(self, file_id)

    def delete(self, f: FileRecord) -> None:
        self.registry.delete_file(f.id)
        with contextlib.suppress(FileNotFoundError):
            self.path(f.id).unlink()


class FileWriter:
    """Lines written to a temporary file; `commit` makes it a file (None when no line was
    written), `discard` drops whatever was not committed."""

    def __init__(self, files: Files, file_id: str | None = None) -> None:
        self._files = files
        self.file_id = file_id or new_id("file-")
        self._tmp = files.path(self.file_id + ".part")
        self._out = os.fdopen(os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")
        self.lines = 0
        self.bytes = 0

    def write(self, line: bytes) -> None:
        self._out.write(line + b"\n")
        self.lines += 1
        self.bytes += len(line) + 1

    def commit(self, owner: str, filename: str) -> str | None:
        self._out.close()
        if not self.lines:
            return None
        os.replace(self._tmp, self._files.path(self.file_id))
        now = int(self._files.clock.wall())
        self._files.registry.add_file(
            FileRecord(self.file_id, owner, filename, "batch_output", self.bytes, now)
        )
        return self.file_id

    def discard(self) -> None:
        self._out.close()
        with contextlib.suppress(FileNotFoundError):
            self._tmp.unlink()


def write_private(target: Path, data: bytes) -> None:
    """`target` created owner-only (0600, whatever the umask) holding `data`."""
    with os.fdopen(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
        out.write(data)


def link_or_copy(source: Path, target: Path) -> None:
    """`target` becomes `source`'s content: a hard link where it can, else an owner-only copy."""
    try:
        os.link(source, target)
    except OSError:
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(source, "rb") as src, os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
