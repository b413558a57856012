"""The output of a fan-out or pipeline job: ONE joined line per input item, every step's answer side
by side, and the figures that compare the steps (routes) for the report.

A joined line: `{"custom_id", "line", "answers": {STEP: {"status", "answer", "route", "provider",
"usage", "latency_ms", "cost_usd", "attempts", "error"}}, "agreement"}`; a step that answered an
embeddings request (a fan-out of `/v1/embeddings` lines) also carries its vectors, in input order,
as `"embeddings": [vector, ...]` (its `answer` is null: a vector is not text). A step's status is
`succeeded`, `failed`, `skipped` (its condition was false: nothing was sent), or `blocked` (a step
it needs failed). `agreement` (fan-out only) is the share of routes giving the most common answer
when every answer is a label (a word or three), else null. Items with a step still pending are
left out until the job finishes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

import orjson

from batchgate.jobs.graph.expand import GraphTasks, answer_of, vectors_of
from batchgate.jobs.graph.spec import FANOUT, normalise_answer
from batchgate.jobs.store.protocol import TaskRecord, TaskState
from batchgate.request_fields import task_metadata

LABEL_CHARS = 40
LABEL_WORDS = 3


class StepAnswer(TypedDict):
    """One step's entry in a joined line (a skipped or blocked step: its status and route only)."""

    status: str
    route: str | None
    answer: NotRequired[str | None]
    provider: NotRequired[str | None]
    usage: NotRequired[dict[str, int] | None]
    latency_ms: NotRequired[float | None]
    cost_usd: NotRequired[float]
    attempts: NotRequired[int]
    error: NotRequired[object]  # the stored line's error object, or {"message": ...}
    embeddings: NotRequired[list[object]]


def label(answer: str | None) -> str | None:
    """The answer as a label (normalised), or None when it is longer than a label."""
    if answer is None:
        return None
    value = normalise_answer(answer)
    return value if value and len(value) <= LABEL_CHARS and len(value.split()) <= LABEL_WORDS else None


def agreement(answers: list[str | None]) -> float | None:
    labels = [label(a) for a in answers]
    if len(labels) < 2 or any(x is None for x in labels):
        return None
    top = max(labels.count(x) for x in labels)
    return round(top / len(labels), 4)


@dataclass(slots=True)
class StepFigures:
    route: str
    sent: int = 0
    succeeded: int = 0
    failed: int = 0
    skipped: int = 0
    blocked: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latencies: list[float] = field(default_factory=list)


def _entry(rec: TaskRecord) -> tuple[StepAnswer, int, int]:
    """A finished task's entry in the joined line, and its prompt / completion tokens."""
    line = orjson.loads(rec.output_line) if rec.output_line else {}
    usage = line.get("usage") or {}
    ok = rec.state is TaskState.SUCCEEDED
    entry: StepAnswer = {
        "status": "succeeded" if ok else "failed",
        "answer": answer_of(rec.output_line) if ok else None,
        "route": rec.route,
        "provider": line.get("provider"),
        "usage": usage or None,
        "latency_ms": line.get("latency_ms"),
        "cost_usd": round(rec.cost_usd, 8),
        "attempts": rec.attempts,
        "error": None if ok else (line.get("error") or {"message": rec.error}),
    }
    vectors = vectors_of(rec.output_line) if ok else None
    if vectors is not None:
        entry["embeddings"] = vectors
    return entry, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))


class Joiner:
    """Folds one item's stored tasks into its joined line, and every item into the step figures."""

    def __init__(self, tasks: GraphTasks) -> None:
        self.tasks = tasks
        self.graph = tasks.graph
        self.figures = {s.name: StepFigures(s.route) for s in self.graph.steps}
        self.pairs: dict[tuple[str, str], list[int]] = {}  # (a, b) -> [compared, agreed]
        self.failed_lines: list[bytes] = []

    def join(self, index: int, records: list[TaskRecord]) -> dict[str, object] | None:
        """The joined line of item `index`, or None while a step is unfinished."""
        item = self.tasks.items[index]
        by_step = {r.step: r for r in records}
        answers: dict[str, StepAnswer] = {}
        for step in self.graph.steps:
            rec = by_step.get(step.name)
            if rec is not None and rec.state in (TaskState.SUCCEEDED, TaskState.FAILED):
                answers[step.name] = self._finished(step.name, rec)
            elif rec is None and self.tasks.skipped(item, step):
                answers[step.name] = {"status": "skipped", "route": step.route}
            elif rec is None and self._blocked(answers, step.needs()):
                answers[step.name] = {"status": "blocked", "route": step.route}
            else:
                return None
        for name, entry in answers.items():
            if entry["status"] in ("skipped", "blocked"):
                setattr(self.figures[name], entry["status"], getattr(self.figures[name], entry["status"]) + 1)
        line: dict[str, object] = {"custom_id": item.custom_id, "line": item.line_no, "answers": answers}
        if self.graph.kind == FANOUT:
            line["agreement"] = agreement([a.get("answer") for a in answers.values()])
            self._compare(answers)
            line |= {k: v for k, v in task_metadata(item.fields).items() if k not in line}  # the line's own
        return line

    @staticmethod
    def _blocked(answers: dict[str, StepAnswer], needs: tuple[str, ...]) -> bool:
        return any(n in answers and answers[n]["status"] in ("failed", "skipped", "blocked") for n in needs)

    def _finished(self, name: str, rec: TaskRecord) -> StepAnswer:
        entry, prompt, completion = _entry(rec)
        fig = self.figures[name]
        fig.sent += 1
        fig.prompt_tokens += prompt
        fig.completion_tokens += completion
        fig.cost_usd += rec.cost_usd
        if entry["latency_ms"] is not None:
            fig.latencies.append(float(entry["latency_ms"]))
        if entry["status"] == "succeeded":
            fig.succeeded += 1
        else:
            fig.failed += 1
            if rec.output_line:
                self.failed_lines.append(rec.output_line)
        return entry

    def _compare(self, answers: dict[str, StepAnswer]) -> None:
        names = list(answers)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                la, lb = label(answers[a].get("answer")), label(answers[b].get("answer"))
                if la is None or lb is None:
                    continue
                cell = self.pairs.setdefault((a, b), [0, 0])
                cell[0] += 1
                cell[1] += la == lb
