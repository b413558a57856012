"""What a job remembers beside its tasks (`JobRecord.options`): its own spec (name, priority,
schedule, deadline, callback, metadata, mode, validation — `config.job_spec.JobSpec`) and how the
run that made it was asked to write and read (ordered, skipped lines, errors file, fan-out or
pipeline graph, the API id a server gave it, submitted for workers). Stored as one JSON object and
read once, here, into this value; rows an older batchgate wrote (the spec's `mode`,
`deadline_hours` and `priority` at the top) read the same."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypedDict

import orjson

from batchgate.config.job_spec import JobSpec

_LEGACY_SPEC = ("mode", "deadline_hours", "priority")  # spec fields an older version kept at the top


class SkippedLine(TypedDict):
    """An input line `--skip-invalid` left out, as the report lists it."""

    line: int
    reason: str


@dataclass(frozen=True, slots=True)
class JobOptions:
    spec: JobSpec = field(default_factory=JobSpec)
    ordered: bool = False  # OUT in input order, written at the end
    skip_invalid: bool = False
    errors_path: str | None = None
    skipped_lines: int = 0  # input lines --skip-invalid left out
    skipped_first: Sequence[SkippedLine] = ()  # the first of them, as the report lists them
    price_notes: Mapping[str, str] = field(default_factory=dict)  # model → where its price came from
    graph: Mapping[str, object] | None = None  # a fan-out or pipeline (`Graph.to_dict`)
    served: bool = False  # run by `batchgate serve` (never signalled by `batchgate cancel`)
    api_id: str | None = None  # the batch or job id the server's API gave it
    workers: bool = False  # submitted for `batchgate worker`s to run

    def to_dict(self) -> dict[str, object]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["spec"] = self.spec.to_dict()
        out["skipped_first"] = [p.copy() for p in self.skipped_first]
        return out

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_dict())

    @classmethod
    def of_dict(cls, data: Mapping[str, Any]) -> JobOptions:
        known = {f.name for f in fields(cls)} - {"spec"}
        spec = dict(data.get("spec") or {})
        for name in _LEGACY_SPEC:
            if name in data and name not in spec:
                spec[name] = data[name]
        values = {k: v for k, v in data.items() if k in known and v is not None}
        values["skipped_first"] = tuple(values.get("skipped_first", ()))
        return cls(spec=JobSpec.of_dict(spec), **values)

    @classmethod
    def of_json(cls, blob: bytes | str) -> JobOptions:
        return cls.of_dict(orjson.loads(blob))
