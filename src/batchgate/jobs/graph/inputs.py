"""The input lines of a fan-out or pipeline job, as `InputItem`s, and their validation pass.

A fan-out reads the usual chat shapes (`read_tasks`; a line's model is optional and ignored: each
route sets its own). A pipeline reads one JSON object per line — any fields, `custom_id` optional
(default `line-N`) — and checks that every input field a step's template names is present, so a bad line is
reported with its number before anything is sent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from batchgate.jobs.graph.spec import FANOUT, Graph
from batchgate.jobs.graph.template import MissingField, lookup
from batchgate.jobs.input.read import (
    MAX_REPORTED_PROBLEMS,
    InputProblem,
    ValidationReport,
    file_sha256,
    read_tasks,
)
from batchgate.jobs.store.protocol import TaskSpec


@dataclass(frozen=True, slots=True)
class InputItem:
    index: int  # 0-based among accepted lines
    line_no: int
    custom_id: str
    fields: dict[str, Any]  # pipeline: the line's object; fan-out: the request body


def read_items(path: Path, graph: Graph) -> Iterator[InputItem | InputProblem]:
    if graph.kind == FANOUT:
        for t in read_tasks(path, any_model=True):  # each route sets the model
            yield t if isinstance(t, InputProblem) else _from_spec(t)
        return
    yield from _read_objects(path, graph)


def _from_spec(t: TaskSpec) -> InputItem:
    return InputItem(t.seq, t.line_no, t.custom_id, t.body)


def _read_objects(path: Path, graph: Graph) -> Iterator[InputItem | InputProblem]:
    paths = {p for s in graph.steps for t in s.templates() for p in t.paths if p[0] != "steps"}
    seen: dict[str, int] = {}
    index = 0
    with path.open("rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                data = orjson.loads(raw)
            except orjson.JSONDecodeError:
                yield InputProblem(line_no, "not valid JSON")
                continue
            if not isinstance(data, dict):
                yield InputProblem(line_no, "a pipeline input line must be a JSON object")
                continue
            custom_id = data.get("custom_id", f"line-{line_no}")
            if not isinstance(custom_id, str) or not custom_id:
                yield InputProblem(line_no, "custom_id must be a non-empty string")
                continue
            problem = _missing(data, paths) or _duplicate(seen, custom_id)
            if problem:
                yield InputProblem(line_no, problem)
                continue
            seen[custom_id] = line_no
            yield InputItem(index, line_no, custom_id, data)
            index += 1


def _missing(data: Mapping[str, object], paths: set[tuple[str, ...]]) -> str | None:
    for p in sorted(paths):
        try:
            lookup(data, p)
        except MissingField as exc:
            return f"field {exc.args[0]!r} used by the pipeline's templates is missing"
    return None


def _duplicate(seen: dict[str, int], custom_id: str) -> str | None:
    first = seen.get(custom_id)
    return None if first is None else f"duplicate custom_id {custom_id!r} (first on line {first})"


def validate_items(path: Path, graph: Graph) -> ValidationReport:
    """The validation pass: the file's sha256, how many items it holds, and its problems."""
    digest = file_sha256(path)  # InputError naming the file when it cannot be read
    count = 0
    problems: list[InputProblem] = []
    problem_count = 0
    for item in read_items(path, graph):
        if isinstance(item, InputItem):
            count += 1
        else:
            problem_count += 1
            if len(problems) < MAX_REPORTED_PROBLEMS:
                problems.append(item)
    return ValidationReport(str(path), digest, count, count + problem_count, problem_count, problems)
