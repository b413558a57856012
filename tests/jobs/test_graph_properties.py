"""Property: for random DAG-shaped pipelines (1–4 steps, random conditions and failures) run over
the in-memory store with crashes at random moments, no task is sent again once it succeeded, no
task runs whose condition is false or whose inputs failed, and the joined output is complete."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from batchgate.jobs.graph.expand import GraphTasks
from batchgate.jobs.graph.inputs import InputItem
from batchgate.jobs.graph.join import Joiner
from batchgate.jobs.graph.spec import PIPELINE, Condition, Graph, Step
from batchgate.jobs.store.memory import MemoryJobStore
from batchgate.jobs.store.protocol import TaskOutcome, TaskSpec, TaskState

from .factories import job

LABELS = ("yes", "no")


@st.composite
def graphs(draw: st.DrawFn) -> Graph:
    steps: list[Step] = []
    for k in range(draw(st.integers(1, 4))):
        earlier = [s.name for s in steps]
        needs: list[str] = draw(st.lists(st.sampled_from(earlier), unique=True)) if earlier else []
        refs = " ".join(f"{{{{ steps.{n}.answer }}}}" for n in needs)
        when = None
        conditional: bool = draw(st.booleans())
        if needs and conditional:
            when = Condition(draw(st.sampled_from(needs)), (draw(st.sampled_from(LABELS)),))
        steps.append(Step(name=f"s{k}", route="r", prompt=f"step {k} of {{{{ text }}}} {refs}", when=when))
    return Graph(PIPELINE, tuple(steps))


def answer(spec: TaskSpec, rng: random.Random) -> TaskOutcome:
    """A stand-in model: a deterministic label per prompt; some tasks fail."""
    prompt = spec.body["messages"][-1]["content"]
    label = LABELS[hash(prompt) % 2]
    if rng.random() < 0.1:
        return TaskOutcome(spec.seq, TaskState.FAILED, 1, b'{"error": {"message": "boom"}}', "boom", "p")
    line = {"response": {"body": {"choices": [{"message": {"content": label}}]}}, "latency_ms": 1.0}
    return TaskOutcome(spec.seq, TaskState.SUCCEEDED, 1, orjson.dumps(line), None, "p")


async def crash(store: MemoryJobStore, graph: Graph, items: list[InputItem]) -> GraphTasks:
    """The process dies: claimed work goes back to pending; a new process recovers from the store."""
    await store.requeue_running("job1")
    tasks = GraphTasks(graph, items)
    await tasks.recover(store, "job1")
    return tasks


async def run(graph: Graph, n: int, seed: int) -> tuple[dict[int, int], set[int], GraphTasks, MemoryJobStore]:
    rng = random.Random(seed)
    items = [InputItem(i, i + 1, f"c{i}", {"text": f"t{i}"}) for i in range(n)]
    store = MemoryJobStore()
    await store.create_job(job())
    tasks = GraphTasks(graph, items)
    await store.add_tasks("job1", tasks.root_tasks())
    sends: dict[int, int] = {}
    sent_after_success: set[int] = set()
    succeeded: set[int] = set()
    while True:
        if rng.random() < 0.2:
            tasks = await crash(store, graph, items)
        claimed = await store.claim_tasks("job1", rng.randint(1, 5))
        if not claimed:
            break
        for spec in claimed:
            sends[spec.seq] = sends.get(spec.seq, 0) + 1
            if spec.seq in succeeded:
                sent_after_success.add(spec.seq)
            outcome = answer(spec, rng)
            if rng.random() < 0.15:  # answered, but the process dies before storing it
                tasks = await crash(store, graph, items)
                break
            await store.complete_tasks("job1", [outcome])
            if outcome.state is TaskState.SUCCEEDED:
                succeeded.add(spec.seq)
            if rng.random() < 0.1:  # dies after storing the answer, before storing what it made ready
                tasks = await crash(store, graph, items)
                break
            await store.add_tasks("job1", tasks.after(spec, outcome))
    return sends, sent_after_success, tasks, store


def oracle(graph: Graph, answers: dict[str, str | None]) -> dict[str, str]:
    """The status every step must end with, given which tasks answered what (None: failed)."""
    status: dict[str, str] = {}
    for step in graph.steps:
        if any(status[n] != "succeeded" for n in step.needs()):
            status[step.name] = "blocked"
        elif step.when is not None and answers[step.when.step] not in step.when.equals:
            status[step.name] = "skipped"
        else:
            status[step.name] = "succeeded" if answers.get(step.name) is not None else "failed"
    return status


@settings(max_examples=60, deadline=None)
@given(graph=graphs(), n=st.integers(1, 6), seed=st.integers(0, 10_000))
def test_random_pipelines_send_each_task_at_most_once_after_success(graph: Graph, n: int, seed: int) -> None:
    _sends, sent_after_success, tasks, store = asyncio.run(run(graph, n, seed))
    assert sent_after_success == set()
    joiner = Joiner(tasks)
    rows: list[dict[str, Any]] = []

    async def join() -> None:
        recs = [r async for r in store.iter_results("job1", ordered=True)]
        for i in range(n):
            line = joiner.join(i, [r for r in recs if r.seq // graph.width == i])
            assert line is not None, f"item {i} is incomplete"
            rows.append(line)

    asyncio.run(join())
    assert len(rows) == n
    for row in rows:
        got = {name: a.get("answer") for name, a in row["answers"].items()}
        expected = oracle(graph, got)
        assert {name: a["status"] for name, a in row["answers"].items()} == expected
