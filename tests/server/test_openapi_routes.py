"""The OpenAPI document `batchgate serve` serves names exactly the routes it serves: the app is
built as `serve` builds it (`make_app` over a real registry, job store and gateway) and its router's
routes (method, path) are compared with the document's operations, both ways. What a user's API
client has no use for (the dashboard, `/metrics`, the document itself) is named below, each with
its reason; a route added to the app without a word in the document fails here, and so does an
operation documented for a route that is gone."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchgate.clock import LoopClock
from batchgate.config import load_config
from batchgate.emulator import EmulatorThread
from batchgate.gateway import Gateway
from batchgate.jobs.store.sqlite import SqliteJobStore
from batchgate.server.app import Service, make_app
from batchgate.server.batch_api.batches import Batches
from batchgate.server.batch_api.files import Files
from batchgate.server.batch_api.run_parts import RunParts
from batchgate.server.batch_api.runs import Runs
from batchgate.server.job_api.job_table import JobTable
from batchgate.server.job_api.native import Jobs, JobTerms
from batchgate.server.tenancy.registry import REGISTRY_FILE, Registry
from batchgate.server.views import openapi

from .harness import PROVIDER_KEY, gateway_config

pytestmark = pytest.mark.integration

METHODS = {"get", "post", "put", "patch", "delete"}
UNDOCUMENTED = {
    ("get", "/openapi.json"),  # the document itself
    ("get", "/metrics"),  # Prometheus' text format, for a scraper
    ("get", "/"),  # the dashboard: HTML and its static files, for a browser
    ("get", "/static/{name}"),
    ("get", "/v1/dashboard/jobs"),  # the dashboard's own data, shaped for its pages
    ("get", "/v1/dashboard/jobs/{id}"),
    ("get", "/v1/dashboard/providers"),
}


def documented(document: dict[str, object]) -> set[tuple[str, str]]:
    paths = document["paths"]
    assert isinstance(paths, dict)
    return {(method, path) for path, ops in paths.items() for method in ops if method in METHODS}


async def served(root: Path, emu: EmulatorThread) -> set[tuple[str, str]]:
    """The (method, path) of every route of the app `serve` makes, HEAD left out (aiohttp adds
    one to each GET)."""
    config = load_config(gateway_config(root / "gateway.yaml", emu))
    registry, table = Registry(root / REGISTRY_FILE), JobTable(root / REGISTRY_FILE)
    store = await SqliteJobStore.open(root / "jobs.db")
    clock = LoopClock()
    try:
        async with Gateway(config, clock=clock, quota_store=None) as gateway:
            files = Files(registry, root / "files", clock)
            parts = RunParts(registry, files, store, config=config, store_path=root / "jobs.db",
                             folder=root / "batches", gateway=gateway, clock=clock, grace_s=0.1)  # fmt: skip
            jobs = Jobs(Runs(parts, JobTerms(table, config)), table)
            try:
                app = make_app(Service(registry, files, Batches(jobs.runs), jobs))
                return {
                    (route.method.lower(), route.resource.canonical)
                    for route in app.router.routes()
                    if route.method != "HEAD" and route.resource is not None
                }
            finally:
                await jobs.close()
    finally:
        await store.close()
        table.close()
        registry.close()


async def test_the_document_and_the_routes_name_the_same_operations(
    tmp_path: Path, emu: EmulatorThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EMU_KEY", PROVIDER_KEY)
    routes = await served(tmp_path, emu)
    operations = documented(openapi.document())
    assert routes - operations == UNDOCUMENTED, "served, not documented"
    assert operations - routes == set(), "documented, not served"


def test_a_route_missing_from_the_document_is_found() -> None:
    document: dict[str, object] = {"paths": {"/v1/jobs": {"get": {}, "parameters": []}}}
    assert documented(document) == {("get", "/v1/jobs")}
    assert {("get", "/v1/jobs"), ("post", "/v1/jobs")} - documented(document) == {("post", "/v1/jobs")}
