"""Which tasks a fan-out or pipeline job holds, and when each becomes ready.

Task numbering: input item `i`, step `k` (its index in the graph) is task `seq = i * width + k`,
so every (item, step) has one fixed seq and `add_tasks`, idempotent on seq, can be asked again
safely. The root steps' tasks are stored when the job is created. A later step's task is added
the moment the last step it needs succeeds (`after`, called by the engine once that answer is
committed), unless its condition is false: then nothing is stored or sent for it. After a crash
`recover` reads the answers back from the store and adds any ready task that is missing, so a
kill between an answer's commit and its follower's insert loses nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from batchgate.jobs.graph.inputs import InputItem
from batchgate.jobs.graph.spec import Graph, Step
from batchgate.jobs.graph.template import Template
from batchgate.jobs.store.protocol import JobStore, TaskOutcome, TaskSpec, TaskState
from batchgate.models import answer_text


def _answer_body(output_line: bytes | None) -> object:
    if not output_line:
        return None
    try:
        return orjson.loads(output_line)["response"]["body"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None


def answer_of(output_line: bytes | None) -> str | None:
    """The answer text of a stored OUT line (a chat, Responses or completions answer), None when
    it holds none (an embeddings answer holds vectors: `vectors_of`)."""
    body = _answer_body(output_line)
    return answer_text(body) if isinstance(body, dict) else None


def vectors_of(output_line: bytes | None) -> list[object] | None:
    """The vectors of a stored embeddings OUT line, in input order (each as the provider gave it:
    floats, or a base64 string), None when it is not an embeddings answer."""
    body = _answer_body(output_line)
    data = body.get("data") if isinstance(body, dict) and body.get("object") == "list" else None
    if not isinstance(data, list) or not all(isinstance(d, dict) and "embedding" in d for d in data):
        return None
    ordered = sorted(data, key=lambda d: d.get("index", 0) if isinstance(d.get("index"), int) else 0)
    return [d["embedding"] for d in ordered]


class GraphTasks:
    """The tasks of one job's graph over its input items, and the answers seen so far."""

    def __init__(self, graph: Graph, items: Iterable[InputItem]) -> None:
        self.graph = graph
        self.width = graph.width
        self.items: list[InputItem] = list(items)
        self.answers: dict[int, str] = {}  # seq -> answer of a succeeded task
        self._templates = {s.name: (Template.parse(s.prompt) if s.prompt else None) for s in graph.steps}
        self._systems = {s.name: (Template.parse(s.system) if s.system else None) for s in graph.steps}

    def step_sizes(self) -> dict[str, int]:
        """The most tasks each step can hold: one per input item (fewer where a condition skips)."""
        return {s.name: len(self.items) for s in self.graph.steps}

    def locate(self, seq: int) -> tuple[InputItem, Step]:
        return self.items[seq // self.width], self.graph.steps[seq % self.width]

    def seq(self, item: InputItem, step: Step) -> int:
        return item.index * self.width + self.graph.index(step.name)

    def root_tasks(self) -> Iterator[TaskSpec]:
        roots = self.graph.roots()
        for item in self.items:
            for step in roots:
                yield self._spec(item, step)

    def after(self, spec: TaskSpec, outcome: TaskOutcome) -> list[TaskSpec]:
        """The tasks that become ready now that `spec` ended with `outcome`."""
        if outcome.state is not TaskState.SUCCEEDED:
            return []
        answer = answer_of(outcome.output_line)
        if answer is None:
            return []
        self.answers[spec.seq] = answer
        item, step = self.locate(spec.seq)
        return [self._spec(item, d) for d in self.graph.dependents(step.name) if self.runs(item, d)]

    def runs(self, item: InputItem, step: Step) -> bool:
        """Whether `step` should run for `item` now: every step it needs answered, condition true."""
        got = {n: self.answers.get(item.index * self.width + self.graph.index(n)) for n in step.needs()}
        if any(a is None for a in got.values()):
            return False
        return step.when is None or step.when.holds(got[step.when.step] or "")

    def skipped(self, item: InputItem, step: Step) -> bool:
        """Every step it needs answered, but its condition is false: it never runs."""
        if step.when is None:
            return False
        base = item.index * self.width
        needs = [self.answers.get(base + self.graph.index(n)) for n in step.needs()]
        return all(a is not None for a in needs) and not self.runs(item, step)

    async def recover(self, store: JobStore, job_id: str) -> int:
        """Load the stored answers; add every ready task the store lacks. Returns how many."""
        present: set[int] = set()
        async for rec in store.iter_results(job_id, ordered=True):
            present.add(rec.seq)
            if rec.state is TaskState.SUCCEEDED:
                answer = answer_of(rec.output_line)
                if answer is not None:
                    self.answers[rec.seq] = answer
        missing = [
            self._spec(item, step)
            for item in self.items
            for step in self.graph.steps
            if step.needs() and self.seq(item, step) not in present and self.runs(item, step)
        ]
        return await store.add_tasks(job_id, missing) if missing else 0

    def _spec(self, item: InputItem, step: Step) -> TaskSpec:
        return TaskSpec(
            seq=self.seq(item, step),
            line_no=item.line_no,
            custom_id=item.custom_id,
            body=self._body(item, step),
            route=step.route,
            step=step.name,
        )

    def _body(self, item: InputItem, step: Step) -> dict[str, Any]:
        template = self._templates[step.name]
        if template is None:  # fan-out: the line's own request, on this step's route
            return {**item.fields, "model": step.route}
        data = {**item.fields, "steps": self._step_answers(item)}
        messages = []
        system = self._systems[step.name]
        if system is not None:
            messages.append({"role": "system", "content": system.render(data)})
        messages.append({"role": "user", "content": template.render(data)})
        body: dict[str, Any] = {"model": step.route, "messages": messages}
        if step.max_tokens is not None:
            body["max_tokens"] = step.max_tokens
        return body

    def _step_answers(self, item: InputItem) -> dict[str, dict[str, str]]:
        base = item.index * self.width
        return {
            s.name: {"answer": self.answers[base + k]}
            for k, s in enumerate(self.graph.steps)
            if base + k in self.answers
        }
