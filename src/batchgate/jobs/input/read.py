"""Reading and validating the JSONL input: a stream of `TaskSpec`s and line-numbered `InputProblem`s.

`read_tasks` streams; `validate_input` is the pass made before any request is sent (hash, task
count, the first problems). A problem with the file as a whole (missing, unreadable, a directory,
empty) raises `InputError`; a problem with one line (bad UTF-8, over-long, not JSON, not an object,
a bad shape, an unknown model, a duplicate custom_id) is reported with its line number. Accepted
tasks are numbered 0, 1, 2, ... (`seq`) in input order.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol

import orjson

from batchgate.body_types import json_type
from batchgate.errors import InputError
from batchgate.jobs.input.first_lines import FirstLines
from batchgate.jobs.input.shapes import ShapeError, normalise
from batchgate.jobs.store.protocol import TaskSpec

DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024
MAX_REPORTED_PROBLEMS = 1000
_BOM = b"\xef\xbb\xbf"
_SKIP_CHUNK = 1 << 20
_SAMPLE_EVERY = 256  # lines between two offsets kept for re-reading a line by its number
_READ_BUFFER = 1 << 20  # the one pass reads 1 MB at a time: each read is a syscall that drops the GIL


class _Hasher(Protocol):
    def update(self, data: bytes, /) -> None: ...


@dataclass(frozen=True, slots=True)
class InputProblem:
    """One bad input line."""

    line_no: int
    reason: str

    def describe(self, file: str | Path) -> str:
        """`file:line: reason`, the same form as `InputError`."""
        return f"{file}:{self.line_no}: {self.reason}"

    def to_error(self, file: str | Path) -> InputError:
        return InputError(str(file), self.line_no, self.reason)


@dataclass(frozen=True, slots=True)
class ValidationReport:
    """What the validation pass found; `problems` keeps the first MAX_REPORTED_PROBLEMS."""

    path: str
    sha256: str
    task_count: int
    line_count: int
    problem_count: int
    problems: list[InputProblem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.problem_count == 0


# A check of a parsed body that the input reader cannot make alone (e.g. `RouteFit.problem`):
# a one-line reason makes the line a problem, None lets it through.
BodyCheck = Callable[[Mapping[str, object]], "str | None"]


def read_tasks(
    path: str | Path,
    *,
    known_models: Collection[str] | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    check: BodyCheck | None = None,
    any_model: bool = False,
) -> Iterator[TaskSpec | InputProblem]:
    """Stream the input's tasks and line problems in file order (`any_model`: see `normalise`)."""
    return _read(Path(path), known_models, max_line_bytes, None, [0], check, any_model)


def read_tasks_hashed(
    path: Path,
    hasher: _Hasher,
    line_count: list[int],
    *,
    known_models: Collection[str] | None = None,
    check: BodyCheck | None = None,
) -> Iterator[TaskSpec | InputProblem]:
    """`read_tasks`, feeding every byte read to `hasher` and the last line's number to
    `line_count[0]` (one read that validates, hashes and yields the tasks: `ingest.InputPass`)."""
    return _read(path, known_models, DEFAULT_MAX_LINE_BYTES, hasher, line_count, check)


def validate_input(
    path: str | Path,
    known_models: Collection[str] | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    check: BodyCheck | None = None,
) -> ValidationReport:
    """One pass over the whole file: its sha256, how many tasks it holds, and its problems."""
    hasher = hashlib.sha256()
    lines = [0]
    tasks = 0
    problems: list[InputProblem] = []
    problem_count = 0
    for item in _read(Path(path), known_models, max_line_bytes, hasher, lines, check):
        if isinstance(item, TaskSpec):
            tasks += 1
        else:
            problem_count += 1
            if len(problems) < MAX_REPORTED_PROBLEMS:
                problems.append(item)
    return ValidationReport(str(path), hasher.hexdigest(), tasks, lines[0], problem_count, problems)


def file_sha256(path: str | Path) -> str:
    """The hex sha256 of the file's bytes (to notice an input that changed under a job)."""
    hasher = hashlib.sha256()
    with _open(Path(path)) as f:
        try:
            while chunk := f.read(_SKIP_CHUNK):
                hasher.update(chunk)
        except OSError as exc:
            raise InputError(str(path), None, f"cannot read ({exc.strerror})") from None
    return hasher.hexdigest()


def _open(path: Path, buffering: int = -1) -> IO[bytes]:
    try:
        return path.open("rb", buffering=buffering)
    except FileNotFoundError:
        raise InputError(str(path), None, "no such file") from None
    except IsADirectoryError:
        raise InputError(str(path), None, "is a directory, not a JSONL file") from None
    except OSError as exc:
        raise InputError(str(path), None, f"cannot open ({exc.strerror})") from None


def _read(
    path: Path,
    known_models: Collection[str] | None,
    max_line_bytes: int,
    hasher: _Hasher | None,
    line_count: list[int],
    check: BodyCheck | None = None,
    any_model: bool = False,
) -> Iterator[TaskSpec | InputProblem]:
    known = None if known_models is None else frozenset(known_models)
    reread = _Reread(path, max_line_bytes)
    seen = FirstLines(reread.same_id)  # compact: a million ids in ~15 MB, not ~125 MB
    seq = 0
    content = False
    with _open(path, _READ_BUFFER) as f, reread:
        for line_no, offset, raw in _lines(f, path, max_line_bytes, hasher):
            line_count[0] = line_no
            if line_no % _SAMPLE_EVERY == 1:
                reread.samples.append(offset)
            if raw is None:
                content = True
                yield InputProblem(line_no, f"line is longer than {max_line_bytes} bytes")
                continue
            if not raw.strip():
                continue
            content = True
            item = _parse(raw, line_no, known, any_model)
            if isinstance(item, InputProblem):
                yield item
                continue
            custom_id, body = item
            problem = check(body) if check is not None else None
            if problem is not None:
                yield InputProblem(line_no, problem)
                continue
            first = seen.first_line(custom_id, line_no)
            if first is not None:
                yield InputProblem(line_no, f"duplicate custom_id {custom_id!r} (first on line {first})")
                continue
            yield TaskSpec(seq, line_no, custom_id, body)
            seq += 1
    if not content:
        raise InputError(str(path), None, "the input is empty")


def _parse(
    raw: bytes, line_no: int, known: frozenset[str] | None, any_model: bool = False
) -> tuple[str, dict[str, object]] | InputProblem:
    try:
        obj = orjson.loads(raw)  # refuses bad UTF-8 too: a good line is decoded once
    except orjson.JSONDecodeError:
        try:
            text = raw.decode("utf-8")  # which problem, told as before: the UTF-8 one first
        except UnicodeDecodeError as exc:
            return InputProblem(line_no, f"not valid UTF-8 (byte {exc.start + 1} of the line)")
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            return InputProblem(line_no, f"invalid JSON ({exc.msg} at column {exc.colno})")
    if not isinstance(obj, dict):
        return InputProblem(line_no, f"expected a JSON object, got {json_type(obj)}")
    try:
        custom_id, body = normalise(obj, line_no, any_model=any_model)
    except ShapeError as exc:
        return InputProblem(line_no, str(exc))
    if known is not None and body["model"] not in known:
        names = ", ".join(sorted(known)[:8]) or "none"
        return InputProblem(line_no, f"unknown model {body['model']!r} (configured routes: {names})")
    return custom_id, body


class _Reread:
    """Reads an accepted line back by its number, to confirm that a custom_id whose hash matched
    an earlier line's really is that line's (a second handle, opened on the first need): from the
    offset of every `_SAMPLE_EVERY`th line (`samples`, kept by the reader), it reads on to the line."""

    def __init__(self, path: Path, max_line_bytes: int) -> None:
        self._path = path
        self._max = max_line_bytes
        self._f: IO[bytes] | None = None
        self.samples = array("q")  # the offset of lines 1, 1 + _SAMPLE_EVERY, ...

    def same_id(self, line_no: int, custom_id: str) -> bool:
        if self._f is None:
            self._f = _open(self._path)
        before, ahead = divmod(line_no - 1, _SAMPLE_EVERY)
        try:
            self._f.seek(self.samples[before])
            for _ in range(ahead):
                while (skipped := self._f.readline(_SKIP_CHUNK)) and not skipped.endswith(b"\n"):
                    pass
            raw = self._f.readline(self._max + 1)
        except OSError as exc:
            raise InputError(str(self._path), line_no, f"cannot read ({exc.strerror})") from None
        line = raw[:-1] if raw.endswith(b"\n") else raw
        item = _parse(line[len(_BOM) :] if line_no == 1 and line.startswith(_BOM) else line, line_no, None)
        return not isinstance(item, InputProblem) and item[0] == custom_id

    def __enter__(self) -> _Reread:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def _lines(
    f: IO[bytes], path: Path, max_line_bytes: int, hasher: _Hasher | None
) -> Iterator[tuple[int, int, bytes | None]]:
    """`(line_no, offset, bytes)` per line, or `(line_no, offset, None)` for a line longer than
    the limit."""
    line_no = 0
    position = f.tell()  # counted from here on: a tell() a line is a syscall that drops the GIL
    while True:
        line_no += 1
        offset = position
        try:
            raw = f.readline(max_line_bytes + 1)
        except OSError as exc:
            raise InputError(str(path), line_no, f"cannot read ({exc.strerror})") from None
        if not raw:
            return
        position += len(raw)
        if hasher is not None:
            hasher.update(raw)
        if raw.endswith(b"\n") or len(raw) <= max_line_bytes:  # a whole line (the last may lack "\n")
            line = raw[:-1] if raw.endswith(b"\n") else raw
            yield line_no, offset, line[len(_BOM) :] if line_no == 1 and line.startswith(_BOM) else line
        else:
            _skip_rest_of_line(f, path, line_no, hasher)
            position = f.tell()
            yield line_no, offset, None


def _skip_rest_of_line(f: IO[bytes], path: Path, line_no: int, hasher: _Hasher | None) -> None:
    while True:
        try:
            rest = f.readline(_SKIP_CHUNK)
        except OSError as exc:
            raise InputError(str(path), line_no, f"cannot read ({exc.strerror})") from None
        if hasher is not None:
            hasher.update(rest)
        if not rest or rest.endswith(b"\n"):
            return
