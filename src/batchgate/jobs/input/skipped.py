"""The input lines `--skip-invalid` left out, kept for the errors file so each can be found.

Each skipped line becomes one errors-file line: a JSON object keeps its own fields, anything else
(not JSON, not an object, not UTF-8) keeps its text under `input`; both carry `error` =
`{code: "invalid_input", message: reason, line: N}`. The lines are made once, when the job is
created, and stored with it (`SKIPPED_BLOB`), so every later run, resume or cancel writes them
again. A fixed line can be fed back as input as it is (`error` is ignored when read).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

import orjson

from batchgate.jobs.input.read import DEFAULT_MAX_LINE_BYTES, InputProblem
from batchgate.jobs.store.options import SkippedLine

SKIPPED_BLOB = "skipped_lines"
SKIPPED_CODE = "invalid_input"
LISTED_SKIPPED = 20  # skipped lines named in the report (all of them are in the errors file)
_BOM = b"\xef\xbb\xbf"
_CHUNK = 1 << 20


def skipped_lines(
    path: Path, problems: Iterable[InputProblem], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> bytes:
    """The errors-file lines (JSONL) of `problems` (in line order), read back from `path`."""
    wanted = iter(problems)
    problem = next(wanted, None)
    out: list[bytes] = []
    if problem is None:
        return b""
    with path.open("rb") as f:
        for line_no, raw in _lines(f, max_line_bytes):
            while problem is not None and problem.line_no <= line_no:
                if problem.line_no == line_no:
                    out.append(_entry(problem, raw))
                problem = next(wanted, None)
            if problem is None:
                break
    return b"".join(line + b"\n" for line in out)


def listed(problems: Iterable[InputProblem]) -> list[SkippedLine]:
    """The first `LISTED_SKIPPED` problems as the report names them."""
    found: list[SkippedLine] = []
    for p in problems:
        if len(found) == LISTED_SKIPPED:
            break
        found.append({"line": p.line_no, "reason": p.reason})
    return found


def _entry(problem: InputProblem, raw: bytes | None) -> bytes:
    error = {"code": SKIPPED_CODE, "message": problem.reason, "line": problem.line_no}
    obj: object = None
    if raw is not None:
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            obj = None
    if isinstance(obj, dict):
        kept = {k: v for k, v in obj.items() if k != "error"}
        return orjson.dumps({**kept, "error": error})
    text = raw.decode("utf-8", "replace") if raw is not None else None
    return orjson.dumps({"error": error, "input": text})


def _lines(f: IO[bytes], max_line_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """`(line_no, bytes)` per line as the input reader numbers them; None for an over-long one."""
    line_no = 0
    while raw := f.readline(max_line_bytes + 1):
        line_no += 1
        if raw.endswith(b"\n") or len(raw) <= max_line_bytes:
            line = raw[:-1] if raw.endswith(b"\n") else raw
            yield line_no, line[len(_BOM) :] if line_no == 1 and line.startswith(_BOM) else line
            continue
        while (rest := f.readline(_CHUNK)) and not rest.endswith(b"\n"):
            pass
        yield line_no, None
