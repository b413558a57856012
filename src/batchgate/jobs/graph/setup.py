"""A fan-out or pipeline job's set-up: its graph checked against the config, the graph the job
remembers (so `resume` needs neither `--fanout` nor the pipeline file), its tasks rebuilt from the
input and the store after a restart, and each step's own output check."""

from __future__ import annotations

from pathlib import Path

from batchgate.config import GatewayConfig
from batchgate.errors import ConfigError, JobError
from batchgate.jobs.checks.output_check import OutputCheck
from batchgate.jobs.graph.expand import GraphTasks
from batchgate.jobs.graph.inputs import InputItem, read_items
from batchgate.jobs.graph.spec import FANOUT, Graph, fanout_graph, load_pipeline
from batchgate.jobs.store.protocol import JobRecord, JobStore


def requested_graph(
    config: GatewayConfig, fanout: str | list[str] | tuple[str, ...] | None, pipeline: Path | None
) -> Graph | None:
    """The graph `--fanout` / `--pipeline` (or the config's `fanout:`) ask for, checked against the
    config's routes; None for a plain job."""
    if fanout and pipeline is not None:
        raise ConfigError("--fanout", "", "give either --fanout or --pipeline, not both")
    if pipeline is not None:
        graph = load_pipeline(Path(pipeline))
        check_routes(graph, config, str(pipeline))
        return graph
    routes = fanout.split(",") if isinstance(fanout, str) else fanout or config.fanout
    if not routes:
        return None
    source = "--fanout" if fanout else f"{config.source}: fanout"
    graph = fanout_graph(list(routes), source)
    check_routes(graph, config, source)
    return graph


def check_routes(graph: Graph, config: GatewayConfig, source: str) -> None:
    """Every step's route must be a route of the config."""
    known = set(config.route_models())
    for i, step in enumerate(graph.steps):
        if step.route not in known:
            key = "" if graph.kind == FANOUT else f"steps[{i}].route"
            raise ConfigError(
                source, key, f"unknown route {step.route!r} (the config has: {', '.join(sorted(known))})"
            )


def job_graph(requested: Graph | None, job: JobRecord | None) -> Graph | None:
    """The graph a run uses: the one asked for, else the one the job remembers. A job started with
    another graph (or none) is refused: its tasks would not match."""
    stored = job.options.graph if job is not None else None
    remembered = Graph.from_dict(dict(stored)) if stored is not None else None
    if job is None or requested is None:
        return requested if job is None else remembered
    if remembered != requested:
        what = "no fan-out or pipeline" if remembered is None else f"another {remembered.kind}"
        raise JobError(
            f"job {job.job_id} was started with {what}; write to a different --output to start a new job"
        )
    return requested


def input_items(path: Path, graph: Graph) -> list[InputItem]:
    return [i for i in read_items(path, graph) if isinstance(i, InputItem)]


async def restore(store: JobStore, job_id: str, graph: Graph, input_path: Path) -> tuple[GraphTasks, int]:
    """The job's tasks over its input, with the stored answers loaded and any ready task that a
    crash kept from being stored added now; returns them and how many were added."""
    tasks = GraphTasks(graph, input_items(input_path, graph))
    added = await tasks.recover(store, job_id)
    return tasks, added


def step_checks(graph: Graph, config: GatewayConfig) -> dict[str, OutputCheck]:
    """Each step with `validate:` checks its answers with that regex instead of the job's check."""
    return {
        s.name: OutputCheck(s.validate, None, source=config.source)
        for s in graph.steps
        if s.validate is not None
    }
